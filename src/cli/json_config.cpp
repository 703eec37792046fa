#include "cli/json_config.hpp"

#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <system_error>

#include "cli/bounds.hpp"
#include "io/file_kind.hpp"
#include "io/json_text.hpp"
#include "kernels/error.hpp"

namespace noeira::cli {

namespace {

// A config is a few hundred bytes of options; parsed, JSON costs tens of times its size, so a
// file past this is refused before it is read.
constexpr std::uintmax_t kMaxConfigBytes = std::uintmax_t{1} << 20;  // 1 MiB

[[noreturn]] void refuse(const std::filesystem::path& file, const std::string& what) {
  throw InputError(detail::concat(file.string(), ": ", what));
}

// The file's text, refused when larger than kMaxConfigBytes (checked again while reading: the
// file may grow after its size was asked).
std::string config_text(const std::filesystem::path& file) {
  io::require_regular_file(file);
  std::error_code ec;
  const std::uintmax_t size = std::filesystem::file_size(file, ec);
  if (ec) refuse(file, detail::concat("cannot read the config file's size (", ec.message(), ")"));
  const std::string too_large = detail::concat(
      "the config file is larger than ", kMaxConfigBytes, " bytes (a config is a few KB)");
  if (size > kMaxConfigBytes) refuse(file, detail::concat(too_large, ": ", size, " bytes"));
  std::ifstream in(file, std::ios::binary);
  if (!in) refuse(file, "cannot open the config file");
  std::string text(kMaxConfigBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (in.bad()) refuse(file, "cannot read the config file");
  text.resize(static_cast<std::size_t>(in.gcount()));
  if (text.size() > kMaxConfigBytes) refuse(file, too_large);
  return text;
}

// The file's JSON, with what is wrong said in the file's terms ("cfg.json: a number out of range
// at line 3, column 8 ('1e400')").
nlohmann::json parse_config(const std::filesystem::path& file) {
  nlohmann::json doc;
  const std::optional<io::JsonProblem> problem = io::parse_json(config_text(file), doc);
  if (problem) {
    const std::string where =
        problem->line == 0
            ? std::string()
            : detail::concat(" at line ", problem->line, ", column ", problem->column);
    // No token where the text ended early; a key given twice has no position but its name.
    const bool ended = problem->line != 0 && problem->token.empty();
    const std::string near = ended ? std::string(" (the text ends early)")
                                   : detail::concat(" (", shown_argument(problem->token), ")");
    refuse(file, detail::concat(problem->what, where, near));
  }
  return doc;
}

// The longest value a key takes: a path is at most PATH_MAX (4096); every other value is a word or
// a number. Longer, CLI11's and the options' own messages would show it in full.
constexpr std::size_t kMaxValueBytes = 4096;

// The flag's text for a JSON value.
std::string as_argument(const nlohmann::json& v, const std::filesystem::path& file,
                        const std::string& key) {
  if (v.is_string()) {
    const std::string& text = v.get_ref<const std::string&>();
    if (text.size() > kMaxValueBytes) {
      throw InputError(detail::concat(file.string(), ": the value of ", shown_argument(key),
                                      " is ", text.size(), " bytes, more than the ",
                                      kMaxValueBytes, " an option takes: ",
                                      shown_argument(text)));
    }
    return text;
  }
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (v.is_number_integer() || v.is_number_unsigned()) return v.dump();
  if (v.is_number_float()) return v.dump();  // shortest form that reads back the same
  throw InputError(detail::concat(file.string(), ": ", shown_argument(key),
                                  " must be a string, number or boolean, got ", v.type_name()));
}

}  // namespace

void apply_json_config(CLI::App& command, const std::filesystem::path& file,
                       const CLI::App* sibling) {
  const nlohmann::json doc = parse_config(file);
  if (!doc.is_object()) {
    throw InputError(detail::concat(file.string(), ": expected a JSON object of options"));
  }
  for (const auto& [raw_key, value] : doc.items()) {
    std::string key = raw_key;
    for (char& c : key) {
      if (c == '_') c = '-';
    }
    CLI::Option* opt = command.get_option_no_throw("--" + key);
    if (opt == nullptr && sibling != nullptr &&
        sibling->get_option_no_throw("--" + key) != nullptr) {
      continue;  // the other subcommand's option
    }
    if (opt == nullptr || key == "config" || key == "help") {
      throw InputError(detail::concat(file.string(), ": unknown option ", shown_argument(raw_key),
                                      " for noeira ", command.get_name()));
    }
    if (opt->count() > 0) continue;  // the command line wins
    try {
      opt->add_result(as_argument(value, file, raw_key));
      opt->run_callback();
    } catch (const CLI::Error& e) {
      throw InputError(detail::concat(file.string(), ": bad value for ", shown_argument(raw_key),
                                      ": ", e.what()));
    }
  }
}

}  // namespace noeira::cli

#include "cli/json_config.hpp"

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "io/file_kind.hpp"
#include "kernels/error.hpp"

namespace noeira::cli {

namespace {

// The flag's text for a JSON value.
std::string as_argument(const nlohmann::json& v, const std::filesystem::path& file,
                        const std::string& key) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (v.is_number_integer() || v.is_number_unsigned()) return v.dump();
  if (v.is_number_float()) return v.dump();  // shortest form that reads back the same
  throw InputError(detail::concat(file.string(), ": '", key,
                                  "' must be a string, number or boolean, got ", v.type_name()));
}

}  // namespace

void apply_json_config(CLI::App& command, const std::filesystem::path& file,
                       const CLI::App* sibling) {
  io::require_regular_file(file);
  std::ifstream in(file);
  if (!in) throw InputError(detail::concat(file.string(), ": cannot open the config file"));
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(in);
  } catch (const nlohmann::json::parse_error& e) {
    throw InputError(detail::concat(file.string(), ": not valid JSON (byte ", e.byte, ")"));
  }
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
      throw InputError(detail::concat(file.string(), ": unknown option '", raw_key,
                                      "' for noeira ", command.get_name()));
    }
    if (opt->count() > 0) continue;  // the command line wins
    try {
      opt->add_result(as_argument(value, file, raw_key));
      opt->run_callback();
    } catch (const CLI::Error& e) {
      throw InputError(detail::concat(file.string(), ": bad value for '", raw_key, "': ",
                                      e.what()));
    }
  }
}

}  // namespace noeira::cli

#include "train/run_files.hpp"

#include <sys/stat.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <system_error>
#include <utility>

#include "io/temporary_file.hpp"
#include "kernels/error.hpp"
#include "train/run.hpp"

namespace noeira {

namespace {

// A config.json larger than this is not one noeira wrote: it is not read to decide anything.
constexpr std::uintmax_t kMaxConfigBytes = 1 << 20;

[[noreturn]] void refuse_out(const std::filesystem::path& dir, std::string_view why) {
  throw InputError(detail::concat("--out ", dir.string(), ": ", why));
}

// `text` in `file` whole or not at all (io/temporary_file.hpp).
void write_whole(const std::filesystem::path& file, const std::string& text) {
  io::TemporaryFile written(file);
  std::ofstream out(written.path(), std::ios::trunc);
  out << text;
  out.close();
  if (!out) throw InputError(detail::concat(file.string(), ": cannot write it (disk full?)"));
  written.commit();
}

// What a run writes into its output directory (and the temporary name config.json is written
// under): any of them there is another run's record, which this run would replace.
constexpr std::array<const char*, 4> kRecordFiles = {"config.json", "metrics.jsonl", "model.h5",
                                                     "config.json.tmp"};

// The records of a run that `dir` holds, named for a refusal ("" when none).
std::string records_in(const std::filesystem::path& dir) {
  std::string names;
  std::error_code ec;
  for (const char* name : kRecordFiles) {
    if (std::filesystem::exists(std::filesystem::symlink_status(dir / name, ec))) {
      names += (names.empty() ? "" : ", ") + std::string(name);
    }
  }
  return names;
}

// Whether `dir` holds the records of the run that this --resume continues: its config.json
// names the same checkpoint directory.
bool is_resumed_runs_directory(const std::filesystem::path& dir, const TrainConfig& cfg) {
  if (cfg.resume.empty() || cfg.checkpoint_dir.empty()) return false;
  const std::filesystem::path file = dir / "config.json";
  std::error_code ec;
  if (!std::filesystem::is_regular_file(file, ec) ||
      std::filesystem::file_size(file, ec) > kMaxConfigBytes || ec) {
    return false;
  }
  std::ifstream in(file);
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("checkpoint-dir") || !j["checkpoint-dir"].is_string()) {
    return false;
  }
  const std::filesystem::path recorded = j["checkpoint-dir"].get<std::string>();
  return !recorded.empty() && std::filesystem::equivalent(recorded, cfg.checkpoint_dir, ec);
}

// The default output directory, runs/<model>-<data>-<time>, made by this run alone: mkdir(2)
// fails when the name exists, and the next suffix (-2, -3, ...) is tried, so two runs started in
// the same second never share one.
std::filesystem::path create_default_out_dir(const TrainConfig& cfg, NewDirectories& created) {
  const std::filesystem::path base = default_out_dir(cfg);
  NewDirectories fresh(base.parent_path());
  std::error_code ec;
  std::filesystem::create_directories(base.parent_path(), ec);
  if (ec) {
    throw InputError(detail::concat(base.parent_path().string(),
                                    ": cannot create the output directory (", ec.message(), ")"));
  }
  for (int n = 1;; ++n) {
    std::filesystem::path dir = base;
    if (n > 1) dir += detail::concat("-", n);
    if (::mkdir(dir.c_str(), 0777) == 0) {
      fresh.add(dir);
      created = std::move(fresh);
      return dir;
    }
    if (errno != EEXIST || n == 1000) {
      throw InputError(detail::concat(dir.string(), ": cannot create the output directory (",
                                      std::strerror(errno), ")"));
    }
  }
}

// The --out the user named: new, one without a run's records (it may hold the run's own
// checkpoint directory, or a job script's files), or the resumed run's own
// (RunFiles::continues).
bool claim_given_out_dir(const TrainConfig& cfg, NewDirectories& created) {
  const std::filesystem::path dir = cfg.out;
  std::error_code ec;
  const auto status = std::filesystem::status(dir, ec);
  if (std::filesystem::exists(status)) {
    if (!std::filesystem::is_directory(status)) refuse_out(dir, "exists and is not a directory");
    const std::string records = records_in(dir);
    if (records.empty()) return false;
    if (is_resumed_runs_directory(dir, cfg)) return true;
    refuse_out(dir, detail::concat("holds another run's records (", records,
                                   "); give a new directory (a --resume of that run with its "
                                   "--checkpoint-dir continues its records there)"));
  }
  NewDirectories fresh(dir);
  std::filesystem::create_directories(dir, ec);
  if (ec) refuse_out(dir, detail::concat("cannot create the directory (", ec.message(), ")"));
  created = std::move(fresh);
  return false;
}

}  // namespace

NewDirectories::NewDirectories(const std::filesystem::path& dir,
                               std::vector<std::string> own_files)
    : own_files_(std::move(own_files)) {
  std::filesystem::path d = dir.lexically_normal();
  if (!d.empty() && d.filename().empty()) d = d.parent_path();  // "a/b/" is a/b
  std::error_code ec;
  while (!d.empty() && !std::filesystem::exists(d, ec) && !ec) {
    dirs_.push_back(d);
    if (d.parent_path() == d) break;
    d = d.parent_path();
  }
}

NewDirectories::NewDirectories(NewDirectories&& other) noexcept
    : dirs_(std::move(other.dirs_)), own_files_(std::move(other.own_files_)) {
  other.dirs_.clear();
}

NewDirectories& NewDirectories::operator=(NewDirectories&& other) noexcept {
  if (this != &other) {
    remove_now();
    dirs_ = std::move(other.dirs_);
    own_files_ = std::move(other.own_files_);
    other.dirs_.clear();
  }
  return *this;
}

NewDirectories::~NewDirectories() { remove_now(); }

void NewDirectories::add(const std::filesystem::path& innermost) {
  dirs_.insert(dirs_.begin(), innermost);
}

void NewDirectories::remove_now() noexcept {
  std::error_code ec;
  if (!dirs_.empty()) {
    for (const std::string& name : own_files_) std::filesystem::remove(dirs_.front() / name, ec);
  }
  // remove() of a directory is rmdir(2): it fails, harmlessly, on one that is not empty.
  for (const std::filesystem::path& d : dirs_) std::filesystem::remove(d, ec);
  dirs_.clear();
}

RunFiles claim_run_files(const TrainConfig& cfg, NewDirectories& created,
                         std::function<void()> on_begin) {
  RunFiles files;
  if (cfg.out.empty()) {
    files.out = create_default_out_dir(cfg, created);
  } else {
    files.out = cfg.out;
    files.continues = claim_given_out_dir(cfg, created);
  }
  const std::filesystem::path config_file = files.out / "config.json";
  const std::string config_text = to_json(cfg).dump(2) + '\n';
  files.metrics.emplace(files.out / "metrics.jsonl", files.continues,
                        [config_file, config_text, on_begin = std::move(on_begin)] {
                          write_whole(config_file, config_text);
                          if (on_begin) on_begin();
                        });
  return files;
}

}  // namespace noeira

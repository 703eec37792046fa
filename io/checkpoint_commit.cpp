// Committing a checkpoint, the `latest` pointer, pruning, and turning a user's path into a step
// directory (io/checkpoint.hpp).
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <string_view>
#include <system_error>

#include "io/checkpoint.hpp"
#include "io/checkpoint_format.hpp"
#include "io/checkpoint_fs.hpp"
#include "io/file_kind.hpp"
#include "kernels/error.hpp"

namespace noeira::io {

namespace {

constexpr const char* kLatest = "latest";
constexpr std::string_view kTmpPrefix = ".tmp-";
constexpr std::string_view kTrashPrefix = ".del-";

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

// The entries of a directory; InputError naming it when it cannot be listed.
std::vector<std::filesystem::path> list_dir(const std::filesystem::path& dir) {
  std::vector<std::filesystem::path> entries;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator(dir, ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    entries.push_back(it->path());
  }
  if (ec) throw InputError(detail::concat(dir.string(), ": cannot list (", ec.message(), ")"));
  return entries;
}

bool is_dir(const std::filesystem::path& path) {
  std::error_code ec;
  return std::filesystem::is_directory(path, ec);
}

// Everything in the temporary directory that is not one of this commit's rank files: rank files
// of a larger world from an earlier crashed attempt, .part files of ranks that died.
void remove_strays(const std::filesystem::path& tmp, int world_size) {
  std::set<std::string> expected;
  for (int r = 0; r < world_size; ++r) expected.insert(ckpt::rank_file_name(r));
  std::vector<std::filesystem::path> strays;
  for (const auto& entry : list_dir(tmp)) {
    if (expected.count(entry.filename().string()) == 0) strays.push_back(entry);
  }
  for (const auto& p : strays) ckpt::remove_tree(p);
}

// A directory being deleted is first renamed out of the step-* namespace, so that a crash in the
// middle of remove_all never leaves a half-deleted directory that looks like a checkpoint.
void discard(const std::filesystem::path& dir) {
  const std::string name = dir.filename().string();
  std::filesystem::path trash = dir;
  if (!starts_with(name, kTrashPrefix)) {
    trash = dir.parent_path() / (std::string(kTrashPrefix) + name);
    ckpt::remove_tree(trash);
    ckpt::rename_replacing(dir, trash);
  }
  ckpt::remove_tree(trash);
}

// A step directory's name is 13 bytes: `latest` is read no further than one could be, so a huge
// or endless file costs nothing, and what it holds is quoted with unprintable bytes escaped.
constexpr std::size_t kMaxPointerBytes = 64;

std::string printable(std::string_view s) {
  std::string out;
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f && c != '\\') {
      out += c;
    } else {
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\x%02x", u);
      out += esc;
    }
  }
  return out;
}

std::string read_small_file(const std::filesystem::path& file) {
  require_regular_file(file, "a file holding a step directory's name");
  std::ifstream in(file, std::ios::binary);
  if (!in) throw InputError(detail::concat(file.string(), ": cannot read"));
  std::string s(kMaxPointerBytes + 1, '\0');
  in.read(s.data(), static_cast<std::streamsize>(s.size()));
  s.resize(static_cast<std::size_t>(in.gcount()));
  if (s.size() > kMaxPointerBytes) {
    throw InputError(detail::concat(file.string(), ": holds more than ", kMaxPointerBytes,
                                    " bytes ('", printable(s.substr(0, 16)),
                                    "...'), not a step-NNNNNNNN directory name"));
  }
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

bool has_rank_files(const std::filesystem::path& dir) {
  for (const auto& entry : list_dir(dir)) {
    const std::string name = entry.filename().string();
    if (starts_with(name, "rank-") && entry.extension() == ".h5") return true;
  }
  return false;
}

}  // namespace

std::filesystem::path commit_checkpoint(const std::filesystem::path& ckpt_dir, std::int64_t step,
                                        int world_size, int keep_last) {
  NOEIRA_CHECK(world_size >= 1, "world size ", world_size, " is not >= 1");
  const std::filesystem::path tmp = ckpt_dir / ckpt::tmp_dir_name(step);
  std::error_code ec;
  if (!std::filesystem::is_directory(tmp, ec)) {
    throw Error(detail::concat(tmp.string(),
                               ": nothing to commit (no rank wrote step ", step, ")"));
  }
  for (int r = 0; r < world_size; ++r) {
    if (!std::filesystem::exists(tmp / ckpt::rank_file_name(r), ec)) {
      throw Error(detail::concat((tmp / ckpt::rank_file_name(r)).string(), ": missing: rank ", r,
                                 " of ", world_size, " did not finish writing step ", step,
                                 "; the checkpoint is not committed"));
    }
  }
  remove_strays(tmp, world_size);
  // Each step is made durable before the next depends on it: the rank files (fsynced by their
  // writers) and their names in tmp, then tmp's new name, then `latest`.
  ckpt::fsync_dir(tmp);
  ckpt::hook("tmp_dir_synced");
  const std::filesystem::path final_dir = ckpt_dir / step_dir_name(step);
  ckpt::rename_replacing(tmp, final_dir);
  ckpt::fsync_dir(ckpt_dir);
  ckpt::hook("step_dir_renamed");
  ckpt::replace_file_durably(ckpt_dir / kLatest, step_dir_name(step) + "\n", [] {
    ckpt::hook("latest_tmp_synced");
  });
  ckpt::hook("latest_renamed");

  // Leftovers of crashed writes and deletions. No other write is in flight: every rank finished
  // this step before the caller's barrier, and one run owns a checkpoint directory.
  std::vector<std::filesystem::path> leftovers;
  for (const auto& entry : list_dir(ckpt_dir)) {
    const std::string name = entry.filename().string();
    if ((starts_with(name, kTmpPrefix) || starts_with(name, kTrashPrefix)) && is_dir(entry)) {
      leftovers.push_back(entry);
    }
  }
  if (keep_last > 0) {
    const auto committed = list_checkpoints(ckpt_dir);
    const auto keep = static_cast<std::size_t>(keep_last);
    for (std::size_t i = 0; i + keep < committed.size(); ++i) {
      if (committed[i].first != step) leftovers.push_back(committed[i].second);
    }
  }
  for (const auto& dir : leftovers) discard(dir);
  ckpt::hook("pruned");
  return final_dir;
}

std::vector<std::pair<std::int64_t, std::filesystem::path>> list_checkpoints(
    const std::filesystem::path& ckpt_dir) {
  std::vector<std::pair<std::int64_t, std::filesystem::path>> steps;
  for (const auto& entry : list_dir(ckpt_dir)) {
    const std::int64_t step = ckpt::parse_step_dir(entry.filename().string());
    if (step >= 0 && is_dir(entry)) steps.emplace_back(step, entry);
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

void discard_checkpoints(const std::filesystem::path& ckpt_dir) {
  std::error_code ec;
  std::filesystem::remove(ckpt_dir / kLatest, ec);
  if (ec) {
    throw InputError(detail::concat((ckpt_dir / kLatest).string(), ": cannot remove (",
                                    ec.message(), ")"));
  }
  ckpt::fsync_dir(ckpt_dir);
  for (const auto& entry : list_dir(ckpt_dir)) {
    const std::string name = entry.filename().string();
    const bool ours = ckpt::parse_step_dir(name) >= 0 || starts_with(name, kTmpPrefix) ||
                      starts_with(name, kTrashPrefix);
    if (ours && is_dir(entry)) discard(entry);
  }
}

std::optional<std::filesystem::path> abandon_checkpoint(const std::filesystem::path& ckpt_dir,
                                                        std::int64_t step) {
  const std::filesystem::path tmp = ckpt_dir / ckpt::tmp_dir_name(step);
  if (!is_dir(tmp)) return std::nullopt;
  ckpt::remove_tree(tmp);
  return tmp;
}

std::optional<std::filesystem::path> latest_checkpoint(const std::filesystem::path& ckpt_dir) {
  const std::filesystem::path pointer = ckpt_dir / kLatest;
  std::error_code ec;
  if (!std::filesystem::exists(pointer, ec)) return std::nullopt;
  const std::string name = read_small_file(pointer);
  if (ckpt::parse_step_dir(name) < 0) {
    throw InputError(detail::concat(pointer.string(), ": holds '", printable(name),
                                    "', not a step-NNNNNNNN directory name"));
  }
  const std::filesystem::path dir = ckpt_dir / name;
  if (!std::filesystem::is_directory(dir, ec)) {
    throw InputError(
        detail::concat(pointer.string(), ": names ", name, ", which does not exist"));
  }
  return dir;
}

std::filesystem::path resolve_checkpoint(const std::filesystem::path& path) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (!std::filesystem::exists(status)) {
    throw InputError(detail::concat(path.string(), ": no such checkpoint (not found)"));
  }
  const std::string name = path.filename().string();
  if (std::filesystem::is_regular_file(status) && name == kLatest) {
    const auto parent = path.parent_path().empty() ? std::filesystem::path(".") : path.parent_path();
    return *latest_checkpoint(parent);
  }
  if (!std::filesystem::is_directory(status)) {
    throw InputError(detail::concat(path.string(),
                                    ": not a checkpoint (give a step directory, the checkpoint "
                                    "directory or its 'latest' file)"));
  }
  if (starts_with(name, kTmpPrefix)) {
    throw InputError(detail::concat(path.string(),
                                    ": half-written checkpoint (never committed; only step-* "
                                    "directories are loaded)"));
  }
  if (std::filesystem::exists(path / kLatest, ec)) return *latest_checkpoint(path);
  if (has_rank_files(path)) return path;
  if (ckpt::parse_step_dir(name) >= 0) {
    throw InputError(detail::concat(path.string(), ": checkpoint without rank-*.h5 files"));
  }
  for (const auto& entry : list_dir(path)) {
    const std::string child = entry.filename().string();
    if (ckpt::parse_step_dir(child) >= 0 || starts_with(child, kTmpPrefix)) {
      throw InputError(detail::concat(path.string(),
                                      ": no committed checkpoint ('latest' is missing)"));
    }
  }
  throw InputError(detail::concat(path.string(),
                                  ": not a checkpoint (no 'latest' file and no rank-*.h5 files)"));
}

}  // namespace noeira::io

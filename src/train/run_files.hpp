#pragma once
// What rank 0 of a run writes besides its checkpoints — <out>/config.json, <out>/metrics.jsonl
// and, at the end, <out>/model.h5 — and the rules that keep a run from touching another's:
//
// - The output directory is claimed when the run starts, so that a bad --out fails at once, but
//   nothing is written into it until the run's records begin (MetricsFile::open, which the
//   trainer calls once every check that can refuse the run has passed: the model built, the
//   weights and the checkpoint to resume loaded).
// - An --out that holds a run's records (config.json, metrics.jsonl, model.h5) is refused: they
//   are another run's, which this run would replace. Anything else may be there (the run's own
//   checkpoint directory, a job script's files) and is left alone. The one exception is the
//   directory of the run that a --resume continues, whose config.json names the same
//   --checkpoint-dir: its metrics are appended to, its config.json replaced.
// - A run refused before its records begin removes the directories it created (the output
//   directory, the checkpoint directory and their new parents), so it leaves nothing behind.
// - --overwrite-checkpoints discards the old checkpoints when the records begin, not before: a
//   run refused for another reason keeps them.
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "train/config.hpp"
#include "train/metrics.hpp"

namespace noeira {

// The directories of a path (itself and its parents) that did not exist when it was made:
// whoever creates them next, they are this run's, and the destructor removes them again unless
// keep() was called — with the named files of the innermost one, and only while empty
// otherwise (rmdir), so that nothing anyone else put there is ever removed.
class NewDirectories {
 public:
  NewDirectories() = default;
  NewDirectories(const std::filesystem::path& dir, std::vector<std::string> own_files = {});
  NewDirectories(NewDirectories&& other) noexcept;
  // Removes what this one held first (as unique_ptr's assignment frees).
  NewDirectories& operator=(NewDirectories&& other) noexcept;
  NewDirectories(const NewDirectories&) = delete;
  NewDirectories& operator=(const NewDirectories&) = delete;
  ~NewDirectories();

  // One more, inside the innermost: a directory this run has just made itself.
  void add(const std::filesystem::path& innermost);
  void keep() { dirs_.clear(); }

 private:
  void remove_now() noexcept;

  std::vector<std::filesystem::path> dirs_;  // innermost first
  std::vector<std::string> own_files_;
};

struct RunFiles {
  std::filesystem::path out;
  bool continues = false;  // the directory of the run being resumed: its records go on
  std::optional<MetricsFile> metrics;
};

// Claims the output directory (--out, else a new runs/<model>-<data>-<time>) under the rules
// above; writes nothing. `on_begin` runs when the records begin, after config.json is written.
// InputErrors name --out and why.
RunFiles claim_run_files(const TrainConfig& cfg, NewDirectories& created,
                         std::function<void()> on_begin);

}  // namespace noeira

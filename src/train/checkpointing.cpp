#include "train/checkpointing.hpp"

#include <span>
#include <string>
#include <vector>

#include "core/finite.hpp"
#include "core/hash.hpp"
#include "distributed/host_collectives.hpp"
#include "io/checkpoint_reader.hpp"
#include "kernels/error.hpp"
#include "train/divergence.hpp"
#include "train/model_buffers.hpp"

namespace noeira {

namespace {
// Metadata key of one rank's running loss sum ("loss_sum.epoch.rank3").
std::string loss_key(const char* what, int rank) {
  return detail::concat("loss_sum.", what, ".rank", rank);
}
}  // namespace

namespace {

using dist::Coverage;
using dist::State;

constexpr State kStates[] = {State::Value, State::M, State::V};

const char* kind_name(State s) { return s == State::Value ? "val" : s == State::M ? "m" : "v"; }

// Every rank learns whether every rank succeeded (one scalar allreduce), so that all of them
// throw together instead of leaving the others waiting in the next collective. A failure every
// rank had is an AgreedError (said once, by rank 0, without MPI_Abort); otherwise a failing rank
// throws its own error and the others say that it failed.
void agree(dist::ProcessGroup& group, bool ok, const std::string& error, const char* what) {
  const std::int64_t failures = dist::sum_over_ranks<std::int64_t>(group, ok ? 0 : 1);
  if (failures == 0) return;
  if (failures == group.size()) throw AgreedError(error);
  if (!ok) throw Error(error);
  throw Error(detail::concat(what, ": ", static_cast<int>(failures),
                             " other rank(s) failed (see their errors)"));
}

// A checkpoint of a non-finite state would become `latest` and be resumed from: every rank scans
// what it is about to write, and all learn the first rank's first bad tensor (one gather), so that
// every rank throws the same DivergedError before any file is touched. `codes[i]` is slice i's
// tensor as param * 3 + state.
void refuse_non_finite_slices(dist::ProcessGroup& group, const dist::WalkUnits& walk,
                              std::span<const io::TensorSlice> slices,
                              std::span<const std::size_t> codes, std::int64_t step,
                              const TrainConfig& cfg) {
  double mine = -1.0;  // exact: tensor codes are far below 2^53
  for (std::size_t i = 0; i < slices.size(); ++i) {
    if (first_non_finite(slices[i].data)) {
      mine = static_cast<double>(codes[i]);
      break;
    }
  }
  std::vector<double> all(static_cast<std::size_t>(group.size()));
  dist::all_gather_host(group, std::span<const double>(&mine, 1), all);
  for (const double code : all) {
    if (code < 0.0) continue;
    const auto c = static_cast<std::size_t>(code);
    throw DivergedError(detail::concat(
        "step ", step, ": non-finite value in ",
        io::param_tensor_name(walk.params[c / 3].name, kind_name(kStates[c % 3])),
        kept_checkpoint_note(cfg)));
  }
}

}  // namespace

io::Signature signature_of(const dist::WalkUnits& walk) {
  io::Signature sig;
  for (const NamedParam& p : walk.params) sig.push_back({p.name, p.param->shape()});
  return sig;
}

std::filesystem::path resume_path(const TrainConfig& cfg) {
  if (cfg.resume == "latest") {
    const auto latest = io::latest_checkpoint(cfg.checkpoint_dir);
    if (!latest) {
      throw InputError(detail::concat("--resume latest: no checkpoint in ", cfg.checkpoint_dir,
                                      " yet (no `latest` file)"));
    }
    return *latest;
  }
  return cfg.resume;
}

io::CheckpointDirLock claim_checkpoint_dir(const TrainConfig& cfg) {
  const std::filesystem::path dir = cfg.checkpoint_dir;
  io::CheckpointDirLock lock = io::CheckpointDirLock::acquire(dir);
  // Looked at under the lock: no other run commits between this look and this run's saves.
  // Without `latest` nothing was ever committed here (step directories alone are what a crash in
  // a first commit leaves): only a `latest` says that the checkpoints are a run's.
  const auto latest = io::latest_checkpoint(dir);
  if (!latest) return lock;
  if (!cfg.resume.empty()) {
    std::error_code ec;
    const std::filesystem::path from = io::resolve_checkpoint(resume_path(cfg));
    if (std::filesystem::equivalent(from.parent_path(), dir, ec)) return lock;
  }
  // Discarded when the run's records begin (discard_replaced_checkpoints), not now: a run
  // refused before then keeps them.
  if (cfg.overwrite_checkpoints) return lock;
  throw InputError(detail::concat(
      "--checkpoint-dir ", dir.string(), ": holds the checkpoints of another run (newest ",
      latest->filename().string(),
      "); continue it with --resume latest, or pass --overwrite-checkpoints to discard them"));
}

void discard_replaced_checkpoints(const TrainConfig& cfg) {
  if (!cfg.overwrite_checkpoints || !io::latest_checkpoint(cfg.checkpoint_dir)) return;
  io::discard_checkpoints(cfg.checkpoint_dir);
}

std::filesystem::path save_checkpoint(dist::ShardingPolicy& policy, const dist::WalkUnits& walk,
                                      const Optimizer& optimizer, const LrSchedule& schedule,
                                      const TrainConfig& cfg, std::int64_t train_samples,
                                      const TrainCursor& cursor) {
  dist::ProcessGroup& group = policy.group();
  io::CheckpointMeta meta;
  meta.step = cursor.step;
  meta.epoch = cursor.samples_seen / train_samples;
  meta.samples_seen = cursor.samples_seen;
  meta.world_size = group.size();
  meta.policy = dist::to_string(cfg.policy);
  meta.optimizer = {optimizer.state().t, optimizer.state().beta1_pow, optimizer.state().beta2_pow};
  meta.signature = signature_of(walk);
  // The schedule is a pure function of the step; its parameters are saved to be seen and checked.
  meta.scalars = {{"lr", cfg.lr},
                  {"min_lr", cfg.min_lr},
                  {"next_lr", schedule.lr_at(cursor.step)}};
  meta.counters = {{"seed", cfg.seed},
                   {"batch", static_cast<std::uint64_t>(cfg.batch)},
                   {"block", static_cast<std::uint64_t>(cfg.block)},
                   {"train_samples", static_cast<std::uint64_t>(train_samples)},
                   {"warmup_steps", static_cast<std::uint64_t>(schedule.warmup_steps)},
                   {"total_steps", static_cast<std::uint64_t>(schedule.total_steps)}};
  // Every rank's running loss sums (collective): the losses are sums over this rank's rows, so a
  // rank's own partial is what it restores.
  const double mine[2] = {cursor.epoch_loss_sum, cursor.window_loss_sum};
  std::vector<double> all(static_cast<std::size_t>(2 * group.size()));
  dist::all_gather_host(group, std::span<const double>(mine), all);
  for (int r = 0; r < group.size(); ++r) {
    meta.scalars[loss_key("epoch", r)] = all[2 * static_cast<std::size_t>(r)];
    meta.scalars[loss_key("window", r)] = all[2 * static_cast<std::size_t>(r) + 1];
    // The same values on every rank: every rank stops alike.
    check_finite(all[2 * static_cast<std::size_t>(r)], cursor.step,
                 detail::concat("training loss sum of rank ", r), " (before a checkpoint)", cfg);
    check_finite(all[2 * static_cast<std::size_t>(r) + 1], cursor.step,
                 detail::concat("logged loss sum of rank ", r), " (before a checkpoint)", cfg);
  }
  meta.counters["window_samples"] = static_cast<std::uint64_t>(cursor.window_samples);
  if (cfg.data_fingerprint != 0) meta.counters["data_fingerprint"] = cfg.data_fingerprint;
  meta.labels = {{"model", cfg.model},
                 {"optimizer", std::string(to_string(cfg.optimizer))},
                 {"schedule", std::string(to_string(cfg.schedule))},
                 {"data", std::string(to_string(cfg.data))}};
  // A language model's tokenizer travels with it: generation decodes without the corpus.
  if (!cfg.vocabulary.empty()) meta.labels["vocabulary"] = cfg.vocabulary;
  // For eval of the checkpoint.
  if (cfg.loss == LossChoice::GaussianNll) meta.labels["loss"] = kLossNames.name_of(cfg.loss);
  // A user's arrays' normalization: eval of the checkpoint applies what training applied.
  if (!cfg.input_mean.empty()) {
    meta.labels["input_mean"] = cfg.input_mean;
    meta.labels["input_std"] = cfg.input_std;
  }

  // The writer reads host memory: a policy on the GPU stages its pieces first (all at once; a
  // rank's slice of the state is what it holds anyway, so this at most doubles it briefly).
  const bool staged = policy.target() != Target::Cpu;
  const KernelTable& k = kernels_for(policy.target());
  std::vector<std::vector<float>> host_copies;
  std::vector<io::TensorSlice> slices;
  std::vector<std::size_t> codes;  // for refuse_non_finite_slices
  for (State s : kStates) {
    for (const auto& piece : policy.pieces(s, Coverage::Written)) {
      const NamedParam& p = walk.params[piece.param];
      const auto count = static_cast<std::size_t>(piece.count);
      const float* data = piece.data;
      if (staged) {
        std::vector<float>& copy = host_copies.emplace_back(count);
        k.download(nullptr, copy.data(), piece.data, count * sizeof(float));
        data = copy.data();
      }
      slices.push_back({io::param_tensor_name(p.name, kind_name(s)), p.param->shape(),
                        piece.param_begin, std::span<const float>(data, count)});
      codes.push_back(piece.param * 3 + static_cast<std::size_t>(s));
    }
  }
  if (!cfg.allow_non_finite) {
    refuse_non_finite_slices(group, walk, slices, codes, cursor.step, cfg);
  }
  // Buffers are whole on every rank (the trainer made them rank 0's): rank 0 writes them.
  std::vector<float> buffers;
  if (group.rank() == 0 && !walk.buffers.empty()) {
    buffers = buffer_values(walk);
    for (io::TensorSlice& slice : buffer_slices(walk, buffers)) slices.push_back(std::move(slice));
  }

  bool ok = true;
  std::string error;
  try {
    io::write_rank_file(cfg.checkpoint_dir, group.rank(), meta, slices);
  } catch (const std::exception& e) {
    ok = false;
    error = e.what();
  }
  // Every rank file is durable before rank 0 makes the checkpoint visible.
  agree(group, ok, error, "checkpoint write");
  std::filesystem::path committed;
  try {
    if (group.rank() == 0) {
      committed = io::commit_checkpoint(cfg.checkpoint_dir, cursor.step, group.size(),
                                        cfg.keep_last);
    }
  } catch (const std::exception& e) {
    ok = false;
    error = e.what();
  }
  agree(group, ok, error, "checkpoint commit");
  return group.rank() == 0 ? committed
                           : std::filesystem::path(cfg.checkpoint_dir) / io::step_dir_name(cursor.step);
}

namespace {

// This rank's part of load_checkpoint: no collective inside, so that the ranks can agree on the
// outcome afterwards whichever of them failed.
TrainCursor load_held_pieces(const std::filesystem::path& path, dist::ShardingPolicy& policy,
                             const dist::WalkUnits& walk, Optimizer& optimizer,
                             const TrainConfig& cfg, std::int64_t train_samples) {
  const io::CheckpointReader ckpt = io::CheckpointReader::open(path);
  const io::CheckpointMeta& meta = ckpt.meta();
  const std::string where = ckpt.dir().string();
  ckpt.check_signature(signature_of(walk));
  auto same = [&](const char* flag, const auto& saved, const auto& now) {
    if (!(saved == now)) {
      throw InputError(detail::concat(where, ": saved with --", flag, " ", saved,
                                      ", this run has ", now,
                                      " (a resumed run must keep it to continue exactly)"));
    }
  };
  auto label = [&](const char* key) {
    const auto it = meta.labels.find(key);
    return it == meta.labels.end() ? std::string("?") : it->second;
  };
  auto counter = [&](const char* key) {
    const auto it = meta.counters.find(key);
    return it == meta.counters.end() ? std::uint64_t{0} : it->second;
  };
  same("data", label("data"), std::string(to_string(cfg.data)));
  same("optimizer", label("optimizer"), std::string(to_string(cfg.optimizer)));
  same("seed", counter("seed"), cfg.seed);
  same("batch", counter("batch"), static_cast<std::uint64_t>(cfg.batch));
  same("block", counter("block"), static_cast<std::uint64_t>(cfg.block));
  same("limit-train (training samples)", counter("train_samples"),
       static_cast<std::uint64_t>(train_samples));
  if (label("vocabulary") != (cfg.vocabulary.empty() ? std::string("?") : cfg.vocabulary)) {
    throw InputError(detail::concat(where, ": saved with another vocabulary (tokenizer) than this "
                                           "run's corpus and --tokenizer give"));
  }
  // The same sizes are not the same data (a corpus with its lines shuffled, another file of as
  // many images): the data's hash, where the checkpoint has one (older ones do not).
  if (meta.counters.contains("data_fingerprint") && cfg.data_fingerprint != 0 &&
      counter("data_fingerprint") != cfg.data_fingerprint) {
    throw InputError(detail::concat(
        where, ": saved by a run on other data (hash ", hex64(counter("data_fingerprint")),
        ", this run's ", hex64(cfg.data_fingerprint),
        "): a resumed run must train on the same data to continue exactly"));
  }


  // Values always; m / v when saved (a checkpoint before the first step has none: zeros).
  policy.allocate_optimizer_state(optimizer);
  const bool staged = policy.target() != Target::Cpu;
  const KernelTable& k = kernels_for(policy.target());
  std::vector<float> host_copy;
  for (State s : kStates) {
    for (const auto& piece : policy.pieces(s, Coverage::Held)) {
      const std::string name = io::param_tensor_name(walk.params[piece.param].name, kind_name(s));
      if (s != State::Value && !ckpt.has(name)) {
        if (meta.optimizer.t == 0) continue;
        throw InputError(detail::concat(where, ": no ", name, " for optimizer ", to_string(cfg.optimizer)));
      }
      const auto count = static_cast<std::size_t>(piece.count);
      const std::string what = detail::concat(where, ": tensor '", name, "'");
      if (!staged) {
        ckpt.read(name, piece.param_begin, std::span<float>(piece.data, count));
        refuse_non_finite(std::span<const float>(piece.data, count), non_finite_policy(cfg), what,
                          "load");
        continue;
      }
      host_copy.resize(count);
      ckpt.read(name, piece.param_begin, std::span<float>(host_copy));
      refuse_non_finite(host_copy, non_finite_policy(cfg), what, "load");
      k.upload(nullptr, piece.data, host_copy.data(), count * sizeof(float));
    }
  }
  load_buffers(ckpt, walk, non_finite_policy(cfg));
  optimizer.set_state({meta.optimizer.t, meta.optimizer.beta1_pow, meta.optimizer.beta2_pow});

  TrainCursor cursor{meta.step, meta.samples_seen};
  cursor.window_samples = static_cast<std::int64_t>(counter("window_samples"));
  const int rank = policy.group().rank();
  auto partial = [&](const char* what, int r) {
    const auto it = meta.scalars.find(loss_key(what, r));
    return it == meta.scalars.end() ? 0.0 : it->second;
  };
  if (meta.world_size == policy.group().size()) {
    cursor.epoch_loss_sum = partial("epoch", rank);
    cursor.window_loss_sum = partial("window", rank);
  } else if (rank == 0) {
    for (int r = 0; r < meta.world_size; ++r) {
      cursor.epoch_loss_sum += partial("epoch", r);
      cursor.window_loss_sum += partial("window", r);
    }
  }
  return cursor;
}

}  // namespace

TrainCursor load_checkpoint(const std::filesystem::path& path, dist::ShardingPolicy& policy,
                            const dist::WalkUnits& walk, Optimizer& optimizer,
                            const TrainConfig& cfg, std::int64_t train_samples) {
  TrainCursor cursor;
  std::string failure;
  bool failed = false;
  try {
    cursor = load_held_pieces(path, policy, walk, optimizer, cfg, train_samples);
  } catch (const std::exception& e) {
    failure = e.what();
    failed = true;
  }
  // A refusal every rank reaches (another run's data, a damaged file) is said once, by rank 0.
  agree(policy.group(), !failed, failure, "checkpoint load");
  return cursor;
}

}  // namespace noeira

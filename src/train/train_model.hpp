#pragma once
// `noeira train` for one model type M: what only the type decides — the checks the model can make,
// the data it reads (text for a language model, arrays or images otherwise) and one rank's
// training — compiled wherever an entry for M is made (train/model_entry.hpp). What no model type
// changes (the launch, the run's files, the ranks) is compiled once, in run.cpp
// (train/run_launch.hpp).
#include <filesystem>
#include <optional>
#include <ostream>
#include <vector>

#include "core/bf16_activation.hpp"
#include "core/scratch_arena.hpp"
#include "distributed/policy.hpp"
#include "distributed/rank_stream.hpp"
#include "io/params_file.hpp"
#include "train/checkpointing.hpp"
#include "train/model_description.hpp"
#include "train/run_data.hpp"
#include "train/run_launch.hpp"
#include "train/weights_file.hpp"

namespace noeira {

namespace detail {

// What the preset alone can refuse of the options, and weights to start from that do not fit it:
// before the (slow) data load.
template <Module M>
void check_model_options(const TrainConfig& cfg) {
  check_preset_suits_data<M>(cfg);
  if (cfg.batchnorm == BatchNormStats::Local || cfg.checkpoint_activations ||
      cfg.fp32_activations) {
    M probe(model_init<M>(cfg, Target::Cpu));
    if (cfg.batchnorm == BatchNormStats::Local && dist::walk_units(probe).buffers.empty()) {
      throw InputError(detail::concat("--batchnorm local: model '", cfg.model,
                                      "' has no batch normalization"));
    }
    if (cfg.checkpoint_activations && checkpoint_sites(probe) == 0) {
      throw InputError(detail::concat("--checkpoint-activations: model '", cfg.model,
                                      "' has no blocks to checkpoint (the gpt, vit and resnet "
                                      "models have)"));
    }
    if (cfg.fp32_activations && bf16_activation_sites(probe) == 0) {
      throw InputError(detail::concat("--fp32-activations: model '", cfg.model,
                                      "' holds no activation in bf16 (the gpt and vit models "
                                      "do)"));
    }
  }
  if (!cfg.init_from.empty()) {
    // A file that does not fit the model fails now, not after the (slow) data load; a
    // safetensors file's table of contents before the model is even built (a few bytes naming
    // gpt2-124m must not cost its memory first).
    if (io::is_safetensors_path(cfg.init_from)) {
      check_weights_before_building(io::SafetensorsFile::open(cfg.init_from), cfg.model,
                                    cfg.names);
    }
    M probe(model_init<M>(cfg, Target::Cpu));
    load_weights_file(cfg.init_from, cfg.model, cfg.names, dist::walk_units(probe),
                      non_finite_policy(cfg));
  }
}

// One rank's whole run: build the model, hand its parameters to the sharding policy, make the
// replicas identical, train, and (rank 0) save the final parameters. `files` and `progress` are
// rank 0's (null elsewhere).
template <Module M, class Run>
TrainSummary train_rank(const TrainConfig& cfg, dist::ProcessGroup& group, const Run& run,
                        Progress* progress, RunFiles* files) {
  // The group's buffers decide where this rank computes (the NCCL group and a simulated world on
  // the GPU: cuda), and the group decides on which stream.
  const dist::RankStream stream(group, group.buffer_target());
  Context ctx = Context::for_target(group.buffer_target(), stream.get(),
                                    cfg.precision);
  ctx.seed = cfg.seed;
  // Under --precision bf16 the activations that only products read are held as bfloat16 bits:
  // the same numbers in half the bytes (core/bf16_activation.hpp), unless --fp32-activations.
  ctx.bf16_activations = !cfg.fp32_activations;
  // This rank's blocks share one block's buffers (a simulated rank is a thread of its own).
  ScratchArena scratch;
  if (cfg.checkpoint_activations) ctx.scratch = &scratch;
  M model(model_init<M>(cfg, ctx.target));
  // Weights to start from replace the initializer's before the policy takes the parameters.
  if (!cfg.init_from.empty()) {
    load_weights_file(cfg.init_from, cfg.model, cfg.names, dist::walk_units(model),
                      non_finite_policy(cfg));
  }
  dist::ShardingPolicy policy(cfg.policy, dist::walk_units(model), group, ctx,
                              policy_options(cfg));
  // Identical seeds are not enough for identical replicas: rank 0's values win.
  policy.broadcast_initial_parameters();

  // Ranks other than 0 report nothing: their progress goes nowhere.
  std::ostream null_stream(nullptr);
  Progress quiet(null_stream, null_stream, cfg.log_format, false);
  const std::filesystem::path resume = cfg.resume.empty() ? std::filesystem::path() : resume_path(cfg);
  auto task = [&] {
    if constexpr (LanguageModel<M>) {
      return run.task(cfg, M::block);
    } else {
      return run.task(cfg);
    }
  }();
  const TrainSummary summary =
      train(model, ctx, cfg, task, progress != nullptr ? *progress : quiet,
            files != nullptr && files->metrics ? &*files->metrics : nullptr, policy, resume);
  if (summary.stop_signal != 0) return summary;  // to be resumed: no final parameters yet

  // Collective under ZeRO-3 (it gathers); rank 0 writes the file.
  const std::vector<float> values = policy.full_parameters();
  if (files != nullptr) {
    const std::filesystem::path params_file = files->out / "model.h5";
    auto save = [&] {
      const dist::WalkUnits walk = dist::walk_units(model);
      io::save_params(params_file, cfg.model, signature_of(walk), values,
                      saved_attributes(cfg, sizes_of<M>(static_cast<std::int64_t>(values.size()))),
                      non_finite_policy(cfg), buffer_signature(walk), buffer_values(walk));
    };
    if (!summary.save_failure.empty()) {
      // A checkpoint failed: what can still be written is, and the failure says what it was.
      TrainSummary failed = summary;
      try {
        save();
        failed.save_failure += detail::concat("; the parameters of step ", summary.steps,
                                              " are in ", params_file.string());
      } catch (const std::exception& e) {
        failed.save_failure += detail::concat("; model.h5 not written either: ", e.what());
      }
      return failed;
    }
    save();
    if (progress != nullptr) {
      progress->note(detail::concat("saved ", params_file.string(), "; metrics in ",
                                    files->metrics->path().string()));
    }
  }
  return summary;
}

}  // namespace detail

// Checks and loads on every rank, then trains on every rank of the launch. Loss: the model's own
// loss of float targets (loss/target_loss.hpp), or void for --loss's.
template <Module M, class Loss = void>
TrainOutcome train_model(TrainConfig& cfg, const TrainLaunch& launch) {
  // What only the model and the data can refuse, checked and loaded alike on every rank.
  auto load = [&] {
    if constexpr (LanguageModel<M>) {
      TextRun text = load_text_run(cfg, launch.target, M::vocab);
      cfg.vocabulary = text.tokenizer.to_text();
      cfg.tokenizer = text.tokenizer.kind();  // token shards read with gpt2 where cfg said char
      return text;
    } else {
      return load_image_run(cfg, launch.target, M::in_dim, M::out_dim, /*train_split=*/true,
                            own_loss_factory<Loss>(), input_vocab_of<M>());
    }
  };
  std::optional<decltype(load())> loaded;
  prepare_every_rank(launch, [&] {
    detail::check_model_options<M>(cfg);
    loaded.emplace(load());
    cfg.data_fingerprint = loaded->fingerprint;
    if constexpr (!LanguageModel<M>) {
      // Recorded with the parameters and in checkpoints, for eval to apply.
      const FeatureNormalization& n = loaded->normalization;
      if (!n.identity()) {
        cfg.input_mean = float_list_text(n.mean);
        cfg.input_std = float_list_text(n.std);
      }
    }
    if (LanguageModel<M> && !cfg.init_from.empty()) check_init_vocabulary(cfg);
  });
  const auto& run = *loaded;
  LoadedRun described{run.fingerprint, run.describe(cfg), 0};
  {
    M probe(model_init<M>(cfg, Target::Cpu));
    described.parameters = parameter_count(probe);
    described.units = dist::walk_units(probe).unit_params.size();
  }
  return run_ranks(cfg, launch, described,
                   [&](dist::ProcessGroup& group, Progress* progress, RunFiles* files) {
                     return detail::train_rank<M>(cfg, group, run, progress, files);
                   });
}

}  // namespace noeira

#pragma once
// Shared by the tests/test_checkpoint*.cpp files: a small "model" of logical tensors with
// awkward sizes and bit patterns, random contiguous partitions of it over N ranks (as the
// trainer's shard arithmetic would cut the flat space), writing a checkpoint with N threads as
// the simulated backend would, and reading it back with another partition.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "expect_error.hpp"
#include "io/checkpoint.hpp"
#include "io/checkpoint_reader.hpp"
#include "io_test_files.hpp"
#include "kernels/error.hpp"

namespace noeira::testing {

struct LogicalTensor {
  std::string name;
  Shape shape;
  std::vector<float> values;
};

struct CkptModel {
  io::Signature signature;
  std::vector<LogicalTensor> tensors;
};

// Parameters with sizes that no N in 1..4 divides evenly, a 0-d one, one without Adam moments
// and a tensor outside params/. Values from `seed`, with -0, infinities, a NaN with a payload
// and a denormal mixed in: a round trip must keep every bit.
inline CkptModel make_model(std::uint32_t seed) {
  CkptModel model;
  model.signature = {{"0.weight", {7, 13}},
                     {"0.bias", {13}},
                     {"1.weight", {5, 3, 11}},
                     {"2.scale", {1}},
                     {"3.temperature", {}},
                     {"4.embedding", {101, 3}}};
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const auto fill = [&](const std::string& name, const Shape& shape) {
    LogicalTensor t{name, shape, std::vector<float>(static_cast<std::size_t>(shape_numel(shape)))};
    for (float& x : t.values) x = normal(rng);
    model.tensors.push_back(std::move(t));
  };
  for (const io::SignatureEntry& e : model.signature) {
    fill(io::param_tensor_name(e.name, "val"), e.shape);
    if (e.name == "2.scale") continue;  // no moments (an SGD-like parameter)
    fill(io::param_tensor_name(e.name, "m"), e.shape);
    fill(io::param_tensor_name(e.name, "v"), e.shape);
  }
  fill("buffers/0.running_mean", {13});
  std::vector<float>& w = model.tensors.front().values;
  std::uint32_t nan_bits = 0x7fc01234u;
  std::memcpy(&w[3], &nan_bits, sizeof nan_bits);
  w[4] = -0.0f;
  w[5] = std::numeric_limits<float>::infinity();
  w[6] = -std::numeric_limits<float>::infinity();
  w[7] = std::numeric_limits<float>::denorm_min();
  return model;
}

inline io::CheckpointMeta make_meta(const CkptModel& model, std::int64_t step, int world_size) {
  io::CheckpointMeta meta;
  meta.step = step;
  meta.epoch = step / 7;
  meta.samples_seen = step * 96 + 5;
  meta.world_size = world_size;
  meta.policy = "zero2";
  meta.optimizer = {step, std::pow(0.9, static_cast<double>(step)),
                    std::pow(0.999, static_cast<double>(step))};
  meta.signature = model.signature;
  meta.scalars = {{"lr", 1.0 / 3.0}, {"warmup_steps", 100}, {"tiny", 4.9e-324}};
  meta.counters = {{"seed", 42}, {"dropout_offset", std::numeric_limits<std::uint64_t>::max()}};
  meta.labels = {{"model", "mlp"}, {"optimizer", "adamw"}, {"empty", ""}};
  return meta;
}

// Cut points: ranks - 1 random positions in [0, total], sorted (repeats give empty ranks).
inline std::vector<std::int64_t> random_cuts(std::int64_t total, int ranks, std::mt19937& rng) {
  std::uniform_int_distribution<std::int64_t> pos(0, total);
  std::vector<std::int64_t> cuts{0};
  for (int r = 1; r < ranks; ++r) cuts.push_back(pos(rng));
  cuts.push_back(total);
  std::sort(cuts.begin(), cuts.end());
  return cuts;
}

// One rank's part of a tensor: elements [offset, offset + count) of tensors[tensor].
struct Piece {
  std::size_t tensor = 0;
  std::int64_t offset = 0;
  std::int64_t count = 0;
};

// The tensors laid end to end in one flat space, cut at random into `ranks` contiguous ranges:
// each rank gets at most one piece of each tensor.
inline std::vector<std::vector<Piece>> random_partition(const CkptModel& model, int ranks,
                                                        std::mt19937& rng) {
  std::int64_t total = 0;
  for (const LogicalTensor& t : model.tensors) total += static_cast<std::int64_t>(t.values.size());
  const std::vector<std::int64_t> cuts = random_cuts(total, ranks, rng);
  std::vector<std::vector<Piece>> parts(static_cast<std::size_t>(ranks));
  for (int r = 0; r < ranks; ++r) {
    std::int64_t base = 0;
    for (std::size_t i = 0; i < model.tensors.size(); ++i) {
      const auto n = static_cast<std::int64_t>(model.tensors[i].values.size());
      const std::int64_t b = std::max(cuts[static_cast<std::size_t>(r)], base);
      const std::int64_t e = std::min(cuts[static_cast<std::size_t>(r) + 1], base + n);
      if (b < e) parts[static_cast<std::size_t>(r)].push_back({i, b - base, e - b});
      base += n;
    }
  }
  return parts;
}

inline std::vector<io::TensorSlice> slices_of(const CkptModel& model,
                                              const std::vector<Piece>& pieces) {
  std::vector<io::TensorSlice> slices;
  for (const Piece& p : pieces) {
    const LogicalTensor& t = model.tensors[p.tensor];
    slices.push_back({t.name, t.shape, p.offset,
                      std::span<const float>(t.values).subspan(static_cast<std::size_t>(p.offset),
                                                               static_cast<std::size_t>(p.count))});
  }
  return slices;
}

// Every rank writes its file on its own thread (the simulated backend), then rank 0 commits.
inline std::filesystem::path write_checkpoint(const std::filesystem::path& dir,
                                              const CkptModel& model, std::int64_t step,
                                              int ranks, std::mt19937& rng, int keep_last = 0) {
  const io::CheckpointMeta meta = make_meta(model, step, ranks);
  const auto parts = random_partition(model, ranks, rng);
  std::vector<std::thread> threads;
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(ranks));
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      try {
        const auto slices = slices_of(model, parts[static_cast<std::size_t>(r)]);
        io::write_rank_file(dir, r, meta, slices);
      } catch (...) {
        errors[static_cast<std::size_t>(r)] = std::current_exception();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (const auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
  return io::commit_checkpoint(dir, step, ranks, keep_last);
}

// Bit patterns, so that NaN payloads and -0 compare exactly.
inline std::vector<std::uint32_t> bits(const std::vector<float>& v) {
  std::vector<std::uint32_t> out(v.size());
  if (!v.empty()) std::memcpy(out.data(), v.data(), v.size() * sizeof(float));
  return out;
}

// Reads the checkpoint back with `ranks` reader threads, each opening the checkpoint itself and
// reading only its (random) ranges, and expects every tensor bit-identical to `model`'s.
inline void expect_reads_back(const std::filesystem::path& path, const CkptModel& model, int ranks,
                              std::mt19937& rng) {
  const auto parts = random_partition(model, ranks, rng);
  std::vector<std::vector<float>> rebuilt(model.tensors.size());
  for (std::size_t i = 0; i < model.tensors.size(); ++i) {
    rebuilt[i].assign(model.tensors[i].values.size(), 12345.0f);
  }
  std::vector<std::thread> threads;
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(ranks));
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      try {
        const io::CheckpointReader ckpt = io::CheckpointReader::open(path);
        for (const Piece& p : parts[static_cast<std::size_t>(r)]) {
          std::span<float> out(rebuilt[p.tensor]);
          ckpt.read(model.tensors[p.tensor].name, p.offset,
                    out.subspan(static_cast<std::size_t>(p.offset),
                                static_cast<std::size_t>(p.count)));
        }
      } catch (...) {
        errors[static_cast<std::size_t>(r)] = std::current_exception();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (const auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
  for (std::size_t i = 0; i < model.tensors.size(); ++i) {
    EXPECT_EQ(bits(rebuilt[i]), bits(model.tensors[i].values)) << model.tensors[i].name;
  }
}

}  // namespace noeira::testing

// Tensor memory accounting (core/tensor.hpp, tensor_bytes): every byte of storage a thread
// allocates counts to that thread until it is freed, views count nothing, and the peak follows
// the live bytes; and through the binary, --report-memory's activation bytes are the step's
// tensors beyond the store: they hold at least the logits, and --accum 2 halves them.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "cli_test_util.hpp"
#include "core/tensor.hpp"

namespace noeira {
namespace {

TEST(TensorBytes, CountThisThreadsStorageExactly) {
  const TensorBytes before = tensor_bytes(Target::Cpu);
  {
    Tensor a({1000}, Target::Cpu);
    EXPECT_EQ(tensor_bytes(Target::Cpu).live, before.live + 4000);
    const Tensor view = a.view({10}, 5);  // shares the storage: nothing new
    EXPECT_EQ(tensor_bytes(Target::Cpu).live, before.live + 4000);
    {
      Tensor b({250}, Target::Cpu, DType::F64);
      EXPECT_EQ(tensor_bytes(Target::Cpu).live, before.live + 6000);
      EXPECT_GE(tensor_bytes(Target::Cpu).peak, before.live + 6000);
    }
    EXPECT_EQ(tensor_bytes(Target::Cpu).live, before.live + 4000);
    reset_peak_tensor_bytes(Target::Cpu);
    EXPECT_EQ(tensor_bytes(Target::Cpu).peak, before.live + 4000);
    a.resize({500}, Target::Cpu);  // fits: no new storage
    EXPECT_EQ(tensor_bytes(Target::Cpu).live, before.live + 4000);
  }
  EXPECT_EQ(tensor_bytes(Target::Cpu).live, before.live);
  EXPECT_EQ(tensor_bytes(Target::Cuda).live, 0) << "nothing was allocated on the GPU";
}

TEST(TensorBytes, EachThreadHasItsOwnAccount) {
  const std::int64_t mine = tensor_bytes(Target::Cpu).live;
  Tensor handed_over;
  std::int64_t theirs = -1;
  std::thread other([&] {
    handed_over = Tensor({100}, Target::Cpu);
    theirs = tensor_bytes(Target::Cpu).live;
  });
  other.join();
  EXPECT_EQ(theirs, 400);
  EXPECT_EQ(tensor_bytes(Target::Cpu).live, mine) << "another thread's storage is not mine";
  handed_over = Tensor();  // freed here, credited to the thread that made it: nothing moves here
  EXPECT_EQ(tensor_bytes(Target::Cpu).live, mine);
}

// A text file of `lines` short lines in `dir`; its path.
std::string write_corpus(const testing::TempDir& dir, int lines) {
  const std::string corpus = (dir / "corpus.txt").string();
  std::ofstream out(corpus);
  for (int i = 0; i < lines; ++i) out << "the quick brown fox, line " << i % 11 << "\n";
  return corpus;
}

// The activations of rank 0's first step, from --report-memory's line.
double activation_mib(const std::string& out) {
  const std::regex line(R"(\[rank 0\] memory: .*activations ([0-9.]+) MiB \(step peak\))");
  std::smatch m;
  if (!std::regex_search(out, m, line)) return -1.0;
  return std::stod(m[1].str());
}

TEST(TensorBytes, ReportedActivationsHoldTheLogitsAndHalveWithTwoMicroBatches) {
  REQUIRE_BINARY();
  testing::TempDir dir;
  const std::string corpus = write_corpus(dir, 300);
  // gpt-tiny: block 16, 256 ids; a batch of 16 windows on 2 simulated ranks is 8 per rank.
  const std::string run = "train --data text --model gpt-tiny --text-file " + corpus +
                          " --batch 16 --steps 2 --eval-every 2 --eval-batches 1 --threads 1 "
                          "--sim-ranks 2 --policy zero2 --report-memory --out ";
  const testing::Output whole = testing::noeira(dir, run + (dir / "k1").string());
  ASSERT_EQ(whole.code, 0) << whole.err;
  const testing::Output halves = testing::noeira(dir, run + (dir / "k2").string() + " --accum 2");
  ASSERT_EQ(halves.code, 0) << halves.err;
  const double k1 = activation_mib(whole.out);
  const double k2 = activation_mib(halves.out);
  ASSERT_GT(k1, 0.0) << whole.out;
  ASSERT_GT(k2, 0.0) << halves.out;
  // The logits of 8 windows of 16 tokens over 256 ids, and their gradient: 2 x 128 KiB at least.
  EXPECT_GE(k1, 2 * 8 * 16 * 256 * 4 / (1024.0 * 1024.0)) << whole.out;
  // Half the rows per forward: about half of everything sized by them (the rest is not).
  EXPECT_LT(k2, 0.65 * k1) << whole.out << halves.out;
  EXPECT_GT(k2, 0.4 * k1) << whole.out << halves.out;
}

TEST(TensorBytes, CheckpointedBlocksHoldLessThanHalfTheActivations) {
  REQUIRE_BINARY();
  testing::TempDir dir;
  const std::string corpus = write_corpus(dir, 400);
  // gpt-char: 4 blocks of width 128 over windows of 64; its attention probabilities and their
  // gradient are most of a block's buffers.
  const std::string run = "train --data text --model gpt-char --text-file " + corpus +
                          " --batch 8 --steps 1 --eval-every 1 --eval-batches 1 --threads 1 "
                          "--report-memory --out ";
  const testing::Output plain = testing::noeira(dir, run + (dir / "plain").string());
  ASSERT_EQ(plain.code, 0) << plain.err;
  const testing::Output recomputed =
      testing::noeira(dir, run + (dir / "recomputed").string() + " --checkpoint-activations");
  ASSERT_EQ(recomputed.code, 0) << recomputed.err;
  const double all = activation_mib(plain.out);
  const double kept = activation_mib(recomputed.out);
  ASSERT_GT(all, 0.0) << plain.out;
  ASSERT_GT(kept, 0.0) << recomputed.out;
  // One block's buffers, every block's input and output gradient, the logits: under half.
  EXPECT_LT(kept, 0.5 * all) << plain.out << recomputed.out;
  // The logits of 8 windows of 64 tokens over 256 ids and their gradient stay.
  EXPECT_GE(kept, 2 * 8 * 64 * 256 * 4 / (1024.0 * 1024.0)) << recomputed.out;
}

}  // namespace
}  // namespace noeira

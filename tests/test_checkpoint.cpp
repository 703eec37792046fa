// Rank-sharded checkpoints: written by N "ranks" (threads) with random contiguous slices, read
// back bit-identical by M ranks cutting the tensors elsewhere; metadata round trip; the commit
// protocol (temporary directory invisible, `latest` last, pruning); the inspect summary; and a
// reader with h5py alone. Bad files are tests/test_checkpoint_errors.cpp, kills mid-write
// tests/test_checkpoint_crash.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <tuple>

#include "checkpoint_test_util.hpp"

namespace noeira {
namespace {

using testing::CkptModel;
using testing::TempDir;
using testing::bits;
using testing::expect_error;
using testing::expect_reads_back;
using testing::make_meta;
using testing::make_model;
using testing::write_checkpoint;

std::string read_text(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

// (ranks that write, ranks that read)
class CheckpointResharding : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(CheckpointResharding, LogicalTensorsReadBackBitIdentical) {
  const auto [writers, readers] = GetParam();
  TempDir dir;
  std::mt19937 rng(1000u * static_cast<unsigned>(writers) + static_cast<unsigned>(readers));
  const CkptModel model = make_model(7);
  const auto step_dir = write_checkpoint(dir.path(), model, 120, writers, rng);
  EXPECT_EQ(step_dir, dir / "step-00000120");
  for (int trial = 0; trial < 3; ++trial) expect_reads_back(dir.path(), model, readers, rng);

  // The writers really did split the work: N files, each holding part of the model.
  const io::CheckpointReader ckpt = io::CheckpointReader::open(dir.path());
  EXPECT_EQ(ckpt.meta().world_size, writers);
  for (int r = 0; r < writers; ++r) {
    EXPECT_TRUE(std::filesystem::exists(step_dir / ("rank-0000" + std::to_string(r) + ".h5")));
  }
  EXPECT_FALSE(std::filesystem::exists(step_dir / ("rank-0000" + std::to_string(writers) + ".h5")));
}

INSTANTIATE_TEST_SUITE_P(WritersByReaders, CheckpointResharding,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4),
                                            ::testing::Values(1, 2, 3, 4)));

TEST(Checkpoint, EveryRangeAcrossSliceBoundariesReadsExactly) {
  TempDir dir;
  const CkptModel full = make_model(11);
  CkptModel model;
  model.signature = {full.signature.front()};
  model.tensors = {full.tensors.front()};
  // Cut by hand: a one-element slice, slices that are not block-aligned.
  const io::CheckpointMeta meta = make_meta(model, 5, 4);
  const std::int64_t cuts[] = {0, 20, 21, 60, 91};
  for (int r = 0; r < 4; ++r) {
    const std::vector<testing::Piece> pieces = {{0, cuts[r], cuts[r + 1] - cuts[r]}};
    io::write_rank_file(dir.path(), r, meta, testing::slices_of(model, pieces));
  }
  io::commit_checkpoint(dir.path(), 5, 4, 0);
  const io::CheckpointReader ckpt = io::CheckpointReader::open(dir / "step-00000005");
  // Every [a, b) of a tensor cut into 4 slices: boundaries inside, at and across slices.
  const testing::LogicalTensor& t = model.tensors.front();
  const auto n = static_cast<std::int64_t>(t.values.size());
  for (std::int64_t a = 0; a <= n; ++a) {
    for (std::int64_t b = a; b <= n; b += 1 + (b - a) / 4) {
      std::vector<float> out(static_cast<std::size_t>(b - a));
      ckpt.read(t.name, a, out);
      const std::vector<float> want(t.values.begin() + a, t.values.begin() + b);
      ASSERT_EQ(bits(out), bits(want)) << "range [" << a << ", " << b << ")";
    }
  }
  std::vector<float> three(3);
  EXPECT_THROW(ckpt.read(t.name, n - 2, three), Error);
  EXPECT_THROW(ckpt.read(t.name, -1, std::span<float>(three).first(1)), Error);
}

TEST(Checkpoint, LargeSlicesReadInBlocksAndPartially) {
  // Slices of several checksum blocks (256 Ki elements each) read whole, in odd pieces, and
  // by one reader shared by four threads.
  TempDir dir;
  CkptModel model;
  model.signature = {{"0.weight", {1000, 1537}}};
  testing::LogicalTensor t{"params/0.weight/val", {1000, 1537}, {}};
  t.values.resize(1000 * 1537);
  for (std::size_t i = 0; i < t.values.size(); ++i) {
    t.values[i] = static_cast<float>(i % 9973) * 0.5f - static_cast<float>(i % 7);
  }
  model.tensors.push_back(std::move(t));
  std::mt19937 rng(5);
  write_checkpoint(dir.path(), model, 1, 3, rng);
  const io::CheckpointReader ckpt = io::CheckpointReader::open(dir.path());
  const auto& values = model.tensors[0].values;
  EXPECT_EQ(bits(ckpt.read_all("params/0.weight/val")), bits(values));
  ckpt.verify();
  std::vector<std::thread> threads;
  std::vector<int> ok(4, 0);
  for (int r = 0; r < 4; ++r) {
    threads.emplace_back([&, r] {
      const std::int64_t begin = 262144 * r + 1000 * r + 17;
      const std::int64_t count = 700001 - 3 * r;
      std::vector<float> out(static_cast<std::size_t>(count));
      ckpt.read("params/0.weight/val", begin, out);
      ok[static_cast<std::size_t>(r)] =
          std::equal(out.begin(), out.end(), values.begin() + begin) ? 1 : 0;
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(ok, std::vector<int>(4, 1));
}

TEST(Checkpoint, MetadataRoundTripsExactly) {
  TempDir dir;
  std::mt19937 rng(9);
  const CkptModel model = make_model(1);
  write_checkpoint(dir.path(), model, 77, 3, rng);
  const io::CheckpointReader ckpt = io::CheckpointReader::open(dir.path());
  const io::CheckpointMeta want = make_meta(model, 77, 3);
  EXPECT_EQ(ckpt.meta(), want);  // doubles compared exactly: beta^t, 1/3, a denormal
  EXPECT_EQ(ckpt.meta().optimizer.beta2_pow, std::pow(0.999, 77.0));
  EXPECT_EQ(ckpt.meta().counters.at("dropout_offset"), std::numeric_limits<std::uint64_t>::max());
  EXPECT_EQ(ckpt.meta().labels.at("empty"), "");
  EXPECT_EQ(ckpt.meta().signature[4].shape, Shape{});  // the 0-d parameter
  EXPECT_EQ(ckpt.format_version(), io::kCheckpointFormatVersion);
  EXPECT_EQ(ckpt.dir(), dir / "step-00000077");

  // Tensors in walk order (val, m, v per parameter), then the others by name.
  const std::vector<std::string> names = ckpt.tensor_names();
  ASSERT_EQ(names.size(), model.tensors.size());
  EXPECT_EQ(names[0], "params/0.weight/val");
  EXPECT_EQ(names[1], "params/0.weight/m");
  EXPECT_EQ(names[2], "params/0.weight/v");
  EXPECT_EQ(names.back(), "buffers/0.running_mean");
  EXPECT_TRUE(ckpt.has("params/2.scale/val"));
  EXPECT_FALSE(ckpt.has("params/2.scale/m"));
  EXPECT_EQ(ckpt.shape("params/1.weight/v"), (Shape{5, 3, 11}));
  expect_error<InputError>([&] { (void)ckpt.shape("params/9.weight/val"); },
                           {"params/9.weight/val", "no tensor"});
}

TEST(Checkpoint, CommitProtocolShowsOnlyCompleteCheckpoints) {
  TempDir dir;
  const CkptModel model = make_model(2);
  const io::CheckpointMeta meta = make_meta(model, 10, 2);
  std::mt19937 rng(4);
  const auto parts = testing::random_partition(model, 2, rng);

  EXPECT_EQ(io::latest_checkpoint(dir.path()), std::nullopt);
  io::write_rank_file(dir.path(), 0, meta, testing::slices_of(model, parts[0]));
  // Written but not committed: invisible to `latest`, refused when named directly.
  EXPECT_TRUE(std::filesystem::exists(dir / ".tmp-step-00000010/rank-00000.h5"));
  EXPECT_FALSE(std::filesystem::exists(dir / "step-00000010"));
  EXPECT_EQ(io::latest_checkpoint(dir.path()), std::nullopt);
  expect_error<InputError>([&] { io::CheckpointReader::open(dir.path()); },
                           {dir.path().string(), "no committed checkpoint"});
  expect_error<InputError>([&] { io::CheckpointReader::open(dir / ".tmp-step-00000010"); },
                           {".tmp-step-00000010", "half-written"});
  // Rank 1 has not finished: commit refuses and publishes nothing.
  expect_error<Error>([&] { io::commit_checkpoint(dir.path(), 10, 2, 0); },
                      {"rank-00001.h5", "rank 1 of 2 did not finish"});
  EXPECT_FALSE(std::filesystem::exists(dir / "latest"));

  io::write_rank_file(dir.path(), 1, meta, testing::slices_of(model, parts[1]));
  io::commit_checkpoint(dir.path(), 10, 2, 0);
  EXPECT_FALSE(std::filesystem::exists(dir / ".tmp-step-00000010"));
  EXPECT_EQ(read_text(dir / "latest"), "step-00000010\n");
  EXPECT_FALSE(std::filesystem::exists(dir / "latest.tmp"));
  EXPECT_EQ(io::latest_checkpoint(dir.path()), dir / "step-00000010");
  // Every way of naming it resolves to the step directory.
  EXPECT_EQ(io::resolve_checkpoint(dir.path()), dir / "step-00000010");
  EXPECT_EQ(io::resolve_checkpoint(dir / "latest"), dir / "step-00000010");
  EXPECT_EQ(io::resolve_checkpoint(dir / "step-00000010"), dir / "step-00000010");
}

TEST(Checkpoint, KeepLastPrunesOldestAndLeftovers) {
  TempDir dir;
  const CkptModel model = make_model(3);
  std::mt19937 rng(8);
  // A leftover of a crashed write (another step, another world size) and a stale rank file of a
  // larger world inside the temporary directory of the step being written.
  std::filesystem::create_directories(dir / ".tmp-step-00000999");
  std::ofstream(dir / ".tmp-step-00000999/rank-00000.h5") << "junk";
  std::filesystem::create_directories(dir / ".tmp-step-00000030");
  std::ofstream(dir / ".tmp-step-00000030/rank-00003.h5") << "stale";
  std::ofstream(dir / ".tmp-step-00000030/rank-00001.h5.part") << "dead rank";

  for (const std::int64_t step : {10, 20, 30, 40, 50}) {
    write_checkpoint(dir.path(), model, step, 2, rng, 2);
  }
  std::vector<std::string> entries;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
    entries.push_back(e.path().filename().string());
  }
  std::sort(entries.begin(), entries.end());
  EXPECT_EQ(entries, (std::vector<std::string>{"latest", "step-00000040", "step-00000050"}));
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(dir / "step-00000050")) {
    files.push_back(e.path().filename().string());
  }
  std::sort(files.begin(), files.end());
  EXPECT_EQ(files, (std::vector<std::string>{"rank-00000.h5", "rank-00001.h5"}));
  const auto listed = io::list_checkpoints(dir.path());
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_EQ(listed[0].first, 40);
  EXPECT_EQ(listed[1].first, 50);
  testing::expect_reads_back(dir.path(), model, 3, rng);
}

TEST(Checkpoint, RecommittingAStepReplacesItAtomically) {
  // A run resumed from step 10 writes step 20 again (its first attempt was committed but the
  // crash came before `latest` moved): the new one replaces it, with another world size.
  TempDir dir;
  std::mt19937 rng(6);
  const CkptModel first = make_model(4);
  const CkptModel second = make_model(5);
  write_checkpoint(dir.path(), first, 20, 4, rng);
  write_checkpoint(dir.path(), second, 20, 2, rng);
  const io::CheckpointReader ckpt = io::CheckpointReader::open(dir.path());
  EXPECT_EQ(ckpt.meta().world_size, 2);
  EXPECT_FALSE(std::filesystem::exists(dir / "step-00000020/rank-00002.h5"));
  testing::expect_reads_back(dir.path(), second, 1, rng);
}

TEST(Checkpoint, SummaryPrintsMetaShapesAndNorms) {
  TempDir dir;
  std::mt19937 rng(12);
  CkptModel model = make_model(6);
  model.tensors.front().values.assign(model.tensors.front().values.size(), 0.5f);  // finite norm
  write_checkpoint(dir.path(), model, 33, 3, rng);
  std::ostringstream os;
  io::print_checkpoint_summary(os, dir.path());
  const std::string text = os.str();
  EXPECT_NE(text.find("step 33,"), std::string::npos) << text;
  EXPECT_NE(text.find("world size 3"), std::string::npos) << text;
  EXPECT_NE(text.find("policy zero2"), std::string::npos) << text;
  EXPECT_NE(text.find("lr=0.333333333"), std::string::npos) << text;
  // Each tensor on its own line with its shape and the L2 norm of all its slices together.
  for (const testing::LogicalTensor& t : model.tensors) {
    double sum = 0;
    for (const float x : t.values) sum += static_cast<double>(x) * x;
    const std::size_t at = text.find("  " + t.name + " ");
    ASSERT_NE(at, std::string::npos) << t.name << "\n" << text;
    const std::string line = text.substr(at, text.find('\n', at) - at);
    EXPECT_NE(line.find(shape_string(t.shape)), std::string::npos) << line;
    const double printed = std::stod(line.substr(line.find("norm ") + 5));
    EXPECT_NEAR(printed, std::sqrt(sum), 1e-8 * std::sqrt(sum)) << line;
  }
  // 0.5 everywhere in 7x13: norm = 0.5 * sqrt(91), a closed form.
  EXPECT_NE(text.find("norm " + [] {
              char buf[32];
              std::snprintf(buf, sizeof buf, "%.9g", 0.5 * std::sqrt(91.0));
              return std::string(buf);
            }()),
            std::string::npos)
      << text;
}

TEST(Checkpoint, RepackedWithGzipStillLoadsThroughHdf5) {
  // Our files are read with pread at H5Dget_offset; a file rewritten by another tool (chunked,
  // compressed) has no such offset and must be read through HDF5, checksums still verified.
  if (std::system("command -v h5repack >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "h5repack is not installed (Debian: hdf5-tools)";
  }
  TempDir dir;
  std::mt19937 rng(15);
  const CkptModel model = make_model(16);
  const auto step_dir = write_checkpoint(dir.path(), model, 50, 2, rng);
  for (const char* rank : {"rank-00000.h5", "rank-00001.h5"}) {
    const auto file = step_dir / rank;
    const auto packed = dir / "packed.h5";
    const std::string cmd = "h5repack -f GZIP=1 -l CHUNK=8 " + file.string() + " " +
                            packed.string() + " >/dev/null 2>&1";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    std::filesystem::rename(packed, file);
  }
  testing::expect_reads_back(dir.path(), model, 3, rng);
  io::CheckpointReader::open(dir.path()).verify();
}

TEST(Checkpoint, H5pyRebuildsTensorsWithoutOurCode) {
  if (std::system("/usr/bin/python3 -c 'import h5py, numpy' >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "/usr/bin/python3 with h5py and numpy is not installed (python3-h5py)";
  }
  TempDir dir;
  std::mt19937 rng(13);
  const CkptModel model = make_model(14);
  write_checkpoint(dir.path(), model, 40, 3, rng);
  const std::filesystem::path script =
      std::filesystem::path(NOEIRA_TEST_DATA_DIR).parent_path() / "checkpoint_h5py_read.py";
  std::string cmd = "/usr/bin/python3 " + script.string() + " " + dir.path().string() + " " +
                    dir.path().string();
  for (const testing::LogicalTensor& t : model.tensors) cmd += " " + t.name;
  cmd += " > " + (dir / "meta.txt").string();
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  for (std::size_t i = 0; i < model.tensors.size(); ++i) {
    const testing::LogicalTensor& t = model.tensors[i];
    std::ifstream in(dir / (std::to_string(i) + ".bin"), std::ios::binary);
    std::vector<float> values(t.values.size() + 1);
    in.read(reinterpret_cast<char*>(values.data()),
            static_cast<std::streamsize>(values.size() * sizeof(float)));
    ASSERT_EQ(in.gcount(), static_cast<std::streamsize>(t.values.size() * sizeof(float)))
        << t.name;
    values.pop_back();
    EXPECT_EQ(bits(values), bits(t.values)) << t.name;
  }
  EXPECT_EQ(read_text(dir / "meta.txt"), "step 40 world_size 3 policy zero2 samples_seen 3845\n");
}

}  // namespace
}  // namespace noeira

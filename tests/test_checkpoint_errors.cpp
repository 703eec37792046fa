// Bad checkpoints: every kind (truncated, flipped bytes in data and anywhere in a file, missing
// or foreign or extra rank files, another model, a future format, gaps and overlaps, dangling
// `latest`) is an InputError whose one-line message names the file and, where there is one, the
// tensor; never a crash. Invalid writes are an Error naming the slice.
#include <gtest/gtest.h>
#include <hdf5.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>

#include "checkpoint_test_util.hpp"
#include "file_damage.hpp"
#include "io/h5.hpp"

namespace noeira {
namespace {

using testing::CkptModel;
using testing::TempDir;
using testing::bits;
using testing::data_offset;
using testing::expect_error;
using testing::flip_byte;
using testing::make_meta;
using testing::make_model;
using testing::write_checkpoint;

std::vector<char> read_bytes(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const std::filesystem::path& file, const std::vector<char>& bytes) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Opens the checkpoint and reads every tensor.
void load_everything(const std::filesystem::path& path) {
  io::CheckpointReader::open(path).verify();
}

class CheckpointErrors : public ::testing::Test {
 protected:
  void SetUp() override { step_dir_ = write_checkpoint(dir_.path(), model_, 20, 3, rng_); }
  std::filesystem::path rank_file(int r) const {
    return step_dir_ / ("rank-0000" + std::to_string(r) + ".h5");
  }

  TempDir dir_;
  std::mt19937 rng_{21};
  CkptModel model_ = make_model(22);
  std::filesystem::path step_dir_;
};

TEST_F(CheckpointErrors, TruncatedRankFileNamesTheFile) {
  const std::vector<char> pristine = read_bytes(rank_file(1));
  for (const std::size_t keep : {pristine.size() - 1, pristine.size() / 2, std::size_t{100},
                                 std::size_t{7}, std::size_t{0}}) {
    write_bytes(rank_file(1), std::vector<char>(pristine.begin(), pristine.begin() + keep));
    expect_error<InputError>([&] { load_everything(dir_.path()); }, {rank_file(1).string()});
  }
  write_bytes(rank_file(1), pristine);
  load_everything(dir_.path());  // the same bytes put back load again: not a stale verdict
}

TEST_F(CheckpointErrors, FlippedDataByteIsAChecksumErrorNamingTensorAndFile) {
  const std::string tensor = "params/1.weight/m";
  for (int r = 0; r < 3; ++r) {
    const std::int64_t at = data_offset(rank_file(r), tensor);
    if (at < 0) continue;  // this rank holds no part of it
    const std::vector<char> pristine = read_bytes(rank_file(r));
    flip_byte(rank_file(r), at + 2);
    const io::CheckpointReader ckpt = io::CheckpointReader::open(dir_.path());  // metadata fine
    expect_error<InputError>([&] { (void)ckpt.read_all(tensor); },
                             {rank_file(r).string(), tensor, "checksum mismatch"});
    expect_error<InputError>([&] { ckpt.verify(); }, {tensor, "checksum mismatch"});
    write_bytes(rank_file(r), pristine);
  }
  load_everything(dir_.path());
}

TEST(CheckpointErrorsLarge, CorruptBlockFailsOnlyTheReadsThatTouchIt) {
  TempDir dir;
  CkptModel model;
  model.signature = {{"0.weight", {3, 262144}}};  // one rank, three checksum blocks
  model.tensors.push_back({"params/0.weight/val", {3, 262144}, std::vector<float>(3 * 262144)});
  for (std::size_t i = 0; i < model.tensors[0].values.size(); ++i) {
    model.tensors[0].values[i] = static_cast<float>(i);
  }
  std::mt19937 rng(1);
  const auto step_dir = write_checkpoint(dir.path(), model, 1, 1, rng);
  const auto file = step_dir / "rank-00000.h5";
  flip_byte(file, data_offset(file, "params/0.weight/val") + 4 * (2 * 262144 + 5));
  const io::CheckpointReader ckpt = io::CheckpointReader::open(dir.path());
  std::vector<float> first(2 * 262144);
  ckpt.read("params/0.weight/val", 0, first);
  EXPECT_EQ(first[262144 + 9], 262144.0f + 9.0f);
  std::vector<float> one(1);
  expect_error<InputError>([&] { ckpt.read("params/0.weight/val", 3 * 262144 - 1, one); },
                           {"elements [524288, 786432)", file.string()});
}

TEST_F(CheckpointErrors, MissingRankFileNamesItAndTheWorldSize) {
  std::filesystem::remove(rank_file(2));
  expect_error<InputError>([&] { load_everything(dir_.path()); },
                           {rank_file(2).string(), "missing rank file", "written by 3 ranks"});
  std::filesystem::remove(rank_file(0));  // the survivors still know the world size
  expect_error<InputError>([&] { load_everything(dir_.path()); },
                           {rank_file(0).string(), "missing rank file"});
}

TEST_F(CheckpointErrors, RankFilesOfAnotherCheckpointOrRankAreRefused) {
  const auto other = write_checkpoint(dir_.path(), model_, 30, 3, rng_);
  std::filesystem::copy_file(rank_file(1), dir_.path() / "saved.h5");
  std::filesystem::copy_file(other / "rank-00001.h5", rank_file(1),
                             std::filesystem::copy_options::overwrite_existing);
  expect_error<InputError>([&] { load_everything(step_dir_); },
                           {rank_file(1).string(), "another checkpoint", "step 30 vs 20"});
  std::filesystem::copy_file(dir_.path() / "saved.h5", rank_file(1),
                             std::filesystem::copy_options::overwrite_existing);
  // Two files swapped.
  std::filesystem::rename(rank_file(0), dir_.path() / "r0.h5");
  std::filesystem::rename(rank_file(1), rank_file(0));
  std::filesystem::rename(dir_.path() / "r0.h5", rank_file(1));
  expect_error<InputError>([&] { load_everything(step_dir_); },
                           {rank_file(0).string(), "holds rank 1, not 0"});
  std::filesystem::rename(rank_file(0), dir_.path() / "r0.h5");
  std::filesystem::rename(rank_file(1), rank_file(0));
  std::filesystem::rename(dir_.path() / "r0.h5", rank_file(1));
  // One file too many.
  std::filesystem::copy_file(rank_file(2), rank_file(3));
  expect_error<InputError>([&] { load_everything(step_dir_); },
                           {rank_file(3).string(), "beyond the checkpoint's world size 3"});
}

TEST_F(CheckpointErrors, NotHdf5AndFutureFormatAreRefused) {
  const std::vector<char> pristine = read_bytes(rank_file(0));
  write_bytes(rank_file(0), {'h', 'e', 'l', 'l', 'o'});
  expect_error<InputError>([&] { load_everything(dir_.path()); },
                           {rank_file(0).string(), "not an HDF5 file"});
  write_bytes(rank_file(0), pristine);
  {
    io::h5::Lock held = io::h5::lock();
    io::h5::Handle f(H5Fopen(rank_file(2).c_str(), H5F_ACC_RDWR, H5P_DEFAULT), H5Fclose);
    io::h5::Handle attr(H5Aopen(f.get(), "format_version", H5P_DEFAULT), H5Aclose);
    const std::int64_t future = io::kCheckpointFormatVersion + 1;
    ASSERT_GE(H5Awrite(attr.get(), H5T_NATIVE_INT64, &future), 0);
  }
  expect_error<InputError>([&] { load_everything(dir_.path()); },
                           {rank_file(2).string(), "format version 2", "reads versions 1 to 1"});
}

TEST_F(CheckpointErrors, AnotherModelIsRefusedNamingTheParameterAndFile) {
  const io::CheckpointReader ckpt = io::CheckpointReader::open(dir_.path());
  ckpt.check_signature(model_.signature);  // the right model passes
  io::Signature other = model_.signature;
  other[2].shape = {5, 3, 12};
  expect_error<InputError>([&] { ckpt.check_signature(other); },
                           {rank_file(0).string(), "'1.weight'", "[5, 3, 11] in the checkpoint",
                            "[5, 3, 12] in the model"});
  other = model_.signature;
  other.push_back({"5.weight", {2, 2}});
  expect_error<InputError>([&] { ckpt.check_signature(other); },
                           {"'5.weight'", "not in the checkpoint"});
  other = model_.signature;
  other.erase(other.begin() + 1);
  expect_error<InputError>([&] { ckpt.check_signature(other); },
                           {"'0.bias'", "not in the model"});
  other = model_.signature;
  std::swap(other[0], other[1]);
  expect_error<InputError>([&] { ckpt.check_signature(other); }, {"walk order"});
}

TEST_F(CheckpointErrors, DanglingOrGarbledLatestAndWrongPathsAreRefused) {
  std::ofstream(dir_ / "latest") << "step-00000099\n";
  expect_error<InputError>([&] { load_everything(dir_.path()); },
                           {(dir_ / "latest").string(), "step-00000099", "does not exist"});
  std::ofstream(dir_ / "latest") << "../../etc\n";
  expect_error<InputError>([&] { load_everything(dir_.path()); }, {"not a step-NNNNNNNN"});
  expect_error<InputError>([&] { load_everything(dir_ / "nowhere"); },
                           {(dir_ / "nowhere").string(), "no such checkpoint"});
  std::filesystem::create_directories(dir_ / "empty");
  expect_error<InputError>([&] { load_everything(dir_ / "empty"); }, {"not a checkpoint"});
  expect_error<InputError>([&] { load_everything(rank_file(0)); }, {"not a checkpoint"});
}

TEST(CheckpointCoverage, GapsAndOverlapsBetweenRanksAreRefused) {
  TempDir dir;
  CkptModel model = make_model(3);
  model.tensors.resize(1);
  model.signature.resize(1);
  const auto write = [&](std::int64_t step, std::vector<std::vector<testing::Piece>> parts) {
    const io::CheckpointMeta meta = make_meta(model, step, static_cast<int>(parts.size()));
    for (std::size_t r = 0; r < parts.size(); ++r) {
      io::write_rank_file(dir.path(), static_cast<int>(r), meta,
                          testing::slices_of(model, parts[r]));
    }
    io::commit_checkpoint(dir.path(), step, static_cast<int>(parts.size()), 0);
  };
  write(1, {{{0, 0, 40}}, {{0, 41, 50}}});  // element 40 in no file
  expect_error<InputError>([&] { load_everything(dir.path()); },
                           {"params/0.weight/val", "elements from 40 of 91"});
  write(2, {{{0, 0, 40}}, {{0, 40, 50}}});  // the end missing
  expect_error<InputError>([&] { load_everything(dir.path()); }, {"elements from 90 of 91"});
  write(3, {{{0, 0, 41}}, {{0, 40, 51}}});
  expect_error<InputError>([&] { load_everything(dir.path()); },
                           {"params/0.weight/val", "rank-00000.h5 and rank-00001.h5 overlap"});
  write(4, {{{0, 0, 41}}, {{0, 41, 50}}});
  load_everything(dir.path());
}

TEST(CheckpointWrite, InvalidSlicesAreErrorsNamingTheSlice) {
  TempDir dir;
  const CkptModel model = make_model(4);
  const io::CheckpointMeta meta = make_meta(model, 1, 2);
  const std::vector<float> data(10, 1.0f);
  const auto write = [&](io::TensorSlice s, int rank = 0) {
    io::write_rank_file(dir.path(), rank, meta, std::vector<io::TensorSlice>{s});
  };
  expect_error<Error>([&] { write({"params/0.bias/val", {13}, 4, data}); },
                      {"params/0.bias/val", "[4, 14)", "outside its 13 elements"});
  expect_error<Error>([&] { write({"params/0.bias/val", {12}, 0, data}); },
                      {"params/0.bias/val", "[12]", "the signature says [13]"});
  expect_error<Error>([&] { write({"params/7.bias/val", {13}, 0, data}); },
                      {"'7.bias'", "not in the model signature"});
  expect_error<Error>([&] { write({"meta/x", {13}, 0, data}); }, {"meta/x"});
  expect_error<Error>([&] { write({"params//val", {13}, 0, data}); }, {"params//val"});
  expect_error<Error>([&] { write({"params/0.bias/val", {13}, 0, data}, 2); },
                      {"rank 2", "world size 2"});
  const std::vector<io::TensorSlice> twice = {{"params/0.bias/val", {13}, 0, data},
                                              {"params/0.bias/val", {13}, 3, data}};
  expect_error<Error>([&] { io::write_rank_file(dir.path(), 0, meta, twice); },
                      {"params/0.bias/val", "given twice"});
}

// Flips one byte at many places of a rank file (metadata and data alike) and loads the
// checkpoint in a child process each time: the load must give the exact tensors or an
// InputError, and never a signal (a crash inside HDF5) or another exception.
TEST_F(CheckpointErrors, FlippedByteAnywhereIsAnInputErrorOrHarmless) {
  const std::filesystem::path file = rank_file(1);
  const std::vector<char> pristine = read_bytes(file);
  // Where the tensors' bytes start: before that is HDF5 metadata (superblock, object headers,
  // attributes), mostly zero padding; flips go to its non-zero bytes and to the data.
  std::int64_t data_start = static_cast<std::int64_t>(pristine.size());
  std::vector<std::int64_t> data_offsets;
  for (const testing::LogicalTensor& t : model_.tensors) {
    const std::int64_t at = data_offset(file, t.name);
    if (at >= 0) data_offsets.push_back(at);
    if (at >= 0) data_start = std::min(data_start, at);
  }
  std::vector<std::int64_t> metadata;
  for (std::int64_t p = 0; p < data_start; ++p) {
    if (pristine[static_cast<std::size_t>(p)] != 0) metadata.push_back(p);
  }
  std::mt19937 pick(5);
  std::shuffle(metadata.begin(), metadata.end(), pick);
  metadata.resize(std::min<std::size_t>(metadata.size(), 240));
  std::vector<std::int64_t> positions = metadata;
  for (const std::int64_t at : data_offsets) positions.push_back(at + 1);
  int harmless = 0, refused = 0;
  std::vector<std::string> bad;
  for (const std::int64_t at : positions) {
    std::vector<char> bytes = pristine;
    bytes[static_cast<std::size_t>(at)] ^= static_cast<char>(0xff);
    write_bytes(file, bytes);
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int code = 0;
      try {
        const io::CheckpointReader ckpt = io::CheckpointReader::open(dir_.path());
        for (const testing::LogicalTensor& t : model_.tensors) {
          if (bits(ckpt.read_all(t.name)) != bits(t.values)) code = 2;
        }
      } catch (const InputError&) {
        code = 1;
      } catch (...) {
        code = 3;
      }
      _exit(code);
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
      ++harmless;
    } else if (WIFEXITED(status) && WEXITSTATUS(status) == 1) {
      ++refused;
    } else {
      bad.push_back(detail::concat("byte ", at, ": ",
                                   WIFSIGNALED(status) ? "signal " : "exit ",
                                   WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status)));
    }
  }
  write_bytes(file, pristine);
  EXPECT_TRUE(bad.empty()) << ::testing::PrintToString(bad);
  EXPECT_GT(refused, static_cast<int>(data_offsets.size()));  // every data flip at least
  RecordProperty("harmless", harmless);
  RecordProperty("refused", refused);
}

}  // namespace
}  // namespace noeira

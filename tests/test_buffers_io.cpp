// Buffers in files: model.h5 stores them beside the parameters and reads them back by name; a
// checkpoint stores them as buffers/<name>, and loading refuses a missing, misshapen, unknown or
// corrupted buffer with a message naming it.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "expect_error.hpp"
#include "file_damage.hpp"
#include "io/checkpoint.hpp"
#include "io/checkpoint_reader.hpp"
#include "io/params_file.hpp"
#include "io_test_files.hpp"
#include "train/model_buffers.hpp"

namespace noeira {
namespace {

using testing::TempDir;

struct TwoBuffers {
  Tensor mean = Tensor::from_host({3}, std::vector<float>{0.5f, -1.0f, 2.0f});
  Tensor count = Tensor::from_host({1}, std::vector<float>{7.0f});
  dist::WalkUnits walk() {
    dist::WalkUnits w;
    w.buffers = {{"1.running_mean", &mean}, {"1.num_batches_tracked", &count}};
    return w;
  }
};

TEST(BuffersInFiles, ModelFileRoundTripsBuffersAndRefusesMissingOrExtraOnes) {
  TempDir dir;
  TwoBuffers saved;
  const dist::WalkUnits walk = saved.walk();
  Param w({2}, Target::Cpu, Decay::Apply);
  w.val.copy_from(std::vector<float>{1.0f, 2.0f});
  const io::Signature params = {{"0.weight", {2}}};
  io::save_params(dir / "m.h5", "cnn", params, w.val.to_vector(), {}, NonFinite::Refuse,
                  buffer_signature(walk), buffer_values(walk));

  TwoBuffers loaded;
  loaded.mean.zero();
  loaded.count.zero();
  Param w2({2}, Target::Cpu, Decay::Apply);
  const dist::WalkUnits into = loaded.walk();
  io::load_params(dir / "m.h5", "cnn", {{"0.weight", &w2}}, NonFinite::Refuse, into.buffers);
  EXPECT_EQ(loaded.mean.to_vector(), saved.mean.to_vector());
  EXPECT_EQ(loaded.count.to_vector(), saved.count.to_vector());
  // The file has buffers this model does not know: another network.
  testing::expect_input_error([&] { io::load_params(dir / "m.h5", "cnn", {{"0.weight", &w2}}); },
                              {"has 'buffers/1.num_batches_tracked', which model 'cnn' does not"});
  // The model has a buffer the file lacks.
  Tensor extra({4});
  testing::expect_input_error([&] { io::load_params(dir / "m.h5", "cnn", {{"0.weight", &w2}}, NonFinite::Refuse,
                                     {{"1.running_mean", &loaded.mean},
                                      {"1.num_batches_tracked", &loaded.count},
                                      {"2.running_var", &extra}}); },
                              {"buffer '2.running_var' is missing"});
}

// A one-rank checkpoint holding one parameter and the buffers; returns its step directory.
std::filesystem::path write_checkpoint(const std::filesystem::path& dir, dist::WalkUnits& walk) {
  io::CheckpointMeta meta;
  meta.step = 1;
  meta.signature = {{"0.weight", {2}}};
  const std::vector<float> weight = {1.0f, 2.0f};
  const std::vector<float> buffers = buffer_values(walk);
  std::vector<io::TensorSlice> slices = {{"params/0.weight/val", {2}, 0, weight}};
  for (io::TensorSlice& s : buffer_slices(walk, buffers)) slices.push_back(s);
  io::write_rank_file(dir, 0, meta, slices);
  return io::commit_checkpoint(dir, 1, 1, 0);
}

TEST(BuffersInFiles, CheckpointBuffersLoadAndRefuseByName) {
  TempDir dir;
  TwoBuffers saved;
  dist::WalkUnits walk = saved.walk();
  const std::filesystem::path step = write_checkpoint(dir / "ckpt", walk);

  TwoBuffers loaded;
  loaded.mean.zero();
  load_buffers(io::CheckpointReader::open(step), loaded.walk(), NonFinite::Refuse);
  EXPECT_EQ(loaded.mean.to_vector(), saved.mean.to_vector());

  // The model lacks one of the checkpoint's buffers, or has one the checkpoint lacks, or one of
  // another shape.
  dist::WalkUnits fewer;
  fewer.buffers = {{"1.running_mean", &loaded.mean}};
  testing::expect_input_error([&] { load_buffers(io::CheckpointReader::open(step), fewer, NonFinite::Refuse); },
                              {"holds buffer '1.num_batches_tracked', which this model does not have"});
  Tensor var({3});
  dist::WalkUnits more = loaded.walk();
  more.buffers.push_back({"1.running_var", &var});
  testing::expect_input_error([&] { load_buffers(io::CheckpointReader::open(step), more, NonFinite::Refuse); },
                              {"no buffer '1.running_var'"});
  Tensor wide({4});
  dist::WalkUnits misshapen;
  misshapen.buffers = {{"1.running_mean", &wide}, {"1.num_batches_tracked", &loaded.count}};
  testing::expect_input_error([&] { load_buffers(io::CheckpointReader::open(step), misshapen, NonFinite::Refuse); },
                              {"buffer '1.running_mean' has shape [3], the model expects [4]"});
}

TEST(BuffersInFiles, ACorruptedBufferSliceIsAnErrorNamingIt) {
  TempDir dir;
  TwoBuffers saved;
  dist::WalkUnits walk = saved.walk();
  const std::filesystem::path step = write_checkpoint(dir / "ckpt", walk);
  const std::filesystem::path file = step / "rank-00000.h5";
  const std::int64_t at = testing::data_offset(file, "buffers/1.running_mean");
  ASSERT_GE(at, 0);
  testing::flip_byte(file, at + 5);
  TwoBuffers loaded;
  testing::expect_input_error([&] { load_buffers(io::CheckpointReader::open(step), loaded.walk(),
                                  NonFinite::Refuse); },
                              {"buffers/1.running_mean"});
}

}  // namespace
}  // namespace noeira

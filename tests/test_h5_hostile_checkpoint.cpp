// Hostile checkpoint rank files: the same classes of damage as tests/test_h5_hostile_model.cpp
// (a slice stored elsewhere, of another type, never written, a soft link, a flipped bit), and
// lying attributes of the root, the slices and the metadata, each refused by name.
#include "h5_edit.hpp"

namespace noeira {
namespace {

using namespace testing::h5edit;

// ---- checkpoints ----

using testing::CkptModel;
using testing::make_model;
using testing::write_checkpoint;

constexpr const char* kTensor = "params/0.weight/val";  // 7 x 13, whole in the one rank file

class CheckpointFile : public ::testing::Test {
 protected:
  void SetUp() override {
    std::filesystem::create_directories(spare_);
    step_dir_ = write_checkpoint(ckpt_, model_, 20, 1, rng_);
    pristine_ = spare_ / "rank-00000.h5";
    std::filesystem::copy_file(rank_file(), pristine_);
  }
  std::filesystem::path rank_file() const { return step_dir_ / "rank-00000.h5"; }
  void restore() {
    std::filesystem::copy_file(pristine_, rank_file(),
                               std::filesystem::copy_options::overwrite_existing);
  }
  const std::vector<float>& values() const { return model_.tensors.front().values; }

  void expect_open_refused(const std::vector<std::string>& fragments) {
    std::vector<std::string> all = fragments;
    all.insert(all.begin(), rank_file().string());
    expect_refused([&] { io::CheckpointReader::open(ckpt_).verify(); }, all);
  }

  // The slice's attributes as the writer gives them, for `data` at `offset` of `shape`.
  static void slice_attrs(hid_t ds, const Shape& shape, std::int64_t offset,
                          const std::vector<float>& data) {
    const io::ckpt::SliceChecksums sums = io::ckpt::slice_checksums(data);
    put_i64_array(ds, io::ckpt::kAttrGlobalShape, shape);
    put_i64(ds, io::ckpt::kAttrOffset, offset);
    put_i64(ds, io::ckpt::kAttrLength, static_cast<std::int64_t>(data.size()));
    put_u32(ds, io::ckpt::kAttrCrc, sums.whole);
    put_i64(ds, io::ckpt::kAttrBlockElems, sums.block);
    remove_attr(ds, io::ckpt::kAttrBlockCrcs);
    io::h5::write_u32_array_attr(ds, io::ckpt::kAttrBlockCrcs, sums.blocks, "edited file");
  }

  // Replaces the weight's slice by a dataset of `type` and `dcpl`, written from `data` unless
  // null, with attributes (checksums included) that describe `crc_of`.
  void replace_slice(hid_t type, hid_t dcpl, const std::vector<float>* data,
                     const std::vector<float>& crc_of, const std::string& name = kTensor) {
    Edit e(rank_file());
    Handle ds = make_dataset(e.get(), name, type, {static_cast<std::int64_t>(crc_of.size())}, dcpl,
                             data);
    slice_attrs(ds.get(), {7, 13}, 0, crc_of);
  }

  TempDir dir_;
  std::filesystem::path ckpt_ = dir_.path() / "ckpt";    // the checkpoint directory
  std::filesystem::path spare_ = dir_.path() / "spare";  // other files
  std::mt19937 rng_{3};
  CkptModel model_ = make_model(4);
  std::filesystem::path step_dir_;
  std::filesystem::path pristine_;
};

class H5HostileCheckpoint : public CheckpointFile {};

TEST_F(H5HostileCheckpoint, PristineCheckpointLoads) {
  const io::CheckpointReader ckpt = io::CheckpointReader::open(ckpt_);
  ckpt.verify();
  EXPECT_EQ(testing::bits(ckpt.read_all(kTensor)), testing::bits(values()));
}

TEST_F(H5HostileCheckpoint, SliceInExternalStorageIsRefused) {
  const std::filesystem::path other = spare_ / "elsewhere.bin";
  std::vector<float> elsewhere(values().size(), 42.0f);
  write_floats(other, elsewhere);
  replace_slice(H5T_IEEE_F32LE, external_dcpl(other, elsewhere.size()).get(), nullptr, elsewhere);
  expect_open_refused({"dataset 'params/0.weight/val'", "external file", "elsewhere.bin"});
}

TEST_F(H5HostileCheckpoint, ExternalLinkIsRefused) {
  const std::filesystem::path other = spare_ / "other.h5";
  write_source(other, {91}, values());
  {
    Edit e(rank_file());
    remove_link(e.get(), kTensor);
    check(H5Lcreate_external(other.c_str(), "/src", e.get(), kTensor, H5P_DEFAULT, H5P_DEFAULT),
          "H5Lcreate_external");
  }
  expect_open_refused({"'params/0.weight/val'", "external link", "other.h5:/src"});
  // The metadata group reached through an external link.
  restore();
  {
    Edit e(rank_file());
    remove_link(e.get(), "meta/labels");
    check(H5Lcreate_external(other.c_str(), "/", e.get(), "meta/labels", H5P_DEFAULT,
                             H5P_DEFAULT),
          "H5Lcreate_external");
  }
  expect_open_refused({"'meta/labels'", "external link"});
}

TEST_F(H5HostileCheckpoint, VirtualDatasetIsRefusedWithItsSourcePresentOrMissing) {
  const std::filesystem::path source = spare_ / "source.h5";
  write_source(source, {91}, values());
  replace_slice(H5T_IEEE_F32LE, virtual_dcpl(source, {91}).get(), nullptr, values());
  ASSERT_EQ(testing::bits(plain_read(rank_file(), kTensor, 91)), testing::bits(values()));
  expect_open_refused({"dataset 'params/0.weight/val'", "virtual dataset", "source.h5"});
  restore();
  const std::vector<float> zeros(91, 0.0f);
  replace_slice(H5T_IEEE_F32LE, virtual_dcpl(spare_ / "gone.h5", {91}).get(), nullptr,
                zeros);
  expect_open_refused({"dataset 'params/0.weight/val'", "virtual dataset", "gone.h5"});
}

TEST_F(H5HostileCheckpoint, SliceOfAnotherTypeIsRefused) {
  std::vector<float> integral(91);
  for (std::size_t i = 0; i < integral.size(); ++i) integral[i] = static_cast<float>(i);
  for (const auto& [type, name] : std::vector<std::pair<hid_t, std::string>>{
           {H5T_STD_I32LE, "int32"}, {H5T_IEEE_F64LE, "float64"}}) {
    SCOPED_TRACE(name);
    restore();
    replace_slice(type, H5P_DEFAULT, &integral, integral);
    expect_open_refused({"dataset 'params/0.weight/val'", "holds " + name});
  }
}

TEST_F(H5HostileCheckpoint, SliceNeverWrittenIsRefused) {
  replace_slice(H5T_IEEE_F32LE, H5P_DEFAULT, nullptr, std::vector<float>(91, 0.0f));
  expect_open_refused({"dataset 'params/0.weight/val'", "never written"});
}

TEST_F(H5HostileCheckpoint, FlippedBitIsRefusedByItsChecksum) {
  const std::int64_t at = testing::data_offset(rank_file(), kTensor);
  ASSERT_GE(at, 0);
  flip_bit(rank_file(), at + 17);
  expect_open_refused({"tensor 'params/0.weight/val'", "checksum mismatch"});
}

TEST_F(H5HostileCheckpoint, SoftLinksSecondNamesAndStrangeTensorsAreRefused) {
  {
    Edit e(rank_file());
    Handle lcpl = plist(H5P_LINK_CREATE);
    check(H5Pset_create_intermediate_group(lcpl.get(), 1), "H5Pset_create_intermediate_group");
    check(H5Lcreate_soft("/params/0.bias/val", e.get(), "params/alias/val", lcpl.get(),
                         H5P_DEFAULT),
          "H5Lcreate_soft");
  }
  expect_open_refused({"'params/alias/val'", "soft link"});
  restore();
  {
    Edit e(rank_file());
    check(H5Lcreate_hard(e.get(), kTensor, e.get(), "extra", H5P_DEFAULT, H5P_DEFAULT),
          "H5Lcreate_hard");
  }
  expect_open_refused({"links name"});
  restore();
  // A parameter's tensor that is neither its value nor a moment.
  replace_slice(H5T_IEEE_F32LE, H5P_DEFAULT, &values(), values(), "params/0.weight/zzz");
  expect_open_refused({"tensor 'params/0.weight/zzz'", "val, m or v"});
}

TEST_F(H5HostileCheckpoint, LyingRootAttributesAreRefusedByName) {
  struct Lie {
    std::function<void(hid_t)> edit;
    std::vector<std::string> fragments;
  };
  const std::int32_t one = 1;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<Lie> lies = {
      {[](hid_t f) { put_i64(f, "world_size", 0); }, {"'world_size'", "is 0"}},
      {[](hid_t f) { put_i64(f, "world_size", -1); }, {"'world_size'", "is -1"}},
      // Would read as world size 1 through a cast to int.
      {[](hid_t f) { put_i64(f, "world_size", (std::int64_t{1} << 32) + 1); }, {"'world_size'"}},
      {[&](hid_t f) { put_attr(f, "world_size", H5T_STD_I32LE, H5T_NATIVE_INT32, &one); },
       {"'world_size'", "wrong type"}},
      {[](hid_t f) { put_i64(f, "rank", 1); }, {"'rank'", "is 1"}},
      {[](hid_t f) { put_i64(f, "rank", -3); }, {"'rank'"}},
      {[](hid_t f) { put_i64(f, "format_version", 99); }, {"'format_version'", "99"}},
      {[](hid_t f) { put_i64(f, "format_version", 0); }, {"'format_version'"}},
      {[](hid_t f) { put_i64(f, "step", 21); }, {"'step'", "step-00000020"}},
      {[](hid_t f) { put_i64(f, "step", -20); }, {"'step'"}},
      {[](hid_t f) { put_i64(f, "epoch", -1); }, {"'epoch'"}},
      {[](hid_t f) { put_i64(f, "samples_seen", -5); }, {"'samples_seen'"}},
      {[](hid_t f) { put_string(f, "policy", "zero9"); }, {"'policy'", "ddp, zero1"}},
      {[](hid_t f) { put_string(f, "policy", std::string(1000, 'z')); }, {"'policy'", "1000"}},
      {[](hid_t f) { put_i64(f, "optimizer_t", 21); }, {"'optimizer_t'", "is 21"}},
      {[](hid_t f) { put_i64(f, "optimizer_t", -1); }, {"'optimizer_t'"}},
      {[](hid_t f) { put_f64(f, "optimizer_beta1_pow", 2.0); }, {"'optimizer_beta1_pow'"}},
      {[=](hid_t f) { put_f64(f, "optimizer_beta2_pow", nan); }, {"'optimizer_beta2_pow'"}},
      {[](hid_t f) { put_i64(f, "optimizer_t", 0); }, {"'optimizer_beta1_pow'"}},
      {[](hid_t f) { put_string(f, "format", "noeira-params"); }, {"not a noeira checkpoint"}},
  };
  for (const Lie& lie : lies) {
    SCOPED_TRACE(lie.fragments.front());
    restore();
    {
      Edit e(rank_file());
      lie.edit(e.get());
    }
    expect_open_refused(lie.fragments);
  }
}

TEST_F(H5HostileCheckpoint, LyingSliceAttributesAreRefusedByName) {
  struct Lie {
    std::function<void(hid_t)> edit;
    std::vector<std::string> fragments;
  };
  const std::vector<Lie> lies = {
      {[](hid_t d) { put_i64_array(d, "global_shape", {-7, -13}); }, {"global_shape"}},
      {[](hid_t d) {
         put_i64_array(d, "global_shape", {std::int64_t{1} << 40, std::int64_t{1} << 40});
       },
       {"global_shape", "too many elements"}},
      {[](hid_t d) { put_i64_array(d, "global_shape", std::vector<std::int64_t>(40, 1)); },
       {"'global_shape'", "40 elements"}},
      {[](hid_t d) { put_i64_array(d, "global_shape", {91}); }, {"shape [91]"}},
      {[](hid_t d) { put_i64(d, "offset", -1); }, {"offset -1"}},
      {[](hid_t d) { put_i64(d, "offset", 1); }, {"offset 1"}},
      {[](hid_t d) { put_i64(d, "length", 90); }, {"length 90"}},
      {[](hid_t d) { put_i64(d, "crc32_block", 0); }, {"crc32_block 0"}},
      {[](hid_t d) { put_i64(d, "crc32_block", std::int64_t{1} << 62); }, {"crc32_block"}},
      {[](hid_t d) { put_i64(d, "crc32_block", 10); }, {"crc32_blocks holds 1", "crc32_block 10"}},
      {[](hid_t d) { put_u32(d, "crc32", 7); }, {"crc32 disagrees with crc32_blocks"}},
      {[](hid_t d) { remove_attr(d, "crc32_blocks"); }, {"'crc32_blocks'", "missing"}},
      {[](hid_t d) { put_f64(d, "offset", 0.0); }, {"'offset'", "wrong type"}},
  };
  for (const Lie& lie : lies) {
    SCOPED_TRACE(lie.fragments.front());
    restore();
    {
      Edit e(rank_file());
      lie.edit(open_object(e.get(), kTensor).get());
    }
    std::vector<std::string> fragments = lie.fragments;
    fragments.insert(fragments.begin(), "params/0.weight/val");
    expect_open_refused(fragments);
  }
}

TEST_F(H5HostileCheckpoint, LyingMetadataIsRefusedByName) {
  const auto set_signature = [&](const std::string& text) {
    Edit e(rank_file());
    remove_link(e.get(), "meta/signature");
    Handle meta(H5Gopen2(e.get(), "meta", H5P_DEFAULT), H5Gclose);
    io::h5::write_string_dataset(meta.get(), "signature", text, "edited file");
  };
  const std::string good = io::ckpt::signature_text(model_.signature);
  const std::vector<std::pair<std::string, std::string>> signatures = {
      {good + "0.weight 7,13\n", "named twice"},
      {good + "9.x 1,a\n", "malformed"},
      {good + "9.x -1\n", "malformed"},
      {good + "9.x 4294967296,4294967296,4294967296\n", "overflows"},
      {good + "9.x " + std::string(80, '1') + "\n", "malformed"},
  };
  for (const auto& [text, fragment] : signatures) {
    SCOPED_TRACE(fragment);
    restore();
    set_signature(text);
    expect_open_refused({"meta/signature", fragment});
  }
  // Keys and values of the maps.
  restore();
  {
    Edit e(rank_file());
    Handle labels(H5Gopen2(e.get(), "meta/labels", H5P_DEFAULT), H5Gclose);
    put_string(labels.get(), "bad key", "x");
  }
  expect_open_refused({"meta/labels", "bad key"});
  restore();
  {
    Edit e(rank_file());
    Handle labels(H5Gopen2(e.get(), "meta/labels", H5P_DEFAULT), H5Gclose);
    put_string(labels.get(), "model", std::string("ml\0p", 4));
  }
  expect_open_refused({"meta/labels", "'model'", "NUL"});
  restore();
  {
    Edit e(rank_file());
    Handle scalars(H5Gopen2(e.get(), "meta/scalars", H5P_DEFAULT), H5Gclose);
    put_i64(scalars.get(), "lr", 3);
  }
  expect_open_refused({"meta/scalars", "'lr'", "wrong type"});
  restore();
  {
    Edit e(rank_file());
    remove_link(e.get(), "meta/counters");
  }
  expect_open_refused({"'meta/counters'", "missing"});
}

TEST(H5HostileCheckpointPolicies, EveryPolicyTheTrainerNamesIsReadBack) {
  // io/ keeps its own list of policy names (it cannot include distributed/): the same list.
  ASSERT_EQ(io::ckpt::kPolicies.size(), dist::kPolicyNames.rows.size());
  for (const auto& row : dist::kPolicyNames.rows) {
    SCOPED_TRACE(std::string(row.name));
    TempDir dir;
    CkptModel model = make_model(1);
    io::CheckpointMeta meta = testing::make_meta(model, 3, 1);
    meta.policy = std::string(row.name);
    std::mt19937 rng(1);
    const auto slices = testing::slices_of(model, testing::random_partition(model, 1, rng).front());
    io::write_rank_file(dir.path(), 0, meta, slices);
    io::commit_checkpoint(dir.path(), 3, 1, 0);
    EXPECT_EQ(io::CheckpointReader::open(dir.path()).meta().policy, row.name);
  }
}

TEST_F(H5HostileCheckpoint, EvalOfACheckpointNamingAnUnknownModelIsRefused) {
  {
    Edit e(rank_file());
    Handle labels(H5Gopen2(e.get(), "meta/labels", H5P_DEFAULT), H5Gclose);
    put_string(labels.get(), "model", "gpt-9000");
  }
  TrainConfig cfg;
  cfg.eval_checkpoint = ckpt_.string();
  expect_refused([&] { SavedModel::open(cfg); },
                 {"label 'model'", "gpt-9000", "no model this program knows"});
}

}  // namespace
}  // namespace noeira

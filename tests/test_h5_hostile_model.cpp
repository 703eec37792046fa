// Hostile model.h5 files: a tensor stored somewhere else (external storage, an external link, a
// virtual dataset with its source present or missing), of another type (int32, float64,
// big-endian float32), never written, reached through a soft link or not a dataset at all, with a
// flipped bit, or whose attributes lie. Each is refused with a one-line InputError naming the file
// and the dataset or attribute, and nothing of it is taken: the tensor a refused load would have
// filled keeps its old values, an export writes no file. The files are crafted from real ones
// (io::save_params) with tests/h5_edit.hpp, so every other byte is what noeira writes. A model.h5
// of format version 1 (no checksums) still loads.
#include "h5_edit.hpp"

namespace noeira {
namespace {

using namespace testing::h5edit;

// ---- model.h5 ----

constexpr const char* kWeight = "params/0.weight/val";
constexpr const char* kBias = "params/0.bias/val";
constexpr const char* kMean = "buffers/1.running_mean";
const Shape kWeightShape = {4, 3};

// A small model.h5 (two parameters and a buffer) as io::save_params writes it, and loading it into
// tensors that hold 7 before: a refused load leaves the refused tensor at 7.
class ModelFile : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int i = 0; i < 12; ++i) weight_.push_back(0.25f * static_cast<float>(i) - 1.0f);
    bias_ = {0.5f, -0.5f, 1.5f, 2.0f};
    mean_ = {0.1f, 0.2f, 0.3f, 0.4f};
    std::vector<float> values = weight_;
    values.insert(values.end(), bias_.begin(), bias_.end());
    io::save_params(file_, "mlp", {{"0.weight", kWeightShape}, {"0.bias", {4}}}, values, {},
                    NonFinite::Refuse, {{"1.running_mean", {4}}}, mean_);
  }

  void load() {
    w_.val.copy_from(std::vector<float>(12, 7.0f));
    b_.val.copy_from(std::vector<float>(4, 7.0f));
    m_.copy_from(std::vector<float>(4, 7.0f));
    io::load_params(file_, "mlp", {{"0.weight", &w_}, {"0.bias", &b_}}, NonFinite::Refuse,
                    {{"1.running_mean", &m_}});
  }

  // Refused, naming the file and `fragments`, with the weight never filled.
  void expect_load_refused(const std::vector<std::string>& fragments) {
    std::vector<std::string> all = fragments;
    all.insert(all.begin(), file_.string());
    expect_refused([&] { load(); }, all);
    EXPECT_EQ(w_.val.to_vector(), std::vector<float>(12, 7.0f)) << "a refused weight was taken";
  }

  void expect_loads() {
    load();
    EXPECT_EQ(w_.val.to_vector(), weight_);
    EXPECT_EQ(b_.val.to_vector(), bias_);
    EXPECT_EQ(m_.to_vector(), mean_);
  }

  // Replaces the weight by a dataset of `type` and creation properties `dcpl`, written from
  // `values` unless null, with the checksum of `crc_of` (so that only the check under test can
  // refuse it).
  void replace_weight(hid_t type, hid_t dcpl, const std::vector<float>* values,
                      const std::vector<float>& crc_of) {
    Edit e(file_);
    Handle ds = make_dataset(e.get(), kWeight, type, kWeightShape, dcpl, values);
    put_u32(ds.get(), io::ckpt::kAttrCrc, io::ckpt::crc32_of(crc_of));
  }

  // A directory beside the model file for copies and other files.
  std::filesystem::path spare() const {
    std::filesystem::create_directories(dir_.path() / "spare");
    return dir_.path() / "spare";
  }

  TempDir dir_;
  std::filesystem::path file_ = dir_.path() / "model.h5";
  std::vector<float> weight_, bias_, mean_;
  Param w_{kWeightShape, Target::Cpu, Decay::Apply};
  Param b_{{4}, Target::Cpu, Decay::Apply};
  Tensor m_{{4}};
};

class H5Hostile : public ModelFile {};
class ModelFileIntegrity : public ModelFile {};

TEST_F(H5Hostile, PristineModelFileLoads) { expect_loads(); }

TEST_F(H5Hostile, ModelWeightInExternalStorageIsRefused) {
  // The weight's bytes in another file, the checksum theirs: nothing but the layout is wrong.
  std::vector<float> elsewhere(12);
  for (std::size_t i = 0; i < elsewhere.size(); ++i) elsewhere[i] = 100.0f + static_cast<float>(i);
  const std::filesystem::path other = dir_.path() / "elsewhere.bin";
  write_floats(other, elsewhere);
  replace_weight(H5T_IEEE_F32LE, external_dcpl(other, 12).get(), nullptr, elsewhere);
  ASSERT_EQ(plain_read(file_, kWeight, 12), elsewhere) << "the crafted file does not read it";
  expect_load_refused({"dataset 'params/0.weight/val'", "external file", "elsewhere.bin"});
}

TEST_F(H5Hostile, ModelExternalLinkIsRefused) {
  const std::filesystem::path other = dir_.path() / "other.h5";
  write_source(other, kWeightShape, weight_);
  {
    Edit e(file_);
    remove_link(e.get(), kWeight);
    check(H5Lcreate_external(other.c_str(), "/src", e.get(), kWeight, H5P_DEFAULT, H5P_DEFAULT),
          "H5Lcreate_external");
  }
  ASSERT_EQ(plain_read(file_, kWeight, 12), weight_) << "the crafted link does not resolve";
  expect_load_refused({"'params/0.weight/val'", "external link", "other.h5:/src"});

  // A group reached through an external link: refused at the link, before anything below it.
  const std::filesystem::path f2 = spare() / "model.h5";
  std::filesystem::copy_file(file_, f2);
  {
    Edit e(f2);
    remove_link(e.get(), kWeight);
    make_dataset(e.get(), kWeight, H5T_IEEE_F32LE, kWeightShape, H5P_DEFAULT, &weight_);
    remove_link(e.get(), "buffers");
    check(H5Lcreate_external(other.c_str(), "/", e.get(), "buffers", H5P_DEFAULT, H5P_DEFAULT),
          "H5Lcreate_external");
  }
  file_ = f2;
  expect_load_refused({"'buffers'", "external link"});
}

TEST_F(H5Hostile, ModelVirtualDatasetIsRefusedWithItsSourcePresentOrMissing) {
  const std::filesystem::path source = dir_.path() / "source.h5";
  write_source(source, kWeightShape, weight_);
  replace_weight(H5T_IEEE_F32LE, virtual_dcpl(source, kWeightShape).get(), nullptr, weight_);
  ASSERT_EQ(plain_read(file_, kWeight, 12), weight_) << "the view does not read its source";
  expect_load_refused({"dataset 'params/0.weight/val'", "virtual dataset", "source.h5"});

  // A missing source reads as zeros to plain HDF5; the checksum of zeros makes it look whole.
  const std::filesystem::path missing = dir_.path() / "missing.h5";
  replace_weight(H5T_IEEE_F32LE, virtual_dcpl(missing, kWeightShape).get(), nullptr,
                 std::vector<float>(12, 0.0f));
  ASSERT_EQ(plain_read(file_, kWeight, 12), std::vector<float>(12, 0.0f));
  expect_load_refused({"dataset 'params/0.weight/val'", "virtual dataset", "missing.h5"});
}

TEST_F(H5Hostile, ModelDatasetOfAnotherTypeIsRefusedNotConverted) {
  const std::pair<hid_t, const char*> types[] = {{H5T_STD_I32LE, "int32"},
                                                 {H5T_IEEE_F64LE, "float64"},
                                                 {H5T_IEEE_F32BE, "float32 (big-endian)"},
                                                 {H5T_STD_I64LE, "int64"}};
  std::vector<float> integral(12);
  for (std::size_t i = 0; i < integral.size(); ++i) integral[i] = static_cast<float>(i);
  for (const auto& [type, name] : types) {
    SCOPED_TRACE(name);
    // Values an int32 holds exactly, the checksum of them as float32: converted, they would pass.
    replace_weight(type, H5P_DEFAULT, &integral, integral);
    expect_load_refused({"dataset 'params/0.weight/val'", std::string("holds ") + name,
                         "expected float32"});
  }
}

TEST_F(H5Hostile, ModelDatasetNeverWrittenIsRefused) {
  // Created, never written: it would read as zeros, whose checksum it carries.
  replace_weight(H5T_IEEE_F32LE, H5P_DEFAULT, nullptr, std::vector<float>(12, 0.0f));
  expect_load_refused({"dataset 'params/0.weight/val'", "never written"});

  // Chunked, one row of four written: the other chunks would read as fill values.
  {
    Handle dcpl = plist(H5P_DATASET_CREATE);
    const hsize_t chunk[2] = {1, 3};
    check(H5Pset_chunk(dcpl.get(), 2, chunk), "H5Pset_chunk");
    Edit e(file_);
    Handle ds = make_dataset(e.get(), kWeight, H5T_IEEE_F32LE, kWeightShape, dcpl.get(), nullptr);
    Handle space(H5Dget_space(ds.get()), H5Sclose);
    const hsize_t start[2] = {0, 0}, count[2] = {1, 3};
    check(H5Sselect_hyperslab(space.get(), H5S_SELECT_SET, start, nullptr, count, nullptr),
          "H5Sselect_hyperslab");
    Handle mem(H5Screate_simple(2, count, nullptr), H5Sclose);
    check(H5Dwrite(ds.get(), H5T_NATIVE_FLOAT, mem.get(), space.get(), H5P_DEFAULT,
                   weight_.data()),
          "H5Dwrite");
    std::vector<float> first_row(12, 0.0f);
    std::copy(weight_.begin(), weight_.begin() + 3, first_row.begin());
    put_u32(ds.get(), io::ckpt::kAttrCrc, io::ckpt::crc32_of(first_row));
  }
  expect_load_refused({"dataset 'params/0.weight/val'", "1 of its 4 chunks"});
}

TEST_F(H5Hostile, ModelChunkedAndCompressedDatasetWrittenWholeLoads) {
  // What h5py writes with chunks=True, compression="gzip", shuffle=True: data in this file.
  Handle dcpl = plist(H5P_DATASET_CREATE);
  const hsize_t chunk[2] = {2, 2};
  check(H5Pset_chunk(dcpl.get(), 2, chunk), "H5Pset_chunk");
  check(H5Pset_shuffle(dcpl.get()), "H5Pset_shuffle");
  check(H5Pset_deflate(dcpl.get(), 4), "H5Pset_deflate");
  replace_weight(H5T_IEEE_F32LE, dcpl.get(), &weight_, weight_);
  expect_loads();
}

TEST_F(H5Hostile, ModelCompactDatasetIsRefused) {
  Handle dcpl = plist(H5P_DATASET_CREATE);
  check(H5Pset_layout(dcpl.get(), H5D_COMPACT), "H5Pset_layout");
  replace_weight(H5T_IEEE_F32LE, dcpl.get(), &weight_, weight_);
  expect_load_refused({"dataset 'params/0.weight/val'", "compact"});
}

TEST_F(H5Hostile, ModelSoftLinkIsRefused) {
  {
    Edit e(file_);
    remove_link(e.get(), kWeight);
    check(H5Lcreate_soft("/params/0.bias/val", e.get(), kWeight, H5P_DEFAULT, H5P_DEFAULT),
          "H5Lcreate_soft");
  }
  expect_load_refused({"'params/0.weight/val'", "soft link", "/params/0.bias/val"});
}

TEST_F(H5Hostile, ModelObjectThatIsNotAPlainDatasetIsRefused) {
  const std::filesystem::path pristine = spare() / "pristine.h5";
  std::filesystem::copy_file(file_, pristine);
  const auto fresh = [&] {
    std::filesystem::copy_file(pristine, file_, std::filesystem::copy_options::overwrite_existing);
  };
  // A group where the weight belongs.
  {
    Edit e(file_);
    remove_link(e.get(), kWeight);
    Handle g(H5Gcreate2(e.get(), kWeight, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
  }
  expect_load_refused({"'params/0.weight/val'", "is a group, not a dataset"});
  // A named datatype there.
  fresh();
  {
    Edit e(file_);
    remove_link(e.get(), kWeight);
    Handle t(H5Tcopy(H5T_IEEE_F32LE), H5Tclose);
    check(H5Tcommit2(e.get(), kWeight, t.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
          "H5Tcommit2");
  }
  expect_load_refused({"'params/0.weight/val'", "named datatype"});
  // A second name for a dataset: one object, two tensors.
  fresh();
  {
    Edit e(file_);
    check(H5Lcreate_hard(e.get(), kBias, e.get(), "buffers/1.spare", H5P_DEFAULT, H5P_DEFAULT),
          "H5Lcreate_hard");
  }
  expect_load_refused({"links name"});
  // A null dataspace.
  fresh();
  {
    Edit e(file_);
    remove_link(e.get(), kWeight);
    Handle space(H5Screate(H5S_NULL), H5Sclose);
    Handle ds(H5Dcreate2(e.get(), kWeight, H5T_IEEE_F32LE, space.get(), H5P_DEFAULT, H5P_DEFAULT,
                         H5P_DEFAULT),
              H5Dclose);
    put_u32(ds.get(), io::ckpt::kAttrCrc, 0);
  }
  expect_load_refused({"dataset 'params/0.weight/val'", "null dataspace"});
}

TEST_F(ModelFileIntegrity, FlippedBitInAWeightOrABufferIsRefusedByItsChecksum) {
  const std::filesystem::path pristine = spare() / "pristine.h5";
  std::filesystem::copy_file(file_, pristine);
  for (const char* tensor : {kWeight, kMean}) {
    SCOPED_TRACE(tensor);
    std::filesystem::copy_file(pristine, file_, std::filesystem::copy_options::overwrite_existing);
    const std::int64_t at = testing::data_offset(file_, tensor);
    ASSERT_GE(at, 0);
    flip_bit(file_, at + 9);
    std::vector<std::string> fragments = {std::string("dataset '") + tensor + "'",
                                          "checksum mismatch"};
    if (tensor == std::string(kWeight)) {
      expect_load_refused(fragments);
    } else {
      fragments.insert(fragments.begin(), file_.string());
      expect_refused([&] { load(); }, fragments);
      EXPECT_EQ(m_.to_vector(), std::vector<float>(4, 7.0f)) << "a corrupted buffer was taken";
    }
  }
}

TEST_F(ModelFileIntegrity, FormatVersionOneWithoutChecksumsStillLoads) {
  {
    Edit e(file_);
    put_i64(e.get(), "format_version", 1);
    for (const char* tensor : {kWeight, kBias, kMean}) {
      remove_attr(open_object(e.get(), tensor).get(), io::ckpt::kAttrCrc);
    }
  }
  expect_loads();
  // An old file is still read through the same checks: a weight in another file is refused.
  std::vector<float> elsewhere(12, 3.0f);
  write_floats(dir_.path() / "elsewhere.bin", elsewhere);
  {
    Edit e(file_);
    make_dataset(e.get(), kWeight, H5T_IEEE_F32LE, kWeightShape,
                 external_dcpl(dir_.path() / "elsewhere.bin", 12).get(), nullptr);
  }
  expect_load_refused({"dataset 'params/0.weight/val'", "external file"});
}

TEST_F(ModelFileIntegrity, WrongChecksumInAVersionOneFileIsStillRefused) {
  {
    Edit e(file_);
    put_i64(e.get(), "format_version", 1);
    put_u32(open_object(e.get(), kWeight).get(), io::ckpt::kAttrCrc, 12345);
  }
  expect_load_refused({"dataset 'params/0.weight/val'", "checksum mismatch"});
}

TEST_F(ModelFileIntegrity, CurrentVersionWithoutAChecksumIsRefused) {
  {
    Edit e(file_);
    remove_attr(open_object(e.get(), kWeight).get(), io::ckpt::kAttrCrc);
  }
  expect_load_refused({"dataset 'params/0.weight/val'", "attribute 'crc32' is missing"});
  // A checksum of the wrong type is no checksum.
  {
    Edit e(file_);
    const std::int64_t crc = io::ckpt::crc32_of(weight_);
    put_i64(open_object(e.get(), kWeight).get(), io::ckpt::kAttrCrc, crc);
  }
  expect_load_refused({"dataset 'params/0.weight/val'", "attribute 'crc32'", "wrong type"});
}

TEST_F(ModelFileIntegrity, WrittenFileCarriesTheCurrentVersionAndChecksums) {
  Edit e(file_);
  EXPECT_EQ(io::h5::read_i64_attr(e.get(), "format_version", file_, "root"),
            io::kParamsFormatVersion);
  EXPECT_EQ(io::h5::read_u32_attr(open_object(e.get(), kWeight).get(), "crc32", file_, "w"),
            io::ckpt::crc32_of(weight_));
}

TEST_F(ModelFileIntegrity, LyingRootAttributesAreRefusedByName) {
  const std::filesystem::path pristine = spare() / "pristine.h5";
  std::filesystem::copy_file(file_, pristine);
  struct Lie {
    std::function<void(hid_t)> edit;
    std::vector<std::string> fragments;
    bool seen_in_attributes = true;  // false: only against the model's tensors
  };
  const std::int32_t two = 2;
  const std::vector<Lie> lies = {
      {[](hid_t f) { put_i64(f, "format_version", 3); }, {"'format_version'", "is 3"}},
      {[](hid_t f) { put_i64(f, "format_version", 0); }, {"'format_version'", "is 0"}},
      {[](hid_t f) { put_i64(f, "format_version", -1); }, {"'format_version'", "is -1"}},
      {[](hid_t f) { put_string(f, "format_version", "2"); }, {"'format_version'", "wrong type"}},
      {[&](hid_t f) { put_attr(f, "format_version", H5T_STD_I32LE, H5T_NATIVE_INT32, &two); },
       {"'format_version'", "int32"}},
      {[](hid_t f) { remove_attr(f, "format_version"); }, {"'format_version'", "missing"}},
      {[](hid_t f) { put_string(f, "model", "ml p"); }, {"'model'", "preset name"}},
      {[](hid_t f) { put_string(f, "model", std::string(300, 'm')); }, {"'model'", "300 bytes"}},
      {[](hid_t f) { put_string(f, "model", std::string("ml\0p", 4)); }, {"'model'", "NUL"}},
      {[](hid_t f) { remove_attr(f, "model"); }, {"'model'", "missing"}},
      {[](hid_t f) { put_i64(f, "model", 1); }, {"'model'", "wrong type"}},
      {[](hid_t f) { put_string(f, "parameters", "-5"); }, {"'parameters'", "decimal count"}},
      {[](hid_t f) { put_string(f, "parameters", "abc"); }, {"'parameters'", "decimal count"}},
      {[](hid_t f) { put_string(f, "parameters", "99999999999999999999"); }, {"'parameters'"}},
      {[](hid_t f) { put_string(f, "parameters", "17"); },
       {"'parameters'", "is 17", "has 16"},
       false},
      {[](hid_t f) { put_string(f, "block", "0"); }, {"'block'"}},
      {[](hid_t f) { put_string(f, "block", "16"); }, {"'block'", "without a vocabulary"}},
      {[](hid_t f) { put_string(f, "tokenizer", "word"); }, {"'tokenizer'", "char, byte or gpt2"}},
      {[](hid_t f) { put_string(f, "vocabulary", "junk"); }, {"'vocabulary'"}},
      {[](hid_t f) {
         put_string(f, "vocabulary", "noeira-tokenizer 1\nbyte\n");
         put_string(f, "tokenizer", "char");
       },
       {"'tokenizer'", "another kind"}},
      {[](hid_t f) {
         put_string(f, "vocabulary", "noeira-tokenizer 1\nbyte\n");
         put_string(f, "labels", "[\"a\"]");
       },
       {"'labels'", "vocabulary"}},
      {[](hid_t f) { put_string(f, "input_shape", "1,28,28"); }, {"'input_shape'", "JSON list"}},
      {[](hid_t f) { put_string(f, "loss", "huber"); }, {"'loss'", "gaussian-nll"}},
      {[](hid_t f) { put_string(f, "input", "two\nlines"); }, {"'input'"}},
      {[](hid_t f) { put_string(f, "data", "fashion mnist"); }, {"'data'"}},
  };
  for (const Lie& lie : lies) {
    SCOPED_TRACE(lie.fragments.front());
    std::filesystem::copy_file(pristine, file_, std::filesystem::copy_options::overwrite_existing);
    {
      Edit e(file_);
      lie.edit(e.get());
    }
    expect_load_refused(lie.fragments);
    if (lie.seen_in_attributes) {
      // The attributes alone, as `eval` reads them before it builds the model.
      std::vector<std::string> all = lie.fragments;
      all.insert(all.begin(), file_.string());
      expect_refused([&] { io::read_params_attributes(file_); }, all);
    }
  }
}

TEST_F(ModelFileIntegrity, NegativeAndOverflowingShapesAreRefused) {
  // A dataset whose shape disagrees with the model: refused before anything is allocated by it.
  for (const Shape& shape : std::vector<Shape>{{3, 4}, {12}, {4, 3, 1}}) {
    SCOPED_TRACE(shape_string(shape));
    {
      Edit e(file_);
      std::vector<float> v(12, 1.0f);
      Handle ds = make_dataset(e.get(), kWeight, H5T_IEEE_F32LE, shape, H5P_DEFAULT, &v);
      put_u32(ds.get(), io::ckpt::kAttrCrc, io::ckpt::crc32_of(v));
    }
    expect_load_refused({"parameter '0.weight'", "has shape " + shape_string(shape)});
  }
  // An extendible dataset claiming 2^62 elements in a few bytes.
  {
    Edit e(file_);
    remove_link(e.get(), kWeight);
    const hsize_t dims[2] = {hsize_t{1} << 31, hsize_t{1} << 31};
    const hsize_t max[2] = {H5S_UNLIMITED, H5S_UNLIMITED};
    Handle space(H5Screate_simple(2, dims, max), H5Sclose);
    Handle dcpl = plist(H5P_DATASET_CREATE);
    const hsize_t chunk[2] = {1, 1};
    check(H5Pset_chunk(dcpl.get(), 2, chunk), "H5Pset_chunk");
    Handle ds(H5Dcreate2(e.get(), kWeight, H5T_IEEE_F32LE, space.get(), H5P_DEFAULT, dcpl.get(),
                         H5P_DEFAULT),
              H5Dclose);
    put_u32(ds.get(), io::ckpt::kAttrCrc, 0);
  }
  expect_load_refused({"dataset 'params/0.weight/val'"});
}

// ---- model.h5 through eval / export: the description against the model ----

class ModelFileIntegrityEval : public ::testing::Test {
 protected:
  void SetUp() override {
    presets::Mlp model(Init(Target::Cpu, InitSpec{}));
    const dist::WalkUnits walk = dist::walk_units(model);
    TrainConfig cfg;
    cfg.data = DatasetKind::FashionMnist;
    std::vector<float> values;
    for (const NamedParam& p : walk.params) {
      const std::vector<float> v = p.param->val.to_vector();
      values.insert(values.end(), v.begin(), v.end());
    }
    io::save_params(file_, "mlp", signature_of(walk), values,
                    saved_attributes(cfg, sizes_of<presets::Mlp>(parameter_count(model))));
  }

  void eval_load() {
    TrainConfig cfg;
    cfg.params = file_.string();
    SavedModel saved = SavedModel::open(cfg);
    presets::Mlp model(Init(Target::Cpu, InitSpec{}));
    saved.load_into(model);
  }

  std::filesystem::path spare() const {
    std::filesystem::create_directories(dir_.path() / "spare");
    return dir_.path() / "spare";
  }

  TempDir dir_;
  std::filesystem::path file_ = dir_.path() / "model.h5";
};

TEST_F(ModelFileIntegrityEval, DescriptionMustAgreeWithTheModel) {
  eval_load();  // pristine
  const std::filesystem::path pristine = spare() / "pristine.h5";
  std::filesystem::copy_file(file_, pristine);
  const std::vector<std::pair<std::string, std::string>> lies = {
      {"parameters", "12"},
      {"input_shape", "[3,32,32]"},
      {"input_mean", "[0.5]"},
      {"labels", "[\"cat\",\"dog\"]"},
      {"output", "float32 logits [rows, 100]"},
      {"data", "cifar10"},  // then the rest describes the wrong data set
      {"data", "imagenet"},
      {"data", "text"},
      {"model", "resnet1000"},
      {"tokenizer", "char"},
  };
  for (const auto& [key, value] : lies) {
    SCOPED_TRACE(key + " = " + value);
    std::filesystem::copy_file(pristine, file_, std::filesystem::copy_options::overwrite_existing);
    {
      Edit e(file_);
      put_string(e.get(), key.c_str(), value);
    }
    expect_refused([&] { eval_load(); }, {file_.string(), "attribute '"});
  }
  // A file older than the description (model and tensors only) loads.
  std::filesystem::copy_file(pristine, file_, std::filesystem::copy_options::overwrite_existing);
  {
    Edit e(file_);
    for (const char* key : {"data", "parameters", "input", "input_shape", "input_mean",
                            "input_std", "output", "labels"}) {
      remove_attr(e.get(), key);
    }
  }
  eval_load();
}

TEST_F(ModelFileIntegrityEval, ExportCopiesNoBytesFromAnotherFile) {
  // The weight points at another file's bytes (the issue's /etc/passwd): export refuses and
  // writes nothing.
  const std::filesystem::path secret = dir_.path() / "secret.bin";
  std::vector<float> bytes(784 * 256);
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<float>(i % 251) * 0.01f;
  write_floats(secret, bytes);
  {
    Edit e(file_);
    Handle ds = make_dataset(e.get(), "params/0.weight/val", H5T_IEEE_F32LE, {256, 784},
                             external_dcpl(secret, bytes.size()).get(), nullptr);
    put_u32(ds.get(), io::ckpt::kAttrCrc, io::ckpt::crc32_of(bytes));
  }
  ExportConfig e;
  e.params = file_.string();
  e.out = (dir_.path() / "out.safetensors").string();
  expect_refused([&] { run_export(e); },
                 {file_.string(), "dataset 'params/0.weight/val'", "external file", "secret.bin"});
  EXPECT_FALSE(std::filesystem::exists(e.out));
  EXPECT_FALSE(std::filesystem::exists(e.out + ".tmp"));
  expect_refused([&] { eval_load(); }, {file_.string(), "external file"});
}

}  // namespace
}  // namespace noeira

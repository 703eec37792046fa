// NumPy's .npz archives (io/npz.hpp). The properties: what NumPy's savez and savez_compressed
// write reads back value for value, by name and as the archive's only array; an archive's arrays
// train bit for bit as the same arrays in .npy files, held and streamed; and every archive noeira
// cannot use is one line naming it (and the member), built here with libzip.
#include <gtest/gtest.h>
#include <zip.h>

#include <fstream>
#include <string>
#include <vector>

#include "cli_test_util.hpp"
#include "io/array_spec.hpp"
#include "io_test_files.hpp"
#include "saved_params.hpp"
#include "expect_error.hpp"

namespace noeira {
namespace {

using testing::Output;
using testing::TempDir;
using testing::expect_input_error;
using testing::expect_one_error_line;
using testing::noeira;
using testing::saved_mlp;
using testing::write_npy;
using testing::write_npy_array;

std::vector<float> floats(const io::ArraySource& a) {
  std::vector<float> out(static_cast<std::size_t>(a.rows() * a.row_elements()));
  a.read_rows(0, a.rows(), out);
  return out;
}

std::vector<std::int64_t> ints(const io::ArraySource& a) {
  std::vector<std::int64_t> out(static_cast<std::size_t>(a.rows() * a.row_elements()));
  a.read_rows(0, a.rows(), out);
  return out;
}

std::string slurp(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// An archive of `members` (name, bytes), each stored or deflated as `method` says.
void write_zip(const std::filesystem::path& file,
               const std::vector<std::pair<std::string, std::string>>& members,
               zip_int32_t method = ZIP_CM_STORE) {
  int code = 0;
  zip_t* za = zip_open(file.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &code);
  ASSERT_NE(za, nullptr) << code;
  for (const auto& [name, bytes] : members) {
    zip_source_t* src = zip_source_buffer(za, bytes.data(), bytes.size(), 0);
    const zip_int64_t index = zip_file_add(za, name.c_str(), src, 0);
    ASSERT_GE(index, 0);
    ASSERT_EQ(zip_set_file_compression(za, static_cast<zip_uint64_t>(index), method, 0), 0);
  }
  ASSERT_EQ(zip_close(za), 0);
}

TEST(Npz, ReadsWhatNumpyWritesStoredAndCompressed) {
  const TempDir d;
  if (std::system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "/usr/bin/python3 with numpy is not installed (python3-numpy)";
  }
  std::ofstream(d / "write.py") << R"(import sys, numpy as np
d = sys.argv[1]
a = np.arange(24).reshape(4, 3, 2)
np.savez(f'{d}/stored.npz', x=(a * 0.5).astype('<f4'), y=np.arange(4, dtype='<i8'))
np.savez_compressed(f'{d}/deflated.npz', x=(a - 3).astype('<f8'), y=np.arange(4, dtype='|u1'))
np.savez(f'{d}/one.npz', (a * 0.25).astype('<f2'))
)";
  ASSERT_EQ(std::system(("/usr/bin/python3 " + (d / "write.py").string() + " " + d.path().string())
                            .c_str()),
            0);
  std::vector<float> half, shifted, quarter;
  for (int i = 0; i < 24; ++i) {
    half.push_back(static_cast<float>(i) * 0.5f);
    shifted.push_back(static_cast<float>(i - 3));
    quarter.push_back(static_cast<float>(i) * 0.25f);
  }
  const auto stored = io::open_array_spec((d / "stored.npz").string() + ":x");
  EXPECT_EQ(stored->shape(), (std::vector<std::int64_t>{4, 3, 2}));
  EXPECT_TRUE(stored->holds_floats());
  EXPECT_EQ(floats(*stored), half);
  EXPECT_EQ(ints(*io::open_array_spec((d / "stored.npz").string() + ":y")),
            (std::vector<std::int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(floats(*io::open_array_spec((d / "deflated.npz").string() + ":x")), shifted);
  EXPECT_EQ(ints(*io::open_array_spec((d / "deflated.npz").string() + ":y")),
            (std::vector<std::int64_t>{0, 1, 2, 3}));
  // The only array, by the archive's name alone or NumPy's positional name.
  EXPECT_EQ(floats(*io::open_array_spec((d / "one.npz").string())), quarter);
  EXPECT_EQ(floats(*io::open_array_spec((d / "one.npz").string() + ":arr_0")), quarter);
  // Rows from the middle, of both kinds of member.
  for (const char* file : {"stored.npz", "deflated.npz"}) {
    const auto x = io::open_array_spec((d / file).string() + ":x");
    std::vector<float> rows(12);
    x->read_rows(1, 2, rows);
    const std::vector<float>& all = std::string(file) == "stored.npz" ? half : shifted;
    EXPECT_EQ(rows, std::vector<float>(all.begin() + 6, all.begin() + 18)) << file;
  }
}

constexpr std::int64_t kFeatures = 784;

TEST(CliNpz, ArchivesTrainBitForBitAsNpyFilesHeldAndStreamed) {
  REQUIRE_BINARY();
  const TempDir d;
  std::vector<float> x;
  std::vector<std::int64_t> y;
  for (std::int64_t i = 0; i < 18 * kFeatures; ++i) {
    x.push_back(static_cast<float>((i * 5) % 13) / 4.0f - 1.5f);
  }
  for (std::int64_t i = 0; i < 18; ++i) y.push_back((i * 3) % 10);
  std::filesystem::create_directories(d / "npy");
  write_npy_array(d / "npy/train_x.npy", "<f4", {12, kFeatures},
                  std::vector<float>(x.begin(), x.begin() + 12 * kFeatures));
  write_npy_array(d / "npy/train_y.npy", "<i8", {12}, std::vector<std::int64_t>(y.begin(), y.begin() + 12));
  write_npy_array(d / "npy/test_x.npy", "<f4", {6, kFeatures},
                  std::vector<float>(x.begin() + 12 * kFeatures, x.end()));
  write_npy_array(d / "npy/test_y.npy", "<i8", {6}, std::vector<std::int64_t>(y.begin() + 12, y.end()));
  const auto member = [&](const char* file) { return slurp(d / "npy" / file); };
  write_zip(d / "train.npz", {{"x.npy", member("train_x.npy")}, {"y.npy", member("train_y.npy")}});
  write_zip(d / "test.npz", {{"x.npy", member("test_x.npy")}, {"y.npy", member("test_y.npy")}},
            ZIP_CM_DEFLATE);
  const std::string run = "train --model mlp --epochs 2 --batch 4 --threads 1";
  const Output from_npy = noeira(d, run + " --data npy --data-dir " + (d / "npy").string() +
                                        " --out " + (d / "npy-run").string());
  ASSERT_EQ(from_npy.code, 0) << from_npy.err;
  const std::string train = (d / "train.npz").string(), test = (d / "test.npz").string();
  const std::string arrays = " --train-x " + train + ":x --train-y " + train + ":y --test-x " +
                             test + ":x --test-y " + test + ":y";
  for (const char* stream : {"", " --stream-data"}) {
    SCOPED_TRACE(stream);
    const Output from_npz = noeira(d, run + arrays + stream + " --out " + (d / "npz-run").string());
    ASSERT_EQ(from_npz.code, 0) << from_npz.err;
    EXPECT_EQ(saved_mlp(d / "npz-run/model.h5"), saved_mlp(d / "npy-run/model.h5"));
    std::filesystem::remove_all(d / "npz-run");
  }
}

// Opening `spec` is one line holding `fragment`.
void refused(const std::string& spec, const std::string& fragment) {
  SCOPED_TRACE(spec);
  expect_input_error([&] { (void)io::open_array_spec(spec); }, {fragment});
}

TEST(Npz, EveryArchiveItCannotUseIsOneLineNamingIt) {
  const TempDir d;
  std::string npy;
  {
    write_npy_array(d / "x.npy", "<f4", {2, 3}, std::vector<float>(6, 1.5f));
    npy = slurp(d / "x.npy");
  }
  write_zip(d / "two.npz", {{"x.npy", npy}, {"y.npy", npy}});
  const std::string two = (d / "two.npz").string();
  refused(two, "archive of 2 arrays (x, y); name one");
  refused(two + ":z", "holds no array 'z' (it holds x, y)");
  refused(two + ":", "names no array in the archive");
  refused((d / "none.npz").string() + ":x", "none.npz: file not found");
  std::filesystem::create_directories(d / "dir.npz");
  refused((d / "dir.npz").string() + ":x", "is a directory");
  std::ofstream(d / "text.npz") << "not a zip archive at all";
  refused((d / "text.npz").string() + ":x", "text.npz: not a readable .npz (zip) archive");
  // A flipped byte in a member's data: its CRC-32 does not match, stored or deflated.
  for (const zip_int32_t method : {ZIP_CM_STORE, ZIP_CM_DEFLATE}) {
    const std::filesystem::path file = d / "flipped.npz";
    write_npy_array(d / "big.npy", "<f4", {2000, 3}, std::vector<float>(6000, 0.0f));
    write_zip(file, {{"x.npy", slurp(d / "big.npy")}}, method);
    std::string bytes = slurp(file);
    bytes[bytes.size() / 2] = static_cast<char>(bytes[bytes.size() / 2] ^ 0x10);
    std::ofstream(file, std::ios::binary) << bytes;
    refused(file.string() + ":x", "flipped.npz");
  }
  // The archive cut short.
  {
    write_zip(d / "whole.npz", {{"x.npy", npy}});
    const std::string bytes = slurp(d / "whole.npz");
    std::ofstream(d / "cut.npz", std::ios::binary) << bytes.substr(0, bytes.size() - 30);
    refused((d / "cut.npz").string(), "cut.npz");
  }
  // What the .npy reader refuses, named by the member.
  write_zip(d / "fortran.npz",
            {{"x.npy", [&] {
                write_npy(d / "f.npy", "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }",
                          std::string(24, '\0'));
                return slurp(d / "f.npy");
              }()}});
  refused((d / "fortran.npz").string() + ":x", "fortran.npz:x.npy: is in Fortran (column) order");
  write_zip(d / "short.npz", {{"x.npy", npy.substr(0, npy.size() - 4)}});
  refused((d / "short.npz").string(), "short.npz:x.npy: holds 20 bytes of data");
  write_zip(d / "junk.npz", {{"x.npy", "plain text"}});
  refused((d / "junk.npz").string(), "junk.npz:x.npy: not a NumPy .npy file");
  // Compressed other than by deflate, where this libzip can write it.
  if (zip_compression_method_supported(ZIP_CM_BZIP2, 1) != 0) {
    write_zip(d / "bzip2.npz", {{"x.npy", npy}}, ZIP_CM_BZIP2);
    refused((d / "bzip2.npz").string(), "bzip2.npz:x.npy: is compressed by method 12");
  }
  if (zip_encryption_method_supported(ZIP_EM_AES_256, 1) != 0) {
    write_zip(d / "secret.npz", {{"x.npy", npy}});
    int code = 0;
    zip_t* za = zip_open((d / "secret.npz").c_str(), 0, &code);
    ASSERT_NE(za, nullptr);
    ASSERT_EQ(zip_file_set_encryption(za, 0, ZIP_EM_AES_256, "password"), 0);
    ASSERT_EQ(zip_close(za), 0);
    refused((d / "secret.npz").string(), "secret.npz:x.npy: is encrypted");
  }
}

}  // namespace
}  // namespace noeira

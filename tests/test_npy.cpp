// NumPy .npy files (io/npy.hpp): arrays NumPy itself wrote (every type taken, format versions 1.0,
// 2.0 and 3.0, 0-d and empty arrays) read back value for value, and every kind of file NumPy can
// write but noeira does not take, and hand-damaged headers, refused in one line naming the file.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "expect_error.hpp"
#include "io/npy.hpp"
#include "io_test_files.hpp"

namespace noeira {
namespace {

using testing::expect_input_error;
using testing::TempDir;
using testing::write_npy;

// Runs NumPy (Debian's python3-numpy) on `script` with the directory as sys.argv[1]; false when
// NumPy is not there.
bool numpy_writes(const TempDir& dir, const std::string& script) {
  if (std::system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") != 0) return false;
  const auto file = dir / "write.py";
  std::ofstream(file) << "import sys, numpy as np\nd = sys.argv[1]\n" << script;
  const std::string cmd = "/usr/bin/python3 " + file.string() + " " + dir.path().string();
  EXPECT_EQ(std::system(cmd.c_str()), 0) << script;
  return true;
}

std::vector<float> floats(const io::NpyArray& a) {
  std::vector<float> out(static_cast<std::size_t>(a.header().elements()));
  a.read_rows(0, a.header().rows(), out);
  return out;
}

std::vector<std::int64_t> ints(const io::NpyArray& a) {
  std::vector<std::int64_t> out(static_cast<std::size_t>(a.header().elements()));
  a.read_rows(0, a.header().rows(), out);
  return out;
}

TEST(Npy, ReadsEveryTypeNumpyWritesValueForValue) {
  TempDir dir;
  if (!numpy_writes(dir, R"(
a = np.arange(24).reshape(2, 3, 4)
for t in ['<f4', '<f8', '<f2', '|i1', '<i2', '<i4', '<i8', '|u1', '<u2', '<u4', '<u8']:
    np.save(f'{d}/{t[1:]}.npy', (a - 5 if t[1] in 'fi' else a).astype(t))
np.save(f'{d}/b1.npy', a % 3 == 0)
np.save(f'{d}/scalar.npy', np.float32(2.5))
np.save(f'{d}/empty.npy', np.zeros((0, 5), '<f4'))
np.save(f'{d}/third.npy', (np.arange(6, dtype='<f4') / 3).reshape(2, 3))
for v in [(2, 0), (3, 0)]:
    with open(f'{d}/v{v[0]}.npy', 'wb') as f:
        np.lib.format.write_array(f, (a * 0.25).astype('<f4'), version=v)
)")) {
    GTEST_SKIP() << "/usr/bin/python3 with NumPy is not installed (python3-numpy)";
  }
  for (const char* name : {"f4", "f8", "f2", "i1", "i2", "i4", "i8"}) {
    const io::NpyArray a = io::NpyArray::open(dir / (std::string(name) + ".npy"));
    EXPECT_EQ(a.header().shape, (std::vector<std::int64_t>{2, 3, 4})) << name;
    EXPECT_EQ(a.header().rows(), 2);
    EXPECT_EQ(a.header().row_elements(), 12);
    const std::vector<float> v = floats(a);
    for (std::size_t i = 0; i < v.size(); ++i) ASSERT_EQ(v[i], static_cast<float>(i) - 5) << name;
    if (name[0] == 'i') {
      const std::vector<std::int64_t> n = ints(a);
      for (std::size_t i = 0; i < n.size(); ++i) ASSERT_EQ(n[i], static_cast<std::int64_t>(i) - 5);
    }
  }
  for (const char* name : {"u1", "u2", "u4", "u8"}) {
    const std::vector<std::int64_t> n = ints(io::NpyArray::open(dir / (std::string(name) + ".npy")));
    for (std::size_t i = 0; i < n.size(); ++i) ASSERT_EQ(n[i], static_cast<std::int64_t>(i)) << name;
  }
  const std::vector<std::int64_t> b = ints(io::NpyArray::open(dir / "b1.npy"));
  for (std::size_t i = 0; i < b.size(); ++i) ASSERT_EQ(b[i], i % 3 == 0 ? 1 : 0);
  const io::NpyArray scalar = io::NpyArray::open(dir / "scalar.npy");
  EXPECT_TRUE(scalar.header().shape.empty());
  EXPECT_EQ(floats(scalar), std::vector<float>{2.5f});
  const io::NpyArray empty = io::NpyArray::open(dir / "empty.npy");
  EXPECT_EQ(empty.header().rows(), 0);
  EXPECT_TRUE(floats(empty).empty());
  // A row range, and float32 bits as NumPy computed them.
  const io::NpyArray third = io::NpyArray::open(dir / "third.npy");
  std::vector<float> row(3);
  third.read_rows(1, 1, row);
  EXPECT_EQ(row, (std::vector<float>{3.0f / 3, 4.0f / 3, 5.0f / 3}));
  for (const char* name : {"v2.npy", "v3.npy"}) {
    const std::vector<float> v = floats(io::NpyArray::open(dir / name));
    for (std::size_t i = 0; i < v.size(); ++i) ASSERT_EQ(v[i], 0.25f * static_cast<float>(i)) << name;
  }
  // Asking for rows past the end, or integers of a float array, is refused.
  expect_input_error([&] { third.read_rows(1, 2, std::span<float>(row.data(), 3)); },
                     {"third.npy", "rows 1..3 asked of 2"});
  std::vector<std::int64_t> ids(3);
  expect_input_error([&] { third.read_rows(0, 1, ids); },
                     {"third.npy", "holds float32, expected integers"});
}

TEST(Npy, RefusesWhatNumpyWritesButNoeiraDoesNotTake) {
  TempDir dir;
  if (!numpy_writes(dir, R"(
a = np.arange(6, dtype='<f4').reshape(2, 3)
np.save(f'{d}/fortran.npy', np.asfortranarray(a))
np.save(f'{d}/big.npy', a.astype('>f4'))
np.save(f'{d}/object.npy', np.array([1, 'x'], dtype=object), allow_pickle=True)
np.save(f'{d}/record.npy', np.zeros(3, dtype=[('a', '<f4'), ('b', '<i4')]))
np.save(f'{d}/complex.npy', a.astype('<c8'))
np.save(f'{d}/text.npy', np.array(['ab', 'c']))
np.save(f'{d}/dates.npy', np.array(['2026-12-07'], dtype='datetime64[D]'))
np.save(f'{d}/huge.npy', np.array([2**63 + 5], dtype='<u8'))
)")) {
    GTEST_SKIP() << "/usr/bin/python3 with NumPy is not installed (python3-numpy)";
  }
  // Refused in one line naming the file and every fragment.
  auto refused = [&](const char* name, std::initializer_list<std::string> fragments) {
    try {
      io::NpyArray::open(dir / name);
      ADD_FAILURE() << name << " was taken";
    } catch (const InputError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find((dir / name).string()), std::string::npos) << msg;
      for (const std::string& f : fragments) EXPECT_NE(msg.find(f), std::string::npos) << msg;
      EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    }
  };
  refused("fortran.npy", {"Fortran (column) order", "ascontiguousarray"});
  refused("big.npy", {"'>f4'", "big-endian"});
  refused("object.npy", {"'|O'", "Python objects"});
  refused("record.npy", {"structured record"});
  refused("complex.npy", {"'<c8'", "complex"});
  refused("text.npy", {"'<U2'", "strings"});
  refused("dates.npy", {"'<M8[D]'"});
  const io::NpyArray huge = io::NpyArray::open(dir / "huge.npy");
  std::vector<std::int64_t> out(1);
  expect_input_error([&] { huge.read_rows(0, 1, out); }, {"huge.npy", "past int64's range"});
}

TEST(Npy, RefusesDamagedHeadersAndDataOfAnotherSize) {
  TempDir dir;
  const std::string good = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  const std::string data(24, '\0');
  write_npy(dir / "good.npy", good, data);
  EXPECT_EQ(io::NpyArray::open(dir / "good.npy").header().elements(), 6);

  struct Case {
    const char* name;
    std::string header;
    std::string data;
    std::string fragment;
  };
  const std::vector<Case> cases = {
      {"short.npy", good, std::string(23, '\0'), "holds 23 bytes of data where shape (2, 3) of float32 needs 24 (truncated)"},
      {"long.npy", good, std::string(25, '\0'), "(bytes after the array)"},
      {"nokey.npy", "{'descr': '<f4', 'shape': (2, 3), }", data, "needs 'descr', 'fortran_order' and 'shape'"},
      {"twice.npy", "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)}", data, "repeated key 'descr'"},
      {"extra.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'x': 1}", data, "unexpected or repeated key 'x'"},
      {"negative.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (-2, 3)}", data, "'shape' holds a non-integer"},
      {"float.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (2.0, 3)}", data, "header: expected ','"},
      {"overflow.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 16)}", data, "the shape's size overflows"},
      {"bigdim.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}", data, "a dimension too large"},
      {"notdict.npy", "['<f4', False, (2, 3)]", data, "header: expected '{'"},
      {"fortran.npy", "{'descr': '<f4', 'fortran_order': 1, 'shape': (2, 3)}", data, "neither True nor False"},
      {"descr.npy", "{'descr': 'f4', 'fortran_order': False, 'shape': (2, 3)}", data, "is not a NumPy type string"},
      {"width.npy", "{'descr': '<f3', 'fortran_order': False, 'shape': (2, 3)}", data, "'<f3' is not supported"},
      {"tail.npy", good + " junk", data, "text after the closing '}'"},
      {"quote.npy", "{'descr: '<f4'}", data, "header: "},
  };
  for (const Case& c : cases) {
    write_npy(dir / c.name, c.header, c.data);
    expect_input_error([&] { io::NpyArray::open(dir / c.name); },
                       {(dir / c.name).string(), c.fragment});
  }
  // The prefix: magic, version, header length, newline.
  write_npy(dir / "magic.npy", good, data, "\x93NUMPX\x01");
  expect_input_error([&] { io::NpyArray::open(dir / "magic.npy"); }, {"magic.npy", "no \\x93NUMPY magic"});
  write_npy(dir / "version.npy", good, data, "\x93NUMPY\x04");
  expect_input_error([&] { io::NpyArray::open(dir / "version.npy"); }, {"version 4.0"});
  write_npy(dir / "minor.npy", good, data, "\x93NUMPY\x01", 1);
  expect_input_error([&] { io::NpyArray::open(dir / "minor.npy"); }, {"version 1.1"});
  {
    std::ofstream out(dir / "length.npy", std::ios::binary);
    out << "\x93NUMPY" << '\x02' << '\0' << std::string("\xff\xff\xff\x7f", 4) << good;
  }
  expect_input_error([&] { io::NpyArray::open(dir / "length.npy"); },
                     {"length.npy", "header of 2147483647 bytes in a file of"});
  {
    std::ofstream out(dir / "newline.npy", std::ios::binary);
    out << "\x93NUMPY" << '\x01' << '\0' << static_cast<char>(good.size()) << '\0' << good;
  }
  expect_input_error([&] { io::NpyArray::open(dir / "newline.npy"); },
                     {"does not end with a newline"});
  expect_input_error([&] { io::NpyArray::open(dir / "missing.npy"); }, {"missing.npy"});
  expect_input_error([&] { io::NpyArray::open(dir.path()); }, {"is a directory"});
}

}  // namespace
}  // namespace noeira

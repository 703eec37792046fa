// The safetensors reader and writer (io/safetensors.hpp): a round trip keeps every bit, the
// reader widens PyTorch's other float types exactly, and every hostile header (a truncated file,
// a huge header length, offsets out of range, overlapping or leaving gaps, a shape that does not
// match its bytes, an unknown dtype, bad JSON) is a one-line InputError naming the file and the
// tensor, before anything large is allocated; so is every truncation of a good file, and a
// changed header byte is either read or such an error.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "expect_error.hpp"
#include "io/safetensors.hpp"
#include "io_test_files.hpp"

namespace noeira {
namespace {

using testing::expect_input_error;

// A file of `length` (the header length field, which may lie), `header` and `data`.
void write_raw(const std::filesystem::path& file, std::uint64_t length, const std::string& header,
               const std::vector<unsigned char>& data = {}) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(&length), sizeof length);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
  ASSERT_TRUE(out.good());
}

// A file whose length field is the header's true length.
void write_header(const std::filesystem::path& file, const std::string& header,
                  std::size_t data_bytes) {
  write_raw(file, header.size(), header, std::vector<unsigned char>(data_bytes, 0));
}

std::vector<std::uint32_t> bits(const std::vector<float>& v) {
  std::vector<std::uint32_t> out;
  for (const float f : v) out.push_back(std::bit_cast<std::uint32_t>(f));
  return out;
}

TEST(Safetensors, RoundTripKeepsEveryBitAndTheMetadata) {
  testing::TempDir dir;
  const std::vector<float> weight = {1.5f, -0.0f, std::numeric_limits<float>::denorm_min(),
                                     -3.25e-20f, 7.0e30f, 0.1f};
  const std::vector<float> bias = {0.25f};
  const std::vector<float> counter = {123.0f};
  const std::filesystem::path file = dir / "w.safetensors";
  io::save_safetensors(file,
                       {{"layer.weight", {2, 3}, weight},
                        {"layer.bias", {1}, bias},
                        {"bn.num_batches_tracked", {}, counter, io::StDtype::I64}},
                       {{"model", "mlp"}, {"vocabulary", "a\nb \"c\""}});
  EXPECT_FALSE(std::filesystem::exists(dir / "w.safetensors.tmp"));
  // The data section starts 8-byte aligned.
  std::ifstream in(file, std::ios::binary);
  std::uint64_t length = 0;
  in.read(reinterpret_cast<char*>(&length), sizeof length);
  EXPECT_EQ(length % 8, 0u);

  const io::SafetensorsFile st = io::SafetensorsFile::open(file);
  EXPECT_EQ(st.metadata().at("model"), "mlp");
  EXPECT_EQ(st.metadata().at("vocabulary"), "a\nb \"c\"");
  ASSERT_EQ(st.entries().size(), 3u);
  const io::StEntry* w = st.find("layer.weight");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->dtype, io::StDtype::F32);
  EXPECT_EQ(w->shape, (Shape{2, 3}));
  EXPECT_EQ(bits(st.read_float(*w)), bits(weight));
  EXPECT_EQ(bits(st.read_float(*st.find("layer.bias"))), bits(bias));
  const io::StEntry* c = st.find("bn.num_batches_tracked");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->dtype, io::StDtype::I64);
  EXPECT_TRUE(c->shape.empty());
  EXPECT_EQ(st.read_counter(*c), counter);
  EXPECT_EQ(st.find("absent"), nullptr);
}

TEST(Safetensors, WidensF64F16AndBf16Exactly) {
  testing::TempDir dir;
  const std::filesystem::path file = dir / "mixed.safetensors";
  std::vector<unsigned char> data;
  auto put = [&](const void* p, std::size_t n) {
    const auto* b = static_cast<const unsigned char*>(p);
    data.insert(data.end(), b, b + n);
  };
  const double d[2] = {0.5, -1e-3};
  put(d, sizeof d);
  // F16: 1, -2, the smallest subnormal 2^-24, infinity.
  const std::uint16_t h[4] = {0x3c00, 0xc000, 0x0001, 0x7c00};
  put(h, sizeof h);
  // BF16: 1, -0.15625 (0xbe20).
  const std::uint16_t b[2] = {0x3f80, 0xbe20};
  put(b, sizeof b);
  const std::string header =
      R"({"d":{"dtype":"F64","shape":[2],"data_offsets":[0,16]},)"
      R"("h":{"dtype":"F16","shape":[2,2],"data_offsets":[16,24]},)"
      R"("b":{"dtype":"BF16","shape":[2],"data_offsets":[24,28]}})";
  write_raw(file, header.size(), header, data);
  const io::SafetensorsFile st = io::SafetensorsFile::open(file);
  EXPECT_EQ(st.read_float(*st.find("d")), (std::vector<float>{0.5f, static_cast<float>(-1e-3)}));
  EXPECT_EQ(st.read_float(*st.find("h")),
            (std::vector<float>{1.0f, -2.0f, std::ldexp(1.0f, -24),
                                std::numeric_limits<float>::infinity()}));
  EXPECT_EQ(st.read_float(*st.find("b")), (std::vector<float>{1.0f, -0.15625f}));
}

TEST(Safetensors, IntegersAreCountersOnly) {
  testing::TempDir dir;
  const std::filesystem::path file = dir / "ints.safetensors";
  std::vector<unsigned char> data(16);
  const std::int64_t values[2] = {-7, std::int64_t{1} << 40};
  std::memcpy(data.data(), values, sizeof values);
  const std::string header = R"({"n":{"dtype":"I64","shape":[2],"data_offsets":[0,16]}})";
  write_raw(file, header.size(), header, data);
  const io::SafetensorsFile st = io::SafetensorsFile::open(file);
  expect_input_error([&] { (void)st.read_float(*st.find("n")); },
                     {file.string(), "tensor 'n' is I64", "floating point"});
  // -7 is fine, 2^40 is not exact in float32.
  expect_input_error([&] { (void)st.read_counter(*st.find("n")); },
                     {file.string(), "tensor 'n'", "1099511627776", "2^24"});
}

TEST(Safetensors, EveryHostileHeaderIsAOneLineError) {
  testing::TempDir dir;
  const std::filesystem::path file = dir / "bad.safetensors";
  const std::string f32_6 = R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]}})";

  write_raw(file, 0, "", {});
  std::filesystem::resize_file(file, 5);
  expect_input_error([&] { (void)io::SafetensorsFile::open(file); },
                     {file.string(), "5 bytes", "shorter than the 8-byte header length"});

  write_raw(file, std::uint64_t{1} << 62, "{}");
  expect_input_error([&] { (void)io::SafetensorsFile::open(file); },
                     {file.string(), "header length 4611686018427387904", "cap"});

  write_raw(file, 1000, f32_6);
  expect_input_error([&] { (void)io::SafetensorsFile::open(file); },
                     {file.string(), "truncated", "header length 1000"});

  write_header(file, R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]})", 24);
  expect_input_error([&] { (void)io::SafetensorsFile::open(file); }, {file.string(), "JSON"});

  write_header(file, "[1, 2]", 0);
  expect_input_error([&] { (void)io::SafetensorsFile::open(file); },
                     {file.string(), "not a JSON object"});

  // The data section is 16 bytes short of the tensor's 24.
  write_header(file, f32_6, 8);
  expect_input_error([&] { (void)io::SafetensorsFile::open(file); },
                     {file.string(), "tensor 'w'", "[0, 24)", "run past", "8 bytes"});

  write_header(file, R"({"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,24]}})", 24);
  expect_input_error([&] { (void)io::SafetensorsFile::open(file); },
                     {file.string(), "tensor 'w'", "[2, 2]", "16", "24"});

  write_header(file, R"({"w":{"dtype":"F32","shape":[4611686018427387904,8],)"
                     R"("data_offsets":[0,24]}})", 24);
  expect_input_error([&] { (void)io::SafetensorsFile::open(file); },
                     {file.string(), "tensor 'w'", "too large"});

  write_header(file, R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,0]}})", 0);
  expect_input_error([&] { (void)io::SafetensorsFile::open(file); },
                     {file.string(), "tensor 'w'", "dimension"});

  write_header(file, R"({"w":{"dtype":"Q4","shape":[6],"data_offsets":[0,24]}})", 24);
  expect_input_error([&] { (void)io::SafetensorsFile::open(file); },
                     {file.string(), "tensor 'w'", "unknown dtype 'Q4'"});

  write_header(file, R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", 8);
  expect_input_error([&] { (void)io::SafetensorsFile::open(file); },
                     {file.string(), "tensor 'w'", "end before"});

  write_header(file, R"({"w":{"dtype":"F32","shape":[2]}})", 8);
  expect_input_error([&] { (void)io::SafetensorsFile::open(file); },
                     {file.string(), "tensor 'w'", "data_offsets"});

  write_header(file,
               R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
               R"("b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
               16);
  expect_input_error([&] { (void)io::SafetensorsFile::open(file); },
                     {file.string(), "tensor 'b'", "overlap tensor 'a'"});

  write_header(file,
               R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
               R"("b":{"dtype":"F32","shape":[2],"data_offsets":[12,20]}})",
               20);
  expect_input_error([&] { (void)io::SafetensorsFile::open(file); },
                     {file.string(), "tensor 'b'", "[8, 12)", "belong to no tensor"});

  write_header(file, f32_6, 32);
  expect_input_error([&] { (void)io::SafetensorsFile::open(file); },
                     {file.string(), "last 8 bytes belong to no tensor"});

  write_header(file, R"({"__metadata__":{"model":3}})", 0);
  expect_input_error([&] { (void)io::SafetensorsFile::open(file); },
                     {file.string(), "__metadata__", "'model'", "not a string"});

  expect_input_error([&] { (void)io::SafetensorsFile::open(dir / "absent.safetensors"); },
                     {"absent.safetensors"});
}

// Opens and reads a possibly damaged file: an InputError is fine, any other exception is not.
void open_and_read(const std::filesystem::path& file, const std::string& what) {
  try {
    const io::SafetensorsFile st = io::SafetensorsFile::open(file);
    for (const io::StEntry& e : st.entries()) (void)st.read_counter(e);
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << what << ": " << e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << ": not an InputError: " << e.what();
  }
}

TEST(Safetensors, EveryTruncationAndHeaderByteChangeFailsCleanly) {
  testing::TempDir dir;
  const std::filesystem::path good = dir / "good.safetensors";
  const std::vector<float> w = {1, 2, 3, 4, 5, 6}, c = {3};
  io::save_safetensors(good, {{"w", {2, 3}, w}, {"n", {}, c, io::StDtype::I64}}, {{"k", "v"}});
  std::vector<char> bytes(std::filesystem::file_size(good));
  std::ifstream(good, std::ios::binary)
      .read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  std::uint64_t length = 0;
  std::memcpy(&length, bytes.data(), 8);
  const std::filesystem::path bad = dir / "bad.safetensors";
  auto write = [&](const std::vector<char>& b) {
    std::ofstream(bad, std::ios::binary | std::ios::trunc)
        .write(b.data(), static_cast<std::streamsize>(b.size()));
  };
  for (std::size_t n = 0; n < bytes.size(); ++n) {
    write(std::vector<char>(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n)));
    expect_input_error([&] { (void)io::SafetensorsFile::open(bad); }, {bad.string()});
  }
  // Every byte of the length and the header, replaced by a few values that break it differently.
  for (std::size_t i = 0; i < 8 + length; ++i) {
    for (const char v : {'\0', '9', '"', ']', '-', '\xff'}) {
      std::vector<char> changed = bytes;
      changed[i] = v;
      write(changed);
      open_and_read(bad, "byte " + std::to_string(i) + " = " + std::to_string(int{v}));
    }
  }
}

TEST(Safetensors, WriterRefusesBadTensorsAndLeavesNothing) {
  testing::TempDir dir;
  const std::filesystem::path file = dir / "w.safetensors";
  const std::vector<float> v = {1.0f, 2.0f};
  expect_input_error([&] { io::save_safetensors(file, {{"a", {2}, v}, {"a", {2}, v}}); },
                     {file.string(), "tensor 'a'", "twice"});
  expect_input_error([&] { io::save_safetensors(file, {{"a", {3}, v}}); },
                     {file.string(), "tensor 'a'", "2 values", "[3]"});
  const std::vector<float> half = {0.5f};
  expect_input_error([&] { io::save_safetensors(file, {{"n", {}, half, io::StDtype::I64}}); },
                     {file.string(), "tensor 'n'", "whole number"});
  EXPECT_FALSE(std::filesystem::exists(file));
  EXPECT_FALSE(std::filesystem::exists(dir / "w.safetensors.tmp"));
}

}  // namespace
}  // namespace noeira

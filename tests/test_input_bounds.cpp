// Inputs small on disk that must not cost much before they are refused, and the readers' errors
// in noeira's words: a safetensors header past its cap or with a repeated tensor, a tiny file
// naming gpt2-124m (refused before the model's gigabyte is allocated), a head of its own beside
// the tied one, a --config file past its cap or with a number out of range, a gzip corpus past
// the corpus cap, and a corpus encoded straight into its resident ids.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <string>
#include <vector>

#include "cli_test_util.hpp"
#include "distributed/param_store.hpp"
#include "expect_error.hpp"
#include "io/safetensors.hpp"
#include "io/text.hpp"
#include "io_test_files.hpp"
#include "train/export.hpp"
#include "train/generate.hpp"
#include "train/presets.hpp"
#include "train/run.hpp"
#include "train/text_data.hpp"
#include "train/text_windows.hpp"
#include "train/weights_file.hpp"

namespace noeira {
namespace {

using testing::expect_input_error;
using testing::TempDir;

void write_file(const std::filesystem::path& file, const std::string& bytes) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good());
}

// A safetensors file of `header` (its true length) and `data_bytes` zero bytes.
void write_safetensors(const std::filesystem::path& file, const std::string& header,
                       std::size_t data_bytes) {
  const std::uint64_t length = header.size();
  std::string bytes(reinterpret_cast<const char*>(&length), sizeof length);
  write_file(file, bytes + header + std::string(data_bytes, '\0'));
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

TEST(SafetensorsBounds, AHeaderPastTheCapIsRefusedBeforeItIsRead) {
  TempDir dir;
  const std::filesystem::path file = dir / "big.safetensors";
  // A header of valid JSON, 2 MiB of metadata: the length is refused, the text never parsed.
  const std::string header =
      R"({"__metadata__":{"pad":")" + std::string(2 << 20, 'x') + R"("}})";
  write_safetensors(file, header, 0);
  const auto start = std::chrono::steady_clock::now();
  expect_input_error([&] { (void)io::SafetensorsFile::open(file); },
                     {file.string(), "header length", "exceeds the cap of 1048576"});
  EXPECT_LT(seconds_since(start), 0.5);
  // The writer refuses what the reader would.
  const std::vector<float> one = {1.0f};
  expect_input_error(
      [&] {
        io::save_safetensors(dir / "w.safetensors", {{"a", {1}, one}},
                             {{"pad", std::string(2 << 20, 'x')}});
      },
      {"w.safetensors", "more than the cap"});
  EXPECT_FALSE(std::filesystem::exists(dir / "w.safetensors"));
  EXPECT_FALSE(std::filesystem::exists(dir / "w.safetensors.tmp"));
}

TEST(SafetensorsBounds, HeaderErrorsAreNoeirasWords) {
  TempDir dir;
  const std::filesystem::path file = dir / "h.safetensors";
  const std::string entry = R"({"dtype":"F32","shape":[1],"data_offsets":[0,4]})";
  // A tensor named twice: nlohmann would keep the second silently.
  write_safetensors(file, R"({"a":)" + entry + R"(,"a":)" + entry + "}", 4);
  expect_input_error([&] { (void)io::SafetensorsFile::open(file); },
                     {file.string(), "names tensor 'a' twice"});
  write_safetensors(file, R"({"a":{"dtype":"F32","shape":[1e400]}})", 0);
  try {
    (void)io::SafetensorsFile::open(file);
    ADD_FAILURE() << "expected an InputError";
  } catch (const InputError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("a number out of range at line 1, column"), std::string::npos) << msg;
    EXPECT_EQ(msg.find("json.exception"), std::string::npos) << msg;
  }
  // A name of a megabyte stays a short line.
  write_safetensors(file, R"({")" + std::string(1 << 19, 'n') + R"(":{"dtype":"Q9"}})", 0);
  try {
    (void)io::SafetensorsFile::open(file);
    ADD_FAILURE() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_LT(std::string(e.what()).size(), 400u) << std::string(e.what()).substr(0, 400);
  }
}

// The walk check_weights_before_building knows without a model is the walk of the built model.
TEST(SafetensorsBounds, TheUnbuiltGptWalkIsTheBuiltOne) {
  auto expect_same = [](auto& model, std::string_view name) {
    const dist::WalkUnits walk = dist::walk_units(model);
    std::vector<std::pair<std::string, Shape>> built;
    for (const NamedParam& p : walk.params) built.emplace_back(p.name, p.param->shape());
    for (const NamedBuffer& b : walk.buffers) built.emplace_back(b.name, b.tensor->shape());
    EXPECT_EQ(unbuilt_walk_for_tests(name), built) << name;
  };
  const Init init(Target::Cpu, InitSpec{InitKind::Zero});
  presets::GptTiny tiny(init);
  expect_same(tiny, "gpt-tiny");
  presets::GptChar chr(init);
  expect_same(chr, "gpt-char");
  EXPECT_TRUE(unbuilt_walk_for_tests("mlp").empty());
  // gpt2-124m's, counted: 124,439,808 parameters with the tied head once.
  std::int64_t total = 0;
  for (const auto& [name, shape] : unbuilt_walk_for_tests("gpt2-124m")) total += shape_numel(shape);
  EXPECT_EQ(total, 124439808);
}

// A 92-byte file that names gpt2-124m: eval, generate and export refuse it without building the
// model (no tensor storage beyond a few KB).
TEST(SafetensorsBounds, ATinyFileNamingGpt2IsRefusedBeforeTheModelIsBuilt) {
  TempDir dir;
  const std::filesystem::path file = dir / "tiny.safetensors";
  write_safetensors(file,
                    R"({"__metadata__":{"model":"gpt2-124m"},)"
                    R"("x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
                    4);
  const std::int64_t live = tensor_bytes(Target::Cpu).live;
  auto expect_refused_small = [&](auto&& call) {
    reset_peak_tensor_bytes(Target::Cpu);
    const auto start = std::chrono::steady_clock::now();
    expect_input_error(call, {file.string(), "wpe.weight", "is missing", "gpt2-124m"});
    EXPECT_LT(tensor_bytes(Target::Cpu).peak - live, 1 << 20);
    EXPECT_LT(seconds_since(start), 1.0);
  };
  TrainConfig eval;
  eval.params = file.string();
  eval.model.clear();  // the file's
  eval.data = DatasetKind::Text;
  expect_refused_small([&] { (void)run_eval(eval); });
  GenerateConfig generate;
  generate.params = file.string();
  expect_refused_small([&] { (void)run_generate(generate); });
  ExportConfig exported;
  exported.params = file.string();
  exported.out = (dir / "out.safetensors").string();
  expect_refused_small([&] { (void)run_export(exported); });
}

// gpt-tiny's weights under `scheme`'s names with one more tensor, `name`: `extra`, or where that
// is null a copy of the tensor `copy_of`.
void write_with_extra(const std::filesystem::path& file, NameScheme scheme,
                      const std::string& name, const std::vector<float>* extra, const Shape& shape,
                      const std::string& copy_of = "") {
  const Init init(Target::Cpu, InitSpec{InitKind::Normal, 0.0f, 0.5f, 7});
  presets::GptTiny model(init);
  const std::filesystem::path plain = file.string() + ".plain.safetensors";
  save_weights_safetensors(plain, "gpt-tiny", NameMap::for_preset(scheme, "gpt-tiny"),
                           dist::walk_units(model), {}, NonFinite::Refuse);
  const io::SafetensorsFile st = io::SafetensorsFile::open(plain);
  std::vector<std::vector<float>> values;
  values.reserve(st.entries().size() + 1);
  std::vector<io::StTensorOut> out;
  for (const io::StEntry& e : st.entries()) {
    values.push_back(st.read_float(e));
    out.push_back({e.name, e.shape, values.back()});
  }
  values.push_back(extra != nullptr ? *extra : st.read_float(*st.find(copy_of)));
  out.push_back({name, shape, values.back()});
  io::save_safetensors(file, out, st.metadata());
}

// gpt-tiny under PyTorch's names, with `head` (null: the tied embedding's copy) as lm_head.weight.
void write_with_head(const std::filesystem::path& file, const std::vector<float>* head,
                     const Shape& head_shape) {
  write_with_extra(file, NameScheme::Pytorch, "lm_head.weight", head, head_shape,
                   "transformer.wte.weight");
}

TEST(SafetensorsBounds, AHeadOfItsOwnIsRefusedByNameAndTheTiedCopyRead) {
  TempDir dir;
  const Init init(Target::Cpu, InitSpec{InitKind::Zero});
  presets::GptTiny model(init);
  const dist::WalkUnits walk = dist::walk_units(model);
  const std::vector<float> three = {1.0f, 2.0f, 3.0f};
  write_with_head(dir / "three.safetensors", &three, {3});
  expect_input_error(
      [&] {
        load_weights_file(dir / "three.safetensors", "gpt-tiny", std::nullopt, walk, NonFinite::Refuse);
      },
      {"three.safetensors", "'lm_head.weight'", "ties it to 'transformer.wte.weight'"});
  std::vector<float> other(256 * 32, 0.5f);
  write_with_head(dir / "other.safetensors", &other, {256, 32});
  expect_input_error(
      [&] {
        load_weights_file(dir / "other.safetensors", "gpt-tiny", std::nullopt, walk, NonFinite::Refuse);
      },
      {"other.safetensors", "'lm_head.weight'", "differ"});
  // The same bits as the embedding (what a state_dict of the tied model holds): read.
  write_with_head(dir / "same.safetensors", nullptr, {256, 32});
  load_weights_file(dir / "same.safetensors", "gpt-tiny", std::nullopt, walk, NonFinite::Refuse);
  // eval's check before building says the same.
  TrainConfig eval;
  eval.params = (dir / "three.safetensors").string();
  eval.model.clear();  // the file's
  eval.data = DatasetKind::Text;
  expect_input_error([&] { (void)run_eval(eval); }, {"three.safetensors", "'lm_head.weight'"});
}

TEST(SafetensorsBounds, ATensorTheModelDoesNotUseIsRefusedByName) {
  TempDir dir;
  const Init init(Target::Cpu, InitSpec{InitKind::Zero});
  presets::GptTiny model(init);
  const dist::WalkUnits walk = dist::walk_units(model);
  const std::vector<float> one = {1.0f};
  write_with_extra(dir / "extra.safetensors", NameScheme::Noeira, "h.0.attn.extra", &one, {1});
  expect_input_error(
      [&] {
        load_weights_file(dir / "extra.safetensors", "gpt-tiny", std::nullopt, walk, NonFinite::Refuse);
      },
      {"extra.safetensors", "has tensor 'h.0.attn.extra'"});
}

// `noeira train --config <file>` (the config reader lives in the binary).
testing::Output train_with(const TempDir& dir, const std::filesystem::path& file) {
  return testing::noeira(dir, "train --config " + file.string(), 20);
}

TEST(ConfigFileBounds, AConfigPastOneMebibyteIsRefusedUnread) {
  REQUIRE_BINARY();
  TempDir dir;
  const std::filesystem::path file = dir / "big.json";
  write_file(file, R"({"epochs": 1, "pad": ")" + std::string(2 << 20, ' ') + "\"}");
  const auto start = std::chrono::steady_clock::now();
  testing::expect_one_error_line(train_with(dir, file),
                                 file.string() + ": the config file is larger than 1048576 bytes");
  EXPECT_LT(seconds_since(start), 2.0);
}

TEST(ConfigFileBounds, ParseErrorsSayTheFileTheLineAndTheText) {
  REQUIRE_BINARY();
  TempDir dir;
  const std::filesystem::path file = dir / "cfg.json";
  write_file(file, "{\n  \"epochs\": 1,\n  \"lr\": 1e400\n}\n");
  const testing::Output o = train_with(dir, file);
  testing::expect_one_error_line(o, file.string() + ": a number out of range at line 3");
  EXPECT_NE(o.err.find("('1e400')"), std::string::npos) << o.err;
  EXPECT_EQ(o.err.find("json.exception"), std::string::npos) << o.err;
  write_file(file, "{\"epochs\": 1,\n\n \"lr\" 3}");
  testing::expect_one_error_line(train_with(dir, file),
                                 file.string() + ": not valid JSON at line 3");
  write_file(file, "{\"epochs\": 1");
  testing::expect_one_error_line(train_with(dir, file), file.string() + ": not valid JSON");
  write_file(file, R"({"lr": 1, "lr": 2})");
  testing::expect_one_error_line(train_with(dir, file),
                                 file.string() + ": a key given twice ('lr')");
  // A key or a value of half a megabyte is shown shortened.
  write_file(file, R"({")" + std::string(1 << 19, 'k') + R"(": 1})");
  testing::Output big = train_with(dir, file);
  testing::expect_one_error_line(big, "unknown option 'kkkk");
  EXPECT_LT(big.err.size(), 300u);
  for (const char* key : {"lr", "optimizer", "data", "model"}) {
    write_file(file, R"({")" + std::string(key) + R"(": ")" + std::string(1 << 19, '9') + R"(x"})");
    big = train_with(dir, file);
    EXPECT_NE(big.code, 0) << key;
    EXPECT_LT(big.err.size(), 600u) << key << ": " << big.err.substr(0, 600);
  }
}

TEST(CorpusBounds, AGzipFilePastTheCapIsRefusedByItsOwnName) {
  TempDir dir;
  std::filesystem::create_directory(dir / "corpus");
  write_file(dir / "corpus" / "a.txt", "plain text\n");
  testing::write_bytes(dir / "corpus" / "b.gz", std::vector<std::uint8_t>(100000, 'z'), true);
  expect_input_error([&] { (void)io::read_text_corpus(dir / "corpus", 50000); },
                     {(dir / "corpus" / "b.gz").string(), "decompressed, larger than 50000"});
}

TEST(CorpusBounds, TheTextIsAllocatedOnceAtItsSize) {
  TempDir dir;
  std::string text(3'000'001, 'a');
  for (std::size_t i = 0; i < text.size(); ++i) text[i] = static_cast<char>('a' + i % 23);
  write_file(dir / "plain.txt", text);
  const io::TextCorpus plain = io::read_text_corpus(dir / "plain.txt");
  EXPECT_EQ(plain.text, text);
  EXPECT_EQ(plain.text.capacity(), text.size());
  testing::write_bytes(dir / "z.gz", std::vector<std::uint8_t>(text.begin(), text.end()), true);
  const io::TextCorpus gz = io::read_text_corpus(dir / "z.gz");
  EXPECT_EQ(gz.text, text);
  EXPECT_EQ(gz.text.capacity(), text.size());
}

// Encoded a block at a time into the resident tensor, the ids are those of encode(), with no
// character cut at a block's edge (the text passes 4 MiB, in 2- and 3-byte characters).
TEST(CorpusBounds, IdsEncodedIntoTheirTensorAreTheTokenizersIds) {
  std::string text;
  while (text.size() < (std::size_t{9} << 20)) text += "ab\xc3\xa9\xe2\x82\xac\n";
  const Tokenizer tokenizer = Tokenizer::build(TokenizerKind::Char, text.substr(0, 4));
  std::uint64_t fingerprint = 0;
  std::int64_t unknown = 0;
  const ResidentTokens resident =
      encode_resident_tokens("t/train", tokenizer, text, Target::Cpu, fingerprint, unknown);
  const std::vector<std::int32_t> expected = tokenizer.encode(text);
  EXPECT_EQ(resident.count, static_cast<std::int64_t>(expected.size()));
  EXPECT_EQ(resident.ids.to_ids(), expected);
  // "ab" and "é" are known; "€" and "\n" are not.
  EXPECT_EQ(unknown, std::count(expected.begin(), expected.end(), Tokenizer::kUnknownId));
  EXPECT_EQ(unknown * 5, resident.count * 2);
  EXPECT_NE(fingerprint, 0u);
}

}  // namespace
}  // namespace noeira

// GPT-2's tokenizer (train/gpt2_bpe.hpp, train/gpt2_pieces.hpp) against the reference nobody here
// wrote: npm's gpt-3-encoder (Encoder.js, run by node) encodes the same megabyte of varied text
// (fortunes, the README, our sources, many scripts and emoji, random bytes made valid UTF-8,
// whitespace runs) and every id must match. Then the properties the reference cannot show: any
// bytes round-trip, a text encoded in parts cut by gpt2_safe_cut is the text encoded whole, and a
// vocabulary that is damaged or not GPT-2's is refused naming its file.
//
// The vocabulary and Encoder.js are what scripts/setup.sh installs; without them these tests fail
// (setup is part of the test command) rather than skip.
#include <gtest/gtest.h>
#include <unicode/uchar.h>
#include <unicode/utf8.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "expect_error.hpp"
#include "io/text.hpp"
#include "io_test_files.hpp"
#include "train/gpt2_bpe.hpp"
#include "train/gpt2_pieces.hpp"
#include "train/text_data.hpp"
#include "train/text_windows.hpp"
#include "train/tokenizer.hpp"

namespace noeira {
namespace {

using testing::expect_input_error;
using testing::TempDir;

std::string file_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void append_utf8(std::string& out, UChar32 c) {
  if (c < 0x80) {
    out.push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (c >> 6)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (c >> 12)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (c >> 18)));
    out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

// Bytes made valid UTF-8 as a decoder does: each byte that does not begin a valid sequence
// becomes U+FFFD. A character this build's Unicode tables (ICU) do not know becomes U+FFFD too:
// node's tables are newer, and such a character may be a letter there (gpt2_pieces.hpp).
std::string valid_utf8(const std::string& raw) {
  std::string out;
  const auto* s = reinterpret_cast<const std::uint8_t*>(raw.data());
  for (std::size_t i = 0; i < raw.size();) {
    auto at = static_cast<std::int32_t>(i);
    UChar32 c = 0;
    U8_NEXT(s, at, static_cast<std::int32_t>(raw.size()), c);
    if (c < 0 || u_charType(c) == U_UNASSIGNED) {
      append_utf8(out, 0xFFFD);
      i = c < 0 ? i + 1 : static_cast<std::size_t>(at);
    } else {
      out.append(raw, i, static_cast<std::size_t>(at) - i);
      i = static_cast<std::size_t>(at);
    }
  }
  return out;
}

std::string random_valid_utf8(std::mt19937& rng, std::size_t bytes) {
  std::string raw(bytes, '\0');
  for (char& b : raw) b = static_cast<char>(rng() & 0xFF);
  return valid_utf8(raw);
}

// Text in many scripts, numbers of every kind, emoji (with joiners and modifiers), combining
// marks, contractions in every case, and whitespace of every kind in runs before words,
// punctuation, numbers and the end.
std::string varied_text(std::mt19937& rng) {
  const std::vector<std::string> samples = {
      "Ελληνικά γράμματα, κεφαλαία ΑΒΓ και τόνοι ά έ.",
      "Русский текст: съешь же ещё этих мягких французских булок.",
      "中文文本，日本語のテキスト、한국어 텍스트。",
      "العربية: مرحبا بالعالم ١٢٣٤٥ — עברית: שלום עולם",
      "हिन्दी पाठ ०१२३ और தமிழ் ௧௨௩ ঘ ক্ষ",
      "Roman Ⅻ ⅷ, superscripts x² y³ ½ ¾ ①②③, fullwidth １２３ ＡＢＣ",
      "emoji 😀😃 👍🏽 👨‍👩‍👧‍👦 🇫🇷🇯🇵 ❤️ ✈︎ 🤖🧠",
      "combining: e\xcc\x81 n\xcc\x83 a\xcc\x8a\xcc\x81; Zalgo: H\xcc\xb5\xcd\x8c\xcd\x9d",
      "I'm, you're, they've, he'll, she'd, it's, don't; I'M YOU'RE THEY'VE HE'LL 'S 'T 'D",
      "quotes 'single' \"double\" `back` ‘curly’ “curly” «guillemets» '' ''' 's's",
      "code: if (x != y && z <= 3) { return a->b[i] * 2.5e-3; } // done\n\tfoo(bar);",
      "json: {\"a\",\"b\":[1,2],\"c\":{\"d\":\"e\"}},\"f\",\"g\"] ['x','y'] (1),\"2\"",
      "math ∀x∈ℝ: x²≥0 ∑ ∫ √ ≠ ≈ ∞ — ellipsis… dash – bullet •",
      "numbers 3.14159 1,000,000 0x1F 1e10 -42 +7 ٣٫١٤ 〇一二三",
  };
  const std::vector<std::string> spaces = {" ",        "  ",           "   ",          "\t",
                                           "\n",       "\n\n",         "\r\n",         " \n ",
                                           "\xc2\xa0", "\xe3\x80\x80", "\xe2\x80\x83", "\x0b",
                                           "\x0c",     "\xef\xbb\xbf", "\xe2\x80\xa8"};
  const std::vector<std::string> after = {"word", "Word", "123", "!?", "'s", "é", "中", "", "\n"};
  std::string text;
  for (int round = 0; round < 40; ++round) {
    for (const std::string& s : samples) {
      text += s;
      text += spaces[rng() % spaces.size()];
    }
    for (int k = 0; k < 200; ++k) {
      std::string run;
      const std::size_t n = 1 + rng() % 6;
      for (std::size_t i = 0; i < n; ++i) run += spaces[rng() % spaces.size()];
      text += run + after[rng() % after.size()];
    }
    text += "\n";
  }
  return text;
}

// The megabyte the reference encodes (about half fortunes; the rest the README, our sources,
// the varied text and the random text).
std::string reference_text() {
  std::mt19937 rng(20240520);
  const std::filesystem::path source = std::filesystem::path(NOEIRA_TEST_DATA_DIR) / "../..";
  std::string text = io::read_text_corpus(io::default_text_corpus()).text.substr(0, 600000);
  text += file_text(source / "README.md");
  for (const char* file : {"src/train/gpt2_bpe.cpp", "src/train/gpt2_pieces.cpp",
                           "src/train/tokenizer.cpp", "io/json_text.cpp", "tests/CMakeLists.txt",
                           "scripts/setup.sh", "benchmarks/gpu_check.sh"}) {
    text += file_text(source / file);
  }
  text += varied_text(rng);
  text += random_valid_utf8(rng, 120000);
  text += "   trailing spaces at the end   ";
  return valid_utf8(text);
}

// The text cut into parts at every safe cut.
std::vector<std::string> safe_parts(const std::string& text) {
  std::vector<std::string> parts;
  std::size_t begin = 0;
  while (begin < text.size()) {
    const std::size_t cut = gpt2_safe_cut(text, begin + 1);
    parts.push_back(text.substr(begin, cut - begin));
    begin = cut;
  }
  return parts;
}

TEST(Gpt2Tokenizer, MatchesTheReferenceEncoderOnAMegabyteOfVariedText) {
  TempDir dir;
  const std::string text = reference_text();
  ASSERT_GE(text.size(), 1000000u);
  const std::vector<std::string> parts = safe_parts(text);
  { std::ofstream(dir / "pieces.json") << nlohmann::json(parts).dump(); }
  const std::filesystem::path script =
      std::filesystem::path(NOEIRA_TEST_DATA_DIR) / ".." / "gpt2_reference_encode.js";
  const std::string command = "node '" + script.string() + "' '" + gpt2_vocabulary_dir().string() +
                              "' '" + (dir / "pieces.json").string() + "' '" +
                              (dir / "ids.json").string() + "'";
  ASSERT_EQ(std::system(command.c_str()), 0)
      << command << " failed: node and npm's gpt-3-encoder come with scripts/setup.sh";
  const auto expected = nlohmann::json::parse(file_text(dir / "ids.json")).get<std::vector<int>>();

  const Tokenizer gpt2 = Tokenizer::gpt2();
  const std::vector<std::int32_t> ids = gpt2.encode(text);
  ASSERT_EQ(ids.size(), expected.size());
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] != expected[i]) {
      std::vector<std::int32_t> context(
          ids.begin() + static_cast<std::ptrdiff_t>(i > 8 ? i - 8 : 0),
          ids.begin() + static_cast<std::ptrdiff_t>(i + 1));
      FAIL() << "id " << i << " is " << ids[i] << ", the reference's " << expected[i] << " after \""
             << gpt2.decode(context) << "\"";
    }
  }
  EXPECT_EQ(gpt2.decode(ids), text);
}

TEST(Gpt2Tokenizer, EncodesKnownWordsAsGpt2Does) {
  const Tokenizer gpt2 = Tokenizer::gpt2();
  // "Hello world" is [15496, 995] in every GPT-2 tokenizer; " world" carries its space.
  EXPECT_EQ(gpt2.encode("Hello world"), (std::vector<std::int32_t>{15496, 995}));
  EXPECT_EQ(gpt2.vocab_size(), 50257);
  EXPECT_EQ(gpt2.decode(std::vector<std::int32_t>{Gpt2Bpe::kEndOfText}), "<|endoftext|>");
}

TEST(Gpt2Tokenizer, AnyBytesRoundTrip) {
  const Tokenizer gpt2 = Tokenizer::gpt2();
  std::mt19937 rng(7);
  for (std::size_t size : {1u, 2u, 3u, 17u, 1000u, 200000u}) {
    std::string bytes(size, '\0');
    for (char& b : bytes) b = static_cast<char>(rng() & 0xFF);
    const std::vector<std::int32_t> ids = gpt2.encode(bytes);
    for (std::int32_t id : ids) ASSERT_TRUE(id >= 0 && id < Gpt2Bpe::kEndOfText) << id;
    EXPECT_EQ(gpt2.decode(ids), bytes) << size << " random bytes";
  }
  // Cut sequences, stray continuation bytes, overlong forms, surrogates and a megabyte of one
  // space (one piece: the merges run from a heap, not in quadratic time).
  for (const std::string& bytes :
       {std::string("a\xe2\x82"), std::string("\x80\x80 x"), std::string("\xc0\xaf/"),
        std::string("\xed\xa0\x80!"), std::string(1 << 20, ' '), std::string(100000, 'a')}) {
    EXPECT_EQ(gpt2.decode(gpt2.encode(bytes)), bytes);
  }
}

TEST(Gpt2Tokenizer, ATextEncodedInSafePartsIsTheTextEncodedWhole) {
  const Tokenizer gpt2 = Tokenizer::gpt2();
  std::mt19937 rng(11);
  const std::string text = varied_text(rng) + random_valid_utf8(rng, 20000);
  std::vector<std::int32_t> joined;
  std::size_t parts = 0;
  for (const std::string& part : safe_parts(text)) {
    const std::vector<std::int32_t> ids = gpt2.encode(part);
    joined.insert(joined.end(), ids.begin(), ids.end());
    ++parts;
  }
  EXPECT_GT(parts, 100u);
  EXPECT_EQ(joined, gpt2.encode(text));
}

TEST(Gpt2Tokenizer, SerializedFormNamesTheKindOnly) {
  const Tokenizer gpt2 = Tokenizer::gpt2();
  EXPECT_EQ(gpt2.to_text(), "noeira-tokenizer 1\ngpt2\n");
  EXPECT_EQ(Tokenizer::from_text(gpt2.to_text()), gpt2);
  expect_input_error([] { Tokenizer::from_text("noeira-tokenizer 1\ngpt2 5\n"); },
                     {"gpt2 tokenizer has nothing after its kind"});
  expect_input_error([&] { gpt2.decode(std::vector<std::int32_t>{50257}); },
                     {"token id 50257", "outside GPT-2's vocabulary"});
}

// --data text --tokenizer gpt2: the corpus splits 90/10 by bytes (at a character's first byte),
// each part encoded whole, and the resident ids are those ids.
TEST(Gpt2Tokenizer, SplitsATextCorpusByBytesAndEncodesEachPart) {
  std::string corpus;
  for (int i = 0; i < 40; ++i) corpus += "Hello w\xc3\xb6rld, line " + std::to_string(i) + ".\n";
  const TextData data = make_text_data("corpus", corpus, TokenizerKind::Gpt2);
  std::size_t cut = corpus.size() * 9 / 10;
  while ((static_cast<unsigned char>(corpus[cut]) & 0xC0) == 0x80) ++cut;
  const Tokenizer gpt2 = Tokenizer::gpt2();
  EXPECT_EQ(data.tokenizer, gpt2);
  EXPECT_EQ(data.train, gpt2.encode(corpus.substr(0, cut)));
  EXPECT_EQ(data.validation, gpt2.encode(corpus.substr(cut)));
  std::uint64_t fingerprint = 0;
  std::int64_t unknown = 0;
  const ResidentTokens resident =
      encode_resident_tokens("corpus/train", gpt2, corpus.substr(0, cut), Target::Cpu, fingerprint,
                             unknown);
  EXPECT_EQ(resident.ids.to_ids(), data.train);
  EXPECT_EQ(resident.vocab_size, 50257);
  EXPECT_EQ(unknown, 0);
}

// A copy of the installed vocabulary with one file replaced.
void damaged_copy(const TempDir& dir, const std::string& file, const std::string& text) {
  for (const char* name : {"encoder.json", "vocab.bpe"}) {
    std::filesystem::copy_file(gpt2_vocabulary_dir() / name, dir / name);
  }
  std::ofstream(dir / file, std::ios::trunc | std::ios::binary) << text;
}

TEST(Gpt2Tokenizer, AVocabularyThatIsNotGpt2sIsRefusedNamingItsFile) {
  const std::string encoder = file_text(gpt2_vocabulary_dir() / "encoder.json");
  const std::string merges = file_text(gpt2_vocabulary_dir() / "vocab.bpe");
  struct Case {
    std::string file, text, error;
  };
  std::string swapped = encoder;  // two ids exchanged: well-formed, not GPT-2's
  swapped.replace(swapped.find("\"!\": 0"), 6, "\"!\": 1");
  swapped.replace(swapped.find("\"\\\"\": 1"), 7, "\"\\\"\": 0");
  std::string reordered = merges;  // the first two merges exchanged
  reordered.replace(reordered.find("\u0120 t\n\u0120 a\n"), 10, "\u0120 a\n\u0120 t\n");
  const std::vector<Case> cases = {
      {"encoder.json", "not json", "encoder.json: not GPT-2's vocabulary: not a JSON object"},
      {"encoder.json", "{\"a\": 0}", "1 tokens, GPT-2 has 50257"},
      {"encoder.json", encoder.substr(0, encoder.size() / 2), "not a JSON object"},
      {"encoder.json", swapped, "differ from GPT-2's"},
      {"vocab.bpe", merges.substr(0, merges.size() / 2), "vocab.bpe: not GPT-2's vocabulary"},
      {"vocab.bpe", "", "vocab.bpe: not GPT-2's vocabulary"},
      {"vocab.bpe", reordered, "differ from GPT-2's"},
  };
  for (const Case& c : cases) {
    TempDir dir;
    damaged_copy(dir, c.file, c.text);
    expect_input_error([&] { Gpt2Bpe::read(dir.path()); }, {c.error});
  }
  TempDir empty;
  expect_input_error([&] { Gpt2Bpe::read(empty.path()); },
                     {"encoder.json: cannot read GPT-2's vocabulary file"});
}

}  // namespace
}  // namespace noeira

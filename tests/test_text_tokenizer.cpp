// The tokenizers (train/tokenizer.hpp): char (code points, vocabulary from the training text,
// id 0 for an unknown character) and byte (256 ids) round-trip text; decode refuses ids outside
// the vocabulary; the serialized form round-trips exactly and every kind of damage to it is a
// one-line error, never a crash or a different vocabulary.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "expect_error.hpp"
#include "train/tokenizer.hpp"

namespace noeira {
namespace {

using testing::expect_input_error;

// Three bytes for "€", two for "é", one for the rest.
const std::string kText =
    "caf\xc3\xa9 \xe2\x82\xac"
    "5, caf\xc3\xa9\n";

TEST(CharTokenizer, VocabularyIsTheSortedCodePointsOfTheTrainingText) {
  const Tokenizer t = Tokenizer::build(TokenizerKind::Char, kText);
  // '\n', ' ', ',', '5', 'a', 'c', 'f', 'é', '€' after the unknown id.
  EXPECT_EQ(t.vocab_size(), 1 + 9);
  const std::vector<std::int32_t> ids = t.encode(kText);
  ASSERT_EQ(ids.size(), 14u);  // one id per character, not per byte
  EXPECT_EQ(ids[0], 6);        // 'c'
  EXPECT_EQ(ids[3], 8);        // 'é'
  EXPECT_EQ(ids[5], 9);        // '€'
  EXPECT_EQ(ids[13], 1);       // '\n'
  EXPECT_EQ(t.decode(ids), kText);
}

TEST(CharTokenizer, UnknownCharactersTakeTheReservedIdAndDecodeAsReplacement) {
  const Tokenizer t = Tokenizer::build(TokenizerKind::Char, "abc");
  EXPECT_EQ(t.encode("abz\xc3\xa9"), (std::vector<std::int32_t>{1, 2, 0, 0}));
  EXPECT_EQ(t.decode(std::vector<std::int32_t>{1, 0, 3}),
            "a\xef\xbf\xbd"
            "c");  // U+FFFD
  expect_input_error([&] { t.decode(std::vector<std::int32_t>{4}); },
                     {"token id 4", "outside the vocabulary [0, 4)"});
  expect_input_error([&] { t.decode(std::vector<std::int32_t>{-1}); }, {"token id -1"});
}

TEST(CharTokenizer, RefusesTextThatIsNotUtf8) {
  const Tokenizer t = Tokenizer::build(TokenizerKind::Char, "abc");
  expect_input_error([&] { t.encode("ab\xff"); }, {"invalid UTF-8 at byte 2"});
  expect_input_error([&] { t.encode("ab\xc3"); }, {"at byte 2", "cut short"});
  expect_input_error([&] { t.encode("\xc0\xaf"); }, {"overlong"});
  expect_input_error([&] { t.encode("\xed\xa0\x80"); }, {"surrogate"});
  expect_input_error([] { Tokenizer::build(TokenizerKind::Char, ""); }, {"no characters"});
}

TEST(ByteTokenizer, EveryByteIsItsOwnId) {
  const Tokenizer t = Tokenizer::build(TokenizerKind::Byte, "ignored");
  EXPECT_EQ(t, Tokenizer::bytes());
  EXPECT_EQ(t.vocab_size(), 256);
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  const std::vector<std::int32_t> ids = t.encode(all);
  for (int b = 0; b < 256; ++b) ASSERT_EQ(ids[static_cast<std::size_t>(b)], b);
  EXPECT_EQ(t.decode(ids), all);  // any bytes, UTF-8 or not
  EXPECT_EQ(t.encode(kText).size(), kText.size());
  expect_input_error([&] { t.decode(std::vector<std::int32_t>{256}); }, {"token id 256"});
}

TEST(TokenizerText, RoundTripsExactly) {
  const Tokenizer chars = Tokenizer::build(TokenizerKind::Char, kText);
  const std::string text = chars.to_text();
  EXPECT_EQ(text, "noeira-tokenizer 1\nchar 9\na 20 2c 35 61 63 66 e9 20ac\n");
  const Tokenizer back = Tokenizer::from_text(text);
  EXPECT_EQ(back, chars);
  EXPECT_EQ(back.to_text(), text);
  EXPECT_EQ(back.decode(chars.encode(kText)), kText);

  EXPECT_EQ(Tokenizer::bytes().to_text(), "noeira-tokenizer 1\nbyte\n");
  EXPECT_EQ(Tokenizer::from_text("noeira-tokenizer 1\nbyte\n"), Tokenizer::bytes());
  // Code point 0 and the largest scalar value survive.
  const Tokenizer edge =
      Tokenizer::build(TokenizerKind::Char, std::string("\0\xf4\x8f\xbf\xbf", 5));
  EXPECT_EQ(edge.to_text(), "noeira-tokenizer 1\nchar 2\n0 10ffff\n");
  EXPECT_EQ(Tokenizer::from_text(edge.to_text()), edge);
}

TEST(TokenizerText, DamageIsAOneLineError) {
  const std::string good = "noeira-tokenizer 1\nchar 3\na 20 61\n";
  ASSERT_EQ(Tokenizer::from_text(good).vocab_size(), 4);
  struct Case {
    std::string text;
    std::string says;
  };
  const std::vector<Case> cases = {
      {"", "no end of line after the header"},
      {"noeira-tokenizer 2\nbyte\n", "the first line is 'noeira-tokenizer 2'"},
      {"\x89HDF\r\n\x1a\n", "the first line is '\\x89HDF\\x0d'"},
      {"noeira-tokenizer 1\nword\n", "unknown kind 'word'"},
      {"noeira-tokenizer 1\nbyte 256\n", "nothing after its kind"},
      {"noeira-tokenizer 1\nbyte", "no end of line after the kind"},
      {"noeira-tokenizer 1\nbyte\n\n", "1 unexpected byte(s)"},
      {"noeira-tokenizer 1\nchar\na\n", "does not give a code point count"},
      {"noeira-tokenizer 1\nchar 0\n\n", "does not give a code point count"},
      {"noeira-tokenizer 1\nchar 03\na 20 61\n", "does not give a code point count"},
      {"noeira-tokenizer 1\nchar -3\na 20 61\n", "does not give a code point count"},
      {"noeira-tokenizer 1\nchar 3\na 20 61", "no end of line after the code points"},
      {"noeira-tokenizer 1\nchar 4\na 20 61\n", "3 code points where the header says 4"},
      {"noeira-tokenizer 1\nchar 2\na 20 61\n", "more than the 2 code points"},
      {"noeira-tokenizer 1\nchar 3\na 61 20\n", "entry 3 (20) does not follow"},
      {"noeira-tokenizer 1\nchar 3\na 20 20\n", "entry 3 (20) does not follow"},
      {"noeira-tokenizer 1\nchar 3\na 20 6G\n", "entry 3 '6G' is not a Unicode scalar value"},
      {"noeira-tokenizer 1\nchar 3\na 20 0061\n", "entry 3 '0061'"},
      {"noeira-tokenizer 1\nchar 3\na 20 d800\n", "entry 3 'd800'"},
      {"noeira-tokenizer 1\nchar 3\na 20 110000\n", "entry 3 '110000'"},
      {"noeira-tokenizer 1\nchar 3\na 20 ffffffffff\n", "entry 3 'ffffffffff'"},
      {"noeira-tokenizer 1\nchar 3\na  20 61\n", "entry 2 ''"},
      {"noeira-tokenizer 1\nchar 3\na 20 61 \n", "entry 4 ''"},
      {"noeira-tokenizer 1\nchar 3\na 20 61\nmore", "4 unexpected byte(s)"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    expect_input_error([&] { Tokenizer::from_text(c.text); },
                       {"tokenizer: corrupted vocabulary", c.says});
  }
  // Every truncation of a good form is refused, none crashes.
  for (std::size_t n = 0; n < good.size(); ++n) {
    EXPECT_THROW(Tokenizer::from_text(good.substr(0, n)), InputError) << n;
  }
}

TEST(TokenizerKindNames, ParseAndPrint) {
  EXPECT_EQ(parse_tokenizer_kind("char"), TokenizerKind::Char);
  EXPECT_EQ(to_string(TokenizerKind::Byte), "byte");
  expect_input_error([] { parse_tokenizer_kind("bpe"); },
                     {"unknown tokenizer 'bpe'", "char, byte"});
}

}  // namespace
}  // namespace noeira

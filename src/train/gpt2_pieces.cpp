#include "train/gpt2_pieces.hpp"

#include <unicode/uchar.h>

#include <array>
#include <cstdint>

namespace noeira {

namespace {

enum class CharClass : std::uint8_t { Letter, Number, Space, Other };

struct Char {
  CharClass cls;
  std::size_t size;  // bytes
};

constexpr std::array<CharClass, 128> ascii_classes() {
  std::array<CharClass, 128> table{};
  for (int c = 0; c < 128; ++c) {
    table[c] = CharClass::Other;
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) table[c] = CharClass::Letter;
    if (c >= '0' && c <= '9') table[c] = CharClass::Number;
    if ((c >= 0x09 && c <= 0x0D) || c == ' ') table[c] = CharClass::Space;
  }
  return table;
}
constexpr std::array<CharClass, 128> kAscii = ascii_classes();

// JavaScript's WhiteSpace and LineTerminator past ASCII (ECMA-262: U+00A0, U+FEFF and the
// category Zs, stable since Unicode 6.3, plus U+2028 and U+2029).
bool is_js_space(UChar32 c) {
  return c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
         c == 0x202F || c == 0x205F || c == 0x3000 || c == 0xFEFF;
}

CharClass class_of(UChar32 c) {
  if (is_js_space(c)) return CharClass::Space;
  const std::uint32_t mask = U_GET_GC_MASK(c);
  if ((mask & U_GC_L_MASK) != 0) return CharClass::Letter;
  if ((mask & U_GC_N_MASK) != 0) return CharClass::Number;
  return CharClass::Other;
}

// The character at text[i]: a valid UTF-8 sequence (shortest form, a scalar value), or one byte
// of class Other.
Char char_at(std::string_view text, std::size_t i) {
  const auto lead = static_cast<unsigned char>(text[i]);
  if (lead < 0x80) return {kAscii[lead], 1};
  std::size_t size = 0;
  UChar32 c = 0;
  UChar32 min = 0;
  if ((lead & 0xE0) == 0xC0) {
    size = 2, c = lead & 0x1F, min = 0x80;
  } else if ((lead & 0xF0) == 0xE0) {
    size = 3, c = lead & 0x0F, min = 0x800;
  } else if ((lead & 0xF8) == 0xF0) {
    size = 4, c = lead & 0x07, min = 0x10000;
  } else {
    return {CharClass::Other, 1};
  }
  if (size > text.size() - i) return {CharClass::Other, 1};
  for (std::size_t k = 1; k < size; ++k) {
    const auto b = static_cast<unsigned char>(text[i + k]);
    if ((b & 0xC0) != 0x80) return {CharClass::Other, 1};
    c = (c << 6) | (b & 0x3F);
  }
  if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return {CharClass::Other, 1};
  return {class_of(c), size};
}

// The end of the run of characters of class `cls` that starts at i.
std::size_t run_end(std::string_view text, std::size_t i, CharClass cls) {
  while (i < text.size()) {
    const Char ch = char_at(text, i);
    if (ch.cls != cls) break;
    i += ch.size;
  }
  return i;
}

// 's 't 're 've 'm 'll 'd at i (text[i] == '\''): the length matched, or 0.
std::size_t contraction_at(std::string_view text, std::size_t i) {
  const std::string_view rest = text.substr(i + 1, 2);
  if (rest.starts_with("re") || rest.starts_with("ve") || rest.starts_with("ll")) return 3;
  if (!rest.empty() && (rest[0] == 's' || rest[0] == 't' || rest[0] == 'm' || rest[0] == 'd')) {
    return 2;
  }
  return 0;
}

}  // namespace

std::size_t gpt2_piece_end(std::string_view text, std::size_t begin) {
  if (text[begin] == '\'') {
    if (const std::size_t n = contraction_at(text, begin); n > 0) return begin + n;
  }
  const Char first = char_at(text, begin);
  // ' ?\p{L}+', ' ?\p{N}+', ' ?[^\s\p{L}\p{N}]+': a space joins the run that follows it.
  if (text[begin] == ' ' && begin + 1 < text.size()) {
    const Char next = char_at(text, begin + 1);
    if (next.cls != CharClass::Space) return run_end(text, begin + 1, next.cls);
  }
  if (first.cls != CharClass::Space) return run_end(text, begin, first.cls);
  // '\s+(?!\S)|\s+': a run of spaces followed by more text leaves its last space to begin the
  // next piece (which joins the word after it when it is ' '), unless it is the only one.
  std::size_t last = begin;  // where the run's last character starts
  std::size_t end = begin;
  while (end < text.size()) {
    const Char ch = char_at(text, end);
    if (ch.cls != CharClass::Space) break;
    last = end;
    end += ch.size;
  }
  if (end == text.size() || last == begin) return end;
  return last;
}

std::size_t gpt2_safe_cut(std::string_view text, std::size_t from) {
  for (std::size_t i = text.find('\n', from == 0 ? 1 : from); i != std::string_view::npos;
       i = text.find('\n', i + 1)) {
    // The character before the '\n' starts at the last byte that is not a UTF-8 continuation
    // byte; where that does not decode to exactly the bytes before the '\n', the byte before it
    // is a stray one, of class Other.
    std::size_t start = i - 1;
    while (start > 0 && i - start < 4 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) {
      --start;
    }
    const Char before = char_at(text, start);
    if (start + before.size != i || before.cls != CharClass::Space) return i;
  }
  return text.size();
}

}  // namespace noeira

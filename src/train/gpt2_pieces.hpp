#pragma once
// GPT-2's pre-tokenization: the text cut into the pieces that byte-level BPE then encodes one by
// one (train/gpt2_bpe.hpp). OpenAI's encoder cuts with the regular expression
//
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//
// matched leftmost-first from the end of the previous piece. gpt2_piece_end is that expression
// written out as a scanner over the pattern's four classes of characters:
//
//   letter  \p{L}: Unicode general categories Lu, Ll, Lt, Lm, Lo (ICU's tables);
//   number  \p{N}: Nd, Nl, No;
//   space   \s as JavaScript defines it (the reference encoder, npm's gpt-3-encoder, is
//           JavaScript): U+0009..U+000D, U+0020, U+00A0, U+1680, U+2000..U+200A, U+2028,
//           U+2029, U+202F, U+205F, U+3000, U+FEFF (Python's engines also count U+001C..U+001F
//           and U+0085, so OpenAI's Python encoder may cut text holding those differently);
//   other   everything else.
//
// A byte that does not begin a valid UTF-8 sequence (a stray continuation byte, an overlong form,
// a surrogate, a sequence cut short) counts as one character of class `other`, so any bytes cut
// into pieces and every byte lands in exactly one: byte-level BPE then encodes them like any
// other byte, and decoding gives the bytes back. Text that is not UTF-8 is therefore encoded, not
// refused; where a reference decoder would first replace such bytes by U+FFFD, the ids differ.
//
// The classes come from the ICU this build links (Unicode 15.0 for Debian 12's ICU 72). A
// character assigned in a later Unicode version is `other` here and may be a letter to a newer
// encoder; every character assigned by Unicode 15.0 classes as any conforming engine classes it.
#include <cstddef>
#include <string_view>

namespace noeira {

// The end of the piece that starts at byte `begin` of `text` (begin < text.size()): a byte
// offset past begin, at most text.size().
std::size_t gpt2_piece_end(std::string_view text, std::size_t begin);

// The offset of the first cut at or after `from` where the text may be split into two texts whose
// pieces are the pieces of the whole: before a '\n' that follows a character other than a space
// (no piece crosses such a point, and the pattern never looks behind). text.size() where there
// is none. Lets a long text be encoded in parts, or by several workers, with the ids of one call.
std::size_t gpt2_safe_cut(std::string_view text, std::size_t from);

}  // namespace noeira

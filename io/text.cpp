#include "io/text.hpp"

#include <array>

#include "io/gzfile.hpp"
#include "kernels/error.hpp"

namespace noeira::io {

TextTokens read_text_tokens(const std::filesystem::path& file) {
  GzFile f(file);
  std::vector<std::uint8_t> bytes;
  // Unknown length (the file may be compressed): read until the stream ends.
  std::array<std::uint8_t, 1 << 16> chunk;
  for (;;) {
    const std::size_t got = f.read_some(chunk.data(), chunk.size());
    if (got == 0) break;
    bytes.insert(bytes.end(), chunk.begin(), chunk.begin() + static_cast<std::ptrdiff_t>(got));
  }
  if (bytes.empty()) {
    throw InputError(detail::concat(file.string(), ": empty, expected text"));
  }
  std::array<bool, 256> seen{};
  for (std::uint8_t b : bytes) seen[b] = true;
  TextTokens out;
  std::array<std::int32_t, 256> id_of{};
  for (int b = 0; b < 256; ++b) {
    if (seen[static_cast<std::size_t>(b)]) {
      id_of[static_cast<std::size_t>(b)] = static_cast<std::int32_t>(out.vocab.size());
      out.vocab.push_back(static_cast<std::uint8_t>(b));
    }
  }
  out.ids.resize(bytes.size());
  for (std::size_t i = 0; i < bytes.size(); ++i) out.ids[i] = id_of[bytes[i]];
  return out;
}

std::string TextTokens::decode(const std::vector<std::int32_t>& token_ids) const {
  std::string s;
  s.reserve(token_ids.size());
  for (std::int32_t id : token_ids) {
    if (id < 0 || id >= vocab_size()) {
      throw InputError(detail::concat("token id ", id, " outside the vocabulary of ",
                                      vocab_size()));
    }
    s.push_back(static_cast<char>(vocab[static_cast<std::size_t>(id)]));
  }
  return s;
}

}  // namespace noeira::io

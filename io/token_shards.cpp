#include "io/token_shards.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "core/hash.hpp"
#include "io/file_kind.hpp"
#include "kernels/error.hpp"

namespace noeira::io {

namespace {

[[noreturn]] void fail(const std::filesystem::path& path, std::string_view why) {
  throw InputError(detail::concat(path.string(), ": ", why));
}

enum class ShardFormat { Llmc, Nanogpt };
enum class SplitOf { Train, Validation };

struct ShardName {
  ShardFormat format;
  SplitOf split;
};

// What a `.bin` name says: llm.c's <name>_train_<n>.bin / <name>_val_<n>.bin, or nanoGPT's
// train.bin / val.bin; an InputError for any other name.
ShardName classify(const std::filesystem::path& path) {
  const std::string name = path.filename().string();
  if (name == "train.bin") return {ShardFormat::Nanogpt, SplitOf::Train};
  if (name == "val.bin") return {ShardFormat::Nanogpt, SplitOf::Validation};
  if (name.find("_train_") != std::string::npos) return {ShardFormat::Llmc, SplitOf::Train};
  if (name.find("_val_") != std::string::npos) return {ShardFormat::Llmc, SplitOf::Validation};
  fail(path,
       "a .bin file that is neither a training nor a validation shard (llm.c's "
       "<name>_train_<n>.bin / <name>_val_<n>.bin, or nanoGPT's train.bin / val.bin)");
}

// The token count and the bytes before the tokens, from the header and the file's size.
std::pair<std::int64_t, std::int64_t> shard_extent(const std::filesystem::path& path,
                                                   ShardFormat format, std::uint64_t size) {
  if (format == ShardFormat::Nanogpt) {
    if (size % 2 != 0)
      fail(path, detail::concat(size, " bytes: not a whole number of uint16 tokens"));
    return {static_cast<std::int64_t>(size / 2), 0};
  }
  if (size < static_cast<std::uint64_t>(kShardHeaderBytes)) {
    fail(path, detail::concat(size, " bytes, shorter than llm.c's header of ", kShardHeaderBytes));
  }
  std::int32_t header[3] = {};
  std::ifstream in(path, std::ios::binary);
  in.read(reinterpret_cast<char*>(header), sizeof header);
  if (!in) fail(path, "cannot read the header");
  if (header[0] != kShardMagic) {
    fail(path,
         detail::concat("magic ", header[0], ", not llm.c's token shard (", kShardMagic, ")"));
  }
  if (header[1] != kShardVersion) {
    fail(path, detail::concat("version ", header[1], " (this reader knows version ", kShardVersion,
                              ": uint16 tokens)"));
  }
  const std::int64_t count = header[2];
  const std::uint64_t holds = (size - static_cast<std::uint64_t>(kShardHeaderBytes)) / 2;
  if (count < 0 || static_cast<std::uint64_t>(count) != holds ||
      (size - static_cast<std::uint64_t>(kShardHeaderBytes)) % 2 != 0) {
    fail(path,
         detail::concat("its header says ", count, " tokens but the file holds ",
                        size - static_cast<std::uint64_t>(kShardHeaderBytes), " bytes after it",
                        static_cast<std::uint64_t>(count) > holds ? " (truncated)" : ""));
  }
  return {count, kShardHeaderBytes};
}

}  // namespace

std::vector<std::int32_t> shard_header(std::int64_t tokens) {
  NOEIRA_CHECK(tokens >= 0 && tokens <= INT32_MAX, "shard_header: ", tokens, " tokens");
  std::vector<std::int32_t> header(256, 0);
  header[0] = kShardMagic;
  header[1] = kShardVersion;
  header[2] = static_cast<std::int32_t>(tokens);
  return header;
}

std::string shard_name(const std::string& prefix, std::int64_t index) {
  char number[16];
  std::snprintf(number, sizeof number, "%06lld", static_cast<long long>(index));
  return detail::concat(prefix, index == 0 ? "_val_" : "_train_", number, ".bin");
}

TokenStream::TokenStream(std::string name, const std::vector<std::filesystem::path>& files)
    : name_(std::move(name)) {
  try {
    open_shards(files);
  } catch (...) {
    for (const Shard& shard : shards_) ::close(shard.fd);
    throw;
  }
}

void TokenStream::open_shards(const std::vector<std::filesystem::path>& files) {
  for (const std::filesystem::path& path : files) {
    require_regular_file(path, "a token shard");
    const std::uint64_t size = std::filesystem::file_size(path);
    const auto [count, offset] = shard_extent(path, classify(path).format, size);
    if (count == 0) fail(path, "holds no tokens");
    Shard shard;
    shard.path = path;
    shard.first = count_;
    shard.count = count;
    shard.offset = offset;
    shard.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (shard.fd < 0) fail(path, detail::concat("cannot open (", std::strerror(errno), ")"));
    // Windows are drawn at random: read-ahead would only read what nobody asks for.
    ::posix_fadvise(shard.fd, 0, 0, POSIX_FADV_RANDOM);
    shards_.push_back(shard);
    count_ += count;
  }
}

TokenStream::~TokenStream() {
  for (const Shard& shard : shards_) ::close(shard.fd);
}

void TokenStream::read(std::int64_t start, std::int64_t n, std::int32_t* out,
                       std::int64_t vocab) const {
  NOEIRA_CHECK(start >= 0 && n >= 0 && start + n <= count_, name_, ": tokens [", start, ", ",
               start + n, ") asked of ", count_);
  if (n == 0) return;
  auto shard = std::upper_bound(shards_.begin(), shards_.end(), start,
                                [](std::int64_t at, const Shard& s) { return at < s.first; }) -
               1;
  constexpr std::int64_t kChunk = 2048;
  std::uint16_t tokens[kChunk];
  for (std::int64_t done = 0; done < n;) {
    const std::int64_t from = start + done - shard->first;
    const std::int64_t take = std::min({n - done, shard->count - from, kChunk});
    const auto bytes = static_cast<std::size_t>(2 * take);
    const ssize_t got = ::pread(shard->fd, tokens, bytes, shard->offset + 2 * from);
    if (got != static_cast<ssize_t>(bytes)) {
      fail(shard->path, detail::concat("cannot read tokens ", from, "..", from + take,
                                       got < 0 ? std::string(" (") + std::strerror(errno) + ")"
                                               : std::string(" (the file shrank?)")));
    }
    for (std::int64_t i = 0; i < take; ++i) {
      const std::int32_t id = tokens[i];
      if (id >= vocab) {
        throw InputError(detail::concat(shard->path.string(), ": token ", from + i, " is ", id,
                                        ", outside the vocabulary [0, ", vocab, ")"));
      }
      out[done + i] = id;
    }
    done += take;
    if (from + take == shard->count) ++shard;
  }
}

std::uint64_t TokenStream::fingerprint() const {
  std::uint64_t h = fnv1a(name_);
  constexpr std::int64_t kEdge = 4096;
  std::vector<std::uint16_t> tokens;
  for (const Shard& shard : shards_) {
    h = hash_words(std::span<const char>(shard.path.filename().native()), h);
    const std::int64_t counts[1] = {shard.count};
    h = hash_words(std::span<const std::int64_t>(counts), h);
    std::ifstream in(shard.path, std::ios::binary);
    for (const std::int64_t at :
         {std::int64_t{0}, std::max<std::int64_t>(0, shard.count - kEdge)}) {
      tokens.assign(static_cast<std::size_t>(std::min(kEdge, shard.count)), 0);
      in.seekg(shard.offset + 2 * at);
      in.read(reinterpret_cast<char*>(tokens.data()),
              static_cast<std::streamsize>(tokens.size() * 2));
      if (!in) fail(shard.path, "cannot read its tokens");
      h = hash_words(std::span<const std::uint16_t>(tokens), h);
    }
  }
  return h;
}

TokenShards open_token_shards(const std::filesystem::path& dir) {
  if (file_type_of(dir) != std::filesystem::file_type::directory) {
    fail(dir, "not a directory of token shards (noeira tokenize writes one)");
  }
  std::vector<std::filesystem::path> files[2];
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with(".") || entry.path().extension() != ".bin") continue;
    files[classify(entry.path()).split == SplitOf::Train ? 0 : 1].push_back(entry.path());
  }
  for (auto& split : files) std::sort(split.begin(), split.end());
  if (files[0].empty() || files[1].empty()) {
    fail(dir, detail::concat("holds ", files[0].size(), " training and ", files[1].size(),
                             " validation shards; a run needs both (noeira tokenize writes both)"));
  }
  return TokenShards{std::make_shared<const TokenStream>(dir.string() + "/train", files[0]),
                     std::make_shared<const TokenStream>(dir.string() + "/validation", files[1])};
}

}  // namespace noeira::io

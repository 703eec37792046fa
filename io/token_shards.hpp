#pragma once
// Token shards: a language model's corpus tokenized once (`noeira tokenize`) and read a window at
// a time, so that a corpus far larger than memory trains with only the windows a rank draws
// read. The shards are kept open and read with pread, not mapped: a fault in a mapping of a file
// maps the whole page-cache folio around it (up to 2 MB on ext4 with large folios, Linux 6.x),
// so 16 windows of 66 bytes made 25 MB resident; read, the pages stay in the page cache (shared,
// reclaimable) and the process's resident memory stays flat whatever the corpus.
//
// Two formats, told apart by name:
//   llm.c's   <name>_val_<n>.bin / <name>_train_<n>.bin: a header of 256 little-endian int32
//             (magic 20240520, version 1, the token count, the rest zero), then the tokens as
//             little-endian uint16;
//   nanoGPT's val.bin / train.bin: uint16 tokens, no header.
// A directory's `.bin` files (names starting with '.' left out) are its shards; those of each
// split, in name order, form one stream of tokens. Every other kind of `.bin` name, a header
// that is not llm.c's (magic, version), a token count that the file's size does not hold
// (truncated or with bytes after the tokens), an odd-sized header-less file, an empty split and
// a directory without both splits are InputErrors naming the file or directory.
//
// Tokens are checked against the vocabulary where they are read (TokenStream::read): checking
// them all at start would read the whole corpus every time a run starts.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace noeira::io {

inline constexpr std::int32_t kShardMagic = 20240520;
inline constexpr std::int32_t kShardVersion = 1;
inline constexpr std::int64_t kShardHeaderBytes = 256 * 4;

// The header of an llm.c shard of `tokens` tokens.
std::vector<std::int32_t> shard_header(std::int64_t tokens);
// "<prefix>_val_000000.bin" (shard 0) or "<prefix>_train_<index>.bin".
std::string shard_name(const std::string& prefix, std::int64_t index);

// One split's shards, open for reading, as one stream of tokens.
class TokenStream {
 public:
  // Opens `files`, checked, in this order; `name` ("<dir>/train") for messages.
  TokenStream(std::string name, const std::vector<std::filesystem::path>& files);
  ~TokenStream();
  TokenStream(const TokenStream&) = delete;
  TokenStream& operator=(const TokenStream&) = delete;

  const std::string& name() const { return name_; }
  std::int64_t count() const { return count_; }
  std::size_t shards() const { return shards_.size(); }

  // Tokens [start, start + n) of the stream (across shards where they straddle two) into out,
  // each checked against [0, vocab): an InputError naming the shard, the token's place in it
  // and its value otherwise.
  void read(std::int64_t start, std::int64_t n, std::int32_t* out, std::int64_t vocab) const;

  // What identifies the stream without reading it whole: each shard's name and token count and
  // its first and last 4096 tokens.
  std::uint64_t fingerprint() const;

 private:
  struct Shard {
    std::filesystem::path path;
    int fd = -1;
    std::int64_t first = 0;  // the stream position of tokens[0]
    std::int64_t count = 0;
    std::int64_t offset = 0;  // bytes before the first token
  };
  void open_shards(const std::vector<std::filesystem::path>& files);

  std::string name_;
  std::vector<Shard> shards_;
  std::int64_t count_ = 0;
};

struct TokenShards {
  std::shared_ptr<const TokenStream> train;
  std::shared_ptr<const TokenStream> validation;
};

// The shards of `dir` (the header comment's rules).
TokenShards open_token_shards(const std::filesystem::path& dir);

}  // namespace noeira::io

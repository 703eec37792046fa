#include "train/tokenize.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>

#include "io/checkpoint_lock.hpp"
#include "io/file_kind.hpp"
#include "io/text.hpp"
#include "io/token_shards.hpp"
#include "kernels/error.hpp"
#include "train/gpt2_bpe.hpp"

namespace noeira {

namespace {

struct Ranks {
  MPI_Comm comm;
  int rank = 0;
  int size = 1;

  explicit Ranks(MPI_Comm c) : comm(c) {
    if (comm != MPI_COMM_NULL) {
      MPI_Comm_rank(comm, &rank);
      MPI_Comm_size(comm, &size);
    }
  }
  void barrier() const {
    if (comm != MPI_COMM_NULL) MPI_Barrier(comm);
  }
  // Every rank's value, in rank order.
  std::vector<std::int64_t> gather(std::int64_t value) const {
    std::vector<std::int64_t> all(static_cast<std::size_t>(size), value);
    if (comm != MPI_COMM_NULL) {
      MPI_Allgather(&value, 1, MPI_INT64_T, all.data(), 1, MPI_INT64_T, comm);
    }
    return all;
  }
};

[[noreturn]] void refuse(std::string_view option, std::string_view why) {
  throw InputError(detail::concat(option, ": ", why));
}

void check(const TokenizeConfig& c) {
  if (c.tokenizer != TokenizerKind::Gpt2) {
    refuse("--tokenizer", detail::concat(to_string(c.tokenizer),
                                         ": token shards hold GPT-2's ids (--tokenizer gpt2)"));
  }
  if (c.inputs.empty()) refuse("tokenize", "no text files or directories named");
  if (c.out.empty()) refuse("-o", "the shards' directory is required");
  if (c.shard_tokens < 1 || c.shard_tokens > INT32_MAX) {
    refuse("--shard-tokens", detail::concat(c.shard_tokens, " is outside [1, ", INT32_MAX,
                                            "] (llm.c's header counts tokens in an int32)"));
  }
  if (c.prefix.starts_with(".") || c.prefix.find('/') != std::string::npos) {
    refuse("--prefix", detail::concat("'", c.prefix,
                                      "': a shard name may not start with '.' (readers skip "
                                      "hidden files) or hold a '/'"));
  }
  if (c.val_tokens < 0 || c.val_tokens > INT32_MAX) {
    refuse("--val-tokens", detail::concat(c.val_tokens, " is outside [0, ", INT32_MAX, "]"));
  }
}

// The output directory, created; one that already holds shards is refused (never overwritten).
void prepare_output(const std::filesystem::path& out) {
  std::error_code ec;
  std::filesystem::create_directories(out, ec);
  if (ec || io::file_type_of(out) != std::filesystem::file_type::directory) {
    throw InputError(detail::concat(out.string(), ": cannot create the shards' directory",
                                    ec ? " (" + ec.message() + ")" : std::string()));
  }
  for (const auto& entry : std::filesystem::directory_iterator(out)) {
    const std::string name = entry.path().filename().string();
    if (!name.starts_with(".") && entry.path().extension() == ".bin") {
      throw InputError(detail::concat(out.string(), ": already holds token shards (", name,
                                      "); name another directory with -o or remove them"));
    }
  }
}

// Where each rank's files begin (and, last, the end): files are dealt in order, each to the rank
// whose equal share of the total bytes holds the file's first byte.
std::vector<std::size_t> deal(const std::vector<std::uint64_t>& sizes, int ranks) {
  std::vector<std::uint64_t> start(sizes.size(), 0);  // each file's first byte in the corpus
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < sizes.size(); ++i) start[i] = total, total += sizes[i];
  std::vector<std::size_t> first(static_cast<std::size_t>(ranks) + 1, sizes.size());
  for (int r = 0; r < ranks; ++r) {
    const std::uint64_t share =
        total / static_cast<std::uint64_t>(ranks) * static_cast<std::uint64_t>(r);
    first[static_cast<std::size_t>(r)] = static_cast<std::size_t>(
        std::lower_bound(start.begin(), start.end(), share) - start.begin());
  }
  return first;
}

// A rank's tokens, written as they come and removed with the object.
class Spill {
 public:
  explicit Spill(std::filesystem::path path)
      : path_(std::move(path)), out_(path_, std::ios::binary) {
    if (!out_) throw InputError(detail::concat(path_.string(), ": cannot create the spill file"));
  }
  ~Spill() {
    std::error_code ignored;
    std::filesystem::remove(path_, ignored);
  }
  void append(std::int32_t first, const std::vector<std::int32_t>& ids) {
    buffer_.assign(1, static_cast<std::uint16_t>(first));
    for (std::int32_t id : ids) buffer_.push_back(static_cast<std::uint16_t>(id));
    out_.write(reinterpret_cast<const char*>(buffer_.data()),
               static_cast<std::streamsize>(buffer_.size() * 2));
    if (!out_) throw InputError(detail::concat(path_.string(), ": write failed (disk full?)"));
    count_ += static_cast<std::int64_t>(buffer_.size());
  }
  void close() {
    out_.close();
    if (!out_) throw InputError(detail::concat(path_.string(), ": write failed (disk full?)"));
  }
  std::int64_t count() const { return count_; }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  std::ofstream out_;
  std::vector<std::uint16_t> buffer_;
  std::int64_t count_ = 0;
};

struct ShardPlan {
  std::vector<std::int64_t> begin;  // stream position of each shard's first token; then the end
  std::filesystem::path final_path(const TokenizeConfig& c, const std::string& prefix,
                                   std::size_t i) const {
    return c.out / io::shard_name(prefix, static_cast<std::int64_t>(i));
  }
  std::filesystem::path partial_path(const TokenizeConfig& c, const std::string& prefix,
                                     std::size_t i) const {
    return c.out /
           detail::concat(".", io::shard_name(prefix, static_cast<std::int64_t>(i)), ".partial");
  }
  std::size_t shards() const { return begin.size() - 1; }
};

ShardPlan plan_shards(const TokenizeConfig& c, std::int64_t total) {
  std::int64_t val = c.val_tokens;
  if (val == 0) val = std::min((total + 9) / 10, c.shard_tokens);
  if (total < 2 || val >= total) {
    throw InputError(detail::concat(c.out.string(), ": ", total, " tokens cannot give ", val,
                                    " validation tokens and leave any to train on",
                                    c.val_tokens > 0 ? " (--val-tokens)" : ""));
  }
  ShardPlan plan;
  plan.begin.push_back(0);
  for (std::int64_t at = val; at < total; at = std::min(total, at + c.shard_tokens)) {
    plan.begin.push_back(at);
  }
  plan.begin.push_back(total);
  return plan;
}

void write_at(int fd, const void* data, std::size_t bytes, std::int64_t offset,
              const std::filesystem::path& path) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::pwrite(fd, p, bytes, offset);
    if (n <= 0) {
      throw InputError(
          detail::concat(path.string(), ": write failed (", std::strerror(errno), ")"));
    }
    p += n, bytes -= static_cast<std::size_t>(n), offset += n;
  }
}

int open_shard(const std::filesystem::path& path, int flags) {
  const int fd = ::open(path.c_str(), flags | O_CLOEXEC, 0644);
  if (fd < 0)
    throw InputError(detail::concat(path.string(), ": cannot open (", std::strerror(errno), ")"));
  return fd;
}

// Rank 0: every shard at its final size with its header, under its hidden name.
void create_partials(const TokenizeConfig& c, const std::string& prefix, const ShardPlan& plan) {
  for (std::size_t i = 0; i < plan.shards(); ++i) {
    const std::filesystem::path path = plan.partial_path(c, prefix, i);
    const int fd = open_shard(path, O_WRONLY | O_CREAT | O_TRUNC);
    const std::int64_t count = plan.begin[i + 1] - plan.begin[i];
    const std::vector<std::int32_t> header = io::shard_header(count);
    write_at(fd, header.data(), header.size() * 4, 0, path);
    const bool sized = ::ftruncate(fd, io::kShardHeaderBytes + 2 * count) == 0;
    ::close(fd);
    if (!sized) throw InputError(detail::concat(path.string(), ": cannot size it (disk full?)"));
  }
}

// This rank's tokens, stream positions [first, first + spill.count()), into the shards.
void write_tokens(const TokenizeConfig& c, const std::string& prefix, const ShardPlan& plan,
                  const Spill& spill, std::int64_t first) {
  std::ifstream in(spill.path(), std::ios::binary);
  constexpr std::int64_t kChunk = std::int64_t{1} << 22;
  std::vector<std::uint16_t> tokens;
  const std::int64_t end = first + spill.count();
  for (std::size_t i = 0; i < plan.shards(); ++i) {
    const std::int64_t from = std::max(first, plan.begin[i]);
    const std::int64_t to = std::min(end, plan.begin[i + 1]);
    if (from >= to) continue;
    const std::filesystem::path path = plan.partial_path(c, prefix, i);
    const int fd = open_shard(path, O_WRONLY);
    for (std::int64_t at = from; at < to; at += kChunk) {
      const std::int64_t n = std::min(kChunk, to - at);
      tokens.resize(static_cast<std::size_t>(n));
      in.seekg(2 * (at - first));
      in.read(reinterpret_cast<char*>(tokens.data()), 2 * n);
      if (!in) {
        ::close(fd);
        throw InputError(detail::concat(spill.path().string(), ": read failed"));
      }
      write_at(fd, tokens.data(), static_cast<std::size_t>(2 * n),
               io::kShardHeaderBytes + 2 * (at - plan.begin[i]), path);
    }
    const bool synced = ::fsync(fd) == 0;
    ::close(fd);
    if (!synced) throw InputError(detail::concat(path.string(), ": cannot flush it to disk"));
  }
}

// The first input's name without its extension and leading dots ("fortunes", "input" for
// input.txt; "." and "dir/" name their directory), or "tokens" where that leaves nothing.
std::string default_prefix(const std::filesystem::path& input) {
  std::filesystem::path p = std::filesystem::absolute(input).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();
  std::string stem = p.filename().stem().string();
  stem.erase(0, stem.find_first_not_of('.'));  // a hidden shard would be skipped by readers
  return stem.empty() || stem == "/" ? std::string("tokens") : stem;
}

}  // namespace

TokenizeResult run_tokenize(const TokenizeConfig& c, MPI_Comm comm) {
  const auto started = std::chrono::steady_clock::now();
  check(c);
  const Ranks ranks(comm);
  const Tokenizer tokenizer = Tokenizer::gpt2();
  std::vector<std::filesystem::path> files;
  std::vector<std::uint64_t> sizes;
  for (const std::filesystem::path& input : c.inputs) {
    for (std::filesystem::path& file : io::corpus_files(input)) {
      sizes.push_back(std::filesystem::file_size(file));
      files.push_back(std::move(file));
    }
  }
  if (files.empty()) refuse("tokenize", "the inputs hold no files");
  const std::string prefix = !c.prefix.empty() ? c.prefix : default_prefix(c.inputs.front());
  // Rank 0 owns the directory for the run (the checkpoints' lock, io/checkpoint_lock.hpp): a
  // second tokenize into it is refused instead of writing into this one's hidden files.
  std::optional<io::CheckpointDirLock> lock;
  if (ranks.rank == 0) {
    lock.emplace(io::CheckpointDirLock::acquire(c.out, "-o"));
    prepare_output(c.out);
  }
  ranks.barrier();

  TokenizeResult result;
  const std::vector<std::size_t> first_file = deal(sizes, ranks.size);
  Spill spill(c.out / detail::concat(".tokenize-rank", ranks.rank, ".tmp"));
  std::int64_t documents = 0;
  std::uint64_t bytes = 0;
  double encode_seconds = 0;
  const std::size_t first = first_file[static_cast<std::size_t>(ranks.rank)];
  const std::size_t end = first_file[static_cast<std::size_t>(ranks.rank) + 1];
  auto last_report = std::chrono::steady_clock::now();
  std::vector<std::int32_t> ids;
  for (std::size_t f = first; f < end; ++f) {
    if (sizes[f] == 0) continue;  // an empty document adds nothing, not even a separator
    const io::TextCorpus text = io::read_text_corpus(files[f]);
    const auto encode_start = std::chrono::steady_clock::now();
    ids = tokenizer.encode(text.text);
    const auto encoded = std::chrono::steady_clock::now();
    encode_seconds += std::chrono::duration<double>(encoded - encode_start).count();
    spill.append(Gpt2Bpe::kEndOfText, ids);
    ++documents;
    bytes += text.text.size();
    if (ranks.rank == 0 && encoded - last_report > std::chrono::seconds(10)) {
      last_report = encoded;
      std::fprintf(stderr, "tokenize: rank 0 of %d at file %zu of its %zu (%.1f MB, %.2f MB/s)\n",
                   ranks.size, f - first + 1, end - first, static_cast<double>(bytes) / 1e6,
                   static_cast<double>(bytes) / 1e6 / encode_seconds);
    }
  }
  spill.close();

  const std::vector<std::int64_t> counts = ranks.gather(spill.count());
  std::int64_t total = 0;
  std::int64_t mine = 0;
  for (int r = 0; r < ranks.size; ++r) {
    if (r == ranks.rank) mine = total;
    total += counts[static_cast<std::size_t>(r)];
  }
  const ShardPlan plan = plan_shards(c, total);
  if (ranks.rank == 0) create_partials(c, prefix, plan);
  ranks.barrier();
  write_tokens(c, prefix, plan, spill, mine);
  ranks.barrier();
  for (std::size_t i = 0; i < plan.shards(); ++i) {
    if (ranks.rank == 0) {
      std::filesystem::rename(plan.partial_path(c, prefix, i), plan.final_path(c, prefix, i));
    }
    result.shards.push_back(plan.final_path(c, prefix, i));
  }
  ranks.barrier();
  const std::vector<std::int64_t> all_documents = ranks.gather(documents);
  const std::vector<std::int64_t> all_bytes = ranks.gather(static_cast<std::int64_t>(bytes));
  for (int r = 0; r < ranks.size; ++r) {
    result.documents += all_documents[static_cast<std::size_t>(r)];
    result.bytes += static_cast<std::uint64_t>(all_bytes[static_cast<std::size_t>(r)]);
  }
  result.tokens = total;
  result.val_tokens = plan.begin[1];
  result.rank0_bytes = static_cast<std::uint64_t>(all_bytes[0]);
  result.rank0_encode_seconds = encode_seconds;  // rank 0's where it matters: rank 0 prints
  result.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return result;
}

}  // namespace noeira

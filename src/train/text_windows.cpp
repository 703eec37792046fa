#include "train/text_windows.hpp"

#include <algorithm>

#include "core/hash.hpp"
#include "kernels/error.hpp"
#include "kernels/philox.hpp"
#include "train/order.hpp"

namespace noeira {

namespace {

// Starts and token indices are int32 on the device (gather_rows' index type).
void check_count(const std::string& name, std::uint64_t count) {
  if (count > static_cast<std::uint64_t>(INT32_MAX)) {
    throw InputError(detail::concat(name, ": ", count, " tokens, more than the ", INT32_MAX,
                                    " a split may hold"));
  }
}

// The one check of the ids: the gathers and the embedding on a device never see an id that was
// not checked here. `first` is the position of ids[0] in the split.
void check_ids(const std::string& name, std::span<const std::int32_t> ids, std::size_t first,
               std::int64_t vocab_size) {
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab_size) {
      throw InputError(detail::concat(name, ": token id ", ids[i], " at position ", first + i,
                                      " is outside the vocabulary [0, ", vocab_size, ")"));
    }
  }
}

// The end of the block of text that starts at `begin`: about kBlock bytes, moved on to the next
// character's first byte so that no character is cut (the text is valid UTF-8: counting its
// tokens checked it).
std::size_t block_end(std::string_view text, std::size_t begin, TokenizerKind kind) {
  constexpr std::size_t kBlock = std::size_t{1} << 22;
  std::size_t end = std::min(text.size(), begin + kBlock);
  if (kind == TokenizerKind::Char) {
    while (end < text.size() && (static_cast<unsigned char>(text[end]) & 0xc0) == 0x80) ++end;
  }
  return end;
}

// The checks both gathers make of the windows asked for (`available` starts exist), and the
// batch's tensors sized for `rows` windows of `block` tokens (kept where they already are).
void size_batch(WindowBatch& out, const ResidentTokens& tokens, std::int64_t first,
                std::int64_t rows, std::int64_t available, std::int64_t max_rows,
                std::int64_t block) {
  NOEIRA_CHECK(rows > 0 && rows <= max_rows, "WindowGather: ", rows, " windows, at most ",
               max_rows);
  NOEIRA_CHECK(first >= 0 && first + rows <= available, "WindowGather: starts [", first, ", ",
               first + rows, ") outside the ", available, " starts of ", tokens.name);
  const Target target = tokens.ids.target();
  if (out.ids.rank() != 2 || out.ids.dim(0) != rows || out.ids.dim(1) != block) {
    out.ids.resize({rows, block}, target);
  }
  if (out.targets.numel() != rows * block) out.targets.resize({rows * block}, target);
}

}  // namespace

ResidentTokens make_resident_tokens(std::string name, std::span<const std::int32_t> ids,
                                    std::int64_t vocab_size, Target target) {
  check_count(name, ids.size());
  check_ids(name, ids, 0, vocab_size);
  ResidentTokens out;
  out.name = std::move(name);
  out.count = static_cast<std::int64_t>(ids.size());
  out.vocab_size = vocab_size;
  out.ids = Tensor::from_host_ids({out.count}, ids, target);
  return out;
}

ResidentTokens encode_resident_tokens(std::string name, const Tokenizer& tokenizer,
                                      std::string_view text, Target target,
                                      std::uint64_t& fingerprint, std::int64_t& unknown) {
  if (tokenizer.kind() == TokenizerKind::Gpt2) {
    // BPE tells its count only once it has encoded: the ids are made first (about as many bytes
    // as the text), in one call so that no piece is cut.
    const std::vector<std::int32_t> ids = tokenizer.encode(text);
    fingerprint = hash_words(std::span(ids), fingerprint);
    return make_resident_tokens(std::move(name), ids, tokenizer.vocab_size(), target);
  }
  const std::int64_t count = Tokenizer::split_units(tokenizer.kind(), text);
  check_count(name, static_cast<std::uint64_t>(count));
  ResidentTokens out;
  out.count = count;
  out.vocab_size = tokenizer.vocab_size();
  out.ids = Tensor({count}, target, DType::I32);
  std::size_t done = 0;  // ids written
  for (std::size_t begin = 0; begin < text.size();) {
    const std::size_t end = block_end(text, begin, tokenizer.kind());
    const std::vector<std::int32_t> ids = tokenizer.encode(text.substr(begin, end - begin));
    NOEIRA_CHECK(done + ids.size() <= static_cast<std::size_t>(count), name, ": more ids (",
                 done + ids.size(), ") than the text's ", count, " tokens");
    check_ids(name, ids, done, out.vocab_size);
    if (tokenizer.kind() == TokenizerKind::Char) {
      unknown += std::count(ids.begin(), ids.end(), Tokenizer::kUnknownId);
    }
    fingerprint = hash_words(std::span(ids), fingerprint);
    kernels_for(target).upload(nullptr, out.ids.ids() + done, ids.data(),
                               ids.size() * sizeof(std::int32_t));
    done += ids.size();
    begin = end;
  }
  NOEIRA_CHECK(done == static_cast<std::size_t>(count), name, ": ", done, " ids for ", count,
               " tokens");
  out.name = std::move(name);
  return out;
}

ResidentTokens shard_tokens(std::shared_ptr<const io::TokenStream> stream,
                             std::int64_t vocab_size, Target target) {
  ResidentTokens out;
  out.name = stream->name();
  out.count = stream->count();
  out.vocab_size = vocab_size;
  out.ids = Tensor({0}, target, DType::I32);
  out.shards = std::move(stream);
  return out;
}

ResidentText make_resident_text(const TextData& data, Target target) {
  const std::int64_t vocab = data.tokenizer.vocab_size();
  return ResidentText{
      make_resident_tokens(data.name + "/train", data.train, vocab, target),
      make_resident_tokens(data.name + "/validation", data.validation, vocab, target)};
}

std::int64_t window_start(std::uint64_t seed, WindowStream stream, std::int64_t step,
                          std::int64_t row, std::int64_t tokens, std::int64_t block) {
  NOEIRA_CHECK(block > 0 && tokens > block, "window_start: windows of ", block + 1,
               " tokens need more than ", tokens);
  NOEIRA_CHECK(step >= 0 && step <= UINT32_MAX && row >= 0, "window_start: step ", step, " row ",
               row);
  // Counter (row, step, stream): the stream word keeps these draws apart from dropout's, whose
  // counter has the step there and zero above it, and from the epoch orders' "orde" word.
  const std::uint64_t counter_high =
      (std::uint64_t{static_cast<std::uint32_t>(stream)} << 32) | static_cast<std::uint64_t>(step);
  const philox::Block random = philox::at(seed, counter_high, static_cast<std::uint64_t>(row));
  return static_cast<std::int64_t>(draw_below(random, static_cast<std::uint64_t>(tokens - block)));
}

std::vector<std::int64_t> wide_window_starts(std::uint64_t seed, WindowStream stream,
                                             std::int64_t first_step, std::int64_t steps,
                                             std::int64_t batch, std::int64_t tokens,
                                             std::int64_t block) {
  NOEIRA_CHECK(steps >= 0 && batch >= 0, "window_starts: ", steps, " batches of ", batch);
  std::vector<std::int64_t> starts(static_cast<std::size_t>(steps * batch));
  for (std::int64_t s = 0; s < steps; ++s) {
    for (std::int64_t r = 0; r < batch; ++r) {
      starts[static_cast<std::size_t>(s * batch + r)] =
          window_start(seed, stream, first_step + s, r, tokens, block);
    }
  }
  return starts;
}

std::vector<std::int32_t> window_starts(std::uint64_t seed, WindowStream stream,
                                        std::int64_t first_step, std::int64_t steps,
                                        std::int64_t batch, std::int64_t tokens,
                                        std::int64_t block) {
  NOEIRA_CHECK(tokens <= INT32_MAX, "window_starts: ", tokens, " tokens exceed int32 starts");
  const std::vector<std::int64_t> wide =
      wide_window_starts(seed, stream, first_step, steps, batch, tokens, block);
  return std::vector<std::int32_t>(wide.begin(), wide.end());
}

WindowGather::WindowGather(std::int64_t max_rows, std::int64_t block, Target target)
    : max_rows_(max_rows), block_(block) {
  NOEIRA_CHECK(max_rows > 0 && block > 0 && max_rows * block <= INT32_MAX,
               "WindowGather: ", max_rows, " windows of ", block, " tokens");
  const std::int64_t n = max_rows * block;
  std::vector<std::int32_t> row(static_cast<std::size_t>(n)), position(row.size());
  for (std::int64_t i = 0; i < n; ++i) {
    row[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(i / block);
    position[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(i % block);
  }
  row_ = Tensor::from_host_ids({n}, row, target);
  position_ = Tensor::from_host_ids({n}, position, target);
  index_ = Tensor({n}, target, DType::I32);
}

void WindowGather::gather(WindowBatch& out, const ResidentTokens& tokens, const Tensor& starts,
                          std::int64_t first, std::int64_t rows, Stream stream) {
  const Target target = tokens.ids.target();
  NOEIRA_CHECK(starts.target() == target && row_.target() == target,
               "WindowGather: the starts or tables of ", tokens.name,
               " are on another target than its tokens");
  NOEIRA_CHECK(tokens.count > block_, tokens.name, ": ", tokens.count,
               " tokens, too few for a window of ", block_ + 1);
  size_batch(out, tokens, first, rows, starts.numel(), max_rows_, block_);
  const std::int64_t n = rows * block_;
  const KernelTable& k = kernels_for(target);
  std::int32_t* index = index_.ids();
  // index[b·block + t] = starts[first + b] + t: broadcast each start over its window's
  // positions (a gather of row b of the starts), then add the position.
  k.gather_rows(stream, index, row_.ids(), starts.ids() + first, n, 1, rows);
  k.accumulate_typed(stream, DType::I32, index, position_.ids(), n);
  // Inputs from the tokens, targets from the tokens one further on: with every start below
  // count - block, index + 1 stays inside the split, so the gathers never poison a row.
  k.gather_rows(stream, out.ids.ids(), index, tokens.ids.ids(), n, 1, tokens.count);
  k.gather_rows(stream, out.targets.ids(), index, tokens.ids.ids() + 1, n, 1, tokens.count - 1);
}

void WindowGather::gather_from_shards(WindowBatch& out, const ResidentTokens& tokens,
                                      std::span<const std::int64_t> starts, std::int64_t first,
                                      std::int64_t rows, Stream stream) {
  NOEIRA_CHECK(tokens.shards != nullptr, "WindowGather::gather_from_shards: ", tokens.name,
               " is resident, not in shards");
  size_batch(out, tokens, first, rows, static_cast<std::int64_t>(starts.size()), max_rows_,
             block_);
  const std::int64_t n = rows * block_;
  host_window_.resize(static_cast<std::size_t>(block_ + 1));
  host_ids_.resize(static_cast<std::size_t>(n));
  host_targets_.resize(static_cast<std::size_t>(n));
  for (std::int64_t b = 0; b < rows; ++b) {
    tokens.shards->read(starts[static_cast<std::size_t>(first + b)], block_ + 1,
                        host_window_.data(), tokens.vocab_size);
    std::copy_n(host_window_.begin(), block_, host_ids_.begin() + b * block_);
    std::copy_n(host_window_.begin() + 1, block_, host_targets_.begin() + b * block_);
  }
  const KernelTable& k = kernels_for(tokens.ids.target());
  k.upload(stream, out.ids.ids(), host_ids_.data(), host_ids_.size() * sizeof(std::int32_t));
  k.upload(stream, out.targets.ids(), host_targets_.data(),
           host_targets_.size() * sizeof(std::int32_t));
}

}  // namespace noeira

#pragma once
// Training windows of a token stream, resident on the run's target.
//
// A split's ids are uploaded once (ResidentTokens), checked against the vocabulary then and only
// then: every id a kernel reads was checked. A batch is `rows` windows of block + 1 consecutive
// tokens; window b's input ids are tokens [start_b, start_b + block) and its targets tokens
// [start_b + 1, start_b + block + 1): the next token of every input position.
//
// Where the windows start is drawn on the host by Philox from (seed, stream, step, global row)
// alone (window_start), never from the world size or the order of calls, so the global batch is
// the same for any number of ranks and a resumed run draws the windows the uninterrupted run
// would have. The starts of a whole period are uploaded at once; a batch is then built on the
// target from them with the kernel table's gather_rows and accumulate_typed (WindowGather): no
// token crosses the host-device boundary after the upload.
//
// A split of token shards (io/token_shards.hpp) is not uploaded: it stays in its files, and each
// batch's windows are read from them on the host, checked against the vocabulary as they are
// read, and uploaded (gather_from_shards). Its window starts are drawn the same way, as int64, so a
// split may hold more than 2^31 tokens.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/tensor.hpp"
#include "io/token_shards.hpp"
#include "train/text_data.hpp"
#include "train/tokenizer.hpp"

namespace noeira {

// One split's token ids on a target, or left in its token shards.
struct ResidentTokens {
  std::string name;  // "<corpus>/train", for messages
  std::int64_t count = 0;
  std::int64_t vocab_size = 0;
  Tensor ids;  // [count] I32, each in [0, vocab_size); [0] on the run's target for shards
  std::shared_ptr<const io::TokenStream> shards;  // token shards: the ids stay in their files
};

// A split of token shards: read where the windows fall, on a run on `target`.
ResidentTokens shard_tokens(std::shared_ptr<const io::TokenStream> stream,
                             std::int64_t vocab_size, Target target);

// Uploads `ids` to `target` after checking every id against the vocabulary (an InputError
// naming the split, the position and the id otherwise).
ResidentTokens make_resident_tokens(std::string name, std::span<const std::int32_t> ids,
                                    std::int64_t vocab_size, Target target);

// One split's text encoded straight into its resident ids, a block of text at a time, each block
// checked like make_resident_tokens' ids: the ids exist once, never as a host vector beside their
// tensor (a corpus of N bytes then costs N + 4N bytes rather than N + 8N). gpt2 encodes the split
// at once (a cut could split a BPE piece) into a host vector first: its count is known only then.
// `fingerprint` is carried on over the ids (hash_words), `unknown` counts the ids that are
// Tokenizer::kUnknownId.
ResidentTokens encode_resident_tokens(std::string name, const Tokenizer& tokenizer,
                                      std::string_view text, Target target,
                                      std::uint64_t& fingerprint, std::int64_t& unknown);

struct ResidentText {
  ResidentTokens train;
  ResidentTokens validation;
};
// Both splits of `data`, named "<corpus>/train" and "<corpus>/validation".
ResidentText make_resident_text(const TextData& data, Target target);

// The independent random streams of window starts: training batches are indexed by the global
// optimizer step, validation batches by their place in the fixed validation set.
enum class WindowStream : std::uint32_t {
  Train = 0x77747261,       // "wtra"
  Validation = 0x7776616c,  // "wval"
};

// The start of the window of global row `row` of batch `step`: uniform over the
// tokens - block starts that leave block + 1 tokens, a function of its arguments only.
std::int64_t window_start(std::uint64_t seed, WindowStream stream, std::int64_t step,
                          std::int64_t row, std::int64_t tokens, std::int64_t block);

// The starts of batches first_step .. first_step + steps - 1 of `batch` rows each, batch-major:
// element s · batch + r is window_start(seed, stream, first_step + s, r, tokens, block).
std::vector<std::int32_t> window_starts(std::uint64_t seed, WindowStream stream,
                                        std::int64_t first_step, std::int64_t steps,
                                        std::int64_t batch, std::int64_t tokens,
                                        std::int64_t block);
// The same starts as int64, for a split of shards of any length.
std::vector<std::int64_t> wide_window_starts(std::uint64_t seed, WindowStream stream,
                                             std::int64_t first_step, std::int64_t steps,
                                             std::int64_t batch, std::int64_t tokens,
                                             std::int64_t block);

// One rank's rows of a batch of windows. The tensors keep their storage from batch to batch.
struct WindowBatch {
  explicit WindowBatch(Target target = Target::Cpu)
      : ids({0, 0}, target, DType::I32), targets({0}, target, DType::I32) {}

  Tensor ids;      // [rows, block] I32: the model's input
  Tensor targets;  // [rows · block] I32: the token after each input position, row-major
};

// Builds batches of windows on a target. The position tables are made once, for up to
// max_rows windows of `block` tokens.
class WindowGather {
 public:
  WindowGather(std::int64_t max_rows, std::int64_t block, Target target);

  // out = the windows of starts[first .. first + rows) over `tokens`, on `stream`. `starts` is
  // a resident window_starts on the tokens' target, each start in [0, tokens.count - block).
  void gather(WindowBatch& out, const ResidentTokens& tokens, const Tensor& starts,
              std::int64_t first, std::int64_t rows, Stream stream);
  // The same for a split of shards, from host starts: the windows are read on the host (each id
  // checked) and uploaded.
  void gather_from_shards(WindowBatch& out, const ResidentTokens& tokens,
                     std::span<const std::int64_t> starts, std::int64_t first, std::int64_t rows,
                     Stream stream);

  std::int64_t block() const { return block_; }

 private:
  std::int64_t max_rows_;
  std::int64_t block_;
  Tensor row_;       // [max_rows · block] I32: b at position b · block + t
  Tensor position_;  // [max_rows · block] I32: t at position b · block + t
  Tensor index_;     // [max_rows · block] I32 scratch: the token index of each position
  std::vector<std::int32_t> host_window_;   // gather_from_shards: one window of block + 1 ids
  std::vector<std::int32_t> host_ids_;      // gather_from_shards: [rows · block] inputs
  std::vector<std::int32_t> host_targets_;  // gather_from_shards: [rows · block] targets
};

}  // namespace noeira

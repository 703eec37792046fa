#pragma once
// `noeira tokenize`: text files tokenized once into token shards (io/token_shards.hpp, llm.c's
// format) that `--data tokens` trains from.
//
// The corpus is the files named (a directory contributes its files by io/text.hpp's rules), each
// one document, in the order given: the shards hold, per document, GPT-2's <|endoftext|> and then
// the document's ids (llm.c's convention: the separator before each document). The stream's first
// `val_tokens` tokens are the validation shard, <prefix>_val_000000.bin; the rest follow in
// training shards of `shard_tokens`, <prefix>_train_000001.bin and on. The default validation is
// a tenth of the tokens, at most one shard's worth, so that any corpus of two tokens or more
// splits.
//
// Under mpirun the files are dealt to the ranks in order, in runs of about equal bytes; each rank
// encodes its own into a spill file, the ranks learn each other's token counts, and each writes
// its tokens into the shards at their place (the shards are the same for any number of ranks).
// The shards are written under hidden names and renamed only when complete: a run that fails
// leaves no shard a reader would take. An output directory that already holds shards is refused,
// and so is one that another tokenize is writing (rank 0 holds the directory's lock, as a
// training run holds its checkpoint directory's).
#include <mpi.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "train/tokenizer.hpp"

namespace noeira {

struct TokenizeConfig {
  std::vector<std::filesystem::path> inputs;  // files and directories
  std::filesystem::path out;                  // the shards' directory (created)
  TokenizerKind tokenizer = TokenizerKind::Gpt2;
  std::int64_t shard_tokens = 100'000'000;  // llm.c's FineWeb shards
  std::int64_t val_tokens = 0;              // 0: a tenth of the tokens, at most shard_tokens
  std::string prefix;                       // empty: the first input's name
};

struct TokenizeResult {
  std::int64_t documents = 0;
  std::uint64_t bytes = 0;
  std::int64_t tokens = 0;
  std::int64_t val_tokens = 0;
  std::vector<std::filesystem::path> shards;
  double seconds = 0;
  // Rank 0's own text and the time its tokenizer took on it: the encoding rate per core,
  // without reading, writing or the vocabulary's loading.
  std::uint64_t rank0_bytes = 0;
  double rank0_encode_seconds = 0;
};

// Tokenizes on the ranks of `comm` (MPI_COMM_NULL: this process alone); rank 0 prints a line of
// progress to stderr every 10 seconds. The configuration's errors, unreadable inputs and an
// output directory holding shards are InputErrors.
TokenizeResult run_tokenize(const TokenizeConfig& config, MPI_Comm comm);

}  // namespace noeira

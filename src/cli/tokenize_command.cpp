#include "cli/tokenize_command.hpp"

#include <cstdio>

#include "cli/bounds.hpp"
#include "cli/choice_option.hpp"

namespace noeira::cli {

void add_tokenize_command(CLI::App& app, TokenizeConfig& t) {
  CLI::App* a =
      app.add_subcommand("tokenize",
                         "Tokenize text files once into token shards (llm.c's .bin format) for "
                         "train --data tokens --data-dir DIR");
  a->option_defaults()->always_capture_default();
  a->add_option("inputs", t.inputs,
                "Text files and directories (a directory: its files, in name order); each file "
                "is one document, preceded by <|endoftext|>")
      ->required();
  a->add_option("-o,--out", t.out, "Directory of the shards (created; refused if it holds shards)")
      ->required();
  add_choice(*a, "--tokenizer", t.tokenizer, kTokenizerNames,
             "The tokenizer: gpt2 (GPT-2's byte-level BPE; shards hold uint16 ids)");
  a->add_option("--shard-tokens", t.shard_tokens, "Tokens per training shard")
      ->check(whole_in(1, INT32_MAX));
  a->add_option("--val-tokens", t.val_tokens,
                "Tokens of the validation shard, the stream's first (0: a tenth of the tokens, "
                "at most --shard-tokens)")
      ->check(whole_in(0, INT32_MAX));
  a->add_option("--prefix", t.prefix,
                "Shard names' prefix: <prefix>_val_000000.bin, <prefix>_train_000001.bin, ... "
                "(empty: the first input's name)");
}

int tokenize_main(const TokenizeConfig& t, MPI_Comm comm) {
  const TokenizeResult r = run_tokenize(t, comm);
  int rank = 0;
  if (comm != MPI_COMM_NULL) MPI_Comm_rank(comm, &rank);
  if (rank == 0) {
    std::printf("tokenized %lld documents (%.1f MB) into %lld tokens in %.1f s: %lld validation, "
                "%lld training, %zu shards in %s\n",
                static_cast<long long>(r.documents), static_cast<double>(r.bytes) / 1e6,
                static_cast<long long>(r.tokens), r.seconds, static_cast<long long>(r.val_tokens),
                static_cast<long long>(r.tokens - r.val_tokens), r.shards.size(),
                t.out.string().c_str());
    if (r.rank0_encode_seconds > 0) {
      std::printf("encoding %.2f MB/s per core (rank 0: %.1f MB in %.2f s)\n",
                  static_cast<double>(r.rank0_bytes) / 1e6 / r.rank0_encode_seconds,
                  static_cast<double>(r.rank0_bytes) / 1e6, r.rank0_encode_seconds);
    }
  }
  return 0;
}

}  // namespace noeira::cli

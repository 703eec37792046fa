#pragma once
// `noeira tokenize --tokenizer gpt2 -o DIR FILE...`: text files into token shards
// (train/tokenize.hpp); under mpirun the ranks share the files.
#include <CLI/CLI.hpp>

#include "train/tokenize.hpp"

namespace noeira::cli {

void add_tokenize_command(CLI::App& app, TokenizeConfig& t);

// Rank 0 prints what was written; comm is MPI_COMM_NULL outside mpirun.
int tokenize_main(const TokenizeConfig& t, MPI_Comm comm);

}  // namespace noeira::cli

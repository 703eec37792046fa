#pragma once
// The text of a language-modelling run as token ids: a corpus (io/text.hpp) tokenized
// (train/tokenizer.hpp) and split into training and validation ids.
//
// The split: the first 90% of the corpus's tokens (bytes or code points: floor(0.9 · tokens))
// train, the rest validate; in corpus order, so the validation text is the corpus's tail (for
// the fortunes corpus, the last files in name order). The char vocabulary is built from the
// training part only: a validation character it lacks becomes the unknown id (tokenizer.hpp),
// counted in `unknown_validation`, so the validation loss measures what a model trained on the
// training text can know.
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "io/text.hpp"
#include "train/tokenizer.hpp"

namespace noeira {

// Percent of the corpus's tokens that train.
inline constexpr std::int64_t kTrainPercent = 90;

struct TextData {
  std::string name;                      // the corpus path, for messages
  Tokenizer tokenizer;                   // built from the training part (char) or fixed (byte)
  std::vector<std::int32_t> train;       // the first 90% of the tokens
  std::vector<std::int32_t> validation;  // the rest
  std::int64_t unknown_validation = 0;   // validation tokens that are Tokenizer::kUnknownId
};

// A corpus cut into its training and validation text, with the tokenizer of the training part:
// what make_text_data tokenizes, and what a run encodes straight into its resident ids
// (train/text_windows.hpp) without the vectors of TextData.
struct TextSplit {
  Tokenizer tokenizer;
  std::string_view train;       // the first 90% of the corpus's tokens
  std::string_view validation;  // the rest
};

// Splits an in-memory corpus; the errors of make_text_data, without the name (the caller adds it).
TextSplit split_text(std::string_view corpus, TokenizerKind kind);

// Splits a corpus read from its files: an error names the corpus, and invalid UTF-8 (the char
// tokenizer) the file that holds it, at its offset in that file.
TextSplit split_corpus(const io::TextCorpus& corpus, TokenizerKind kind);

// Tokenizes and splits an in-memory corpus (`name` for messages). A corpus too short to leave
// a token in each part, or one that is not UTF-8 for the char tokenizer, is an InputError
// naming it.
TextData make_text_data(std::string name, std::string_view corpus, TokenizerKind kind);

// Reads the corpus at `path` (a file or a directory: io::read_text_corpus) and makes its data.
TextData load_text_data(const std::filesystem::path& path, TokenizerKind kind);

}  // namespace noeira

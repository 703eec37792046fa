#include "train/text_data.hpp"

#include <algorithm>

#include "io/text.hpp"
#include "kernels/error.hpp"

namespace noeira {

TextSplit split_text(std::string_view corpus, TokenizerKind kind) {
  const std::int64_t units = Tokenizer::split_units(kind, corpus);
  const std::int64_t train_units = units * kTrainPercent / 100;
  const std::size_t cut = train_units == 0 ? 0 : Tokenizer::split_offset(kind, corpus, train_units);
  if (train_units == 0 || cut == corpus.size()) {
    throw InputError(detail::concat("a corpus of ", units, " ", Tokenizer::split_unit(kind),
                                    "s is too short to split ", kTrainPercent, "/",
                                    100 - kTrainPercent, " into training and validation text"));
  }
  const std::string_view train_text = corpus.substr(0, cut);
  return TextSplit{Tokenizer::build(kind, train_text), train_text, corpus.substr(cut)};
}

TextSplit split_corpus(const io::TextCorpus& corpus, TokenizerKind kind) {
  try {
    return split_text(corpus.text, kind);
  } catch (const InvalidUtf8Error& e) {
    // The byte lies in the last file that starts at or before it.
    const auto next = std::upper_bound(corpus.starts.begin(), corpus.starts.end(), e.at());
    if (next != corpus.starts.begin() && corpus.starts.size() == corpus.files.size()) {
      const auto i = static_cast<std::size_t>(next - corpus.starts.begin()) - 1;
      throw InputError(detail::concat(corpus.files[i].string(), ": invalid UTF-8 at byte ",
                                      e.at() - corpus.starts[i], ": ", e.why()));
    }
    throw InputError(detail::concat(corpus.name, ": ", e.what()));
  } catch (const InputError& e) {
    throw InputError(detail::concat(corpus.name, ": ", e.what()));
  }
}

namespace {

TextData tokenized(std::string name, const TextSplit& split, TokenizerKind kind) {
  const Tokenizer& tokenizer = split.tokenizer;
  TextData data{std::move(name), tokenizer, tokenizer.encode(split.train),
                tokenizer.encode(split.validation), 0};
  for (std::int32_t id : data.validation) {
    if (kind == TokenizerKind::Char && id == Tokenizer::kUnknownId) ++data.unknown_validation;
  }
  return data;
}

}  // namespace

TextData make_text_data(std::string name, std::string_view corpus, TokenizerKind kind) {
  try {
    return tokenized(name, split_text(corpus, kind), kind);
  } catch (const InputError& e) {
    // The tokenizer's messages (invalid UTF-8 at byte N: a corpus offset) do not know the name.
    throw InputError(detail::concat(name, ": ", e.what()));
  }
}

TextData load_text_data(const std::filesystem::path& path, TokenizerKind kind) {
  const io::TextCorpus corpus = io::read_text_corpus(path);
  return tokenized(corpus.name, split_corpus(corpus, kind), kind);
}

}  // namespace noeira

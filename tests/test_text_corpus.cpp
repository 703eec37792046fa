// The text corpus reader (io/text.hpp) and the train / validation split (train/text_data.hpp):
// a directory reads its text files once in name order (no .dat indexes, no .u8 duplicates, no
// hidden files, no subdirectories); a FIFO, an empty corpus, a missing path and a corpus past
// the size cap are one-line errors naming the path; the split is 90/10 in tokens and never cuts
// a character.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <string>
#include <vector>

#include "expect_error.hpp"
#include "io/text.hpp"
#include "io_test_files.hpp"
#include "train/text_data.hpp"

namespace noeira {
namespace {

using testing::expect_input_error;
using testing::TempDir;

void write_text(const std::filesystem::path& file, const std::string& text, bool gzip = false) {
  testing::write_bytes(file, std::vector<std::uint8_t>(text.begin(), text.end()), gzip);
}

TEST(TextCorpus, ADirectoryReadsItsTextFilesOnceInNameOrder) {
  TempDir dir;
  // Written out of order: the listing order of the file system must not matter.
  write_text(dir / "b", "bee\n");
  write_text(dir / "a", "ay\n");
  write_text(dir / "c", "sea\n", /*gzip=*/true);              // compressed files read as their text
  write_text(dir / "a.dat", std::string("\x00\x01\x02", 3));  // fortune's index: binary
  std::filesystem::create_symlink("a", dir / "a.u8");         // Debian's duplicate of "a"
  write_text(dir / ".hidden", "editor swap file");
  std::filesystem::create_directory(dir / "sub");
  write_text(dir / "sub" / "deeper", "not read");

  const io::TextCorpus corpus = io::read_text_corpus(dir.path());
  EXPECT_EQ(corpus.text, "ay\nbee\nsea\n");
  ASSERT_EQ(corpus.files.size(), 3u);
  EXPECT_EQ(corpus.files[0].filename(), "a");
  EXPECT_EQ(corpus.files[2].filename(), "c");
  EXPECT_EQ(corpus.name, dir.path().string());
  // A single file is the corpus.
  EXPECT_EQ(io::read_text_corpus(dir / "b").text, "bee\n");
}

// Invalid UTF-8 in a directory's corpus is named by the file that holds it and the offset in that
// file, not by the directory and an offset into the concatenated text. Empty files in between
// start where the next one does.
TEST(TextCorpus, InvalidUtf8NamesItsFileAndItsOffsetThere) {
  TempDir dir;
  write_text(dir / "a", std::string(1000, 'x'));
  write_text(dir / "b", "");
  write_text(dir / "c", "good text\n", /*gzip=*/true);
  write_text(dir / "d", "caf\xe9 au lait\n");
  const io::TextCorpus corpus = io::read_text_corpus(dir.path());
  ASSERT_EQ(corpus.starts, (std::vector<std::uint64_t>{0, 1000, 1000, 1010}));
  expect_input_error([&] { split_corpus(corpus, TokenizerKind::Char); },
                     {(dir / "d").string() + ": invalid UTF-8 at byte 3: ", "byte tokenizer"});
  expect_input_error([&] { load_text_data(dir.path(), TokenizerKind::Char); },
                     {(dir / "d").string() + ": invalid UTF-8 at byte 3: "});
  // The byte tokenizer takes any bytes.
  EXPECT_EQ(split_corpus(corpus, TokenizerKind::Byte).train.size() +
                split_corpus(corpus, TokenizerKind::Byte).validation.size(),
            corpus.text.size());
  // One file: its own name.
  expect_input_error([&] { load_text_data(dir / "d", TokenizerKind::Char); },
                     {(dir / "d").string() + ": invalid UTF-8 at byte 3"});
}

TEST(TextCorpus, RefusesAFifoAsThePathAndInsideADirectory) {
  TempDir dir;
  const std::filesystem::path fifo = dir / "pipe";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // Opening a FIFO would block until a writer comes: refused before any open.
  expect_input_error([&] { io::read_text_corpus(fifo); }, {fifo.string(), "FIFO"});
  write_text(dir / "a", "text");
  expect_input_error([&] { io::read_text_corpus(dir.path()); }, {fifo.string(), "FIFO"});
}

TEST(TextCorpus, EmptyMissingAndOversizedCorporaAreErrors) {
  TempDir dir;
  std::filesystem::create_directory(dir / "empty");
  expect_input_error([&] { io::read_text_corpus(dir / "empty"); },
                     {(dir / "empty").string(), "empty text corpus"});
  write_text(dir / "empty" / "nothing.txt", "");
  write_text(dir / "empty" / "only.dat", "index");
  expect_input_error([&] { io::read_text_corpus(dir / "empty"); },
                     {(dir / "empty").string(), "empty text corpus", "1 file"});
  expect_input_error([&] { io::read_text_corpus(dir / "nope"); },
                     {(dir / "nope").string(), "not found"});

  std::filesystem::create_directory(dir / "big");
  write_text(dir / "big" / "a", std::string(60, 'a'));
  write_text(dir / "big" / "b", std::string(60, 'b'));
  EXPECT_EQ(io::read_text_corpus(dir / "big", 120).text.size(), 120u);
  // Each file is below the cap, the two together are not.
  expect_input_error([&] { io::read_text_corpus(dir / "big", 100); },
                     {(dir / "big").string(), "larger than 100 bytes"});
  // A compressed file's size says nothing: the cap holds while it is read.
  write_text(dir / "big.gz", std::string(5000, 'z'), /*gzip=*/true);
  expect_input_error([&] { io::read_text_corpus(dir / "big.gz", 4096); },
                     {(dir / "big.gz").string(), "larger than 4096 bytes"});
}

TEST(TextCorpus, TruncatedGzipIsAnError) {
  TempDir dir;
  std::string text(5000, 'a');
  for (std::size_t i = 0; i < text.size(); ++i) text[i] = static_cast<char>('a' + (i * 7) % 26);
  write_text(dir / "t.gz", text, /*gzip=*/true);
  std::filesystem::resize_file(dir / "t.gz", std::filesystem::file_size(dir / "t.gz") - 12);
  expect_input_error([&] { io::read_text_corpus(dir / "t.gz"); }, {(dir / "t.gz").string()});
}

TEST(TextSplit, NinetyPercentOfTheTokensTrainAndNoCharacterIsCut) {
  // 10 code points, 14 bytes: "é" and "ü" are two bytes each, "€" three.
  const std::string corpus =
      "abcd\xc3\xa9"
      "fgh\xc3\xbc\xe2\x82\xac";
  const TextData chars = make_text_data("t", corpus, TokenizerKind::Char);
  ASSERT_EQ(chars.train.size(), 9u);  // floor(0.9 · 10) code points
  ASSERT_EQ(chars.validation.size(), 1u);
  // The vocabulary is the training text's: "€" is only in the validation text.
  EXPECT_EQ(chars.tokenizer.vocab_size(), 1 + 9);
  EXPECT_EQ(chars.validation[0], Tokenizer::kUnknownId);
  EXPECT_EQ(chars.unknown_validation, 1);
  EXPECT_EQ(chars.tokenizer.decode(chars.train),
            "abcd\xc3\xa9"
            "fgh\xc3\xbc");

  const TextData bytes = make_text_data("t", corpus, TokenizerKind::Byte);
  EXPECT_EQ(bytes.train.size(), 12u);  // floor(0.9 · 14) bytes: the split may cut a character
  EXPECT_EQ(bytes.validation.size(), 2u);
  EXPECT_EQ(bytes.unknown_validation, 0);

  expect_input_error([] { make_text_data("tiny", "a", TokenizerKind::Byte); },
                     {"tiny", "too short to split"});
  expect_input_error([] { make_text_data("latin1.txt", "caf\xe9 au lait", TokenizerKind::Char); },
                     {"latin1.txt", "invalid UTF-8 at byte 3", "byte tokenizer"});
}

// The default corpus, when installed (Debian's fortunes): about 2.6 MB of text, every file once.
TEST(TextCorpus, TheFortunesCorpusReadsEachTextFileOnce) {
  const std::filesystem::path dir = io::default_text_corpus();
  if (!std::filesystem::exists(dir / "fortunes")) {
    GTEST_SKIP() << "the fortunes corpus is not installed at " << dir << " (apt install fortunes)";
  }
  const io::TextCorpus corpus = io::read_text_corpus(dir);
  for (const auto& f : corpus.files) {
    EXPECT_NE(f.extension(), ".dat");
    EXPECT_NE(f.extension(), ".u8");
  }
  EXPECT_GT(corpus.text.size(), 2'000'000u);
  EXPECT_LT(corpus.text.size(), 3'500'000u);
  const TextData data = make_text_data(corpus.name, corpus.text, TokenizerKind::Char);
  EXPECT_LT(data.tokenizer.vocab_size(), 200);  // English text with a few accents
}

}  // namespace
}  // namespace noeira

// The binary on text: a short GPT run on a corpus the test writes itself leaves its files with
// the vocabulary, and every mistake of a text run is a one-line error naming what is wrong.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "cli_test_util.hpp"
#include "h5_edit.hpp"
#include "io/params_file.hpp"
#include "io_test_files.hpp"

namespace noeira {
namespace {

using testing::Output;
using testing::TempDir;
using testing::expect_one_error_line;
using testing::noeira;

std::string write_corpus(const TempDir& dir) {
  const std::string file = (dir / "corpus.txt").string();
  std::ofstream out(file);
  for (int i = 0; i < 400; ++i) out << "a stitch in time saves nine, line " << i % 13 << "\n";
  return file;
}

TEST(CliText, AShortRunSavesTheModelWithItsVocabulary) {
  REQUIRE_BINARY();
  TempDir dir;
  const std::string corpus = write_corpus(dir);
  const std::string run = (dir / "run").string();
  const Output o = noeira(dir, "train --data text --model gpt-tiny --text-file " + corpus +
                                   " --steps 10 --eval-every 5 --eval-batches 1 --threads 1 "
                                   "--log-every 5 --out " + run);
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.out.find("eval 2/2"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("val loss"), std::string::npos) << o.out;
  EXPECT_EQ(o.out.find("acc"), std::string::npos) << "a language model has no accuracy: " << o.out;
  const auto vocabulary = io::read_params_attribute(run + "/model.h5", "vocabulary");
  ASSERT_TRUE(vocabulary.has_value());
  EXPECT_EQ(vocabulary->rfind("noeira-tokenizer 1\nchar ", 0), 0u) << *vocabulary;
  const Output g = noeira(dir, "generate --params " + run + "/model.h5 --prompt stitch --tokens 5");
  ASSERT_EQ(g.code, 0) << g.err;
  EXPECT_EQ(g.out.rfind("stitch", 0), 0u) << g.out;
}

// A recurrent LM trains at its preset's learning rate where the user gives none, over the text
// runs' default, and at the user's where one is given.
TEST(CliText, ARecurrentLmTakesItsPresetsLearningRate) {
  REQUIRE_BINARY();
  TempDir dir;
  const std::string run = "train --data text --model lstm-tiny --text-file " + write_corpus(dir) +
                          " --steps 2 --eval-every 2 --eval-batches 1 --threads 1 --out ";
  const Output preset = noeira(dir, run + (dir / "a").string());
  ASSERT_EQ(preset.code, 0) << preset.err;
  EXPECT_NE(preset.out.find("optimizer adamw lr 0.003 "), std::string::npos) << preset.out;
  const Output given = noeira(dir, run + (dir / "b").string() + " --lr 5e-4");
  ASSERT_EQ(given.code, 0) << given.err;
  EXPECT_NE(given.out.find("optimizer adamw lr 0.0005 "), std::string::npos) << given.out;
}

// generate refuses a model file whose stored vocabulary has more ids than the model has rows (an
// edited or foreign file) in one line; sampling would otherwise index past the logits.
TEST(CliText, GenerateRefusesAVocabularyLargerThanTheModel) {
  REQUIRE_BINARY();
  TempDir dir;
  const std::string corpus = write_corpus(dir);
  const auto model = dir / "run" / "model.h5";
  const Output o = noeira(dir, "train --data text --model gpt-tiny --text-file " + corpus +
                                   " --steps 2 --eval-every 2 --eval-batches 1 --threads 1 "
                                   "--log-every 0 --out " + (dir / "run").string());
  ASSERT_EQ(o.code, 0) << o.err;
  // 300 characters (a vocabulary of 301 ids) where gpt-tiny has 256 rows.
  std::string vocabulary = "noeira-tokenizer 1\nchar 300\n";
  for (int c = 0; c < 300; ++c) {
    char hex[16];
    std::snprintf(hex, sizeof hex, "%s%x", c == 0 ? "" : " ", 0x100 + c);
    vocabulary += hex;
  }
  vocabulary += "\n";
  {
    testing::h5edit::Edit edit(model);
    testing::h5edit::put_string(edit.get(), "vocabulary", vocabulary);
  }
  expect_one_error_line(
      noeira(dir, "generate --params " + model.string() + " --prompt a --tokens 2"),
      model.string() + ": its vocabulary has 301 ids, more than model 'gpt-tiny' has rows (256)");
}

TEST(CliText, MistakesAreOneLineErrors) {
  REQUIRE_BINARY();
  TempDir dir;
  const std::string corpus = write_corpus(dir);
  const std::string text = "train --data text --text-file " + corpus + " --threads 1 ";
  expect_one_error_line(noeira(dir, text + "--model mlp"), "model 'mlp' classifies images");
  expect_one_error_line(noeira(dir, "train --model gpt-tiny --data-dir " + (dir / "x").string()),
                        "model 'gpt-tiny' models text");
  expect_one_error_line(noeira(dir, text + "--epochs 2"), "--epochs does not apply to --data text");
  expect_one_error_line(noeira(dir, "train --steps 10"), "--steps does not apply to --data fashion");
  expect_one_error_line(noeira(dir, text + "--model gpt-tiny --steps 25 --eval-every 10"),
                        "eval");
  expect_one_error_line(noeira(dir, "train --data text --model gpt-tiny --text-file " +
                                        (dir / "missing.txt").string()),
                        "missing.txt");
  expect_one_error_line(noeira(dir, text + "--model gpt-tiny --tokenizer words"),
                        "--tokenizer");
  expect_one_error_line(noeira(dir, "generate --params " + (dir / "none.h5").string()),
                        "none.h5");
}

}  // namespace
}  // namespace noeira

// Token shards (io/token_shards.hpp) and `noeira tokenize` (train/tokenize.hpp): the shards hold
// <|endoftext|> and GPT-2's ids of each document in llm.c's format, the first the validation
// split; a directory's shards read back as one stream across shard boundaries; nanoGPT's
// header-less files read too; every kind of bad shard, name or directory is one InputError naming
// it; a language model trained from shards computes, bit for bit, what it computes
// from the same ids resident, under ZeRO-3 on two simulated ranks.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "catalogue_test_util.hpp"
#include "expect_error.hpp"
#include "gpu_skip.hpp"
#include "io/checkpoint_lock.hpp"
#include "io/token_shards.hpp"
#include "io_test_files.hpp"
#include "nn/gpt.hpp"
#include "train/gpt2_bpe.hpp"
#include "train/language_model.hpp"
#include "train/model_entry.hpp"
#include "train/run.hpp"
#include "train/text_data.hpp"
#include "train/tokenize.hpp"
#include "trainer_runs.hpp"

namespace noeira {
namespace {

using testing::expect_input_error;
using testing::TempDir;

void write_text(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// An llm.c shard of `tokens`, or a header-less one.
void write_shard(const std::filesystem::path& path, const std::vector<std::uint16_t>& tokens,
                 bool header = true) {
  std::ofstream out(path, std::ios::binary);
  if (header) {
    const std::vector<std::int32_t> h = io::shard_header(static_cast<std::int64_t>(tokens.size()));
    out.write(reinterpret_cast<const char*>(h.data()), static_cast<std::streamsize>(h.size() * 4));
  }
  out.write(reinterpret_cast<const char*>(tokens.data()),
            static_cast<std::streamsize>(tokens.size() * 2));
}

std::vector<std::int32_t> read_all(const io::TokenStream& s, std::int64_t vocab = 65536) {
  std::vector<std::int32_t> out(static_cast<std::size_t>(s.count()));
  s.read(0, s.count(), out.data(), vocab);
  return out;
}

TEST(Tokenize, WritesEachDocumentAfterEndOfTextIntoLlmcShards) {
  TempDir dir;
  std::filesystem::create_directories(dir / "text");
  const std::vector<std::string> docs = {"Hello world, it's a test.\n",
                                         "Second file: 42 numbers!\n",
                                         "The third; with   spaces\t\tand tabs.\n"};
  const char* names[] = {"d0", "d1", "d2"};
  for (std::size_t i = 0; i < docs.size(); ++i) write_text(dir / "text" / names[i], docs[i]);
  write_text(dir / "text" / "empty", "");  // adds nothing
  TokenizeConfig cfg;
  cfg.inputs = {dir / "text"};
  cfg.out = dir / "shards";
  cfg.shard_tokens = 7;
  const TokenizeResult r = run_tokenize(cfg, MPI_COMM_NULL);

  const Tokenizer gpt2 = Tokenizer::gpt2();
  std::vector<std::int32_t> expected;
  for (const std::string& doc : docs) {
    expected.push_back(Gpt2Bpe::kEndOfText);
    const std::vector<std::int32_t> ids = gpt2.encode(doc);
    expected.insert(expected.end(), ids.begin(), ids.end());
  }
  EXPECT_EQ(r.documents, 3);
  EXPECT_EQ(r.tokens, static_cast<std::int64_t>(expected.size()));
  const std::int64_t val = (r.tokens + 9) / 10;
  EXPECT_EQ(r.val_tokens, val);
  EXPECT_EQ(static_cast<std::int64_t>(r.shards.size()), 1 + (r.tokens - val + 6) / 7);
  EXPECT_EQ(r.shards.front().filename(), "text_val_000000.bin");
  EXPECT_EQ(r.shards[1].filename(), "text_train_000001.bin");

  // The header is llm.c's, byte for byte.
  std::ifstream first(r.shards[1], std::ios::binary);
  std::vector<std::int32_t> header(256);
  first.read(reinterpret_cast<char*>(header.data()), 1024);
  EXPECT_EQ(header[0], 20240520);
  EXPECT_EQ(header[1], 1);
  EXPECT_EQ(header[2], 7);
  EXPECT_EQ(std::accumulate(header.begin() + 3, header.end(), 0), 0);

  const io::TokenShards shards = io::open_token_shards(cfg.out);
  std::vector<std::int32_t> all = read_all(*shards.validation);
  const std::vector<std::int32_t> train = read_all(*shards.train);
  all.insert(all.end(), train.begin(), train.end());
  EXPECT_EQ(all, expected);
  // A read across shard boundaries.
  std::vector<std::int32_t> middle(10);
  shards.train->read(5, 10, middle.data(), 50257);
  EXPECT_EQ(middle,
            std::vector<std::int32_t>(expected.begin() + val + 5, expected.begin() + val + 15));

  // A second run into the same directory would overwrite: refused.
  expect_input_error([&] { run_tokenize(cfg, MPI_COMM_NULL); }, {"already holds token shards"});
  // And a directory another run is writing (its lock held) too, naming the holder.
  cfg.out = dir / "busy";
  const io::CheckpointDirLock held = io::CheckpointDirLock::acquire(cfg.out);
  expect_input_error([&] { run_tokenize(cfg, MPI_COMM_NULL); },
                     {"-o ", "busy: in use by another run (host "});
}

TEST(Tokenize, RefusesWhatCannotMakeShards) {
  TempDir dir;
  write_text(dir / "one", "a");
  TokenizeConfig cfg;
  cfg.inputs = {dir / "one"};
  cfg.out = dir / "out";
  cfg.tokenizer = TokenizerKind::Char;
  expect_input_error([&] { run_tokenize(cfg, MPI_COMM_NULL); }, {"--tokenizer", "gpt2"});
  cfg.tokenizer = TokenizerKind::Gpt2;
  cfg.val_tokens = 5;  // the corpus is 2 tokens
  expect_input_error([&] { run_tokenize(cfg, MPI_COMM_NULL); }, {"--val-tokens"});
  cfg.val_tokens = 0;
  cfg.prefix = ".hidden";
  expect_input_error([&] { run_tokenize(cfg, MPI_COMM_NULL); }, {"--prefix", "'.hidden'"});
  cfg.prefix = "a/b";
  expect_input_error([&] { run_tokenize(cfg, MPI_COMM_NULL); }, {"--prefix", "'a/b'"});
  cfg.prefix.clear();
  cfg.inputs = {dir / "missing"};
  expect_input_error([&] { run_tokenize(cfg, MPI_COMM_NULL); }, {"missing"});
  EXPECT_FALSE(std::filesystem::exists(dir / "out" / "one_val_000000.bin"));
}

TEST(Tokenize, TheDefaultPrefixIsTheFirstInputsNameNeverHidden) {
  TempDir dir;
  std::filesystem::create_directories(dir / ".corpus");
  write_text(dir / ".corpus" / "a.txt", "some text to tokenize, and more of it");
  TokenizeConfig cfg;
  cfg.out = dir / "out";
  cfg.inputs = {dir / ".corpus" / ""};  // "dir/": the directory's name
  EXPECT_EQ(run_tokenize(cfg, MPI_COMM_NULL).shards.front().filename(), "corpus_val_000000.bin");
  cfg.out = dir / "out2";
  cfg.inputs = {dir / ".corpus" / "a.txt"};
  EXPECT_EQ(run_tokenize(cfg, MPI_COMM_NULL).shards.front().filename(), "a_val_000000.bin");
}

TEST(TokenShards, NanoGptsHeaderlessFilesRead) {
  TempDir dir;
  write_shard(dir / "train.bin", {1, 2, 3, 4, 5}, false);
  write_shard(dir / "val.bin", {6, 7}, false);
  const io::TokenShards shards = io::open_token_shards(dir.path());
  EXPECT_EQ(read_all(*shards.train), (std::vector<std::int32_t>{1, 2, 3, 4, 5}));
  EXPECT_EQ(read_all(*shards.validation), (std::vector<std::int32_t>{6, 7}));
}

TEST(TokenShards, EveryBadShardIsOneErrorNamingIt) {
  const std::vector<std::uint16_t> tokens = {10, 20, 30, 40};
  struct Case {
    std::string what;
    std::function<void(const TempDir&)> damage;
    std::string error;
  };
  auto patch = [](const std::filesystem::path& path, std::int64_t offset, std::int32_t value) {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(offset);
    f.write(reinterpret_cast<const char*>(&value), 4);
  };
  const std::vector<Case> cases = {
      {"wrong magic", [&](const TempDir& d) { patch(d / "c_train_000001.bin", 0, 12345); },
       "c_train_000001.bin: magic 12345"},
      {"wrong version", [&](const TempDir& d) { patch(d / "c_train_000001.bin", 4, 2); },
       "c_train_000001.bin: version 2"},
      {"truncated",
       [&](const TempDir& d) { std::filesystem::resize_file(d / "c_train_000001.bin", 1024 + 5); },
       "c_train_000001.bin: its header says 4 tokens"},
      {"bytes after the tokens",
       [&](const TempDir& d) { std::filesystem::resize_file(d / "c_train_000001.bin", 1024 + 10); },
       "c_train_000001.bin: its header says 4 tokens"},
      {"shorter than a header",
       [&](const TempDir& d) { std::filesystem::resize_file(d / "c_train_000001.bin", 100); },
       "shorter than llm.c's header"},
      {"an unknown name", [&](const TempDir& d) { write_shard(d / "other.bin", tokens); },
       "other.bin: a .bin file that is neither"},
      {"no validation split",
       [&](const TempDir& d) { std::filesystem::remove(d / "c_val_000000.bin"); },
       "holds 1 training and 0 validation shards"},
      {"an odd header-less file", [&](const TempDir& d) { write_text(d / "train.bin", "abc"); },
       "train.bin: 3 bytes"},
      {"an empty shard", [&](const TempDir& d) { write_shard(d / "c_train_000002.bin", {}); },
       "c_train_000002.bin: holds no tokens"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    TempDir dir;
    write_shard(dir / "c_val_000000.bin", tokens);
    write_shard(dir / "c_train_000001.bin", tokens);
    c.damage(dir);
    expect_input_error([&] { io::open_token_shards(dir.path()); }, {c.error});
  }
  TempDir dir;
  write_shard(dir / "c_val_000000.bin", tokens);
  write_shard(dir / "c_train_000001.bin", {1, 2, 50257, 3});
  const io::TokenShards shards = io::open_token_shards(dir.path());
  std::vector<std::int32_t> out(4);
  expect_input_error([&] { shards.train->read(0, 4, out.data(), 50257); },
                     {"c_train_000001.bin: token 2 is 50257, outside the vocabulary [0, 50257)"});
  expect_input_error([&] { io::open_token_shards(dir / "c_val_000000.bin"); },
                     {"not a directory of token shards"});
}

// A small GPT on the same ids, resident and read from shards (the training split cut into two
// shards, so windows straddle them): the same losses and parameters, bit for bit.
TEST(TokenShards, TrainingFromShardsIsResidentTrainingBitForBit) {
  using Model = Gpt<GptShape{48, 8, 2, 2, 16}>;
  std::string text;
  for (int i = 0; i < 200; ++i)
    text += "the quick brown fox jumps over the lazy dog " + std::to_string(i % 7) + "\n";
  const TextData data = make_text_data("corpus", text, TokenizerKind::Char);
  const ResidentText resident = make_resident_text(data, Target::Cpu);
  TempDir dir;
  const std::vector<std::uint16_t> train(data.train.begin(), data.train.end());
  const std::vector<std::uint16_t> val(data.validation.begin(), data.validation.end());
  const std::size_t half = train.size() / 2 + 3;
  write_shard(dir / "c_val_000000.bin", val);
  write_shard(
      dir / "c_train_000001.bin",
      std::vector<std::uint16_t>(train.begin(), train.begin() + static_cast<std::ptrdiff_t>(half)));
  write_shard(
      dir / "c_train_000002.bin",
      std::vector<std::uint16_t>(train.begin() + static_cast<std::ptrdiff_t>(half), train.end()));
  const io::TokenShards shards = io::open_token_shards(dir.path());
  const std::int64_t vocab = data.tokenizer.vocab_size();
  const ResidentText sharded{shard_tokens(shards.train, vocab, Target::Cpu),
                             shard_tokens(shards.validation, vocab, Target::Cpu)};

  TrainConfig cfg;
  cfg.optimizer = OptimizerKind::AdamW;
  cfg.lr = 3e-3;
  cfg.batch = 6;
  cfg.log_every = 1;
  cfg.seed = 2;
  LanguageModelOptions o;
  o.steps = 8;
  o.eval_every = 4;
  o.eval_batches = 2;
  o.batch = cfg.batch;
  o.block = 8;
  o.seed = cfg.seed;
  auto run = [&](const ResidentText& text) {
    return testing::train_simulated<Model>(dist::Policy::Zero3, 2, cfg, [&] {
      return LanguageModelTask(text.train, text.validation, o);
    });
  };
  const testing::TrainerRun a = run(resident);
  const testing::TrainerRun b = run(sharded);
  EXPECT_EQ(a.losses, b.losses);
  EXPECT_EQ(a.params, b.params);
  EXPECT_EQ(a.summary.last.test_loss, b.summary.last.test_loss);
  EXPECT_EQ(a.losses.size(), 8u);
}

// The library's TrainConfig leaves the tokenizer at char, a text run's default: shards then read
// as GPT-2's ids (a default never fails a run), and the saved model says gpt2.
TEST(TokenShards, ALibraryRunWithTheDefaultTokenizerReadsGpt2Ids) {
  using Model = Gpt<GptShape{50257, 8, 1, 2, 16}>;
  const testing::InstalledCatalogue installed{
      ModelCatalogue({model_entry<Model>("gpt2-mini", "GPT-2's ids, for a test")})};
  TempDir dir;
  std::vector<std::uint16_t> tokens(400);
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    tokens[i] = static_cast<std::uint16_t>((i * 7919) % 50257);
  }
  write_shard(dir / "c_val_000000.bin", tokens);
  write_shard(dir / "c_train_000001.bin", tokens);
  TrainConfig cfg;
  cfg.model = "gpt2-mini";
  cfg.data = DatasetKind::Tokens;
  cfg.data_dir = dir.path().string();
  cfg.steps = 2;
  cfg.eval_every = 2;
  cfg.eval_batches = 1;
  cfg.batch = 2;
  cfg.threads = 1;
  cfg.out = (dir / "run").string();
  ASSERT_EQ(cfg.tokenizer, TokenizerKind::Char);
  const TrainOutcome outcome = run_train(cfg);
  EXPECT_EQ(outcome.summary.steps, 2);
  TrainConfig eval_cfg = cfg;
  eval_cfg.params = (dir / "run" / "model.h5").string();
  EXPECT_GT(run_eval(eval_cfg).loss, 0.0);
}

// The peak resident memory, in KiB, of the noeira binary run with `args` (which must succeed).
long peak_rss_kib(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  const std::string binary = NOEIRA_BINARY;
  argv.push_back(const_cast<char*>(binary.c_str()));
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int null = ::open("/dev/null", O_WRONLY);
    ::dup2(null, 1);
    ::execv(binary.c_str(), argv.data());
    ::_exit(127);
  }
  int status = 0;
  rusage usage{};
  ::wait4(pid, &status, 0, &usage);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "noeira exited with " << status;
  return usage.ru_maxrss;
}

// Training from shards reads windows: a corpus 8 times larger (32 M tokens against 4 M: 64 MB of
// shards, 128 MB as resident int32 ids) leaves the peak RSS within 10 %.
TEST(TokenShards, PeakMemoryDoesNotGrowWithTheCorpus) {
  if (std::string(NOEIRA_BINARY).empty()) GTEST_SKIP() << "the noeira binary is not built";
  TempDir dir;
  std::vector<std::uint16_t> tokens(std::size_t{1} << 22);
  std::uint32_t state = 12345;
  for (std::uint16_t& t : tokens) {
    state = state * 1664525u + 1013904223u;
    t = static_cast<std::uint16_t>((state >> 8) % 50257);
  }
  auto run = [&](const std::string& name, int train_shards) {
    const std::filesystem::path shards = dir / name;
    std::filesystem::create_directories(shards);
    write_shard(shards / "c_val_000000.bin",
                std::vector<std::uint16_t>(tokens.begin(), tokens.begin() + 100000));
    for (int i = 1; i <= train_shards; ++i) {
      write_shard(shards / io::shard_name("c", i), tokens);
    }
    return peak_rss_kib({"train",
                         "--data",
                         "tokens",
                         "--data-dir",
                         shards.string(),
                         "--model",
                         "gpt2-tiny",
                         "--block",
                         "32",
                         "--batch",
                         "4",
                         "--steps",
                         "4",
                         "--eval-every",
                         "2",
                         "--eval-batches",
                         "1",
                         "--threads",
                         "1",
                         "--out",
                         (dir / ("run-" + name)).string()});
  };
  const long small = run("small", 1);
  const long large = run("large", 8);
  EXPECT_LT(std::abs(large - small), small / 10)
      << "peak RSS " << small << " KiB on 4 M tokens, " << large << " KiB on 32 M";
}

// The windows a CUDA run reads from shards (read on the host, uploaded) are the windows
// the CPU gathers from the same ids resident.
TEST(CudaTokenShards, WindowsFromShardsMatchTheCpusResidentWindows) {
  NOEIRA_REQUIRE_GPU();
  TempDir dir;
  std::vector<std::uint16_t> tokens(500);
  for (std::size_t i = 0; i < tokens.size(); ++i)
    tokens[i] = static_cast<std::uint16_t>((i * 37) % 97);
  write_shard(dir / "c_val_000000.bin", tokens);
  write_shard(dir / "c_train_000001.bin",
              std::vector<std::uint16_t>(tokens.begin(), tokens.begin() + 200));
  write_shard(dir / "c_train_000002.bin",
              std::vector<std::uint16_t>(tokens.begin() + 200, tokens.end()));
  const io::TokenShards shards = io::open_token_shards(dir.path());
  const ResidentTokens gpu = shard_tokens(shards.train, 97, Target::Cuda);
  const std::vector<std::int32_t> ids(tokens.begin(), tokens.end());
  const ResidentTokens cpu = make_resident_tokens("cpu", ids, 97, Target::Cpu);
  const std::vector<std::int64_t> wide =
      wide_window_starts(5, WindowStream::Train, 0, 1, 6, 500, 16);
  const std::vector<std::int32_t> narrow(wide.begin(), wide.end());
  const Tensor starts = Tensor::from_host_ids({6}, narrow, Target::Cpu);
  WindowGather on_gpu(6, 16, Target::Cuda), on_cpu(6, 16, Target::Cpu);
  WindowBatch a(Target::Cuda), b(Target::Cpu);
  on_gpu.gather_from_shards(a, gpu, wide, 1, 5, Stream{});
  on_cpu.gather(b, cpu, starts, 1, 5, Stream{});
  EXPECT_EQ(a.ids.to_ids(), b.ids.to_ids());
  EXPECT_EQ(a.targets.to_ids(), b.targets.to_ids());
}

}  // namespace
}  // namespace noeira

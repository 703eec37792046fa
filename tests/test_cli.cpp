// The noeira binary end to end, on a tiny data directory the test writes itself (and on the real
// Fashion-MNIST when installed): options and their defaults in --help, the JSON config with flags
// overriding it, the files a run leaves, eval agreeing with training's last evaluation, identical
// metrics for the same seed, and one-line errors with a non-zero exit.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli_test_util.hpp"
#include "gpu_skip.hpp"
#include "io/params_file.hpp"
#include "io_test_files.hpp"
#include "saved_params.hpp"
#include "train/metrics.hpp"
#include "train/presets.hpp"

namespace noeira {
namespace {

using testing::Output;
using testing::TempDir;
using testing::expect_one_error_line;
using testing::inspect_tensors;
using testing::noeira;
using testing::saved_mlp;
using testing::slurp;

std::vector<nlohmann::json> read_records(const std::filesystem::path& file) {
  std::vector<nlohmann::json> out;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

TEST(Cli, HelpListsEveryOptionWithItsDefault) {
  REQUIRE_BINARY();
  TempDir dir;
  const Output o = noeira(dir, "train --help");
  EXPECT_EQ(o.code, 0);
  for (const char* s : {"--model TEXT=mlp",
                        "--data TEXT:{fashion-mnist,mnist,cifar10,npy,h5,arrays,text,tokens}=fashion-mnist",
                        "--tokenizer TEXT:{char,byte,gpt2}=char",
                        "--epochs INT:[1..1000000]=5", "--batch INT:[1..1000000]=100", "=adam",
                        "--lr FLOAT:[1e-12..1e+30]=0.001", "--weight-decay", "--schedule", "--warmup",
                        "--min-lr", "--grad-clip", "--seed UINT=1", "--threads", "--out",
                        "--log-format", "--log-every", "--config", "--data-dir", "--limit-train",
                        "--train-x", "--train-y", "--test-x", "--test-y",
                        "--policy TEXT:{ddp,zero1,zero2,zero3}=ddp", "--sim-ranks", "--bucket-mb",
                        "--batchnorm TEXT:{sync,local}=sync",
                        "--watchdog-timeout", "--report-memory", "--checkpoint-dir",
                        "--checkpoint-every", "--keep-last INT:[0..1000000]=3", "--resume",
                        "--device TEXT:{cpu,cuda}=cpu", "--allow-tf32"}) {
    EXPECT_NE(o.out.find(s), std::string::npos) << s;
  }
  const Output top = noeira(dir, "--help");
  EXPECT_NE(top.out.find("train"), std::string::npos);
  EXPECT_NE(top.out.find("eval"), std::string::npos);
  EXPECT_NE(top.out.find("inspect"), std::string::npos);
  EXPECT_NE(top.out.find("tokenize"), std::string::npos);
  const Output tokenize = noeira(dir, "tokenize --help");
  EXPECT_EQ(tokenize.code, 0);
  for (const char* s : {"--tokenizer TEXT:{char,byte,gpt2}=gpt2", "--shard-tokens INT",
                        "--val-tokens", "--prefix", "-o,--out"}) {
    EXPECT_NE(tokenize.out.find(s), std::string::npos) << s;
  }
}

TEST(Cli, BadFlagsAreOneLineErrors) {
  REQUIRE_BINARY();
  TempDir dir;
  Output o = noeira(dir, "train --bogus");
  expect_one_error_line(o, "--bogus");
  EXPECT_EQ(o.code, 2);
  expect_one_error_line(noeira(dir, "train --optimizer lamb"), "lamb");
  expect_one_error_line(noeira(dir, "train --epochs 0"), "epochs");
  expect_one_error_line(noeira(dir, ""), "subcommand");
  expect_one_error_line(noeira(dir, "train --model resnet --data-dir " + dir.path().string()),
                        "unknown model 'resnet'");
  expect_one_error_line(noeira(dir, "train --batchnorm global"), "--batchnorm");
  // A flag that cannot apply is an error, not a silent no-op.
  expect_one_error_line(noeira(dir, "train --model mlp --batchnorm local"),
                        "--batchnorm local: model 'mlp' has no batch normalization");
  expect_one_error_line(noeira(dir, "train --policy zero2 --zero3-persist-below 1000"),
                        "--zero3-persist-below applies to --policy zero3 only");
  expect_one_error_line(noeira(dir, "train --policy ddp --no-zero3-prefetch"),
                        "--no-zero3-prefetch applies to --policy zero3 only");
  expect_one_error_line(noeira(dir, "train --model cnn --checkpoint-activations"),
                        "--checkpoint-activations: model 'cnn' has no blocks to checkpoint");
  expect_one_error_line(noeira(dir, "train --fp32-activations"),
                        "--fp32-activations applies to --precision bf16 only");
  expect_one_error_line(noeira(dir, "train --model mlp --precision bf16 --fp32-activations"),
                        "--fp32-activations: model 'mlp' holds no activation in bf16");
  expect_one_error_line(noeira(dir, "train --sim-ranks-per-node 2"),
                        "--sim-ranks-per-node 2 needs --sim-ranks of at least as many ranks "
                        "(got --sim-ranks 0)");
  expect_one_error_line(noeira(dir, "train --sim-ranks 2 --sim-ranks-per-node 3"),
                        "--sim-ranks-per-node 3 needs --sim-ranks of at least as many ranks "
                        "(got --sim-ranks 2)");
}

TEST(Cli, MissingOrBadDataNamesTheFile) {
  REQUIRE_BINARY();
  TempDir dir;
  Output o = noeira(dir, "train --data-dir " + (dir / "nowhere").string());
  expect_one_error_line(o, (dir / "nowhere" / "train-images-idx3-ubyte.gz").string());
  EXPECT_EQ(o.code, 1);
  testing::write_tiny_mnist(dir / "data", 40, 20, false);
  std::filesystem::resize_file(dir / "data" / "t10k-images-idx3-ubyte", 16 + 784 * 5);
  o = noeira(dir, "train --data-dir " + (dir / "data").string() + " --out " + (dir / "run").string());
  expect_one_error_line(o, (dir / "data" / "t10k-images-idx3-ubyte").string() + ": truncated");
}

TEST(Cli, TrainWritesItsFilesAndEvalAgreesWithTheLastEpoch) {
  REQUIRE_BINARY();
  TempDir dir;
  testing::write_tiny_mnist(dir / "data", 300, 100, true);
  // The config sets epochs, batch and lr; the flag overrides its lr.
  std::ofstream(dir / "cfg.json") << R"({"epochs": 2, "batch": 30, "lr": 0.5, "log_every": 4,
                                         "data-dir": ")" << (dir / "data").string() << R"("})";
  const std::string run = (dir / "run").string();
  const Output o = noeira(dir, "train --config " + (dir / "cfg.json").string() +
                                   " --lr 0.002 --threads 1 --out " + run);
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_NE(o.out.find("epoch 2/2"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("test acc"), std::string::npos) << o.out;
  EXPECT_EQ(o.out.find('\r'), std::string::npos) << "no progress bar when not a terminal";

  const nlohmann::json cfg = nlohmann::json::parse(slurp(dir / "run" / "config.json"));
  EXPECT_EQ(cfg["epochs"], 2);
  EXPECT_EQ(cfg["batch"], 30);
  EXPECT_DOUBLE_EQ(cfg["lr"].get<double>(), 0.002);
  EXPECT_EQ(cfg["threads"], 1);

  const auto records = read_records(dir / "run" / "metrics.jsonl");
  // 10 steps per epoch, records at steps 4 and 8 (and 12, 16, 20): 2 + 1 + 3 + 1 records.
  ASSERT_EQ(records.size(), 7u);
  EXPECT_EQ(records[2]["type"], "epoch");
  const nlohmann::json& last = records.back();
  EXPECT_GT(last["test_accuracy"].get<double>(), 0.9) << last.dump();

  const Output e = noeira(dir, "eval --params " + run + "/model.h5 --data-dir " +
                                   (dir / "data").string() + " --log-format json");
  ASSERT_EQ(e.code, 0) << e.err;
  const nlohmann::json ev = nlohmann::json::parse(e.out);
  // Same parameters, same test split: the same numbers as the last epoch's evaluation.
  EXPECT_EQ(ev["test_accuracy"].get<double>(), last["test_accuracy"].get<double>());
  EXPECT_DOUBLE_EQ(ev["test_loss"].get<double>(), last["test_loss"].get<double>());
  EXPECT_EQ(ev["test_samples"], 100);

  // The run's own config.json serves eval too (train-only keys are skipped).
  const Output e2 = noeira(dir, "eval --config " + run + "/config.json --params " + run +
                                    "/model.h5 --log-format json");
  ASSERT_EQ(e2.code, 0) << e2.err;
  EXPECT_EQ(nlohmann::json::parse(e2.out)["test_accuracy"], ev["test_accuracy"]);

  expect_one_error_line(noeira(dir, "eval --params " + run + "/model.h5 --model mlp-cifar --data-dir " +
                                        (dir / "data").string()),
                        "model 'mlp-cifar' takes 3072 inputs");
  expect_one_error_line(noeira(dir, "eval --params " + (dir / "none.h5").string()),
                        (dir / "none.h5").string());
  std::ofstream(dir / "bad.json") << R"({"epochs": 1, "learning_rate": 3})";
  expect_one_error_line(noeira(dir, "train --config " + (dir / "bad.json").string()),
                        "unknown option 'learning_rate'");
}

TEST(Cli, SameSeedGivesTheSameMetricsFile) {
  REQUIRE_BINARY();
  TempDir dir;
  testing::write_tiny_mnist(dir / "data", 200, 50, false);
  const std::string common = "train --data-dir " + (dir / "data").string() +
                             " --epochs 2 --batch 20 --log-every 3 --seed 9 --out ";
  // The same thread count for both: OpenBLAS 0.3.21's sgemm rounds differently with 1 and 2
  // threads at these shapes (K = 784), so runs agree bit for bit only at equal thread counts.
  ASSERT_EQ(noeira(dir, common + (dir / "a").string() + " --threads 2").code, 0);
  ASSERT_EQ(noeira(dir, common + (dir / "b").string() + " --threads 2").code, 0);
  const auto a = read_records(dir / "a" / "metrics.jsonl");
  const auto b = read_records(dir / "b" / "metrics.jsonl");
  ASSERT_EQ(a.size(), b.size());
  ASSERT_GT(a.size(), 3u);
  for (std::size_t i = 0; i < a.size(); ++i) {
    nlohmann::json x = a[i], y = b[i];
    for (std::string_view f : kTimingFields) {
      x.erase(std::string(f));
      y.erase(std::string(f));
    }
    EXPECT_EQ(x.dump(), y.dump()) << "record " << i;
  }
}

TEST(Cli, ShortRunOnFashionMnistReducesTheLoss) {
  REQUIRE_BINARY();
  const std::filesystem::path data = "/usr/share/datasets/fashion-mnist";
  if (!std::filesystem::exists(data / "train-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << "Fashion-MNIST not installed at " << data;
  }
  TempDir dir;
  const Output o = noeira(dir, "train --epochs 1 --limit-train 2000 --limit-test 1000 "
                               "--log-every 4 --log-format json --out " + (dir / "run").string());
  ASSERT_EQ(o.code, 0) << o.err;
  const auto records = read_records(dir / "run" / "metrics.jsonl");
  ASSERT_EQ(records.size(), 6u);  // steps 4, 8, 12, 16, 20 and the epoch
  const double first = records[0]["loss"], last = records[4]["loss"];
  EXPECT_LT(last, 0.6 * first) << first << " -> " << last;
  EXPECT_GT(records[5]["test_accuracy"].get<double>(), 0.65);
  // --log-format json: stdout is the same records, one per line.
  std::istringstream lines(o.out);
  int n = 0;
  for (std::string line; std::getline(lines, line); ++n) {
    EXPECT_EQ(nlohmann::json::parse(line)["type"], records[static_cast<std::size_t>(n)]["type"]);
  }
  EXPECT_EQ(n, 6);
}

double last_accuracy(const std::filesystem::path& metrics) {
  return read_records(metrics).back()["test_accuracy"].get<double>();
}

#define REQUIRE_FASHION_MNIST()                                                           \
  do {                                                                                    \
    if (!std::filesystem::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")) \
      GTEST_SKIP() << "Fashion-MNIST not installed at /usr/share/datasets/fashion-mnist";  \
  } while (0)

// A small Fashion-MNIST run, 2 epochs of 20 steps, one thread per rank.
const std::string kSmallRun =
    "train --limit-train 2000 --limit-test 1000 --epochs 2 --threads 1 --log-every 0 ";

TEST(CliDistributed, SimulatedRanksMatchOneRank) {
  REQUIRE_BINARY();
  REQUIRE_FASHION_MNIST();
  TempDir dir;
  const Output one = noeira(dir, kSmallRun + "--sim-ranks 1 --out " + (dir / "one").string());
  ASSERT_EQ(one.code, 0) << one.err;
  EXPECT_NE(one.out.find("1 rank (simulated), device cpu, policy ddp"), std::string::npos) << one.out;
  const std::vector<float> reference = saved_mlp(dir / "one" / "model.h5");
  double max_p = 0.0;
  for (float p : reference) max_p = std::max(max_p, static_cast<double>(std::fabs(p)));
  const double tol = 1e-4 * max_p + 1e-6;
  const double accuracy = last_accuracy(dir / "one" / "metrics.jsonl");
  EXPECT_GT(accuracy, 0.7);

  // 4 ranks under ZeRO-2 (25 rows each), 3 under ZeRO-1 (uneven rows and shards): the global
  // batch is the same, only the summation order of the gradient differs.
  for (const std::string args : {"--sim-ranks 4 --policy zero2", "--sim-ranks 3 --policy zero1"}) {
    const std::filesystem::path out = dir / ("many-" + args.substr(12, 1));  // a run's own
    const Output many = noeira(dir, kSmallRun + args + " --out " + out.string());
    ASSERT_EQ(many.code, 0) << args << ": " << many.err;
    const std::vector<float> values = saved_mlp(out / "model.h5");
    ASSERT_EQ(values.size(), reference.size());
    double worst = 0.0;
    for (std::size_t i = 0; i < values.size(); ++i) {
      worst = std::max(worst, static_cast<double>(std::fabs(values[i] - reference[i])));
    }
    EXPECT_LE(worst, tol) << args;
    EXPECT_NEAR(last_accuracy(out / "metrics.jsonl"), accuracy, 0.005) << args;
  }
}

TEST(CliDistributed, Zero3MatchesDdpBitForBitAndReportsMemoryPerRank) {
  REQUIRE_BINARY();
  REQUIRE_FASHION_MNIST();
  TempDir dir;
  const Output ddp =
      noeira(dir, kSmallRun + "--sim-ranks 2 --policy ddp --out " + (dir / "ddp").string());
  ASSERT_EQ(ddp.code, 0) << ddp.err;
  const Output zero3 = noeira(dir, kSmallRun + "--sim-ranks 2 --policy zero3 --report-memory " +
                                       "--out " + (dir / "zero3").string());
  ASSERT_EQ(zero3.code, 0) << zero3.err;
  EXPECT_EQ(saved_mlp(dir / "ddp" / "model.h5"), saved_mlp(dir / "zero3" / "model.h5"));
  EXPECT_EQ(last_accuracy(dir / "ddp" / "metrics.jsonl"),
            last_accuracy(dir / "zero3" / "metrics.jsonl"));
  // One line per rank, in rank order.
  const std::size_t r0 = zero3.out.find("[rank 0] memory: rank 0/2 zero3: params");
  const std::size_t r1 = zero3.out.find("[rank 1] memory: rank 1/2 zero3: params");
  EXPECT_NE(r0, std::string::npos) << zero3.out;
  EXPECT_NE(r1, std::string::npos) << zero3.out;
  EXPECT_LT(r0, r1);
  EXPECT_EQ(ddp.out.find("memory:"), std::string::npos) << "only with --report-memory";
}

TEST(CliDistributed, BadDistributedOptionsAreOneLineErrors) {
  REQUIRE_BINARY();
  TempDir dir;
  expect_one_error_line(noeira(dir, "train --policy zero4"), "zero4");
  expect_one_error_line(noeira(dir, "train --sim-ranks -1"), "sim-ranks");
  expect_one_error_line(noeira(dir, "train --watchdog-timeout 0"), "watchdog-timeout");
}

TEST(CliCuda, DeviceErrorsAreOneLineAndComeBeforeTheData) {
  REQUIRE_BINARY();
  TempDir dir;
  // The data directory does not exist: the device is checked first.
  const std::string nowhere = " --data-dir " + (dir / "nowhere").string();
  expect_one_error_line(noeira(dir, "train --device tpu" + nowhere), "tpu");
  expect_one_error_line(noeira(dir, "train --allow-tf32" + nowhere), "--allow-tf32");
  expect_one_error_line(noeira(dir, "train --precision fp16" + nowhere), "--precision");
  if (cuda_available()) GTEST_SKIP() << "a GPU is present: --device cuda is no error here";
  const Output o = noeira(dir, "train --device cuda" + nowhere);
  expect_one_error_line(o, "--device cuda");
  EXPECT_EQ(o.code, 1);
  expect_one_error_line(noeira(dir, "eval --device cuda --params x.h5" + nowhere), "--device cuda");
}

TEST(CliCuda, TrainsOnTheGpuLikeOnTheCpu) {
  REQUIRE_BINARY();
  NOEIRA_REQUIRE_GPU();
  // A GPU machine may carry the data set elsewhere (benchmarks/gpu_deps.sh).
  const char* env_dir = std::getenv("NOEIRA_FASHION_MNIST_DIR");
  const std::filesystem::path data =
      env_dir != nullptr ? env_dir : "/usr/share/datasets/fashion-mnist";
  if (!std::filesystem::exists(data / "train-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << "Fashion-MNIST not found at " << data << " (set NOEIRA_FASHION_MNIST_DIR)";
  }
  TempDir dir;
  const std::string run = kSmallRun + "--data-dir " + data.string() + " ";
  const Output cpu = noeira(dir, run + "--out " + (dir / "cpu").string());
  ASSERT_EQ(cpu.code, 0) << cpu.err;
  const Output gpu = noeira(dir, run + "--device cuda --out " + (dir / "gpu").string());
  ASSERT_EQ(gpu.code, 0) << gpu.err;
  EXPECT_NE(gpu.out.find("device cuda"), std::string::npos) << gpu.out;
  EXPECT_NEAR(last_accuracy(dir / "gpu" / "metrics.jsonl"),
              last_accuracy(dir / "cpu" / "metrics.jsonl"), 0.01);
  // Simulated ranks on the one GPU under ZeRO-3, and eval of its parameters on the GPU.
  const Output sim = noeira(dir, run + "--device cuda --sim-ranks 3 --policy zero3 --out " +
                                     (dir / "sim").string());
  ASSERT_EQ(sim.code, 0) << sim.err;
  EXPECT_NE(sim.out.find("3 ranks (simulated), device cuda"), std::string::npos) << sim.out;
  const double sim_accuracy = last_accuracy(dir / "sim" / "metrics.jsonl");
  EXPECT_NEAR(sim_accuracy, last_accuracy(dir / "gpu" / "metrics.jsonl"), 0.01);
  const Output eval = noeira(dir, "eval --device cuda --data-dir " + data.string() +
                                      " --params " + (dir / "sim" / "model.h5").string());
  ASSERT_EQ(eval.code, 0) << eval.err;
  // bf16 products on the GPU train as those of the CPU do (the same rounding, sums in another
  // order). That they round at all is CudaBf16's check.
  const Output cpu_bf16 = noeira(dir, run + "--precision bf16 --out " + (dir / "cpu16").string());
  ASSERT_EQ(cpu_bf16.code, 0) << cpu_bf16.err;
  const Output gpu_bf16 =
      noeira(dir, run + "--device cuda --precision bf16 --out " + (dir / "gpu16").string());
  ASSERT_EQ(gpu_bf16.code, 0) << gpu_bf16.err;
  EXPECT_NE(gpu_bf16.out.find("device cuda (bf16 products)"), std::string::npos) << gpu_bf16.out;
  EXPECT_NEAR(last_accuracy(dir / "gpu16" / "metrics.jsonl"),
              last_accuracy(dir / "cpu16" / "metrics.jsonl"), 0.01);
}

// Checkpoints: 2 epochs of 20 steps (1000 samples, batch 50), one thread per rank.
const std::string kCkptRun =
    "train --limit-train 1000 --limit-test 500 --epochs 2 --batch 50 --threads 1 --log-every 0 ";

TEST(CliCheckpoint, ResumeMidEpochIsExactForEveryPolicy) {
  REQUIRE_BINARY();
  REQUIRE_FASHION_MNIST();
  TempDir dir;
  for (const std::string policy : {"ddp", "zero1", "zero2", "zero3"}) {
    const std::string base = kCkptRun + "--sim-ranks 2 --policy " + policy + " ";
    const auto ckpt = dir / (policy + "-ckpt");
    const Output full = noeira(dir, base + "--checkpoint-dir " + ckpt.string() +
                                        " --checkpoint-every 7 --keep-last 0 --out " +
                                        (dir / (policy + "-full")).string());
    ASSERT_EQ(full.code, 0) << full.err;
    // Step 14 is inside the first epoch: the resumed run skips the 14 consumed batches of the
    // epoch's order, in a new process, and must end on the same bits.
    const Output resumed =
        noeira(dir, base + "--resume " + (ckpt / "step-00000014").string() + " --checkpoint-dir " +
                        (dir / (policy + "-ckpt2")).string() + " --out " +
                        (dir / (policy + "-resumed")).string());
    ASSERT_EQ(resumed.code, 0) << resumed.err;
    EXPECT_NE(resumed.out.find("resumed from"), std::string::npos) << resumed.out;
    EXPECT_EQ(saved_mlp(dir / (policy + "-full") / "model.h5"),
              saved_mlp(dir / (policy + "-resumed") / "model.h5"))
        << policy;
    // The metrics too: both epochs end after step 14, so the resumed run writes the same epoch
    // records (the interrupted epoch's train loss includes the steps before the checkpoint).
    const auto full_records = read_records(dir / (policy + "-full") / "metrics.jsonl");
    const auto resumed_records = read_records(dir / (policy + "-resumed") / "metrics.jsonl");
    ASSERT_EQ(full_records.size(), 2u) << policy;
    ASSERT_EQ(resumed_records.size(), 2u) << policy;
    for (std::size_t i = 0; i < full_records.size(); ++i) {
      nlohmann::json x = full_records[i], y = resumed_records[i];
      for (std::string_view f : kTimingFields) {
        x.erase(std::string(f));
        y.erase(std::string(f));
      }
      EXPECT_EQ(x.dump(), y.dump()) << policy << " epoch record " << i;
    }
  }
}

TEST(CliCheckpoint, ResumesOnOtherRankCountsAndPolicies) {
  REQUIRE_BINARY();
  REQUIRE_FASHION_MNIST();
  TempDir dir;
  const auto ckpt = dir / "ckpt";
  const Output full = noeira(dir, kCkptRun + "--sim-ranks 4 --policy zero3 --checkpoint-dir " +
                                      ckpt.string() + " --checkpoint-every 7 --keep-last 0 --out " +
                                      (dir / "full").string());
  ASSERT_EQ(full.code, 0) << full.err;
  const std::vector<float> reference = saved_mlp(dir / "full" / "model.h5");
  const std::string saved = inspect_tensors(dir, ckpt / "step-00000040");
  double max_p = 0.0;
  for (float p : reference) max_p = std::max(max_p, static_cast<double>(std::fabs(p)));

  for (const std::string target : {"--sim-ranks 1 --policy ddp", "--sim-ranks 3 --policy zero2"}) {
    // Zero steps left: what was loaded is saved again (model.h5 and a checkpoint in the new
    // layout), bit for bit the same logical tensors, m and v included.
    const auto again = dir / "again";
    std::filesystem::remove_all(again);
    const Output o = noeira(dir, kCkptRun + target + " --resume " + (ckpt / "step-00000040").string() +
                                     " --checkpoint-dir " + again.string() + " --out " +
                                     (dir / "loaded").string());
    ASSERT_EQ(o.code, 0) << target << ": " << o.err;
    EXPECT_EQ(saved_mlp(dir / "loaded" / "model.h5"), reference) << target;
    EXPECT_EQ(inspect_tensors(dir, again), saved) << target;

    // 12 more steps from step 28 on the new layout: within the equivalence tolerance (into a
    // fresh directory each time: --out refuses a directory that holds another run's records).
    std::filesystem::remove_all(dir / "more");
    const Output more = noeira(dir, kCkptRun + target + " --resume " +
                                        (ckpt / "step-00000028").string() + " --out " +
                                        (dir / "more").string());
    ASSERT_EQ(more.code, 0) << target << ": " << more.err;
    const std::vector<float> values = saved_mlp(dir / "more" / "model.h5");
    ASSERT_EQ(values.size(), reference.size());
    double worst = 0.0;
    for (std::size_t i = 0; i < values.size(); ++i) {
      worst = std::max(worst, static_cast<double>(std::fabs(values[i] - reference[i])));
    }
    EXPECT_LE(worst, 1e-4 * max_p + 1e-6) << target;
    EXPECT_GT(worst, 0.0) << target << ": another summation order should leave a trace";
  }
  // eval reads a checkpoint's values (here written by 4 ranks under ZeRO-3) as well as model.h5.
  const Output ev = noeira(dir, "eval --checkpoint " + ckpt.string() +
                                    " --limit-test 500 --threads 1 --log-format json");
  ASSERT_EQ(ev.code, 0) << ev.err;
  EXPECT_EQ(nlohmann::json::parse(ev.out)["test_accuracy"].get<double>(),
            last_accuracy(dir / "full" / "metrics.jsonl"));
  // Another model is refused, naming a parameter.
  expect_one_error_line(noeira(dir, kCkptRun + "--model linear --resume " + ckpt.string() +
                                        " --out " + (dir / "linear").string()),
                        "0.weight");
}

TEST(CliCheckpoint, SignalStopsWithACheckpointThatResumesExactly) {
  REQUIRE_BINARY();
  REQUIRE_FASHION_MNIST();
  TempDir dir;
  // 30 epochs of 20 steps: long enough that the signal, sent once the first step is logged,
  // lands mid-run.
  const std::string base = "train --limit-train 1000 --limit-test 200 --epochs 30 --batch 50 "
                           "--threads 1 --log-every 1 --sim-ranks 2 --policy zero2 --schedule "
                           "constant --checkpoint-dir " + (dir / "ckpt").string() + " ";
  const auto run = dir / "run";
  const std::string binary = NOEIRA_BINARY;
  const std::string script =
      "'" + binary + "' " + base + "--out " + run.string() + " >'" + (dir / "stdout").string() +
      "' 2>'" + (dir / "stderr").string() + "' </dev/null & pid=$!; "
      "while [ ! -s '" + (run / "metrics.jsonl").string() + "' ]; do "
      "kill -0 $pid 2>/dev/null || break; sleep 0.02; done; "
      "kill -USR1 $pid; wait $pid; exit $?";
  const int status = std::system(script.c_str());  // std::system runs it with sh -c
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 75) << slurp(dir / "stderr");
  const std::string err = slurp(dir / "stderr");
  EXPECT_NE(err.find("stopped by SIGUSR1"), std::string::npos) << err;
  EXPECT_NE(err.find("--resume latest"), std::string::npos) << err;
  EXPECT_FALSE(std::filesystem::exists(run / "model.h5")) << "a stopped run has no final model";

  const Output resumed = noeira(dir, base + "--resume latest --out " + run.string());
  ASSERT_EQ(resumed.code, 0) << resumed.err;
  const Output straight = noeira(dir, "train --limit-train 1000 --limit-test 200 --epochs 30 "
                                      "--batch 50 --threads 1 --log-every 1 --sim-ranks 2 "
                                      "--policy zero2 --schedule constant --out " +
                                          (dir / "straight").string());
  ASSERT_EQ(straight.code, 0) << straight.err;
  EXPECT_EQ(saved_mlp(run / "model.h5"), saved_mlp(dir / "straight" / "model.h5"));
}

// The gradient norm of every logged step.
std::vector<double> grad_norms(const std::filesystem::path& metrics) {
  std::vector<double> norms;
  for (const nlohmann::json& r : read_records(metrics)) {
    if (r.contains("grad_norm")) norms.push_back(r["grad_norm"].get<double>());
  }
  return norms;
}

// Signals arriving while a run computes change none of its numbers: a SIGUSR1 that interrupts one
// of oneDNN's JIT GEMM kernels wrote its frame into the heap (a wrong gradient norm at the step it
// hit in about half of such runs, or a corrupted heap), so the stop signals reach one thread of
// their own (train/stop_signal.hpp). SIGUSR1 is sent without pause from the first logged step
// until the run has ended.
TEST(CliCheckpoint, SignalsLeaveTheNumbersAlone) {
  REQUIRE_BINARY();
  REQUIRE_FASHION_MNIST();
  TempDir dir;
  const std::vector<std::string> base = {"train",  "--limit-train", "1000", "--limit-test", "200",
                                         "--batch", "50", "--threads", "1", "--log-every", "1",
                                         "--schedule", "constant", "--sim-ranks", "1"};
  std::string straight_args;
  for (const std::string& a : base) straight_args += a + " ";
  const Output straight =
      noeira(dir, straight_args + "--epochs 2 --out " + (dir / "straight").string());
  ASSERT_EQ(straight.code, 0) << straight.err;
  const std::vector<double> expected = grad_norms(dir / "straight" / "metrics.jsonl");
  for (int attempt = 0; attempt < 8; ++attempt) {
    const auto run = dir / ("run" + std::to_string(attempt));
    std::vector<std::string> args = base;
    for (const std::string a : {"--epochs", "30", "--checkpoint-dir"}) args.push_back(a);
    args.push_back((run / "ckpt").string());
    args.push_back("--out");
    args.push_back(run.string());
    const pid_t pid = testing::spawn_noeira(dir, args);
    ASSERT_GT(pid, 0);
    int status = 0;
    bool ended = false;
    while (!ended && !(std::filesystem::exists(run / "metrics.jsonl") &&
                       std::filesystem::file_size(run / "metrics.jsonl") > 0)) {
      ended = ::waitpid(pid, &status, WNOHANG) == pid;
      ::usleep(1000);
    }
    while (!ended) {
      ::kill(pid, SIGUSR1);
      ended = ::waitpid(pid, &status, WNOHANG) == pid;
    }
    ASSERT_TRUE(WIFEXITED(status)) << slurp(dir / "bg-stderr");
    ASSERT_EQ(WEXITSTATUS(status), 75) << slurp(dir / "bg-stderr");
    const std::vector<double> norms = grad_norms(run / "metrics.jsonl");
    ASSERT_FALSE(norms.empty());
    const auto n = static_cast<std::ptrdiff_t>(std::min(norms.size(), expected.size()));
    EXPECT_EQ(std::vector<double>(norms.begin(), norms.begin() + n),
              std::vector<double>(expected.begin(), expected.begin() + n))
        << "attempt " << attempt;
  }
}

}  // namespace
}  // namespace noeira

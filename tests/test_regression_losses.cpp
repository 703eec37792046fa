// The losses of a regression beyond the mean squared error (loss/target_loss.hpp): --loss
// gaussian-nll, and a program's own loss named with its model. The properties: a Gaussian head
// (means, and softplus variances) trains as PyTorch's gaussian_nll_loss does, step by step, with
// the test loss, RMSE of the means and R² alike, and the check catches a 5 % different rate; eval
// of the saved model scores it with the loss model.h5 records; a program's own loss is the one
// trained; and every loss that does not suit the data or the model is one clear error.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "cli_test_util.hpp"
#include "expect_error.hpp"
#include "io/params_file.hpp"
#include "io_test_files.hpp"
#include "nn/activation.hpp"
#include "nn/parallel.hpp"
#include "train/model_entry.hpp"
#include "train/presets.hpp"
#include "train/run.hpp"

namespace noeira {
namespace {

using testing::TempDir;
using testing::metrics_records;
using testing::write_npy_array;

// 6 features in; 2 means, then 2 variances out (PyTorch's reference: tests/gaussian_nll_torch.py).
using GaussianNet = Sequential<LinearTanh<6, 16>,
                               Parallel<Linear<16, 2>, Sequential<Linear<16, 2>, Softplus<2>>>>;
// 6 features in, 2 predictions out.
using PointNet = Sequential<LinearTanh<6, 16>, Linear<16, 2>>;

// Twice the mean squared error: a loss of the program's own, through the TargetLoss contract.
class TwiceSquaredError final : public TargetLoss {
 public:
  std::string_view name() const override { return "TwiceSquaredError"; }
  void forward_backward(Context& ctx, const Tensor& pred, const Tensor& target, float grad_scale,
                        double* loss_sum) override {
    mse_.forward_backward(ctx, pred, target, 2.0f * grad_scale, loss_sum);
    mse_.forward(ctx, pred, target, loss_sum);
  }
  void forward(Context& ctx, const Tensor& pred, const Tensor& target, double* loss_sum) override {
    mse_.forward(ctx, pred, target, loss_sum);
    mse_.forward(ctx, pred, target, loss_sum);
  }
  const Tensor& grad() const override { return mse_.grad(); }

 private:
  MSELoss mse_;
};

struct InstalledCatalogue {
  explicit InstalledCatalogue(ModelCatalogue c) { install_model_catalogue(std::move(c)); }
  ~InstalledCatalogue() { install_model_catalogue(preset_catalogue()); }
};

// Targets with a spread that depends on the input: what a variance head is for.
void write_split(const std::filesystem::path& dir, const std::string& split, std::int64_t first,
                 std::int64_t count) {
  std::vector<float> x, y;
  for (std::int64_t i = first; i < first + count; ++i) {
    float sum = 0.0f;
    for (int f = 0; f < 6; ++f) {
      x.push_back(std::sin(0.37f * static_cast<float>(i * 6 + f)));
      sum += x.back();
    }
    const float noise = std::sin(1.7f * static_cast<float>(i));
    y.push_back(0.5f * sum + 0.3f * noise * x[x.size() - 6]);
    y.push_back(x[x.size() - 5] * x[x.size() - 4] + 0.1f * noise);
  }
  write_npy_array(dir / (split + "_x.npy"), "<f4", {count, 6}, x);
  write_npy_array(dir / (split + "_y.npy"), "<f4", {count, 2}, y);
}

constexpr std::int64_t kTrain = 96, kSteps = 12;

TrainConfig full_batch_run(const TempDir& dir, const std::string& model, const std::string& out) {
  TrainConfig cfg;
  cfg.model = model;
  cfg.data = DatasetKind::Npy;
  cfg.data_dir = dir.path().string();
  cfg.epochs = kSteps;
  cfg.batch = kTrain;
  cfg.optimizer = OptimizerKind::Adam;
  cfg.lr = 1e-2;
  cfg.schedule = ScheduleKind::Constant;
  cfg.log_every = 1;
  cfg.threads = 1;
  cfg.out = (dir / out).string();
  return cfg;
}

// `noeira eval` of <dir>/<run>/model.h5 on the test split in `dir`, its model as the file names.
EvalResult eval_saved(const TempDir& dir, const std::string& run) {
  TrainConfig eval;
  eval.model.clear();
  eval.params = (dir / run / "model.h5").string();
  eval.data = DatasetKind::Npy;
  eval.data_dir = dir.path().string();
  return run_eval(eval);
}

// PyTorch's run at `lr` (gaussian_nll_torch.py), or nullopt without torch.
std::optional<nlohmann::json> torch_run(const TempDir& dir, double lr) {
  const std::string cmd = "/usr/bin/python3 '" NOEIRA_TEST_DATA_DIR "/../gaussian_nll_torch.py' '" +
                          dir.path().string() + "' " + std::to_string(kSteps) + " " +
                          std::to_string(lr) + " >/dev/null 2>&1";
  const int status = std::system(cmd.c_str());
  if (WIFEXITED(status) && WEXITSTATUS(status) == 77) return std::nullopt;
  EXPECT_EQ(status, 0) << cmd;
  std::ifstream in(dir / "torch.json");
  return nlohmann::json::parse(in);
}

// The largest relative difference between noeira's run and PyTorch's, over every step.
double worst_difference(const std::filesystem::path& metrics, const nlohmann::json& torch) {
  const auto steps = metrics_records(metrics, "step");
  const auto epochs = metrics_records(metrics, "epoch");
  EXPECT_EQ(steps.size(), static_cast<std::size_t>(kSteps));
  EXPECT_EQ(epochs.size(), static_cast<std::size_t>(kSteps));
  double worst = 0.0;
  const auto compare = [&](double ours, double theirs) {
    worst = std::max(worst, std::abs(ours - theirs) / std::max(std::abs(theirs), 1e-3));
  };
  for (std::size_t i = 0; i < steps.size() && i < epochs.size(); ++i) {
    compare(steps[i]["loss"].get<double>(), torch["train"][i].get<double>());
    compare(epochs[i]["test_loss"].get<double>(), torch["test"][i].get<double>());
    compare(epochs[i]["test_rmse"].get<double>(), torch["rmse"][i].get<double>());
    compare(epochs[i]["test_r2"].get<double>(), torch["r2"][i].get<double>());
  }
  return worst;
}

TEST(GaussianNll, AVarianceHeadTrainsAsPyTorchStepByStepAndEvalScoresItAlike) {
  const TempDir dir;
  write_split(dir.path(), "train", 0, kTrain);
  write_split(dir.path(), "test", 1000, 32);
  const std::optional<nlohmann::json> torch = torch_run(dir, 1e-2);
  if (!torch) GTEST_SKIP() << "/usr/bin/python3 with torch is not installed (python3-torch)";
  const InstalledCatalogue installed(
      ModelCatalogue({model_entry<GaussianNet>("gaussian-net", "means and variances")}));
  TrainConfig cfg = full_batch_run(dir, "gaussian-net", "run");
  cfg.loss = LossChoice::GaussianNll;
  cfg.init_from = (dir / "init.safetensors").string();
  cfg.names = NameScheme::Noeira;
  (void)run_train(cfg);
  const double worst = worst_difference(dir / "run/metrics.jsonl", *torch);
  EXPECT_LT(worst, 1e-4);
  std::printf("noeira against PyTorch over %lld steps: largest relative difference %.2e\n",
              static_cast<long long>(kSteps), worst);
  // The check can fail: PyTorch at a 5 % different rate is told apart.
  const std::optional<nlohmann::json> perturbed = torch_run(dir, 1.05e-2);
  ASSERT_TRUE(perturbed);
  EXPECT_GT(worst_difference(dir / "run/metrics.jsonl", *perturbed), 1e-3);

  // model.h5 says which loss scores it, and eval scores it so.
  EXPECT_EQ(io::read_params_attribute(dir / "run/model.h5", "loss"), "gaussian-nll");
  const EvalResult r = eval_saved(dir, "run");
  const auto last = metrics_records(dir / "run/metrics.jsonl", "epoch").back();
  EXPECT_DOUBLE_EQ(r.loss, last["test_loss"].get<double>());
  EXPECT_DOUBLE_EQ(r.rmse, last["test_rmse"].get<double>());
  EXPECT_DOUBLE_EQ(r.r2, last["test_r2"].get<double>());
}

TEST(OwnLoss, AProgramsLossIsTheOneTrainedAndEvaluated) {
  const TempDir dir;
  write_split(dir.path(), "train", 0, kTrain);
  write_split(dir.path(), "test", 1000, 32);
  const InstalledCatalogue installed(
      ModelCatalogue({model_entry<PointNet>("point-net", "predictions"),
                      model_entry<PointNet, TwiceSquaredError>("twice-net", "its own loss")}));
  TrainConfig mse = full_batch_run(dir, "point-net", "mse");
  mse.epochs = 1;
  TrainConfig own = full_batch_run(dir, "twice-net", "own");
  own.epochs = 1;
  (void)run_train(mse);
  (void)run_train(own);
  // The same model from the same seed: the first step's loss is exactly twice.
  const double first_mse = metrics_records(dir / "mse/metrics.jsonl", "step")[0]["loss"];
  const double first_own = metrics_records(dir / "own/metrics.jsonl", "step")[0]["loss"];
  EXPECT_EQ(first_own, 2.0 * first_mse);
  EXPECT_GT(first_mse, 0.0);

  const EvalResult r = eval_saved(dir, "own");
  EXPECT_DOUBLE_EQ(r.loss, metrics_records(dir / "own/metrics.jsonl", "epoch")[0]["test_loss"]);
  // The RMSE is of the predictions, whatever the loss.
  EXPECT_NEAR(r.rmse * r.rmse, r.loss / 2.0, 1e-6 * r.loss);

  own.loss = LossChoice::Mse;
  own.out = (dir / "refused").string();
  testing::expect_input_error([&] { (void)run_train(own); },
                              {"--loss mse: model 'twice-net' brings its own loss "
                               "(TwiceSquaredError)"});
}

TEST(RegressionLosses, ALossThatDoesNotSuitTheDataOrTheModelIsOneClearError) {
  const TempDir dir;
  write_split(dir.path(), "train", 0, kTrain);
  write_split(dir.path(), "test", 1000, 32);
  const InstalledCatalogue installed(
      ModelCatalogue({model_entry<PointNet>("point-net", "predictions"),
                      model_entry<GaussianNet>("gaussian-net", "means and variances")}));
  TrainConfig cfg = full_batch_run(dir, "point-net", "never");
  const auto refused = [&](LossChoice loss, const std::string& model,
                           const std::string& fragment) {
    SCOPED_TRACE(std::string(kLossNames.name_of(loss)) + " " + model);
    TrainConfig c = cfg;
    c.loss = loss;
    c.model = model;
    testing::expect_input_error([&] { (void)run_train(c); }, {fragment});
  };
  refused(LossChoice::GaussianNll, "point-net",
          "has 2 regression targets per sample, but model 'point-net' has 2 outputs "
          "(GaussianNLLLoss takes 2 per target)");
  refused(LossChoice::Mse, "gaussian-net", "has 2 regression targets per sample, but model 'gaussian-net' "
                                 "has 4 outputs");
  refused(LossChoice::CrossEntropy, "point-net",
          "--loss cross-entropy needs integer class labels, but");
  // Class labels (0 and 1 for the two outputs) are no float targets.
  std::filesystem::create_directories(dir / "labels");
  for (const char* split : {"train", "test"}) {
    std::filesystem::copy_file(dir / (std::string(split) + "_x.npy"),
                               dir / "labels" / (std::string(split) + "_x.npy"));
    const std::int64_t count = std::string(split) == "train" ? kTrain : 32;
    std::vector<std::int64_t> labels;
    for (std::int64_t i = 0; i < count; ++i) labels.push_back(i % 2);
    write_npy_array(dir / "labels" / (std::string(split) + "_y.npy"), "<i8", {count}, labels);
  }
  cfg.data_dir = (dir / "labels").string();
  refused(LossChoice::Mse, "point-net", "--loss mse needs float targets, but");
  refused(LossChoice::GaussianNll, "point-net", "--loss gaussian-nll needs float targets, but");
  EXPECT_FALSE(std::filesystem::exists(dir / "never"));
}

}  // namespace
}  // namespace noeira

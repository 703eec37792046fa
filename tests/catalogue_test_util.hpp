#pragma once
// What the tests of a user's own model share: a model no preset is, its regression arrays, a run
// of it, a catalogue installed for one test, and an error's check.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "cli_test_util.hpp"
#include "io_test_files.hpp"
#include "nn/layernorm.hpp"
#include "nn/linear.hpp"
#include "nn/sequential.hpp"
#include "train/config.hpp"
#include "train/model_catalogue.hpp"
#include "train/presets.hpp"

namespace noeira::testing {

// A model no preset is: 6 features in, 2 regression targets out.
using UserNet = Sequential<LinearTanh<6, 16>, LayerNorm<16>, Linear<16, 2>>;

// An error of type E (a user's mistake by default) whose message holds `part`.
template <class E = InputError>
inline void expect_error_containing(const std::function<void()>& f, const std::string& part) {
  try {
    f();
    ADD_FAILURE() << "expected an error containing: " << part;
  } catch (const E& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

// Installs a catalogue for one test and puts the presets back after it.
struct InstalledCatalogue {
  explicit InstalledCatalogue(ModelCatalogue c) { install_model_catalogue(std::move(c)); }
  ~InstalledCatalogue() { install_model_catalogue(preset_catalogue()); }
};

// `count` rows of 6 features (x, [count, 6]) and their 2 targets (y, [count, 2]): smooth
// functions of the features.
struct RegressionArrays {
  std::vector<float> x, y;
};
inline RegressionArrays regression_arrays(std::int64_t count) {
  RegressionArrays a;
  for (std::int64_t i = 0; i < count; ++i) {
    float sum = 0.0f;
    for (int f = 0; f < 6; ++f) {
      const float v = std::sin(0.37f * static_cast<float>(i * 6 + f));
      a.x.push_back(v);
      sum += v;
    }
    a.y.push_back(0.5f * sum);
    a.y.push_back(a.x[static_cast<std::size_t>(i * 6)] * a.x[static_cast<std::size_t>(i * 6 + 1)]);
  }
  return a;
}

// The same as <split>_x.npy and <split>_y.npy in `dir`.
inline void write_regression(const std::filesystem::path& dir, const std::string& split,
                             std::int64_t count) {
  const RegressionArrays a = regression_arrays(count);
  write_npy_array(dir / (split + "_x.npy"), "<f4", {count, 6}, a.x);
  write_npy_array(dir / (split + "_y.npy"), "<f4", {count, 2}, a.y);
}

// A run of `model` on the regression arrays in `dir`: ZeRO-3 on two simulated ranks, one thread
// each.
inline TrainConfig zero3_run(const TempDir& dir, const std::string& model, std::int64_t epochs,
                             std::int64_t batch) {
  TrainConfig cfg;
  cfg.model = model;
  cfg.data = DatasetKind::Npy;
  cfg.data_dir = dir.path().string();
  cfg.epochs = epochs;
  cfg.batch = batch;
  cfg.threads = 1;
  cfg.policy = dist::Policy::Zero3;
  cfg.sim_ranks = 2;
  cfg.out = (dir / model).string();
  return cfg;
}

}  // namespace noeira::testing

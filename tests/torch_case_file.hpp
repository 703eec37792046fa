#pragma once
// The file the tests against PyTorch write and their python checks read (tests/torch_cases.py):
// one line of JSON, {"tensors": [{"name", "shape", "offset"}], "cases": [...]}, then the tensors
// as raw little-endian float32, offsets in elements from the end of that line.
//
// Used by the test_*_torch.cpp writers beside their *_torch_check.py; a whole model's writer
// (test_gpt_torch.cpp, test_vit_torch.cpp) also saves its weights as model.h5 (save_model_file)
// in the directory write_case_dir gives it.
#include <gtest/gtest.h>

#include <unistd.h>

#include <bit>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "core/module.hpp"
#include "distributed/units.hpp"
#include "io/params_file.hpp"
#include "train/checkpointing.hpp"

namespace noeira::testing {

static_assert(std::endian::native == std::endian::little, "the file is little-endian float32");

class CaseFile {
 public:
  void add(const std::string& name, const Tensor& t) {
    const std::vector<float> v = t.to_vector();
    index_.push_back({{"name", name}, {"shape", t.shape()}, {"offset", data_.size()}});
    data_.insert(data_.end(), v.begin(), v.end());
  }
  // Every parameter's value as "<prefix>/param/<name>" and gradient as "<prefix>/grad/<name>".
  template <class M>
  void add_params(const std::string& prefix, M& m) {
    for_each_param(m, [&](const std::string& name, Param& p) {
      add(prefix + "/param/" + name, p.val);
      add(prefix + "/grad/" + name, p.grd);
    });
  }
  // Every parameter's gradient as "grad/<name>"; returns how many.
  template <class M>
  std::size_t add_grads(M& m) {
    std::size_t count = 0;
    for_each_param(m, [&](const std::string& name, Param& p) {
      add("grad/" + name, p.grd);
      ++count;
    });
    return count;
  }
  void add_case(nlohmann::json c) { cases_.push_back(std::move(c)); }

  void write(const std::string& path) const {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    ASSERT_TRUE(out) << "cannot write " << path;
    out << nlohmann::json{{"tensors", index_}, {"cases", cases_}}.dump() << '\n';
    out.write(reinterpret_cast<const char*>(data_.data()),
              static_cast<std::streamsize>(data_.size() * sizeof(float)));
    ASSERT_TRUE(out.good()) << "writing " << path << " failed";
  }

  // Writes to the path the ctest fixture gives in $env_var; run on its own, to a scratch file
  // that it checks and removes.
  void write_where_asked(const char* env_var, const std::string& scratch_name) const {
    const char* env = std::getenv(env_var);
    if (env != nullptr && *env != '\0') {
      write(env);
      return;
    }
    const std::filesystem::path scratch =
        std::filesystem::temp_directory_path() /
        (scratch_name + "_" + std::to_string(::getpid()) + ".bin");
    write(scratch.string());
    EXPECT_GT(std::filesystem::file_size(scratch), 0u);
    std::filesystem::remove(scratch);
  }

 private:
  nlohmann::json index_ = nlohmann::json::array();
  nlohmann::json cases_ = nlohmann::json::array();
  std::vector<float> data_;
};

// Every parameter of the walk, in walk order, as its values are now.
inline std::vector<float> walk_values(const dist::WalkUnits& walk) {
  std::vector<float> values;
  for (const NamedParam& p : walk.params) {
    const std::vector<float> v = p.param->val.to_vector();
    values.insert(values.end(), v.begin(), v.end());
  }
  return values;
}

// The model's parameters as `noeira train` writes model.h5 (train/run.cpp), under `preset`.
template <Module M>
void save_model_file(const std::filesystem::path& file, const std::string& preset, M& model) {
  const dist::WalkUnits walk = dist::walk_units(model);
  io::save_params(file, preset, signature_of(walk), walk_values(walk));
}

// Calls write(dir) with the directory the ctest fixture names in $env_var; run on its own, with
// a scratch directory, checks that model.h5 and cases.bin were written and removes it.
inline void write_case_dir(const char* env_var, const std::string& scratch_name,
                           const std::function<void(const std::filesystem::path&)>& write) {
  const char* env = std::getenv(env_var);
  if (env != nullptr && *env != '\0') {
    std::filesystem::create_directories(env);
    write(env);
    return;
  }
  const std::filesystem::path scratch = std::filesystem::temp_directory_path() /
                                        (scratch_name + "_" + std::to_string(::getpid()));
  std::filesystem::create_directories(scratch);
  write(scratch);
  EXPECT_GT(std::filesystem::file_size(scratch / "model.h5"), 0u);
  EXPECT_GT(std::filesystem::file_size(scratch / "cases.bin"), 0u);
  std::filesystem::remove_all(scratch);
}

}  // namespace noeira::testing

#pragma once
// The file the tests against PyTorch write and their python checks read (tests/torch_cases.py):
// one line of JSON, {"tensors": [{"name", "shape", "offset"}], "cases": [...]}, then the tensors
// as raw little-endian float32, offsets in elements from the end of that line.
//
// Used by test_attention_torch.cpp (attention_torch_check.py) and test_gpt_torch.cpp
// (gpt_torch_check.py).
#include <gtest/gtest.h>

#include <bit>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "core/module.hpp"

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
  void add_case(nlohmann::json c) { cases_.push_back(std::move(c)); }

  void write(const std::string& path) const {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    ASSERT_TRUE(out) << "cannot write " << path;
    out << nlohmann::json{{"tensors", index_}, {"cases", cases_}}.dump() << '\n';
    out.write(reinterpret_cast<const char*>(data_.data()),
              static_cast<std::streamsize>(data_.size() * sizeof(float)));
    ASSERT_TRUE(out.good()) << "writing " << path << " failed";
  }

 private:
  nlohmann::json index_ = nlohmann::json::array();
  nlohmann::json cases_ = nlohmann::json::array();
  std::vector<float> data_;
};

}  // namespace noeira::testing

#pragma once
// The parameters a `noeira train` run saved (<out>/model.h5), read back for comparison.
#include <filesystem>
#include <string>
#include <vector>

#include "io/params_file.hpp"
#include "train/presets.hpp"

namespace noeira::testing {

// The mlp preset's parameters saved in a model.h5, in walk order.
inline std::vector<float> saved_mlp(const std::filesystem::path& file) {
  presets::Mlp model(Init(Target::Cpu, InitSpec{}));
  std::vector<NamedParam> params;
  for_each_param(model, [&](const std::string& n, Param& p) { params.push_back({n, &p}); });
  io::load_params(file, "mlp", params);
  std::vector<float> out;
  for (const NamedParam& p : params) {
    const std::vector<float> v = p.param->val.to_vector();
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

}  // namespace noeira::testing

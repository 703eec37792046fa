#pragma once
// The parameters a `noeira train` run saved (<out>/model.h5), read back for comparison.
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "io/params_file.hpp"
#include "train/presets.hpp"

namespace noeira::testing {

// The parameters of model `name` (type M) saved in a model.h5, in walk order.
template <class M>
std::vector<float> saved_values(const std::filesystem::path& file, std::string_view name) {
  M model(Init(Target::Cpu, InitSpec{}));
  std::vector<NamedParam> params;
  for_each_param(model, [&](const std::string& n, Param& p) { params.push_back({n, &p}); });
  io::load_params(file, name, params);
  std::vector<float> out;
  for (const NamedParam& p : params) {
    const std::vector<float> v = p.param->val.to_vector();
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

// The mlp preset's parameters saved in a model.h5, in walk order.
inline std::vector<float> saved_mlp(const std::filesystem::path& file) {
  return saved_values<presets::Mlp>(file, "mlp");
}

}  // namespace noeira::testing

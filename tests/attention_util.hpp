#pragma once
// Helpers shared by the attention tests (test_attention*.cpp, test_cuda_attention.cpp).
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "gradcheck.hpp"

namespace noeira::testing {

inline const Init kAttentionInit(Target::Cpu, InitSpec{InitKind::XavierUniform, 0.0f, 0.02f, 42});

// A [batch, seq, width] input drawn from U(lo, hi).
inline Tensor sequence_input(std::int64_t batch, std::int64_t seq, std::int64_t width,
                             std::uint32_t seed, Target target = Target::Cpu, float lo = -1.0f,
                             float hi = 1.0f) {
  return Tensor::from_host(
      {batch, seq, width},
      random_values(static_cast<std::size_t>(batch * seq * width), seed, lo, hi), target);
}

inline Tensor key_lengths(const std::vector<std::int32_t>& lengths, Target target = Target::Cpu) {
  return Tensor::from_host_ids({static_cast<std::int64_t>(lengths.size())}, lengths, target);
}

// Every parameter drawn from U(-bound, bound): biases away from 0, so that the checks see them.
template <class M>
void randomize_weights(M& m, std::uint32_t seed, float bound = 0.5f) {
  for_each_param(m, [&](const std::string&, Param& p) {
    p.val.copy_from(random_values(static_cast<std::size_t>(p.numel()), seed++, -bound, bound));
  });
}

// A batched product laid out as attention lays its heads: the items of A and B side by side in
// each row, `head` floats apart (rows long enough for the last item, plus `pad` unused floats),
// groups one after another; the items of C dense but for `c_gap` untouched floats after each.
struct MatmulLayout {
  bool ta = false, tb = false;
  std::int64_t m = 1, n = 1, k = 1, batch = 1, groups = 1, head = 1, pad = 0, c_gap = 0;
  float alpha = 1.0f, beta = 0.0f;
};

struct MatmulOperands {
  Tensor a, b, c;          // random
  BatchedMatmulArgs args;  // into a, b, c
};

inline MatmulOperands matmul_operands(Target target, const MatmulLayout& l) {
  const std::int64_t a_rows = l.ta ? l.k : l.m, a_cols = l.ta ? l.m : l.k;
  const std::int64_t b_rows = l.tb ? l.n : l.k, b_cols = l.tb ? l.k : l.n;
  const std::int64_t lda = (l.batch - 1) * l.head + std::max(a_cols, l.head) + l.pad;
  const std::int64_t ldb = (l.batch - 1) * l.head + std::max(b_cols, l.head) + l.pad;
  const std::int64_t c_item = l.m * l.n + l.c_gap;
  auto random = [&](std::int64_t n, std::uint32_t seed) {
    return Tensor::from_host({n}, random_values(static_cast<std::size_t>(n), seed), target);
  };
  MatmulOperands o{random(l.groups * a_rows * lda, 1), random(l.groups * b_rows * ldb, 2),
                   random(l.groups * l.batch * c_item, 3), {}};
  o.args = {.trans_a = l.ta,
            .trans_b = l.tb,
            .m = l.m,
            .n = l.n,
            .k = l.k,
            .alpha = l.alpha,
            .beta = l.beta,
            .a = {o.a.data(), lda, l.head, a_rows * lda},
            .b = {o.b.data(), ldb, l.head, b_rows * ldb},
            .c = {o.c.data(), l.n, c_item, l.batch * c_item},
            .batch = l.batch,
            .groups = l.groups};
  return o;
}

inline std::string describe(const MatmulLayout& l) {
  return "ta " + std::to_string(l.ta) + " tb " + std::to_string(l.tb) + " m " +
         std::to_string(l.m) + " n " + std::to_string(l.n) + " k " + std::to_string(l.k) +
         " batch " + std::to_string(l.batch) + " groups " + std::to_string(l.groups) + " head " +
         std::to_string(l.head);
}

inline std::vector<std::string> param_names(auto& m) {
  std::vector<std::string> names;
  for_each_param(m, [&](const std::string& name, Param&) { names.push_back(name); });
  return names;
}

}  // namespace noeira::testing

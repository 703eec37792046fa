#include "kernels/cpu/gemm.hpp"

#include <cblas.h>
#include <omp.h>

#include <map>
#include <oneapi/dnnl/dnnl.hpp>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "kernels/bf16_math.hpp"
#include "kernels/cpu/onednn.hpp"
#include "kernels/cpu/vector_isa.hpp"
#include "kernels/error.hpp"

namespace noeira::cpu {

namespace {

int as_blas_int(std::int64_t v) { return static_cast<int>(v); }

// What makes two products one primitive. The operands are packed (their rows contiguous) before
// oneDNN sees them, so lda and ldb are not part of it; ldc is.
using ProductShape = std::tuple<bool, bool, std::int64_t, std::int64_t, std::int64_t,
                                std::int64_t, float, float>;

// A primitive with its arguments: memory objects made once, their data handles set per call, so
// that a call allocates nothing (a dnnl::memory and the argument map cost a few allocations each,
// which showed in small models' steps).
struct Bf16Product {
  dnnl::matmul primitive;
  dnnl::memory::desc scratchpad;
  dnnl::memory a, b, c, scratch;
  std::unordered_map<int, dnnl::memory> args;
};

// Primitives a thread keeps. A run has a few shapes (its batch, a short last batch, evaluation);
// a caller with ever new shapes starts the map again past this many, rather than grow it without
// end (oneDNN's own primitive cache makes a rebuilt shape cheap).
constexpr std::size_t kKeptProducts = 256;

// One thread's state: the conversion buffers grow to the largest operand it has seen.
struct ThreadGemm {
  dnnl::stream stream{onednn_engine()};
  std::map<ProductShape, Bf16Product> products;
  std::vector<std::uint16_t> a16, b16;
  std::vector<std::uint8_t> scratchpad;
};

ThreadGemm& thread_gemm() {
  thread_local ThreadGemm state;
  return state;
}

Bf16Product make_product(const ProductShape& shape) {
  using dnnl::memory;
  const auto [trans_a, trans_b, m, n, k, ldc, alpha, beta] = shape;
  // Packed operands keep their stored orientation; the strides transpose them.
  const memory::desc a({m, k}, memory::data_type::bf16,
                       trans_a ? memory::dims{1, m} : memory::dims{k, 1});
  const memory::desc b({k, n}, memory::data_type::bf16,
                       trans_b ? memory::dims{1, k} : memory::dims{n, 1});
  const memory::desc c({m, n}, memory::data_type::f32, memory::dims{ldc, 1});
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (alpha != 1.0f) attr.set_output_scales(0, {alpha});
  if (beta != 0.0f) {
    dnnl::post_ops sum;
    sum.append_sum(beta);
    attr.set_post_ops(sum);
  }
  const dnnl::engine& engine = onednn_engine();
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c), attr, engine);
  Bf16Product p;
  p.primitive = dnnl::matmul(pd);
  p.scratchpad = pd.scratchpad_desc();
  p.a = memory(a, engine, nullptr);
  p.b = memory(b, engine, nullptr);
  p.c = memory(c, engine, nullptr);
  p.scratch = memory(p.scratchpad, engine, nullptr);
  p.args = {{DNNL_ARG_SRC, p.a},
            {DNNL_ARG_WEIGHTS, p.b},
            {DNNL_ARG_DST, p.c},
            {DNNL_ARG_SCRATCHPAD, p.scratch}};
  return p;
}

// dst [rows, cols] packed = bf16 of src's rows (ld apart).
void pack_bf16(std::vector<std::uint16_t>& dst, const float* src, std::int64_t rows,
               std::int64_t cols, std::int64_t ld) {
  dst.resize(static_cast<std::size_t>(rows * cols));
  std::uint16_t* out = dst.data();
  const bool wide = !omp_in_parallel() && rows * cols >= (1 << 16) && rows > 1;
#pragma omp parallel for schedule(static) if (wide)
  for (std::int64_t r = 0; r < rows; ++r) {
    with_vector_isa([&] {
      const float* __restrict in = src + r * ld;
      std::uint16_t* __restrict o = out + r * cols;
      for (std::int64_t c = 0; c < cols; ++c) o[c] = bf16_bits(in[c]);
    });
  }
}

void bf16_gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
               float alpha, const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
               float beta, float* c, std::int64_t ldc) {
  ThreadGemm& t = thread_gemm();
  pack_bf16(t.a16, a, trans_a ? k : m, trans_a ? m : k, lda);
  pack_bf16(t.b16, b, trans_b ? n : k, trans_b ? k : n, ldb);
  const ProductShape shape{trans_a, trans_b, m, n, k, ldc, alpha, beta};
  auto found = t.products.find(shape);
  if (found == t.products.end()) {
    if (t.products.size() >= kKeptProducts) t.products.clear();
    found = t.products.emplace(shape, make_product(shape)).first;
  }
  Bf16Product& p = found->second;
  if (t.scratchpad.size() < p.scratchpad.get_size()) t.scratchpad.resize(p.scratchpad.get_size());
  // The memory objects share their handles with the argument map's copies.
  p.a.set_data_handle(t.a16.data());
  p.b.set_data_handle(t.b16.data());
  p.c.set_data_handle(c);
  p.scratch.set_data_handle(t.scratchpad.data());
  p.primitive.execute(t.stream, p.args);
  t.stream.wait();
}

}  // namespace

void gemm(Precision precision, bool trans_a, bool trans_b, std::int64_t m, std::int64_t n,
          std::int64_t k, float alpha, const float* a, std::int64_t lda, const float* b,
          std::int64_t ldb, float beta, float* c, std::int64_t ldc) {
  if (precision == Precision::Fp32 || k <= 0) {  // k = 0: C = beta · C, which sgemm does
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, as_blas_int(m), as_blas_int(n),
                as_blas_int(k), alpha, a, as_blas_int(lda), b, as_blas_int(ldb), beta, c,
                as_blas_int(ldc));
    return;
  }
  if (m <= 0 || n <= 0) return;
  try {
    bf16_gemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  } catch (const dnnl::error& e) {
    throw Error(::noeira::detail::concat("bf16 matrix product ", m, "x", n, "x", k,
                                         " (oneDNN): ", e.what()));
  }
}

}  // namespace noeira::cpu

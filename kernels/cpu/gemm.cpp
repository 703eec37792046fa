#include "kernels/cpu/gemm.hpp"

#include <cblas.h>
#include <omp.h>

#include <map>
#include <optional>
#include <oneapi/dnnl/dnnl.hpp>
#include <unordered_map>
#include <vector>

#include "kernels/cpu/bf16_rounding.hpp"
#include "kernels/cpu/cpu_kernels.hpp"
#include "kernels/cpu/onednn.hpp"
#include "kernels/bf16_math.hpp"
#include "kernels/error.hpp"

namespace noeira::cpu {

namespace {

int as_blas_int(std::int64_t v) { return static_cast<int>(v); }

#ifdef NOEIRA_FP32_PRODUCTS_OPENBLAS
constexpr bool kFp32ProductsOnOneDnn = false;
#else
constexpr bool kFp32ProductsOnOneDnn = true;
#endif

// What makes two products one primitive: the element type, the shape, the operands' and the
// result's row strides, alpha and beta, and the threads it runs on (a primitive splits its work
// by the thread count it was built for; see kernels/cpu/onednn.hpp).
struct ProductKey {
  bool bf16, trans_a, trans_b;
  std::int64_t m, n, k, lda, ldb, ldc;
  float alpha, beta;
  int threads;
  auto operator<=>(const ProductKey&) const = default;
};

// A primitive with its arguments: memory objects made once, their data handles set per call, so
// that a call allocates nothing (a dnnl::memory and the argument map cost a few allocations each,
// which showed in small models' steps).
struct KeptProduct {
  dnnl::matmul primitive;
  dnnl::memory::desc scratchpad;
  dnnl::memory a, b, c, scratch;
  std::unordered_map<int, dnnl::memory> args;
};

// Primitives a thread keeps. A run has a few shapes (its batch, a short last batch, evaluation);
// a caller with ever new shapes starts the map again past this many, rather than grow it without
// end (oneDNN's own primitive cache makes a rebuilt shape cheap).
constexpr std::size_t kKeptProducts = 256;

// One thread's state: the bf16 conversion buffers grow to the largest operand it has seen.
struct ThreadGemm {
  dnnl::stream stream{onednn_engine()};
  std::map<ProductKey, KeptProduct> products;
  std::vector<std::uint16_t> a16, b16;
  std::vector<float> a32, b32;  // operands' bf16 values as floats (see widen_bf16)
  std::vector<float> c32;  // a bf16 product's result, dense (see onednn_gemm)
  std::vector<std::uint8_t> scratchpad;
};

ThreadGemm& thread_gemm() {
  thread_local ThreadGemm state;
  return state;
}

KeptProduct make_product(const ProductKey& key) {
  using dnnl::memory;
  const memory::data_type operands = key.bf16 ? memory::data_type::bf16 : memory::data_type::f32;
  // Operands keep their stored orientation; the strides transpose them.
  const memory::desc a({key.m, key.k}, operands,
                       key.trans_a ? memory::dims{1, key.lda} : memory::dims{key.lda, 1});
  const memory::desc b({key.k, key.n}, operands,
                       key.trans_b ? memory::dims{1, key.ldb} : memory::dims{key.ldb, 1});
  const memory::desc c({key.m, key.n}, memory::data_type::f32, memory::dims{key.ldc, 1});
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (key.alpha != 1.0f) attr.set_output_scales(0, {key.alpha});
  if (key.beta != 0.0f) {
    dnnl::post_ops sum;
    sum.append_sum(key.beta);
    attr.set_post_ops(sum);
  }
  const dnnl::engine& engine = onednn_engine();
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c), attr, engine);
  KeptProduct p;
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
  for (std::int64_t r = 0; r < rows; ++r) round_to_bf16_bits(out + r * cols, src + r * ld, cols);
}

// dst [rows, cols] dense = the bfloat16 values of src's rows (ld apart: floats rounded to bf16,
// or bf16 bits) as floats: a bf16 product's operands where oneDNN has no bf16 products
// (onednn_has_bf16).
void widen_bf16(std::vector<float>& dst, Operand src, std::int64_t rows, std::int64_t cols,
                std::int64_t ld) {
  dst.resize(static_cast<std::size_t>(rows * cols));
  float* out = dst.data();
  for (std::int64_t r = 0; r < rows; ++r) {
    if (src.dtype == DType::F32) {
      round_to_bf16_values(out + r * cols, static_cast<const float*>(src.data) + r * ld, cols);
      continue;
    }
    const auto* bits = static_cast<const std::uint16_t*>(src.data) + r * ld;
    for (std::int64_t c = 0; c < cols; ++c) out[r * cols + c] = bf16_value(bits[c]);
  }
}

// The product through a kept oneDNN matmul. Bf16: the operands are first rounded into this
// thread's packed buffers (their rows contiguous), and a result whose rows are not contiguous
// (attention's heads side by side in [batch, seq, heads · head_dim]) goes through this thread's
// dense buffer: oneDNN 2.6 gives a strided result to its gemm-based kernel instead of the AMX or
// AVX-512 BF16 brgemm ones, 1.4x slower at 256x64x256 (and 2.4x with an output scale), where the
// copy out costs far less. Inside a parallel region the primitive is built and run for the
// calling thread alone.
void onednn_gemm(Precision precision, bool trans_a, bool trans_b, std::int64_t m, std::int64_t n,
                 std::int64_t k, float alpha, Operand a, std::int64_t lda, Operand b,
                 std::int64_t ldb, float beta, float* c, std::int64_t ldc) {
  ThreadGemm& t = thread_gemm();
  bool bf16 = precision == Precision::Bf16;
  const void* a_data = a.data;
  const void* b_data = b.data;
  if (bf16 && !onednn_has_bf16()) {
    widen_bf16(t.a32, a, trans_a ? k : m, trans_a ? m : k, lda);
    widen_bf16(t.b32, b, trans_b ? n : k, trans_b ? k : n, ldb);
    lda = trans_a ? m : k;
    ldb = trans_b ? k : n;
    a_data = t.a32.data();
    b_data = t.b32.data();
    bf16 = false;  // an fp32 product from here on
  }
  if (bf16) {
    // Bits stay where they are (the primitive reads them ld apart).
    if (a.dtype == DType::F32) {
      pack_bf16(t.a16, static_cast<const float*>(a.data), trans_a ? k : m, trans_a ? m : k, lda);
      lda = trans_a ? m : k;
      a_data = t.a16.data();
    }
    if (b.dtype == DType::F32) {
      pack_bf16(t.b16, static_cast<const float*>(b.data), trans_b ? n : k, trans_b ? k : n, ldb);
      ldb = trans_b ? k : n;
      b_data = t.b16.data();
    }
  }
  float* const result = c;
  const std::int64_t result_ld = ldc;
  const bool staged = bf16 && ldc != n;
  if (staged) {
    const auto dense = static_cast<std::size_t>(m * n);
    if (t.c32.size() < dense) t.c32.resize(dense);
    c = t.c32.data();
    ldc = n;
    if (beta != 0.0f) copy_columns(nullptr, GradMode::Overwrite, c, ldc, result, result_ld, m, n);
  }
  const bool nested = omp_in_parallel();
  const ProductKey key{bf16, trans_a, trans_b, m, n, k, lda, ldb, ldc, alpha, beta,
                       nested ? 1 : omp_get_max_threads()};
  std::optional<OneThreadScope> one_thread;
  if (nested) one_thread.emplace();
  auto found = t.products.find(key);
  if (found == t.products.end()) {
    if (t.products.size() >= kKeptProducts) t.products.clear();
    found = t.products.emplace(key, make_product(key)).first;
  }
  KeptProduct& p = found->second;
  if (t.scratchpad.size() < p.scratchpad.get_size()) t.scratchpad.resize(p.scratchpad.get_size());
  // The memory objects share their handles with the argument map's copies; oneDNN only reads
  // the operands.
  p.a.set_data_handle(const_cast<void*>(a_data));
  p.b.set_data_handle(const_cast<void*>(b_data));
  p.c.set_data_handle(c);
  p.scratch.set_data_handle(t.scratchpad.data());
  p.primitive.execute(t.stream, p.args);
  t.stream.wait();
  if (staged) copy_columns(nullptr, GradMode::Overwrite, result, result_ld, c, ldc, m, n);
}

}  // namespace

void gemm(Precision precision, bool trans_a, bool trans_b, std::int64_t m, std::int64_t n,
          std::int64_t k, float alpha, const float* a, std::int64_t lda, const float* b,
          std::int64_t ldb, float beta, float* c, std::int64_t ldc) {
  gemm(precision, trans_a, trans_b, m, n, k, alpha, Operand{a}, lda, Operand{b}, ldb, beta, c,
       ldc);
}

void gemm(Precision precision, bool trans_a, bool trans_b, std::int64_t m, std::int64_t n,
          std::int64_t k, float alpha, Operand a, std::int64_t lda, Operand b, std::int64_t ldb,
          float beta, float* c, std::int64_t ldc) {
  for (const Operand& o : {a, b}) {
    NOEIRA_CHECK(o.dtype == DType::F32 || (o.dtype == DType::BF16 && precision == Precision::Bf16),
                 "a ", to_string(precision), " matrix product given a ", to_string(o.dtype),
                 " operand");
  }
  const bool openblas = precision == Precision::Fp32 && !kFp32ProductsOnOneDnn;
  if (openblas || k <= 0) {  // k = 0: C = beta · C, which sgemm does (reading neither operand)
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, as_blas_int(m), as_blas_int(n),
                as_blas_int(k), alpha, static_cast<const float*>(a.data), as_blas_int(lda),
                static_cast<const float*>(b.data), as_blas_int(ldb), beta, c, as_blas_int(ldc));
    return;
  }
  if (m <= 0 || n <= 0) return;
  try {
    onednn_gemm(precision, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  } catch (const dnnl::error& e) {
    throw Error(::noeira::detail::concat(to_string(precision), " matrix product ", m, "x", n,
                                         "x", k, " (oneDNN): ", e.what()));
  }
}

const char* products_library() { return kFp32ProductsOnOneDnn ? "oneDNN" : "OpenBLAS"; }

}  // namespace noeira::cpu

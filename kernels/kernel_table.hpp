#pragma once
// The one dispatch point of the kernels: a table of function pointers per target. Every backend
// (kernels/cpu, kernels/cuda) fills the same table, so a signature is written once, here, and a
// backend that forgets or mistypes a kernel fails to compile.
//
// Conventions (llm.c): stream first, then outputs, then inputs, then sizes. Matrices are
// row-major; "rows" is the batch (times sequence) dimension. Pointers are to the target's memory.
// Element counts are elements, never bytes, except in the raw memory functions.
#include <cstddef>
#include <cstdint>
#include <string>

#include "kernels/optimizer_math.hpp"
#include "kernels/target.hpp"

namespace noeira {

// Identifies one dropout mask: a value is a pure function of (seed, step, global row, column).
struct DropoutKey {
  std::uint64_t seed = 0;
  std::uint64_t step = 0;
  std::int64_t row_offset = 0;  // global index of local row 0 (rank r's first row of the batch)
};

// How gather_pixels turns the bytes of a data set's row into a model's inputs. The row is
// `channels` planes of equal size; byte b of channel c becomes b · scale[c] + shift[c], rounded
// after the product and after the sum (never a fused multiply-add), with scale = 1 / (255 · std)
// and shift = −mean / std computed in float on the host: the arithmetic the data sets used when
// they were held normalized, so every input keeps its bits. shift[c] is also what a black pixel
// becomes, the value of crop-flip's padding.
inline constexpr int kMaxPixelChannels = 4;
struct PixelNormalization {
  std::int64_t channels = 1;
  float scale[kMaxPixelChannels] = {};
  float shift[kMaxPixelChannels] = {};
};

// One random crop and horizontal flip per image, torchvision's RandomCrop(size, padding) then
// RandomHorizontalFlip(): the crop's offsets and the flip of a sample are a pure function of
// (seed, epoch, sample), kernels/augment_math.hpp, so no rank count, batch position, thread count
// or launch shape changes what an image becomes.
struct CropFlip {
  std::uint64_t seed = 0;
  std::uint64_t epoch = 0;
  std::int64_t channels = 1, height = 1, width = 1;  // each table row is [channels, height, width]
  std::int64_t padding = 0;  // pixels added on every side before a crop of height x width
};

enum class LossKind : std::uint8_t { CrossEntropy, SoftCrossEntropy, Mse, TwoHot, GaussianNll };

// No ignore index: an int64 that no int32 label can equal.
inline constexpr std::int64_t kNoIgnoreIndex = INT64_MIN;

// What row_loss reads and writes; a loss leaves the pointers it does not use null. grad may be
// null: loss only, for evaluation.
struct RowLossArgs {
  float* row_loss = nullptr;             // [rows] per-row loss, unscaled
  float* grad = nullptr;                 // [rows, cols] grad_scale · d row_loss / d pred
  // [rows, cols] logits (CE, soft CE, two-hot) or predictions (MSE); Gaussian NLL: [rows, cols]
  // with the means in columns [0, cols/2) and the variances in [cols/2, cols).
  const float* pred = nullptr;
  // [rows, cols] distributions (soft CE) or values (MSE); [rows, cols/2] values (Gaussian NLL);
  // [rows] one scalar per row (two-hot).
  const float* target = nullptr;
  const std::int32_t* labels = nullptr;  // [rows] class labels (CE)
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  float grad_scale = 1.0f;
  std::int64_t ignore_index = kNoIgnoreIndex;  // CE: the label of rows that do not count
  float bin_low = 0.0f, bin_high = 1.0f;  // two-hot: cols bins evenly spaced over [low, high]
  float variance_floor = 1e-6f;           // Gaussian NLL: variances are clamped to at least this
};

// The cells of the recurrent layers, with PyTorch's gate order and equations (torch.nn.LSTM:
// i, f, g, o; torch.nn.GRU: r, z, n).
enum class RecurrentCell : std::uint8_t { Lstm, Gru };

// One time step t of a recurrent layer over `batch` sequences of `hidden` units. Sequence tensors
// are batch-first [batch, steps, width] and the pointers below are their step-t slices, so the
// rows of a slice are steps · width apart; the carries (dh, dc) are contiguous [batch, hidden].
// G is the number of gates (LSTM 4, GRU 3), each `hidden` wide. A null *_prev pointer is the
// zero initial state (t = 0).
struct RecurrentStep {
  RecurrentCell cell = RecurrentCell::Lstm;
  std::int64_t batch = 0, steps = 0, hidden = 0;
  // forward in: pre-activations x·W_ihᵀ + b_ih (LSTM: plus h_prev·W_hhᵀ); out: the activated gates
  // (LSTM i, f, g, o; GRU r, z, n). [batch, steps, G·hidden].
  float* gates = nullptr;
  // GRU: forward in h_prev·W_hhᵀ (null at t = 0: zero); out, in its n part, W_hn·h_prev + b_hn,
  // which the backward reads. [batch, steps, 3·hidden]. Unused by the LSTM.
  float* hidden_gates = nullptr;
  const float* bias_hh = nullptr;  // [G·hidden]
  float* h = nullptr;              // out: h_t [batch, steps, hidden] (the layer's output)
  float* h_next_prev = nullptr;    // out, when not null: h_t again, as step t+1's h_prev
  const float* h_prev = nullptr;   // h_{t-1} [batch, steps, hidden], null at t = 0
  float* c = nullptr;              // LSTM: out c_t [batch, steps, hidden]
  const float* c_prev = nullptr;   // LSTM: c_{t-1}, null at t = 0
  // backward:
  const float* dy = nullptr;  // dL/dh_t from above the layer [batch, steps, hidden]
  // [batch, hidden] in: dL/dh_t through step t+1 (zero at the last step); out: the part of
  // dL/dh_{t-1} that does not pass through W_hh (GRU z·dh, LSTM 0). The caller then adds
  // dhidden_gates · W_hh.
  float* dh = nullptr;
  float* dc = nullptr;  // LSTM [batch, hidden] in: dL/dc_t through step t+1; out: dL/dc_{t-1}
  float* dgates = nullptr;  // out: dL/d(x·W_ihᵀ + b_ih) [batch, steps, G·hidden]
  // GRU out: dL/d(h_prev·W_hhᵀ + b_hh) [batch, steps, 3·hidden]; the LSTM's is dgates itself.
  float* dhidden_gates = nullptr;
};

// The word gather_rows writes for an index outside its table: a quiet NaN as a float.
inline constexpr std::uint32_t kPoisonWord = 0x7FC00000u;

// One operand of a batched matrix product: item (g, i) — item i of group g — is the row-major
// matrix at data + g · outer_stride + i · stride, its rows ld apart.
template <class T>
struct MatrixBatch {
  T* data = nullptr;
  std::int64_t ld = 0;
  std::int64_t stride = 0;
  std::int64_t outer_stride = 0;
};

// A batch of row-major matrix products C = alpha · op(A) · op(B) + beta · C, op(A) [m,k],
// op(B) [k,n], C [m,n], k > 0, for `groups` groups of `batch` items. Two levels, so that
// attention reads the heads of [batch, seq, heads · head_dim] activations in place (group = a
// sequence, item = a head at stride head_dim) with no permutation. beta = 0 never reads C; the
// items' C must not overlap (A's and B's may).
struct BatchedMatmulArgs {
  bool trans_a = false;  // op(A) = Aᵀ: A is stored [k,m]
  bool trans_b = false;  // op(B) = Bᵀ: B is stored [n,k]
  std::int64_t m = 0, n = 0, k = 0;
  float alpha = 1.0f;
  float beta = 0.0f;
  MatrixBatch<const float> a, b;
  MatrixBatch<float> c;
  std::int64_t batch = 1;   // items per group
  std::int64_t groups = 1;  // groups
};

// Which keys each query row of an attention softmax sees: always a prefix [0, n) of the tk keys,
// so one count per row says it. Query i of tq is at position tk - tq + i (the last tq positions:
// with a KV cache the new queries follow the cached keys; in training tq = tk).
struct AttentionMask {
  bool causal = false;  // query at position p sees keys j <= p
  // [batch] in the target's memory, or null: sequence b sees keys j < key_lengths[b], clamped to
  // [0, tk] (the padding mask of a batch of sequences of different lengths).
  const std::int32_t* key_lengths = nullptr;
};

// Where batchnorm_statistics takes the statistics from: the batch (training) or the running
// estimates (evaluation).
enum class BatchNormSource : std::uint8_t { Batch, Running };

// Which way rope() turns: Inverse is RoPE's vjp (a rotation's transpose is its inverse).
enum class Rotation : std::uint8_t { Forward, Inverse };

// Which elements of a head rope() turns together as pair i: SplitHalves (i, i + head_dim / 2), as
// GPT-NeoX, Hugging Face's Llama and the system noeira follows pair them; Interleaved (2i, 2i + 1),
// as RoFormer and Meta's original LLaMA code do. A checkpoint computes the right function only
// under the pairing it was trained with.
enum class RopePairs : std::uint8_t { SplitHalves, Interleaved };

// One rope() call: x [rows, heads · head_dim], rows = batch · seq in [batch, seq] order, row r at
// position start + r % seq.
struct RopeGeometry {
  std::int64_t rows = 0, seq = 1, heads = 1, head_dim = 2;
  std::int64_t start = 0;
  float base = 10000.0f;
  RopePairs pairs = RopePairs::SplitHalves;
};

// One 2-D convolution as its kernels see it. Activations are NCHW: `images` images of
// in_channels x in_height x in_width in, of out_channels x out_height x out_width out. The weight
// is [out_channels, in_channels / groups, kernel, kernel] (PyTorch's Conv2d layout); group g maps
// input channels [g·Ci/G, (g+1)·Ci/G) to output channels [g·Co/G, (g+1)·Co/G). Output pixel
// (oh, ow) reads input (oh·stride − padding + i·dilation, ow·stride − padding + j·dilation) for
// kernel tap (i, j), zero outside the image; out_height and out_width are the window's output
// size (PyTorch's formula).
struct ConvGeometry {
  std::int64_t images = 0;
  std::int64_t in_channels = 0, in_height = 0, in_width = 0;
  std::int64_t out_channels = 0, out_height = 0, out_width = 0;
  std::int64_t kernel = 1;  // square
  std::int64_t stride = 1;
  std::int64_t padding = 0;  // zeros on every side
  std::int64_t dilation = 1;
  std::int64_t groups = 1;

  constexpr bool operator==(const ConvGeometry&) const = default;

  // Floats of the weight ([out_channels, in_channels / groups, kernel, kernel]), of one input
  // image and of one output image.
  constexpr std::int64_t weight_floats() const {
    return out_channels * (in_channels / groups) * kernel * kernel;
  }
  constexpr std::int64_t in_image_floats() const { return in_channels * in_height * in_width; }
  constexpr std::int64_t out_image_floats() const { return out_channels * out_height * out_width; }
};

// Which reduction a pooling window makes.
enum class Pooling : std::uint8_t { Max, Average };

// A batch of image planes read through sliding windows (pooling): `planes` (images · channels)
// planes of in_h × in_w, row-major, each padded by pad_h rows and pad_w columns on every side and
// read through kernel_h × kernel_w windows, stride_h and stride_w apart, into out_h × out_w.
// Every window must hold at least one element of the image (padding <= kernel / 2 and an output
// size that does not reach past the padding, as PyTorch's formula gives).
struct PoolGeometry {
  std::int64_t planes = 0;
  std::int64_t in_h = 0, in_w = 0;
  std::int64_t out_h = 0, out_w = 0;
  std::int64_t kernel_h = 1, kernel_w = 1;
  std::int64_t stride_h = 1, stride_w = 1;
  std::int64_t pad_h = 0, pad_w = 0;
};

struct KernelTable {
  Target target;
  Precision precision = Precision::Fp32;  // of the matrix products below

  // --- raw memory (bytes) ---------------------------------------------------------------------
  void* (*allocate)(std::size_t bytes);
  void (*release)(void* ptr);
  void (*upload)(Stream, void* dst, const void* host_src, std::size_t bytes);
  void (*download)(Stream, void* host_dst, const void* src, std::size_t bytes);
  // dst and src are the same range or do not overlap (cudaMemcpy's rule; the CPU would allow it).
  void (*copy)(Stream, void* dst, const void* src, std::size_t bytes);
  void (*synchronize)(Stream);
  // A stream of the caller's own, ordered with the target's default stream both ways (a CUDA
  // stream created blocking): work on the default stream waits for the stream's earlier work and
  // its later work waits for the default stream's. Null on the CPU.
  Stream (*create_stream)();
  void (*destroy_stream)(Stream);
  // dst row r = table row index[r], rows of row_words 4-byte words (floats or int32 alike): the
  // embedding lookup and the batch gather from a resident data set. An index outside
  // [0, table_rows) never reads outside the table: its row is filled with kPoisonWord (a NaN as
  // a float), so a bad token id that reached a device shows as a NaN loss, not a crash.
  void (*gather_rows)(Stream, void* dst, const std::int32_t* index, const void* table,
                      std::int64_t rows, std::int64_t row_words, std::int64_t table_rows);
  // The batch gather from a resident data set of bytes: dst row r = table row index[r] (row r
  // when index is null: evaluation in file order, the caller offsetting table), row_bytes bytes
  // each, written as floats normalized by `norm`. Where `augment` is not null each image is also
  // cropped and flipped as it draws for sample index[r] (the data set's index, whatever its
  // position in the batch), its padding shift[c]; augment's channels x height x width is then
  // row_bytes and its channels norm.channels. A row outside the table is poisoned as in
  // gather_rows. norm.channels <= kMaxPixelChannels and divides row_bytes.
  void (*gather_pixels)(Stream, float* dst, const std::int32_t* index, const std::uint8_t* table,
                        std::int64_t rows, std::int64_t row_bytes, std::int64_t table_rows,
                        const PixelNormalization& norm, const CropFlip* augment);

  // --- element-wise -----------------------------------------------------------------------------
  void (*fill)(Stream, float* x, float value, std::int64_t n);
  void (*scale)(Stream, float* x, float factor, std::int64_t n);
  // y = a + b (y may alias a or b)
  void (*add)(Stream, float* y, const float* a, const float* b, std::int64_t n);
  // y += x
  void (*accumulate)(Stream, float* y, const float* x, std::int64_t n);
  // y += x for n elements of any arithmetic dtype (F32, F64, I32, I64): the simulated world's
  // reductions of typed collective buffers.
  void (*accumulate_typed)(Stream, DType, void* y, const void* x, std::int64_t n);
  // y = x rounded to bfloat16 (kernels/bf16_math.hpp), and y (= or +=) the fp32 value of x: the
  // conversions around bf16 gradient reductions (--reduce-dtype bf16) and the simulated world's
  // fp32 accumulation of bf16 sums.
  void (*to_bf16)(Stream, std::uint16_t* y, const float* x, std::int64_t n);
  void (*from_bf16)(Stream, GradMode, float* y, const std::uint16_t* x, std::int64_t n);
  // dst[r, 0:cols] (= or +=) src[r, 0:cols] with independent row strides; for concat and split.
  // A src_stride of 0 repeats one row into every dst row (a broadcast: the ViT's class token).
  void (*copy_columns)(Stream, GradMode, float* dst, std::int64_t dst_stride, const float* src,
                       std::int64_t src_stride, std::int64_t rows, std::int64_t cols);
  // y[r, c] = x[r, c] · x[r, h + c] for rows of 2h: the gate of a gated linear unit (SwiGLU).
  void (*gated_product_forward)(Stream, float* y, const float* x, std::int64_t rows,
                                std::int64_t h);
  // dx[r, c] = dy[r, c] · x[r, h + c], dx[r, h + c] = dy[r, c] · x[r, c] (dx overwritten).
  void (*gated_product_backward)(Stream, float* dx, const float* dy, const float* x,
                                 std::int64_t rows, std::int64_t h);

  // --- reductions (deterministic for any thread count or GPU) --------------------------------
  // Result on the host: the call waits for the stream.
  double (*sum_squares)(Stream, const float* x, std::int64_t n);
  double (*sum)(Stream, const float* x, std::int64_t n);
  // *acc += Σ x, acc one double in the target's memory; on CUDA nothing waits for the stream.
  // Adds exactly the value sum() returns.
  void (*sum_into)(Stream, double* acc, const float* x, std::int64_t n);

  // --- Linear family ------------------------------------------------------------------------
  // y[rows,out] = act(x[rows,in] · w[out,in]ᵀ + b[out]); b may be null (no bias).
  // pre[rows,out] receives x·wᵀ+b when activation_needs_input(act), else may be null.
  void (*linear_forward)(Stream, Activation act, float* y, float* pre, const float* x,
                         const float* w, const float* b, std::int64_t rows, std::int64_t in,
                         std::int64_t out);
  // Parameter gradients first (dw, db per mode), then dx (overwritten; skipped when null).
  // dpre[rows,out] is scratch for dy·act'(·) (unused for Identity). y and pre are the forward's.
  void (*linear_backward)(Stream, Activation act, GradMode mode, float* dx, float* dw, float* db,
                          float* dpre, const float* dy, const float* x, const float* w,
                          const float* y, const float* pre, std::int64_t rows, std::int64_t in,
                          std::int64_t out);
  // The same two with activations of either dtype (--precision bf16 holds an activation that
  // only matrix products read as its bfloat16 bits: core/bf16_activation.hpp): x as fp32 values
  // or bf16 bits (x_dtype F32 or BF16), and the forward's y as either (y_dtype). A bf16 y needs
  // pre and an act whose derivative reads it (activation_needs_input): the backward is then
  // given pre for y, which it does not read. Bits need the bf16 table, whose products round x to
  // bfloat16 anyway: the results are linear_forward's and linear_backward's bit for bit, y rounded
  // to bfloat16 as to_bf16 rounds it.
  void (*linear_forward_typed)(Stream, Activation act, void* y, DType y_dtype, float* pre,
                               const void* x, DType x_dtype, const float* w, const float* b,
                               std::int64_t rows, std::int64_t in, std::int64_t out);
  void (*linear_backward_typed)(Stream, Activation act, GradMode mode, float* dx, float* dw,
                                float* db, float* dpre, const float* dy, const void* x,
                                DType x_dtype, const float* w, const float* y, const float* pre,
                                std::int64_t rows, std::int64_t in, std::int64_t out);

  // --- activations --------------------------------------------------------------------------
  void (*activation_forward)(Stream, Activation act, float* y, const float* x, std::int64_t n);
  // dx = dy · act'(x, y); dx may alias dy.
  void (*activation_backward)(Stream, Activation act, float* dx, const float* dy, const float* x,
                              const float* y, std::int64_t n);

  // --- softmax over the last dimension ------------------------------------------------------
  void (*softmax_forward)(Stream, float* y, const float* x, std::int64_t rows, std::int64_t cols);
  void (*softmax_backward)(Stream, float* dx, const float* dy, const float* y, std::int64_t rows,
                           std::int64_t cols);

  // --- attention ------------------------------------------------------------------------------
  // Every item of BatchedMatmulArgs; on the CPU one sgemm per item (parallel over the items when
  // they are small), on CUDA cuBLASLt strided-batched products.
  void (*batched_matmul)(Stream, const BatchedMatmulArgs& args);
  // y[b,h,i,:] = softmax of x[b,h,i,:] over the keys the mask lets row i see, in fp32 with the
  // row max subtracted; y = 0 at every masked key, and a row that sees no key is all 0 (not NaN).
  // x, y [batch, heads, tq, tk]; y may alias x. The 1/sqrt(d) scale is the alpha of the product
  // that makes x. The backward is softmax_backward: masked entries have y = 0, so their gradient
  // is 0 whatever dy holds.
  void (*masked_softmax_forward)(Stream, float* y, const float* x, AttentionMask mask,
                                 std::int64_t batch, std::int64_t heads, std::int64_t tq,
                                 std::int64_t tk);
  // Rotary position embedding of x (RopeGeometry): in every head, pair i (g.pairs says which two
  // elements) turns by position · base^(-2i / head_dim) radians (Inverse: by minus that). head_dim
  // even; y may alias x. Angles, sines and cosines in double, so that the CPU and CUDA agree to
  // an ulp of fp32 and far positions keep their precision.
  void (*rope)(Stream, Rotation rotation, const RopeGeometry& g, float* y, const float* x);

  // --- convolution (ConvGeometry: NCHW activations, PyTorch's weight layout) ----------------
  // Three linear maps of one convolution C, as cuDNN names them. ConvTranspose2D is the same
  // code with the roles swapped: its forward is conv2d_backward_data, its input gradient
  // conv2d_forward, its weight gradient conv2d_backward_filter with its input as dy.
  // `workspace` holds conv2d_workspace(geometry) floats that the caller owns (the CPU's
  // weight-gradient partial sums, a function of the sizes alone; CUDA asks for none and takes
  // cuDNN's from its own per-stream scratch). Deterministic: the same bits for any thread count.
  std::int64_t (*conv2d_workspace)(const ConvGeometry&);
  // y [images, Co, Ho, Wo] = C(x [images, Ci, H, W]; w) + b[Co] (b may be null).
  void (*conv2d_forward)(Stream, float* y, const float* x, const float* w, const float* b,
                         const ConvGeometry&, float* workspace);
  // dx [images, Ci, H, W] = Cᵀ(dy; w) + b[Ci] (overwritten; b may be null, and is null for a
  // convolution's input gradient; a transposed convolution's bias is over these channels).
  void (*conv2d_backward_data)(Stream, float* dx, const float* dy, const float* w, const float* b,
                               const ConvGeometry&, float* workspace);
  // dw [Co, Ci / groups, k, k] (= or +=, per mode) the weight gradient of C at input x for the
  // output gradient dy.
  void (*conv2d_backward_filter)(Stream, GradMode mode, float* dw, const float* dy, const float* x,
                                 const ConvGeometry&, float* workspace);
  // db[c] (= or +=, per mode) Σ over images and pixels of dy [images, channels, pixels]: a
  // convolution's bias gradient (or a transposed one's, from its own output gradient).
  void (*conv2d_backward_bias)(Stream, GradMode mode, float* db, const float* dy,
                               std::int64_t images, std::int64_t channels, std::int64_t pixels);
  // --- images: pooling and nearest upsampling, [planes, h, w] row-major ---------------------
  // y [planes, out_h, out_w] from x [planes, in_h, in_w] (PyTorch's max_pool2d and avg_pool2d).
  // Max: each window's largest element, padding counting as -inf and a NaN winning (it
  // propagates); argmax [planes, out_h, out_w] receives its index in the plane (h · in_w + w),
  // the first in row-major window order among equals. Average: the window's sum over
  // kernel_h · kernel_w, padding counted as zeros (count_include_pad); argmax is unused (null).
  void (*pool2d_forward)(Stream, Pooling pooling, float* y, std::int32_t* argmax, const float* x,
                         const PoolGeometry& geometry);
  // dx [planes, in_h, in_w] overwritten: each element gathers dy from the windows that hold it, in
  // row-major window order (Max: the windows whose argmax it is), so the result has the same
  // bits for any thread count or launch shape. argmax is the forward's (Max; null for Average).
  void (*pool2d_backward)(Stream, Pooling pooling, float* dx, const float* dy,
                          const std::int32_t* argmax, const PoolGeometry& geometry);
  // y [planes, h · scale, w · scale] repeats each element of x [planes, h, w] in a scale × scale
  // block (PyTorch's interpolate(mode='nearest') with an integer scale factor).
  void (*upsample_nearest_forward)(Stream, float* y, const float* x, std::int64_t planes,
                                   std::int64_t h, std::int64_t w, std::int64_t scale);
  // dx [planes, h, w] overwritten with the sum of dy [planes, h · scale, w · scale] over each
  // element's block, in row-major order.
  void (*upsample_nearest_backward)(Stream, float* dx, const float* dy, std::int64_t planes,
                                    std::int64_t h, std::int64_t w, std::int64_t scale);

  // --- normalization: LayerNorm, or RMSNorm where mean, beta and dbeta are null -------------
  // LayerNorm: xhat = (x - mean) · rstd, y = xhat · gamma + beta. RMSNorm: xhat = x · rstd, with
  // rstd from the mean square, y = xhat · gamma. mean[rows] (LayerNorm) and rstd[rows] are saved
  // for the backward pass.
  void (*norm_forward)(Stream, float* y, float* mean, float* rstd, const float* x,
                       const float* gamma, const float* beta, std::int64_t rows,
                       std::int64_t cols, float eps);
  // The same with y as fp32 values or as their bfloat16 bits (y_dtype F32 or BF16, rounded as
  // to_bf16 rounds them): a norm whose output only matrix products read (linear_forward_typed).
  void (*norm_forward_typed)(Stream, void* y, DType y_dtype, float* mean, float* rstd,
                             const float* x, const float* gamma, const float* beta,
                             std::int64_t rows, std::int64_t cols, float eps);
  // Parameter gradients first (dgamma, and dbeta where not null, per mode), then dx (skipped
  // when null). mean and rstd are the forward's.
  void (*norm_backward)(Stream, GradMode mode, float* dx, float* dgamma, float* dbeta,
                        const float* dy, const float* x, const float* gamma, const float* mean,
                        const float* rstd, std::int64_t rows, std::int64_t cols);

  // --- batch normalization over channels (formulas: kernels/batchnorm_math.hpp) -----------------
  // x is [rows, channels, pixels]: an image batch [rows, C, H, W] has pixels = H·W, [rows, C] has
  // pixels = 1. Sums are per channel in double, in a fixed order (no thread-count dependence).
  // moments [2C + 1] = Σx per channel, Σx² per channel, the count rows · pixels; all zero when
  // !counted (a rank whose rows are stand-ins adds nothing to the global batch's statistics).
  void (*batchnorm_moments)(Stream, double* moments, const float* x, bool counted,
                            std::int64_t rows, std::int64_t channels, std::int64_t pixels);
  // mean[C] and rstd[C]: with source Batch from `moments` (the global batch's when synchronized),
  // then, when update_running and the count is non-zero, the running statistics move towards the
  // batch's and batches_tracked[0] grows by one; with source Running from running_mean and
  // running_var (evaluation; moments unused).
  void (*batchnorm_statistics)(Stream, BatchNormSource source, float* mean, float* rstd,
                               float* running_mean, float* running_var, float* batches_tracked,
                               const double* moments, std::int64_t channels, float eps,
                               float momentum, bool update_running);
  // y = (x − mean[c]) · rstd[c] · gamma[c] + beta[c].
  void (*batchnorm_forward)(Stream, float* y, const float* x, const float* mean, const float* rstd,
                            const float* gamma, const float* beta, std::int64_t rows,
                            std::int64_t channels, std::int64_t pixels);
  // grad_sums [2C] = Σdy per channel, Σ dy · xhat per channel, over this rank's rows.
  void (*batchnorm_grad_sums)(Stream, double* grad_sums, const float* dy, const float* x,
                              const float* mean, const float* rstd, std::int64_t rows,
                              std::int64_t channels, std::int64_t pixels);
  // Parameter gradients first, from this rank's local_sums (dgamma = Σ dy · xhat, dbeta = Σ dy,
  // per mode), then dx (skipped when null) from batch_sums, the gradient sums over the batch the
  // statistics came from (local_sums again unless synchronized), and that batch's count
  // moments[2C].
  void (*batchnorm_backward)(Stream, GradMode mode, float* dx, float* dgamma, float* dbeta,
                             const double* local_sums, const double* batch_sums,
                             const double* moments, const float* dy, const float* x,
                             const float* mean, const float* rstd, const float* gamma,
                             std::int64_t rows, std::int64_t channels, std::int64_t pixels);

  // --- embedding (ids are checked against vocab by the caller on the host) ------------------
  // The lookup is gather_rows.
  // dtable is overwritten (zeroed, then scattered) or accumulated per mode; a fixed order per
  // id keeps repeated ids deterministic. Ids outside [0, vocab) are skipped (their forward rows
  // were poisoned: see gather_rows).
  void (*embedding_backward)(Stream, GradMode mode, float* dtable, const float* dy,
                             const std::int32_t* ids, std::int64_t rows, std::int64_t dim,
                             std::int64_t vocab);

  // --- dropout (mask regenerated from the key in backward; nothing stored) -----------------
  // y = x · mask / (1 - p); dx may alias dy, y may alias x.
  void (*dropout_forward)(Stream, float* y, const float* x, DropoutKey key, float p,
                          std::int64_t rows, std::int64_t cols);
  void (*dropout_backward)(Stream, float* dx, const float* dy, DropoutKey key, float p,
                           std::int64_t rows, std::int64_t cols);

  // --- recurrent layers: the pointwise part of one time step (RecurrentStep says what each
  // reads and writes); the matrix products around it are linear_forward and batched_matmul.
  // Each (sequence, unit) is independent, so the result does not depend on threads or launch.
  void (*recurrent_step_forward)(Stream, const RecurrentStep& step);
  void (*recurrent_step_backward)(Stream, const RecurrentStep& step);

  // --- losses: per-row loss (unscaled) and its gradient scaled by grad_scale ----------------
  // One entry for every row loss; RowLossArgs says what each reads. Per row (cols = classes):
  //   CrossEntropy      -log softmax(pred)[label]; grad (softmax(pred) - onehot(label)) · scale.
  //                     A row whose label == ignore_index has loss 0 and gradient 0. A label
  //                     outside [0, cols) otherwise gives a NaN loss and a NaN gradient row,
  //                     never an out-of-bounds read: labels are not checked on the device.
  //   SoftCrossEntropy  -Σ target · log softmax(pred); grad (Σ target · softmax - target) · scale.
  //   Mse               Σ (pred - target)² / cols; grad 2 (pred - target) / cols · scale.
  //   TwoHot            soft CE against the two-hot encoding of the row's scalar target over cols
  //                     bins evenly spaced on [bin_low, bin_high] (the target clamped to it): the
  //                     two bins around it, weighted by closeness (DreamerV3's critic loss).
  //   GaussianNll       Σ_c ½ (log v_c + (μ_c - target_c)² / v_c) / d over the d = cols/2 means
  //                     μ and variances v of the row, v clamped to at least variance_floor
  //                     (torch.nn.GaussianNLLLoss, full=False); the gradient reaches μ and v, the
  //                     clamp passing it through as PyTorch's does.
  // Finite for logits of any magnitude (softmax relative to the row max).
  void (*row_loss)(Stream, LossKind kind, const RowLossArgs& args);
  // Number of rows whose arg-max equals the label.
  std::int64_t (*count_correct)(Stream, const float* logits, const std::int32_t* labels,
                                std::int64_t rows, std::int64_t classes);

  // --- optimizers over flat buffers -----------------------------------------------------------
  // momentum may be null when hyper.momentum == 0.
  void (*sgd_step)(Stream, float* w, float* momentum, const float* g, std::int64_t n,
                   SgdHyper hyper);
  void (*adam_step)(Stream, float* w, float* m, float* v, const float* g, std::int64_t n,
                    AdamHyper hyper);
};

// The table for a target, its matrix products at `precision`. Asking for Cuda in a build without
// CUDA, or on a machine whose CUDA runtime finds no device, throws an error that says so.
const KernelTable& kernels_for(Target target, Precision precision = Precision::Fp32);

// True when this build has the CUDA kernels, their plugin loads (kernels/cuda_plugin.hpp) and a
// CUDA device is present. Loads the plugin in a CUDA build.
bool cuda_available();

// Why cuda_available() is false, in words that name what to fix; empty when it is true.
std::string cuda_unavailable_reason();

// TF32 tensor-core matrix products on CUDA (off by default: GPU results then match the fp32 CPU
// reference within fp32 tolerance). For GEMMs launched afterwards from any thread; no effect on
// the CPU or in a build without CUDA.
void set_allow_tf32(bool allow);

}  // namespace noeira

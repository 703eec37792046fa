#include "core/tensor.hpp"

#include <array>
#include <atomic>
#include <cstring>
#include <optional>
#include <sstream>

#include "core/scratch_arena.hpp"
#include "kernels/error.hpp"
#include "kernels/size_math.hpp"

namespace noeira {

std::int64_t shape_numel(const Shape& shape) {
  std::int64_t n = 1;
  for (std::int64_t d : shape) {
    const std::optional<std::int64_t> next = size_product({n, d});
    NOEIRA_CHECK(next.has_value(), "tensor shape ", shape_string(shape),
                 " has a negative dimension or more elements than int64 counts");
    n = *next;
  }
  return n;
}

std::string shape_string(const Shape& shape) {
  std::ostringstream os;
  os << '[';
  for (std::size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  os << ']';
  return os.str();
}

namespace detail {

struct ByteAccount {
  static constexpr std::size_t kTargets = 2;
  std::array<std::atomic<std::int64_t>, kTargets> live{};
  std::array<std::atomic<std::int64_t>, kTargets> peak{};
};

}  // namespace detail

std::size_t storage_bytes(std::int64_t numel, DType dtype) {
  const std::size_t bytes = static_cast<std::size_t>(numel) * dtype_size(dtype);
  return (bytes + 3) / 4 * 4;
}

namespace {

void check_dimensions(const Shape& shape) {
  for (std::int64_t d : shape) {
    NOEIRA_CHECK(d >= 0, "negative dimension in shape ", shape_string(shape));
  }
}

std::size_t target_index(Target target) {
  const auto i = static_cast<std::size_t>(target);
  NOEIRA_CHECK(i < detail::ByteAccount::kTargets, "tensor bytes: unknown target");
  return i;
}

// Shared, so that storage outliving its thread (a simulated rank's) still has its account.
const std::shared_ptr<detail::ByteAccount>& this_threads_account() {
  thread_local const std::shared_ptr<detail::ByteAccount> account =
      std::make_shared<detail::ByteAccount>();
  return account;
}

}  // namespace

TensorBytes tensor_bytes(Target target) {
  const detail::ByteAccount& a = *this_threads_account();
  const std::size_t i = target_index(target);
  return {a.live[i].load(), a.peak[i].load()};
}

void reset_peak_tensor_bytes(Target target) {
  detail::ByteAccount& a = *this_threads_account();
  const std::size_t i = target_index(target);
  a.peak[i] = a.live[i].load();
}

Storage::Storage(Target target, std::size_t bytes, Kind kind)
    : target_(target), bytes_(bytes), kind_(kind), data_(kernels_for(target).allocate(bytes)) {
  NOEIRA_CHECK(kind != Kind::Adopted, "storage: adopted memory comes with its owner");
  count_and_zero();
}

Storage::Storage(Target target, std::size_t bytes, std::shared_ptr<void> memory)
    : target_(target), bytes_(bytes), kind_(Kind::Adopted), data_(memory.get()),
      adopted_(std::move(memory)) {
  NOEIRA_CHECK(data_ != nullptr || bytes_ == 0, "storage: adopted memory is null");
  count_and_zero();
}

void Storage::count_and_zero() {
  if (bytes_ != 0) {
    account_ = this_threads_account();
    const std::size_t i = target_index(target_);
    const std::int64_t live = account_->live[i] += static_cast<std::int64_t>(bytes_);
    // Only this thread raises its peak; others only lower `live` (a free of this thread's
    // storage), so a stale comparison can only miss a peak that another free undid.
    if (live > account_->peak[i]) account_->peak[i] = live;
    // Zero through the target's own fill so device memory never needs a host staging buffer.
    static_assert(sizeof(float) == 4);
    try {
      if (bytes_ % sizeof(float) == 0) {
        kernels_for(target_).fill(nullptr, static_cast<float*>(data_), 0.0f,
                                  static_cast<std::int64_t>(bytes_ / sizeof(float)));
      } else {
        std::vector<char> zeros(bytes_, 0);
        kernels_for(target_).upload(nullptr, data_, zeros.data(), bytes_);
      }
    } catch (...) {
      // The constructor throws, so no destructor will: undo what it would (a device's fill can
      // fail; the CPU's cannot).
      release_and_uncount();
      throw;
    }
  }
}

// Not stream-ordered: a device's release (cudaFree) waits for the whole device, which is what
// makes freeing a buffer safe while some stream's kernels may still read it (a rank's buffers
// after its last step, an epoch's order, a regrown staging buffer). A stream-ordered or caching
// allocator would have to order those frees itself.
Storage::~Storage() { release_and_uncount(); }

void Storage::release_and_uncount() noexcept {
  if (data_ != nullptr && kind_ != Kind::Adopted) kernels_for(target_).release(data_);
  if (account_) account_->live[target_index(target_)] -= static_cast<std::int64_t>(bytes_);
}

Tensor::Tensor(Shape shape, Target target, DType dtype)
    : shape_(std::move(shape)), dtype_(dtype), target_(target) {
  check_dimensions(shape_);
  storage_ = std::make_shared<Storage>(target_, storage_bytes(numel(), dtype_));
}

Tensor::Tensor(Shape shape, Target target, DType dtype, std::shared_ptr<void> memory,
               std::size_t memory_bytes)
    : shape_(std::move(shape)), dtype_(dtype), target_(target) {
  check_dimensions(shape_);
  const std::size_t bytes = storage_bytes(numel(), dtype_);
  NOEIRA_CHECK(bytes <= memory_bytes, "a tensor of shape ", shape_string(shape_), " in ",
               to_string(dtype_), " needs ", bytes, " bytes; the memory given holds ",
               memory_bytes);
  storage_ = std::make_shared<Storage>(target_, bytes, std::move(memory));
}

Tensor Tensor::from_host(Shape shape, std::span<const float> values, Target target) {
  return from_host_as<float>(std::move(shape), values, target);
}

Tensor Tensor::from_host_ids(Shape shape, std::span<const std::int32_t> ids, Target target) {
  return from_host_as<std::int32_t>(std::move(shape), ids, target);
}

std::int64_t Tensor::row_size() const {
  NOEIRA_CHECK(!shape_.empty() && shape_[0] > 0, "row_size of a tensor without rows, shape ",
               shape_string(shape_));
  return numel() / shape_[0];
}

Tensor Tensor::absent(Shape shape, Target target, DType dtype, std::string reason) {
  Tensor t;
  t.shape_ = std::move(shape);
  t.target_ = target;
  t.dtype_ = dtype;
  t.absent_reason_ = std::make_shared<const std::string>(std::move(reason));
  return t;
}

void* Tensor::raw() {
  if (!storage_) {
    if (absent_reason_) throw Error(*absent_reason_);
    return nullptr;
  }
  return static_cast<char*>(storage_->data()) + offset_ * static_cast<std::int64_t>(dtype_size(dtype_));
}

const void* Tensor::raw() const {
  if (!storage_) {
    if (absent_reason_) throw Error(*absent_reason_);
    return nullptr;
  }
  return static_cast<const char*>(storage_->data()) +
         offset_ * static_cast<std::int64_t>(dtype_size(dtype_));
}

void Tensor::check_dtype(DType expected) const {
  NOEIRA_CHECK(dtype_ == expected, "a ", to_string(dtype_), " tensor of shape ",
               shape_string(shape_), " read as ", to_string(expected));
}

float* Tensor::data() {
  check_dtype(DType::F32);
  return static_cast<float*>(raw());
}
const float* Tensor::data() const {
  check_dtype(DType::F32);
  return static_cast<const float*>(raw());
}
std::int32_t* Tensor::ids() {
  check_dtype(DType::I32);
  return static_cast<std::int32_t*>(raw());
}
const std::int32_t* Tensor::ids() const {
  check_dtype(DType::I32);
  return static_cast<const std::int32_t*>(raw());
}

void Tensor::upload_bytes(const void* host, std::size_t count, std::size_t elem_bytes) {
  NOEIRA_CHECK(static_cast<std::int64_t>(count) == numel() && elem_bytes == dtype_size(dtype_),
               "copying ", count, " values of ", elem_bytes, " bytes into a ", to_string(dtype_),
               " tensor of shape ", shape_string(shape_));
  if (count != 0) kernels_for(target_).upload(nullptr, raw(), host, count * elem_bytes);
}

void Tensor::download_bytes(void* host, std::size_t bytes) const {
  if (bytes != 0) kernels_for(target_).download(nullptr, host, raw(), bytes);
}

std::vector<float> Tensor::to_vector() const { return to_host<float>(); }

std::vector<std::int32_t> Tensor::to_ids() const { return to_host<std::int32_t>(); }

void Tensor::copy_from(std::span<const float> values) {
  check_dtype(DType::F32);
  upload_bytes(values.data(), values.size(), sizeof(float));
}

void Tensor::copy_from_ids(std::span<const std::int32_t> values) {
  check_dtype(DType::I32);
  upload_bytes(values.data(), values.size(), sizeof(std::int32_t));
}

void Tensor::zero() {
  if (numel() == 0) return;
  // All-zero bits are zero in every dtype; a view's offset keeps whole floats except for bf16.
  const std::size_t bytes = static_cast<std::size_t>(numel()) * dtype_size(dtype_);
  NOEIRA_CHECK(bytes % sizeof(float) == 0 && offset_ * dtype_size(dtype_) % sizeof(float) == 0,
               "zero() of a ", to_string(dtype_), " tensor of shape ", shape_string(shape_),
               " that does not cover whole 4-byte words");
  kernels_for(target_).fill(nullptr, static_cast<float*>(raw()), 0.0f,
                            static_cast<std::int64_t>(bytes / sizeof(float)));
}

void Tensor::resize(const Shape& shape, Target target) {
  if (ScratchArena* arena = ScratchArena::active()) {
    storage_ = arena->next(target, storage_bytes(shape_numel(shape), dtype_));
    offset_ = 0;
    shape_ = shape;
    target_ = target;
    return;
  }
  // Outside its scope the arena's slot may be another module's buffer by now.
  if (storage_ && storage_->scratch()) storage_.reset();
  if (target != target_) {  // never reuse the other target's storage
    storage_.reset();
    offset_ = 0;
    target_ = target;
  }
  if (shape == shape_ && storage_) return;
  const std::size_t need = static_cast<std::size_t>(shape_numel(shape)) * dtype_size(dtype_);
  const std::size_t have =
      storage_ ? storage_->bytes() - static_cast<std::size_t>(offset_) * dtype_size(dtype_) : 0;
  if (!storage_ || need > have) {
    *this = Tensor(shape, target_, dtype_);
  } else {
    shape_ = shape;
  }
}

Tensor Tensor::view(Shape shape, std::int64_t element_offset) const {
  const std::size_t end = static_cast<std::size_t>(offset_ + element_offset + shape_numel(shape)) *
                          dtype_size(dtype_);
  NOEIRA_CHECK(storage_ && element_offset >= 0 && end <= storage_->bytes(), "view of shape ",
               shape_string(shape), " at offset ", element_offset,
               " does not fit in a tensor of shape ", shape_string(shape_));
  Tensor t;
  t.storage_ = storage_;
  t.offset_ = offset_ + element_offset;
  t.shape_ = std::move(shape);
  t.dtype_ = dtype_;
  t.target_ = target_;
  return t;
}

}  // namespace noeira

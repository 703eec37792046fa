#pragma once
// Tensor: a shape, a dtype and storage on one target. The target decides which memory is live:
// host memory for Target::Cpu, device memory for Target::Cuda. Host copies of device data are
// explicit (to_vector / copy_from), so a hidden transfer never lands in a hot loop.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kernels/kernel_table.hpp"

namespace noeira {

using Shape = std::vector<std::int64_t>;

std::int64_t shape_numel(const Shape& shape);
std::string shape_string(const Shape& shape);
// The bytes of storage a tensor of `numel` elements takes: rounded up to whole floats, so that
// fill() can zero any dtype.
std::size_t storage_bytes(std::int64_t numel, DType dtype);

// Tensor storage bytes the calling thread allocated on a target and has not freed yet, and the
// most it held since reset_peak_tensor_bytes: a rank's tensor memory, since a rank is one thread
// (a simulated rank too). Storage freed on another thread still counts to the thread that
// allocated it. Allocations of 0 bytes count nothing.
struct TensorBytes {
  std::int64_t live = 0;
  std::int64_t peak = 0;
};
TensorBytes tensor_bytes(Target target);
void reset_peak_tensor_bytes(Target target);  // peak = live

namespace detail {
struct ByteAccount;
}

// Move-only owner of one allocation on one target. Scratch storage belongs to a ScratchArena
// (core/scratch_arena.hpp) and is shared by the buffers of several modules.
class Storage {
 public:
  enum class Kind : std::uint8_t { Owned, Scratch, Adopted };
  Storage(Target target, std::size_t bytes, Kind kind = Kind::Owned);
  // Adopted: `bytes` of target memory that `memory` points to and keeps alive (memory a process
  // group shares with its peers), zeroed and counted to this thread like owned storage.
  Storage(Target target, std::size_t bytes, std::shared_ptr<void> memory);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() { return data_; }
  const void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }
  Target target() const { return target_; }
  bool scratch() const { return kind_ == Kind::Scratch; }

 private:
  Target target_;
  std::size_t bytes_;
  Kind kind_;
  void* data_;
  std::shared_ptr<detail::ByteAccount> account_;  // the allocating thread's (tensor_bytes)
  std::shared_ptr<void> adopted_;                 // Adopted: the memory's owner

  void count_and_zero();
  // Frees owned memory and takes its bytes off the account: the destructor's work, and a failed
  // constructor's.
  void release_and_uncount() noexcept;
};

class Tensor {
 public:
  Tensor() = default;
  // Zero-filled.
  explicit Tensor(Shape shape, Target target = Target::Cpu, DType dtype = DType::F32);
  // Zero-filled, in `memory` (Storage's Adopted kind), which must hold the shape's bytes.
  Tensor(Shape shape, Target target, DType dtype, std::shared_ptr<void> memory,
         std::size_t memory_bytes);

  static Tensor from_host(Shape shape, std::span<const float> values, Target target = Target::Cpu);
  static Tensor from_host_ids(Shape shape, std::span<const std::int32_t> ids,
                              Target target = Target::Cpu);
  // Any element type: from_host_as<double>({2}, values, target).
  template <class T>
  static Tensor from_host_as(Shape shape, std::span<const T> values, Target target = Target::Cpu) {
    Tensor t(std::move(shape), target, dtype_of<T>);
    t.upload_bytes(values.data(), values.size(), sizeof(T));
    return t;
  }

  // A tensor with a shape but no storage, whose every data access throws an Error with `reason`:
  // how a parameter store marks a handle whose memory is not there now (a ZeRO-3 parameter outside
  // its unit's gather), so that reading it is an error rather than another tensor's bytes.
  static Tensor absent(Shape shape, Target target, DType dtype, std::string reason);

  bool defined() const { return storage_ != nullptr; }
  const Shape& shape() const { return shape_; }
  std::int64_t dim(std::size_t i) const { return shape_.at(i); }
  std::size_t rank() const { return shape_.size(); }
  std::int64_t numel() const { return shape_numel(shape_); }
  DType dtype() const { return dtype_; }
  Target target() const { return target_; }
  // Elements per row: numel / dim(0).
  std::int64_t row_size() const;
  // Bytes of the elements it holds (numel times the dtype's size); 0 when undefined.
  std::int64_t byte_size() const {
    return defined() ? numel() * static_cast<std::int64_t>(dtype_size(dtype_)) : 0;
  }

  // Live storage of the target. Checks the dtype.
  float* data();
  const float* data() const;
  std::int32_t* ids();
  const std::int32_t* ids() const;
  // The same for any element type: as<double>() for an F64 tensor.
  template <class T>
  T* as() {
    check_dtype(dtype_of<T>);
    return static_cast<T*>(raw());
  }
  template <class T>
  const T* as() const {
    check_dtype(dtype_of<T>);
    return static_cast<const T*>(raw());
  }

  std::vector<float> to_vector() const;
  std::vector<std::int32_t> to_ids() const;
  template <class T>
  std::vector<T> to_host() const {
    check_dtype(dtype_of<T>);
    std::vector<T> out(static_cast<std::size_t>(numel()));
    download_bytes(out.data(), out.size() * sizeof(T));
    return out;
  }
  void copy_from(std::span<const float> values);
  void copy_from_ids(std::span<const std::int32_t> ids);
  void zero();

  // Gives the tensor this shape on `target`, reallocating (zero-filled) only when the storage is
  // too small or on another target: activation buffers follow the run-time batch size and the
  // context's target this way (a module's buffers start undefined, before it knows its target).
  // Inside a ScratchScope the storage is the arena's next slot instead, its contents undefined.
  void resize(const Shape& shape, Target target);

  // A tensor sharing this one's storage, starting element_offset elements in.
  Tensor view(Shape shape, std::int64_t element_offset = 0) const;

 private:
  void* raw();
  const void* raw() const;
  void check_dtype(DType expected) const;
  // count elements of elem_bytes each, checked against numel.
  void upload_bytes(const void* host, std::size_t count, std::size_t elem_bytes);
  void download_bytes(void* host, std::size_t bytes) const;

  friend class ScratchArena;  // holds(): which storage a tensor shares
  std::shared_ptr<Storage> storage_;
  std::shared_ptr<const std::string> absent_reason_;  // set only by absent()
  std::int64_t offset_ = 0;  // in elements
  Shape shape_;
  DType dtype_ = DType::F32;
  Target target_ = Target::Cpu;
};

}  // namespace noeira

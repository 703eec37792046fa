#pragma once
// KvCache: the keys and values one self-attention layer has seen while generating, so that each
// new token attends to them without recomputing them (SelfAttention::forward_cached).
//
// Time-major: keys and values [capacity, batch, width], width = KvHeads · HeadDim; position p of
// sequence b is row p · batch + b. The first `length` positions of every sequence are then one
// dense block, which RepeatKV reads as rows, and attention reads sequence b in place at row
// stride batch · width. Keys are stored after RoPE (at their own positions), so they are never
// rotated again. Every sequence of the batch has the same length.
#include <cstdint>

#include "core/error.hpp"
#include "core/tensor.hpp"

namespace noeira {

class KvCache {
 public:
  KvCache() = default;

  // Empties the cache and sizes it for `batch` sequences of up to `capacity` positions of
  // `width` floats, on `target`.
  void reset(Target target, std::int64_t batch, std::int64_t capacity, std::int64_t width) {
    if (batch <= 0 || capacity <= 0 || width <= 0) {
      throw InputError(detail::concat("KvCache: batch ", batch, ", capacity ", capacity,
                                      " and width ", width, " must be positive"));
    }
    keys_.resize({capacity, batch, width}, target);
    values_.resize({capacity, batch, width}, target);
    batch_ = batch;
    capacity_ = capacity;
    width_ = width;
    length_ = 0;
  }
  // Forgets the cached positions, keeping the storage.
  void clear() { length_ = 0; }

  std::int64_t batch() const { return batch_; }
  std::int64_t capacity() const { return capacity_; }
  std::int64_t width() const { return width_; }
  std::int64_t length() const { return length_; }  // positions cached per sequence

  Tensor& keys() { return keys_; }      // [capacity, batch, width]
  Tensor& values() { return values_; }  // [capacity, batch, width]

  // Marks `count` more positions as filled (after the caller wrote them).
  void advance(std::int64_t count) { length_ += count; }

 private:
  Tensor keys_;
  Tensor values_;
  std::int64_t batch_ = 0, capacity_ = 0, width_ = 0, length_ = 0;
};

}  // namespace noeira

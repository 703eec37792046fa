#pragma once
// Arrays a program holds in its own memory, given to noeira by name: wherever an array is named
// (--train-x, --test-y and their siblings, a shard of a list), "memory:NAME" is the array the
// program provided as NAME. A simulation that trains a surrogate on its own fields needs no file.
//
// noeira never copies such an array whole: features are read batch by batch from it (the
// streamed path of train/array_dataset.hpp), each row checked finite and hashed once when the run
// starts; labels, targets and ids are copied at their own size, as from a file. The program keeps
// the memory alive and unchanged from provide_array until withdraw_array, and calls neither while
// a run reads the array. Each process provides its own arrays: under MPI, every rank the same
// data (the ranks compare its hash at start-up).
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "io/array_source.hpp"

namespace noeira::io {

enum class MemoryElement : std::uint8_t { F32, F64, BF16, U8, I32, I64 };

// A program's array: `data` holds the product of `shape` elements of `element`, in C order,
// little-endian as this machine stores them.
struct MemoryArray {
  const void* data = nullptr;
  MemoryElement element = MemoryElement::F32;
  std::vector<std::int64_t> shape;
};

// Typed views: memory_array(std::span<const float>(x), {rows, features}).
MemoryArray memory_array(std::span<const float> values, std::vector<std::int64_t> shape);
MemoryArray memory_array(std::span<const double> values, std::vector<std::int64_t> shape);
MemoryArray memory_array(std::span<const std::uint8_t> values, std::vector<std::int64_t> shape);
MemoryArray memory_array(std::span<const std::int32_t> values, std::vector<std::int64_t> shape);
MemoryArray memory_array(std::span<const std::int64_t> values, std::vector<std::int64_t> shape);
// bfloat16 values as their 16 bits (the upper half of a float32's).
MemoryArray memory_array_bf16(std::span<const std::uint16_t> bits,
                              std::vector<std::int64_t> shape);

// Makes `array` readable as "memory:NAME" in this process, replacing one of that name. An
// InputError for a name that is empty or holds ',' (a list's separator), a null pointer, a shape
// of no dimensions or a negative one, or a span whose length is not the shape's size.
void provide_array(std::string name, MemoryArray array);
// Forgets NAME (nothing when it was not provided).
void withdraw_array(std::string_view name);

// "memory:NAME" names a provided array.
inline constexpr std::string_view kMemoryPrefix = "memory:";
// The source of NAME; an InputError naming it when no array of that name was provided.
std::unique_ptr<ArraySource> open_memory_source(std::string_view name);

}  // namespace noeira::io

#pragma once
// Reading a rank-sharded checkpoint (io/checkpoint.hpp writes them) with any number of ranks:
// logical tensors are rebuilt by name from whichever rank files hold the requested range, so a
// run saved by ZeRO-3 on 4 ranks resumes under DDP on 1 or ZeRO-2 on 3.
//
//   const auto ckpt = io::CheckpointReader::open(resume_path);   // "dir", "dir/latest", step dir
//   ckpt.check_signature(model_signature);                        // refuses another model
//   ckpt.read("params/0.weight/val", my_offset, my_span);         // the range this rank owns
//
// Opening validates everything but the tensor bytes: all world_size rank files present and of
// the same checkpoint, format version, every stored tensor covered exactly once by the slices,
// shapes agreeing with the signature. Reading verifies the CRC-32 of every block it touches.
// Every problem with the files is an InputError naming the file (and the tensor), never a crash.
//
// Thread safety: after open, every const method may be called from several threads at once (the
// simulated backend's ranks); HDF5 calls are serialized by io/h5.hpp's lock.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "io/checkpoint.hpp"

namespace noeira::io {

class CheckpointReader {
 public:
  // `path`: as resolve_checkpoint accepts (a step directory, a checkpoint directory whose
  // `latest` is followed, or the `latest` file).
  static CheckpointReader open(const std::filesystem::path& path);

  CheckpointReader(CheckpointReader&&) noexcept;
  CheckpointReader& operator=(CheckpointReader&&) noexcept;
  ~CheckpointReader();

  // The step directory that was opened.
  const std::filesystem::path& dir() const;
  const CheckpointMeta& meta() const;
  int format_version() const;

  // Stored tensors: params/<name>/{val,m,v} of the signature's parameters in walk order, then
  // any other tensor in name order.
  const std::vector<std::string>& tensor_names() const;
  bool has(std::string_view name) const;
  // InputError when the checkpoint has no such tensor.
  const Shape& shape(std::string_view name) const;

  // Refuses a checkpoint written for another model with an InputError naming the first
  // parameter that is missing, extra or of another shape, and the file.
  void check_signature(const Signature& expected) const;

  // Elements [offset, offset + out.size()) of tensor `name` flattened in row-major order,
  // bit-identical to what was written. A range outside the tensor is an Error (the caller's
  // arithmetic); a missing tensor, a checksum mismatch or an unreadable file an InputError.
  void read(std::string_view name, std::int64_t offset, std::span<float> out) const;
  std::vector<float> read_all(std::string_view name) const;

  // Reads every tensor once, checking every checksum.
  void verify() const;

 private:
  struct Impl;
  explicit CheckpointReader(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// What `noeira inspect PATH` prints: step, epoch, samples seen, world size, policy, optimizer
// state, the scalar/counter/label maps, and every tensor with its shape and L2 norm (assembled
// across the rank files, so every checksum is verified on the way).
void print_checkpoint_summary(std::ostream& os, const std::filesystem::path& path);

}  // namespace noeira::io

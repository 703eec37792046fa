#pragma once
// The data a run reads, resident on the run's target, and the batch a step reads from it.
//
// A split is uploaded once (ResidentData), as bytes (or as the floats a user's arrays hold); a
// batch is then a gather of rows on the target that normalizes bytes to floats, for training
// through the epoch's order (itself uploaded once per epoch), for evaluation in file order. No
// sample crosses the host-device boundary after the upload. The batch tensors keep their storage
// from step to step (a short last batch shrinks the shape, never reallocates).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.hpp"
#include "kernels/kernel_table.hpp"
#include "nn/image_shape.hpp"
#include "train/dataset.hpp"
#include "train/order.hpp"

namespace noeira {

// One split on a target: the same content as the Dataset it was made from.
struct ResidentData {
  std::string name;  // e.g. "fashion-mnist/train", for messages
  std::int64_t count = 0;
  std::int64_t features = 0;
  int num_classes = 0;
  ImageShape image;  // as Dataset's: what the features are, when they are an image
  PixelNormalization normalization;  // Dataset's statistics, as gather_pixels takes them
  // [count, features] bytes on the target: device memory, or on the CPU what owns them (the
  // Dataset's own vector when it was handed over, see make_resident). Null for float features.
  std::shared_ptr<const std::uint8_t> pixels;
  // [count, features] F32 for a data set of float features (Dataset::values); I32 ids for a
  // model whose first module is an embedding.
  Tensor values;
  // Or float features read from their file batch by batch (Dataset::streamed).
  std::shared_ptr<const io::ArraySource> streamed;
  Tensor labels;  // [count] I32; undefined for regression
  // Regression: [count, width] F32 targets (Dataset::targets), and their spread about each
  // column's mean, Σ (y - mean)², the denominator of R².
  Tensor targets;
  double target_spread = 0.0;

  bool regression() const { return targets.defined(); }
  Target target() const { return regression() ? targets.target() : labels.target(); }
};

// Uploads `data` to `target`. On the CPU a Dataset handed over (a temporary, std::move) keeps its
// pixels where they are, so the split is never held twice; one that stays the caller's is copied.
ResidentData make_resident(Dataset&& data, Target target);
ResidentData make_resident(const Dataset& data, Target target);

// An epoch's sample order (order.hpp) on the data's target, for gather_batch.
Tensor resident_order(std::span<const std::int32_t> order, Target target);

struct Batch {
  explicit Batch(Target target = Target::Cpu)
      : x({0, 0}, target), labels({0}, target, DType::I32) {}

  Tensor x;        // [rows, features] F32, or I32 ids (ResidentData::values)
  Tensor labels;   // [rows] I32 (classification)
  Tensor targets;  // [rows, width] F32 (regression)
  // labels or targets is a view of the data set's (evaluation order): a gather must not write
  // there.
  bool views_data = false;
  // Streamed features on a device: the rows read on the host before their upload.
  std::vector<float> staging;
};

// This rank's rows of a global batch: rows `global` of the epoch order, split by shard_rows.
RowRange local_rows(RowRange global, int rank, int world);

// Fills `out` with samples order[rows.begin .. rows.end) of `data` (positions into `order`, a
// resident_order of the data's target), gathered and normalized on the target on `stream`, each
// image cropped and flipped as `augment` draws for it where that is not null (train/augment.hpp);
// or, when `order` is undefined (evaluation in file order, never augmented), with samples
// rows.begin .. rows.end, the labels (or a regression's targets) a view of the data's.
void gather_batch(Batch& out, const ResidentData& data, const Tensor& order, RowRange rows,
                  Stream stream = nullptr, const CropFlip* augment = nullptr);

}  // namespace noeira

#include "train/supervised.hpp"

namespace noeira {

SupervisedTask::SupervisedTask(const ResidentData& train, const ResidentData& test,
                               std::int64_t epochs, std::int64_t batch, std::int64_t eval_batch,
                               std::uint64_t seed, Augmentation augment,
                               TargetLossFactory losses)
    : train_(train),
      test_(test),
      epochs_(epochs),
      batch_size_(batch),
      eval_batch_(eval_batch),
      seed_(seed),
      augment_(augment),
      batch_(train.target()),
      losses_(std::move(losses)) {
  if (train_.regression()) target_loss_ = losses_();
  if (augment_.kind == Augment::CropFlip) {
    crop_flip_ = crop_flip_spec(train_, augment_.padding, seed_, /*epoch=*/0);
  }
}

void SupervisedTask::begin_period(std::int64_t epoch, Target target) {
  order_ = resident_order(epoch_order(seed_, epoch, train_.count), target);
  if (augment_.kind == Augment::CropFlip) crop_flip_.epoch = static_cast<std::uint64_t>(epoch);
}

StepRows SupervisedTask::load(std::int64_t s, int rank, int world, Stream stream,
                                  MicroBatch micro) {
  StepRows rows;
  rows.global = global_batch(s, batch_size_, train_.count);
  rows.mine = local_rows(local_rows(rows.global, micro.index, micro.count), rank, world);
  rows.global_targets = rows.global.size();
  gather_batch(batch_, train_, order_, rows_to_compute(rows.mine, rows.global), stream,
               augment_.kind == Augment::CropFlip ? &crop_flip_ : nullptr);
  return rows;
}

namespace detail {

double prediction_squared_errors(const Tensor& pred, const Tensor& targets) {
  const std::vector<float> p = pred.to_vector();
  const std::vector<float> y = targets.to_vector();
  const auto rows = static_cast<std::size_t>(targets.dim(0));
  const auto d = static_cast<std::size_t>(targets.dim(1));
  const auto width = static_cast<std::size_t>(pred.dim(1));
  double sum = 0.0;
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t c = 0; c < d; ++c) {
      const double e = static_cast<double>(p[r * width + c]) - static_cast<double>(y[r * d + c]);
      sum += e * e;
    }
  }
  return sum;
}

}  // namespace detail

}  // namespace noeira

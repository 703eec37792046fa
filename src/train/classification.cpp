#include "train/classification.hpp"

namespace noeira {

ClassificationTask::ClassificationTask(const ResidentData& train, const ResidentData& test,
                                       std::int64_t epochs, std::int64_t batch,
                                       std::int64_t eval_batch, std::uint64_t seed)
    : train_(train),
      test_(test),
      epochs_(epochs),
      batch_size_(batch),
      eval_batch_(eval_batch),
      seed_(seed),
      batch_(train.images.target()) {}

void ClassificationTask::begin_period(std::int64_t epoch, Target target) {
  order_ = resident_order(epoch_order(seed_, epoch, train_.count), target);
}

StepRows ClassificationTask::load(std::int64_t s, int rank, int world, Stream stream) {
  StepRows rows;
  rows.global = global_batch(s, batch_size_, train_.count);
  rows.mine = local_rows(rows.global, rank, world);
  rows.global_targets = rows.global.size();
  gather_batch(batch_, train_, order_, rows_to_compute(rows.mine, rows.global), stream);
  return rows;
}

}  // namespace noeira

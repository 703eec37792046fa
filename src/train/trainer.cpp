#include "train/trainer.hpp"

#include <algorithm>

namespace noeira {

StepMemoryProbe::StepMemoryProbe(const dist::ShardingPolicy& policy, Target target)
    : target_(target), store_at_start_(store_bytes(policy)) {
  reset_peak_tensor_bytes(target_);
  live_at_start_ = tensor_bytes(target_).live;
}

std::int64_t StepMemoryProbe::store_bytes(const dist::ShardingPolicy& policy) {
  const dist::MemoryReport r = policy.memory_report();
  return r.total_bytes() + r.transient_bytes;
}

std::int64_t StepMemoryProbe::activation_bytes(const dist::ShardingPolicy& policy) const {
  const std::int64_t grown = tensor_bytes(target_).peak - live_at_start_;
  return std::max<std::int64_t>(0, grown - (store_bytes(policy) - store_at_start_));
}

void report_memory(dist::ShardingPolicy& policy, LogFormat format,
                   std::int64_t activation_bytes) {
  dist::ProcessGroup& group = policy.group();
  dist::MemoryReport report = policy.memory_report();
  report.activation_bytes = activation_bytes;
  for (int r = 0; r < group.size(); ++r) {
    if (group.rank() == r) {
      const std::string line =
          "[rank " + std::to_string(r) + "] memory: " + report.to_string() + "\n";
      std::FILE* out = format == LogFormat::Json ? stderr : stdout;
      std::fputs(line.c_str(), out);
      std::fflush(out);
    }
    group.barrier().wait();
  }
}

}  // namespace noeira

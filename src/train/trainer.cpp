#include "train/trainer.hpp"

namespace noeira {

void report_memory(dist::ShardingPolicy& policy, LogFormat format) {
  dist::ProcessGroup& group = policy.group();
  for (int r = 0; r < group.size(); ++r) {
    if (group.rank() == r) {
      const std::string line =
          "[rank " + std::to_string(r) + "] memory: " + policy.memory_report().to_string() + "\n";
      std::FILE* out = format == LogFormat::Json ? stderr : stdout;
      std::fputs(line.c_str(), out);
      std::fflush(out);
    }
    group.barrier().wait();
  }
}

}  // namespace noeira

#pragma once
// The stream a rank computes on. A simulated rank on a device gets a stream of its own, so that
// the ranks' kernels overlap on the one GPU; the simulated world performs its collectives on the
// default stream, which CUDA orders after every rank stream's earlier work and before its later
// work (distributed/sim_process_group.hpp). Every other rank computes on the default stream: the
// NCCL group orders its ops after that stream, and the CPU has no streams.
#include "distributed/process_group.hpp"
#include "kernels/kernel_table.hpp"

namespace noeira::dist {

class RankStream {
 public:
  RankStream(const ProcessGroup& group, Target target)
      : k_(kernels_for(target)),
        stream_(group.backend() == "simulated" && target != Target::Cpu ? k_.create_stream()
                                                                        : nullptr) {}
  ~RankStream() {
    if (stream_ == nullptr) return;
    // The stream's work may still run: it ends before the stream does. (The rank's buffers, made
    // after this object, are freed before it: cudaFree waits for the device, so that is safe
    // too, and a stream-ordered or caching allocator would have to keep it so.)
    try {
      k_.synchronize(stream_);
    } catch (...) {
      // Destructors do not throw; an error here already surfaced on the stream's last use.
    }
    k_.destroy_stream(stream_);
  }
  RankStream(const RankStream&) = delete;
  RankStream& operator=(const RankStream&) = delete;

  Stream get() const { return stream_; }

 private:
  const KernelTable& k_;
  Stream stream_;
};

}  // namespace noeira::dist

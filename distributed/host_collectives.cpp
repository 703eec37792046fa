#include "distributed/host_collectives.hpp"

#include "kernels/error.hpp"
#include "kernels/kernel_table.hpp"

namespace noeira::dist {

void allreduce_host(ProcessGroup& group, Buffer values) {
  if (group.buffer_target() == Target::Cpu) {
    group.allreduce(values).wait();
    return;
  }
  const KernelTable& k = kernels_for(group.buffer_target());
  Buffer staged = values;
  staged.data = group.staging(values.bytes(), k);
  k.upload(nullptr, staged.data, values.data, values.bytes());
  group.allreduce(staged).wait();
  k.download(nullptr, values.data, staged.data, values.bytes());
}

void all_gather_host(ProcessGroup& group, ConstBuffer in, Buffer out) {
  NOEIRA_CHECK(out.count == in.count * static_cast<std::size_t>(group.size()) &&
                   in.dtype == out.dtype,
               "all_gather_host: ", out.count, " ", to_string(out.dtype), " outputs for ",
               in.count, " ", to_string(in.dtype), " inputs on ", group.size(), " ranks");
  if (group.buffer_target() == Target::Cpu) {
    group.all_gather(in, out).wait();
    return;
  }
  const KernelTable& k = kernels_for(group.buffer_target());
  // One staging buffer: this rank's input goes where its segment of the output lands (in place).
  Buffer staged = out;
  staged.data = group.staging(out.bytes(), k);
  Buffer mine = staged.sub(static_cast<std::size_t>(group.rank()) * in.count, in.count);
  k.upload(nullptr, mine.data, in.data, in.bytes());
  group.all_gather(mine, staged).wait();
  k.download(nullptr, out.data, staged.data, out.bytes());
}

}  // namespace noeira::dist

#include "distributed/host_collectives.hpp"

#include <algorithm>

#include "core/tensor.hpp"
#include "kernels/error.hpp"

namespace noeira::dist {

void allreduce_host(ProcessGroup& group, std::span<float> values) {
  if (group.buffer_target() == Target::Cpu) {
    group.allreduce(values).wait();
    return;
  }
  Tensor staged = Tensor::from_host({static_cast<std::int64_t>(values.size())}, values,
                                    group.buffer_target());
  group.allreduce(std::span<float>(staged.data(), values.size())).wait();
  const std::vector<float> sums = staged.to_vector();
  std::copy(sums.begin(), sums.end(), values.begin());
}

void all_gather_host(ProcessGroup& group, std::span<const float> in, std::span<float> out) {
  NOEIRA_CHECK(out.size() == in.size() * static_cast<std::size_t>(group.size()),
               "all_gather_host: ", out.size(), " outputs for ", in.size(), " inputs on ",
               group.size(), " ranks");
  if (group.buffer_target() == Target::Cpu) {
    group.all_gather(in, out).wait();
    return;
  }
  const Target target = group.buffer_target();
  Tensor staged_in = Tensor::from_host({static_cast<std::int64_t>(in.size())}, in, target);
  Tensor staged_out({static_cast<std::int64_t>(out.size())}, target);
  group
      .all_gather(std::span<const float>(staged_in.data(), in.size()),
                  std::span<float>(staged_out.data(), out.size()))
      .wait();
  const std::vector<float> gathered = staged_out.to_vector();
  std::copy(gathered.begin(), gathered.end(), out.begin());
}

}  // namespace noeira::dist

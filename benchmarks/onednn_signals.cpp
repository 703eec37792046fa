// Whether signals corrupt oneDNN's fp32 products here, with and without noeira's routing of the
// stop signals to a thread of their own (docs/design.md, "Signals reach one thread"):
//
//   build/benchmarks/onednn_signals          # signals may land in the product: with oneDNN 2.6
//                                            # this aborts in free() or counts wrong products
//   build/benchmarks/onednn_signals routed   # route_stop_signals_to_one_thread() first: clean
//
// The product is the mlp's first layer (50x784 by 784x256) through a kept oneDNN matmul, run for
// five seconds on the main thread while a second thread sends SIGUSR1 to the process without
// pause; every result is compared with the first, made before any signal. Not a test: whether
// it aborts depends on the oneDNN build and the CPU's instruction set (ctest runs the routed
// property through the binary, CliCheckpoint.SignalsLeaveTheNumbersAlone).
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <dnnl.hpp>
#include <string_view>
#include <thread>
#include <vector>

#include "train/stop_signal.hpp"

namespace {

std::atomic<long> g_handled{0};
extern "C" void count_signal(int) { g_handled.fetch_add(1, std::memory_order_relaxed); }

}  // namespace

int main(int argc, char** argv) {
  const bool routed = argc > 1 && std::string_view(argv[1]) == "routed";
  if (routed) noeira::route_stop_signals_to_one_thread();
  struct sigaction action {};
  action.sa_handler = count_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(SIGUSR1, &action, nullptr);

  using dnnl::memory;
  const memory::dim m = 50, k = 784, n = 256;
  dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(engine);
  const memory::desc a_desc({m, k}, memory::data_type::f32, memory::format_tag::ab);
  const memory::desc b_desc({k, n}, memory::data_type::f32, memory::format_tag::ab);
  const memory::desc c_desc({m, n}, memory::data_type::f32, memory::format_tag::ab);
  const dnnl::matmul product(dnnl::matmul::primitive_desc(
      dnnl::matmul::desc(a_desc, b_desc, c_desc), engine));
  std::vector<float> a(m * k), b(k * n), first(m * n), c(m * n);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i % 17) * 0.01f - 0.08f;
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(i % 13) * 0.02f - 0.1f;
  memory a_mem(a_desc, engine, a.data()), b_mem(b_desc, engine, b.data());
  memory c_mem(c_desc, engine, first.data());
  auto run = [&] {
    product.execute(stream, {{DNNL_ARG_SRC, a_mem}, {DNNL_ARG_WEIGHTS, b_mem},
                             {DNNL_ARG_DST, c_mem}});
    stream.wait();
  };
  run();
  c_mem.set_data_handle(c.data());

  std::atomic<bool> done{false};
  std::thread sender([&] {
    // The sender never takes the signal itself: unrouted, the main thread is the only one left.
    sigset_t usr1;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &usr1, nullptr);
    while (!done.load()) kill(getpid(), SIGUSR1);
  });
  long products = 0, wrong = 0;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < until) {
    run();
    ++products;
    if (std::memcmp(c.data(), first.data(), c.size() * sizeof(float)) != 0) ++wrong;
  }
  done = true;
  sender.join();
  std::printf("onednn_signals (%s): %ld products, %ld wrong, %ld signals handled\n",
              routed ? "routed" : "not routed", products, wrong, g_handled.load());
  return wrong == 0 ? 0 : 1;
}

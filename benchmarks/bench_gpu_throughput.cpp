// Training throughput of the trainer's own step on one device: samples/s, ms/step and achieved
// TFLOP/s against the device's peak, for (a) the `mlp` preset at the default batch of 100 (the
// Fashion-MNIST run: its epoch time is given for 60000 samples) and (b) a GEMM-bound MLP,
// 1024-4096-4096-4096-4096-10 with fused Linear+GELU at batch 1024.
//
// The step is train/trainer.hpp's, over a simulated world of one rank on the target under DDP:
// forward_units -> CrossEntropyLoss::forward_backward -> vjp_units(InputGrad::Skip) ->
// reduce_gradients -> Adam step (the trainer's default optimizer, at a constant lr: 1e-3 for mlp,
// 1e-4 for the wide MLP). The data set is not needed for a throughput figure: one batch of
// N(0, 1) inputs and random labels, uploaded once.
//
// FLOPs counted per step: 2·B·in·out for every Linear forward, the same for its dW, the same
// for its dX except the first layer's (skipped). Bias, activation, loss and optimizer work are
// not counted, so the TFLOP/s is the GEMM work the step must do, divided by the whole step time.
//
//   bench_gpu_throughput [--device cuda|cpu] [--allow-tf32] [--model mlp|mlp-4096|all]
//                        [--min-time S] [--warmup N] [--json]
//
// Exit: 0 with figures; 0 with "skipped" (a JSON "skipped": true) when --device cuda has no GPU;
// 1 when a step yields a non-finite or non-decreasing loss (a wrong result), 2 for bad flags.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "core/init.hpp"
#include "core/module.hpp"
#include "distributed/policy.hpp"
#include "distributed/rank_stream.hpp"
#include "distributed/sim_process_group.hpp"
#include "distributed/units.hpp"
#include "kernels/error.hpp"
#include "loss/cross_entropy.hpp"
#include "nn/linear.hpp"
#include "nn/sequential.hpp"
#include "optim/optimizer.hpp"
#include "train/config.hpp"
#include "train/presets.hpp"

#ifdef NOEIRA_HAVE_CUDA
#include <cuda_runtime_api.h>

#endif

namespace noeira {
namespace {

using Clock = std::chrono::steady_clock;

// The GEMM-bound model: four 4096-wide fused Linear+GELU layers and a 10-way head (54.6 M
// parameters, 0.33 TFLOP per step at batch 1024).
using Mlp4096 = Sequential<LinearGELU<1024, 4096>, LinearGELU<4096, 4096>,
                           LinearGELU<4096, 4096>, LinearGELU<4096, 4096>, Linear<4096, 10>>;

// --- FLOPs of one step, read off the model's type ------------------------------------------

template <class Leaf>
struct IsLinear : std::false_type {};
template <std::int64_t In, std::int64_t Out, Activation Act>
struct IsLinear<LinearAct<In, Out, Act>> : std::true_type {};

template <class M>
struct StepFlops;  // defined for Sequentials of Linear leaves only: nothing else is counted
template <class... Leaves>
struct StepFlops<Sequential<Leaves...>> {
  static_assert((IsLinear<Leaves>::value && ...), "StepFlops counts Linear layers only");
  static double at(std::int64_t batch) {
    const double macs[] = {static_cast<double>(Leaves::in_dim * Leaves::out_dim)...};
    double forward = 0.0;
    for (double m : macs) forward += m;
    const double input_grads = forward - macs[0];  // the first layer's dX is skipped
    return 2.0 * static_cast<double>(batch) * (2.0 * forward + input_grads);
  }
};

// --- the device and its peak -------------------------------------------------------------------

struct DeviceInfo {
  std::string name;
  std::string detail;              // "sm_90, 132 SMs at 1980 MHz" / "8 OpenMP threads"
  std::optional<double> fp32_peak;  // FLOP/s
  std::optional<double> tf32_peak;  // FLOP/s, dense tensor-core rate, where we can state it
  std::string tf32_basis;           // how tf32_peak was obtained
};

DeviceInfo cpu_info() {
  DeviceInfo d;
  d.name = "cpu";
  d.detail = detail::concat(omp_get_num_procs(), " OpenMP threads");
  return d;
}

#ifdef NOEIRA_HAVE_CUDA
int device_attribute(cudaDeviceAttr attr, int device, const char* what) {
  int value = 0;
  const cudaError_t status = cudaDeviceGetAttribute(&value, attr, device);
  if (status != cudaSuccess) {
    throw LibraryError(detail::concat("cudaDeviceGetAttribute(", what,
                                      ") failed: ", cudaGetErrorString(status)));
  }
  return value;
}

DeviceInfo cuda_info() {
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) {
    throw LibraryError("cudaGetDevice failed after the CUDA table was created");
  }
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, device) != cudaSuccess) {
    throw LibraryError("cudaGetDeviceProperties failed");
  }
  // cudaDeviceProp::clockRate is gone in CUDA 13: the attribute is the way (kHz, max clock).
  const int sms = device_attribute(cudaDevAttrMultiProcessorCount, device, "MultiProcessorCount");
  const int clock_khz = device_attribute(cudaDevAttrClockRate, device, "ClockRate");
  const int major = device_attribute(cudaDevAttrComputeCapabilityMajor, device, "CCMajor");
  const int minor = device_attribute(cudaDevAttrComputeCapabilityMinor, device, "CCMinor");
  const int cc = 10 * major + minor;
  const double sm_hz = static_cast<double>(sms) * clock_khz * 1e3;

  DeviceInfo d;
  d.name = prop.name;
  d.detail = detail::concat("sm_", cc, ", ", sms, " SMs at ", clock_khz / 1000, " MHz");
  // FP32 lanes per SM by compute capability (CUDA programming guide, arithmetic throughput).
  int lanes = 0;
  if (cc == 90 || cc == 86 || cc == 89) lanes = 128;
  else if (cc == 80 || major == 7) lanes = 64;
  if (lanes > 0) d.fp32_peak = sm_hz * lanes * 2.0;
  // Dense TF32 tensor-core FLOP per SM per clock, where the datasheets pin it: A100 (1024:
  // 108 SMs x 1.41 GHz = 156 TFLOP/s) and H100/H200 (2048). NVIDIA quotes Hopper's tensor peak
  // at a lower clock than the FP32 one (H100 SXM: 494.7 TFLOP/s at 1.83 GHz, FP32 at 1.98 GHz),
  // so at the reported max clock this is an upper bound. Other parts: not stated.
  if (cc == 80) {
    d.tf32_peak = sm_hz * 1024.0;
    d.tf32_basis = "1024 FLOP/clk/SM dense, at the reported clock";
  } else if (cc == 90) {
    d.tf32_peak = sm_hz * 2048.0;
    d.tf32_basis = "2048 FLOP/clk/SM dense, at the reported max clock: an upper bound";
  }
  return d;
}
#endif

// --- one model's measurement ------------------------------------------------------------------

struct Options {
  Target target = Target::Cuda;
  bool allow_tf32 = false;
  bool json = false;
  std::string models = "all";
  double min_time_s = 1.0;  // timed seconds per model, at least
  int warmup = 3;           // untimed steps (allocations, cuBLASLt heuristics, Adam's m and v)
};

struct Result {
  std::string name;
  std::string shape;
  std::int64_t batch = 0;
  std::int64_t parameters = 0;
  std::int64_t steps = 0;  // timed
  double seconds = 0.0;
  double flops_per_step = 0.0;
  double loss_first = 0.0;  // mean loss of the first warm-up step
  double loss_last = 0.0;   // of the last timed step
  double lr = 0.0;  // Adam's, constant
  std::optional<std::int64_t> epoch_samples;  // the data set an epoch figure is given for

  double ms_per_step() const { return 1e3 * seconds / static_cast<double>(steps); }
  double samples_per_s() const { return static_cast<double>(batch * steps) / seconds; }
  double flops() const { return flops_per_step * static_cast<double>(steps) / seconds; }
};

template <Module M>
Result measure(std::string name, std::string shape, std::int64_t batch, double lr,
               std::optional<std::int64_t> epoch_samples, const Options& opt) {
  Result r;
  r.name = std::move(name);
  r.shape = std::move(shape);
  r.batch = batch;
  r.flops_per_step = StepFlops<M>::at(batch);
  r.epoch_samples = epoch_samples;
  r.lr = lr;

  const TrainConfig defaults;  // the trainer's default optimizer (Adam) and seed
  // One batch, uploaded once: N(0, 1) inputs and uniform labels over 10 classes.
  std::mt19937_64 gen(defaults.seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<std::int32_t> label(0, M::out_dim - 1);
  std::vector<float> xs(static_cast<std::size_t>(batch * M::in_dim));
  for (float& v : xs) v = normal(gen);
  std::vector<std::int32_t> ys(static_cast<std::size_t>(batch));
  for (std::int32_t& y : ys) y = label(gen);
  const Tensor x = Tensor::from_host({batch, M::in_dim}, xs, opt.target);
  const Tensor labels = Tensor::from_host_ids({batch}, ys, opt.target);

  M model(Init(opt.target, InitSpec{InitKind::KaimingNormal, 0.0f, 0.02f, defaults.seed}));
  r.parameters = parameter_count(model);
  const int threads = omp_get_num_procs();

  // A simulated world of one rank on the target: the trainer's only code path at N = 1.
  dist::run_simulated(
      1,
      [&](dist::ProcessGroup& group) {
        omp_set_num_threads(threads);  // the rank thread gets every core (as noeira train)
        // The rank's stream as noeira train chooses it (a simulated rank on the GPU: its own).
        const dist::RankStream stream(group, group.buffer_target());
        Context ctx = Context::for_target(group.buffer_target(), stream.get());
        ctx.seed = defaults.seed;
        dist::ShardingPolicy policy(dist::Policy::Ddp, dist::walk_units(model), group, ctx);
        policy.broadcast_initial_parameters();
        Optimizer optimizer(optimizer_config(defaults));
        CrossEntropyLoss loss;
        const float grad_scale = 1.0f / static_cast<float>(batch);

        // train/trainer.hpp steps 2-7 (no clipping by default). The loss sum comes back to the
        // host every step there too: that synchronization is part of the step's cost.
        auto step = [&] {
          const Tensor& logits = dist::forward_units(model, ctx, x, policy);
          const double loss_sum = loss.forward_backward(ctx, logits, labels, grad_scale);
          dist::vjp_units(model, ctx, loss.grad(), InputGrad::Skip, policy);
          policy.reduce_gradients();
          policy.step(optimizer, static_cast<float>(r.lr));
          const double mean = loss_sum / static_cast<double>(batch);
          if (!std::isfinite(mean)) {
            throw Error(detail::concat(r.name, ": the loss is not finite (", mean, ")"));
          }
          return mean;
        };
        auto seconds_since = [](Clock::time_point t) {
          return std::chrono::duration<double>(Clock::now() - t).count();
        };

        // Warm-up; the last warm-up step's time sizes the timed run.
        double last_step_s = 0.0;
        for (int i = 0; i < std::max(1, opt.warmup); ++i) {
          ctx.k->synchronize(ctx.stream);  // the clock reads completed work only
          const Clock::time_point t = Clock::now();
          const double mean = step();
          ctx.k->synchronize(ctx.stream);
          last_step_s = seconds_since(t);
          if (i == 0) r.loss_first = mean;
        }
        const double want = std::ceil(opt.min_time_s / std::max(last_step_s, 1e-6));
        r.steps = static_cast<std::int64_t>(std::clamp(want, 3.0, 100000.0));

        ctx.k->synchronize(ctx.stream);  // start from an idle device
        const Clock::time_point start = Clock::now();
        for (std::int64_t i = 0; i < r.steps; ++i) r.loss_last = step();
        ctx.k->synchronize(ctx.stream);  // every timed kernel has finished
        r.seconds = seconds_since(start);
      },
      {}, opt.target);
  // The same batch every step: a working step fits it, so its loss must fall.
  if (!(r.loss_last < r.loss_first)) {
    throw Error(detail::concat(r.name, ": the loss did not decrease over ", r.steps,
                               " steps on one batch (", r.loss_first, " -> ", r.loss_last, ")"));
  }
  return r;
}

// --- output ------------------------------------------------------------------------------------

std::string percent(double flops, const std::optional<double>& peak) {
  if (!peak) return "n/a";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", 100.0 * flops / *peak);
  return buf;
}

void print_human(const DeviceInfo& dev, const Options& opt, const std::vector<Result>& results) {
  std::printf("device %s: %s (%s)\n", std::string(to_string(opt.target)).c_str(),
              dev.name.c_str(), dev.detail.c_str());
  if (dev.fp32_peak) std::printf("  FP32 peak %.1f TFLOP/s\n", *dev.fp32_peak / 1e12);
  if (dev.tf32_peak) {
    std::printf("  TF32 tensor peak %.1f TFLOP/s (%s)\n", *dev.tf32_peak / 1e12,
                dev.tf32_basis.c_str());
  }
  if (opt.target == Target::Cuda) std::printf("  TF32 %s\n", opt.allow_tf32 ? "on" : "off");
  for (const Result& r : results) {
    std::printf("%s %s batch %lld (%lld params, Adam lr %g): %lld steps in %.2f s\n",
                r.name.c_str(), r.shape.c_str(), static_cast<long long>(r.batch),
                static_cast<long long>(r.parameters), r.lr,
                static_cast<long long>(r.steps), r.seconds);
    std::printf("  %.0f samples/s, %.3f ms/step, %.3f TFLOP/s", r.samples_per_s(), r.ms_per_step(),
                r.flops() / 1e12);
    if (dev.fp32_peak) {
      std::printf(", %s of FP32 peak", percent(r.flops(), dev.fp32_peak).c_str());
    }
    if (opt.allow_tf32 && dev.tf32_peak) {
      std::printf(", %s of TF32 peak", percent(r.flops(), dev.tf32_peak).c_str());
    }
    std::printf("\n  loss %.4f -> %.4f", r.loss_first, r.loss_last);
    if (r.epoch_samples) {
      std::printf(", epoch of %lld samples: %.2f s", static_cast<long long>(*r.epoch_samples),
                  static_cast<double>(*r.epoch_samples) / r.samples_per_s());
    }
    std::printf("\n");
  }
}

nlohmann::ordered_json optional_json(const std::optional<double>& v) {
  return v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json(nullptr);
}

void print_json(const DeviceInfo& dev, const Options& opt, const std::vector<Result>& results) {
  nlohmann::ordered_json out;
  out["skipped"] = false;
  out["device"] = to_string(opt.target);
  out["device_name"] = dev.name;
  out["device_detail"] = dev.detail;
  out["allow_tf32"] = opt.allow_tf32;
  out["fp32_peak_tflops"] = optional_json(dev.fp32_peak ? std::optional(*dev.fp32_peak / 1e12) : std::nullopt);
  out["tf32_peak_tflops"] = optional_json(dev.tf32_peak ? std::optional(*dev.tf32_peak / 1e12) : std::nullopt);
  out["tf32_peak_basis"] = dev.tf32_basis;
  out["models"] = nlohmann::ordered_json::array();
  for (const Result& r : results) {
    nlohmann::ordered_json m;
    m["name"] = r.name;
    m["shape"] = r.shape;
    m["batch"] = r.batch;
    m["parameters"] = r.parameters;
    m["lr"] = r.lr;
    m["steps"] = r.steps;
    m["seconds"] = r.seconds;
    m["samples_per_s"] = r.samples_per_s();
    m["ms_per_step"] = r.ms_per_step();
    m["flops_per_step"] = r.flops_per_step;
    m["tflops"] = r.flops() / 1e12;
    m["fp32_peak_fraction"] =
        optional_json(dev.fp32_peak ? std::optional(r.flops() / *dev.fp32_peak) : std::nullopt);
    // Against the tensor-core peak only when the GEMMs may use the tensor cores.
    m["tf32_peak_fraction"] = optional_json(opt.allow_tf32 && dev.tf32_peak
                                                ? std::optional(r.flops() / *dev.tf32_peak)
                                                : std::nullopt);
    m["loss_first"] = r.loss_first;
    m["loss_last"] = r.loss_last;
    m["epoch_s"] = optional_json(r.epoch_samples ? std::optional(static_cast<double>(*r.epoch_samples) /
                                                                 r.samples_per_s())
                                                 : std::nullopt);
    out["models"].push_back(std::move(m));
  }
  std::printf("%s\n", out.dump(2).c_str());
}

// --- flags -------------------------------------------------------------------------------------

Options parse(int argc, char** argv) {
  Options opt;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    auto value = [&]() -> std::string_view {
      if (i + 1 >= argc) throw InputError(detail::concat(a, " needs a value"));
      return argv[++i];
    };
    auto number = [&](std::string_view flag, std::string_view text) {
      try {
        std::size_t used = 0;
        const double v = std::stod(std::string(text), &used);
        if (used == text.size() && v >= 0.0) return v;
      } catch (const std::exception&) {
      }
      throw InputError(detail::concat(flag, " must be a non-negative number, got '", text, "'"));
    };
    if (a == "--device") {
      const std::string_view d = value();
      if (d == "cuda") opt.target = Target::Cuda;
      else if (d == "cpu") opt.target = Target::Cpu;
      else throw InputError(detail::concat("--device must be cuda or cpu, got '", d, "'"));
    } else if (a == "--allow-tf32") {
      opt.allow_tf32 = true;
    } else if (a == "--json") {
      opt.json = true;
    } else if (a == "--model") {
      opt.models = value();
      if (opt.models != "mlp" && opt.models != "mlp-4096" && opt.models != "all") {
        throw InputError(detail::concat("--model must be mlp, mlp-4096 or all, got '",
                                        opt.models, "'"));
      }
    } else if (a == "--min-time") {
      opt.min_time_s = number(a, value());
    } else if (a == "--warmup") {
      opt.warmup = static_cast<int>(number(a, value()));
    } else if (a == "--help" || a == "-h") {
      std::printf(
          "usage: bench_gpu_throughput [--device cuda|cpu] [--allow-tf32] "
          "[--model mlp|mlp-4096|all] [--min-time S] [--warmup N] [--json]\n");
      std::exit(0);
    } else {
      throw InputError(detail::concat("unknown flag '", a, "' (see --help)"));
    }
  }
  if (opt.allow_tf32 && opt.target != Target::Cuda) {
    throw InputError("--allow-tf32 applies to --device cuda only");
  }
  return opt;
}

int run(const Options& opt) {
  if (opt.target == Target::Cuda && !cuda_available()) {
    const std::string reason = cuda_unavailable_reason();
    if (opt.json) {
      std::printf("{\"skipped\": true, \"reason\": \"%s\"}\n", reason.c_str());
    } else {
      std::printf("bench_gpu_throughput: skipped: %s\n", reason.c_str());
    }
    return 0;
  }
  DeviceInfo dev = cpu_info();
#ifdef NOEIRA_HAVE_CUDA
  if (opt.target == Target::Cuda) {
    (void)kernels_for(Target::Cuda);  // creates the device context and handles first
    set_allow_tf32(opt.allow_tf32);
    dev = cuda_info();
  }
#endif
  std::vector<Result> results;
  if (opt.models == "all" || opt.models == "mlp") {
    results.push_back(
        measure<presets::Mlp>("mlp", "784-256-128-10 relu", 100, TrainConfig{}.lr, 60000, opt));
  }
  if (opt.models == "all" || opt.models == "mlp-4096") {
    // lr 1e-4: Adam's default 1e-3 moves every weight of a 4096-wide layer by about 5% of its
    // initial scale per step, and the loss on the batch climbs for the first steps.
    results.push_back(
        measure<Mlp4096>("mlp-4096", "1024-4096x4-10 gelu", 1024, 1e-4, std::nullopt, opt));
  }
  if (opt.json) {
    print_json(dev, opt, results);
  } else {
    print_human(dev, opt, results);
  }
  return 0;
}

}  // namespace
}  // namespace noeira

int main(int argc, char** argv) {
  noeira::Options opt;
  try {
    opt = noeira::parse(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_gpu_throughput: error: %s\n", e.what());
    return 2;
  }
  try {
    return noeira::run(opt);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_gpu_throughput: error: %s\n", e.what());
    return 1;
  }
}

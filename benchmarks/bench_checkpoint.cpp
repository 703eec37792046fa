// Checkpoint write and read bandwidth at N ranks (threads, as the simulated backend runs them)
// beside `dd` sequential write and read of the same number of bytes on the same disk.
//
//   bench_checkpoint [--dir D] [--mb 128] [--ranks 2] [--reps 5]
//
// Write: every rank writes its near-even half of each tensor (val, m, v of 16 parameters), fsyncs
// it, and rank 0 commits: timed from the first byte to `latest` durable, like
// `dd conv=fdatasync`. Read: every rank opens the checkpoint and reads its half, verifying the
// checksums, after the page cache is dropped (when /proc/sys/vm/drop_caches is writable; else the
// read figures are page-cache figures and the program says so). Median of --reps runs after one
// warm-up. Exits non-zero when the data read back differs from what was written.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "io/checkpoint.hpp"
#include "io/checkpoint_reader.hpp"

namespace {

using Clock = std::chrono::steady_clock;
namespace io = noeira::io;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

bool drop_caches() {
  std::system("sync");
  std::ofstream f("/proc/sys/vm/drop_caches");
  if (!f) return false;
  f << "3\n";
  f.flush();
  return f.good();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Tensor {
  std::string name;
  noeira::Shape shape;
  std::vector<float> values;
};

// 16 parameters of uneven sizes adding up to about `bytes` with their two Adam moments.
std::vector<Tensor> make_state(std::int64_t bytes, io::Signature& signature) {
  const std::int64_t per_kind = bytes / 3 / 4;  // floats per kind
  std::vector<Tensor> tensors;
  std::int64_t left = per_kind;
  for (int p = 0; p < 16; ++p) {
    const std::int64_t cols = 1000 + 37 * p;
    std::int64_t rows = std::max<std::int64_t>(1, per_kind / 16 / cols);
    if (p == 15) rows = std::max<std::int64_t>(1, left / cols);
    left -= rows * cols;
    const std::string name = std::to_string(p) + ".weight";
    signature.push_back({name, {rows, cols}});
    for (const char* kind : {"val", "m", "v"}) {
      Tensor t{io::param_tensor_name(name, kind), {rows, cols},
               std::vector<float>(static_cast<std::size_t>(rows * cols))};
      for (std::size_t i = 0; i < t.values.size(); ++i) {
        t.values[i] = static_cast<float>((i * 2654435761u) % 100003) * 1e-3f + p;
      }
      tensors.push_back(std::move(t));
    }
  }
  return tensors;
}

// Rank r's near-even share [begin, end) of a tensor of n elements.
std::pair<std::int64_t, std::int64_t> share(std::int64_t n, int rank, int ranks) {
  return {n * rank / ranks, n * (rank + 1) / ranks};
}

template <class F>
void on_ranks(int ranks, F&& f) {
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) threads.emplace_back(f, r);
  for (auto& t : threads) t.join();
}

double timed_dd(const std::string& args) {
  const auto t0 = Clock::now();
  const std::string cmd = "dd " + args + " status=none";
  if (std::system(cmd.c_str()) != 0) {
    std::fprintf(stderr, "bench_checkpoint: '%s' failed\n", cmd.c_str());
    std::exit(2);
  }
  return seconds_since(t0);
}

}  // namespace

int main(int argc, char** argv) {
  std::filesystem::path dir = std::filesystem::temp_directory_path() / "noeira-bench-checkpoint";
  std::int64_t mb = 128;
  int ranks = 2;
  int reps = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--dir") dir = argv[i + 1];
    else if (flag == "--mb") mb = std::atoll(argv[i + 1]);
    else if (flag == "--ranks") ranks = std::atoi(argv[i + 1]);
    else if (flag == "--reps") reps = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: %s [--dir D] [--mb 128] [--ranks 2] [--reps 5]\n", argv[0]);
      return 2;
    }
  }
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);

  io::Signature signature;
  const std::vector<Tensor> state = make_state(mb << 20, signature);
  std::int64_t bytes = 0;
  for (const Tensor& t : state) bytes += static_cast<std::int64_t>(t.values.size() * 4);

  io::CheckpointMeta meta;
  meta.world_size = ranks;
  meta.policy = "ddp";
  meta.signature = signature;
  std::vector<double> write_s, read_s, dd_write_s, dd_read_s, open_max_s;
  bool cold = true;
  bool wrong = false;
  for (int rep = 0; rep <= reps; ++rep) {  // rep 0 is the warm-up
    meta.step = rep;
    auto t0 = Clock::now();
    on_ranks(ranks, [&](int r) {
      std::vector<io::TensorSlice> slices;
      for (const Tensor& t : state) {
        const auto [b, e] = share(static_cast<std::int64_t>(t.values.size()), r, ranks);
        slices.push_back({t.name, t.shape, b,
                          std::span<const float>(t.values).subspan(static_cast<std::size_t>(b),
                                                                   static_cast<std::size_t>(e - b))});
      }
      io::write_rank_file(dir, r, meta, slices);
    });
    io::commit_checkpoint(dir, rep, ranks, 1);
    const double w = seconds_since(t0);

    cold = drop_caches() && cold;
    t0 = Clock::now();
    std::vector<int> ok(static_cast<std::size_t>(ranks), 1);
    std::vector<double> open_s(static_cast<std::size_t>(ranks));
    on_ranks(ranks, [&](int r) {
      const io::CheckpointReader ckpt = io::CheckpointReader::open(dir);
      open_s[static_cast<std::size_t>(r)] = seconds_since(t0);
      std::vector<float> buffer;
      for (const Tensor& t : state) {
        const auto [b, e] = share(static_cast<std::int64_t>(t.values.size()), r, ranks);
        buffer.resize(static_cast<std::size_t>(e - b));
        ckpt.read(t.name, b, buffer);
        if (std::memcmp(buffer.data(), t.values.data() + b, buffer.size() * 4) != 0) {
          ok[static_cast<std::size_t>(r)] = 0;
        }
      }
    });
    const double rd = seconds_since(t0);
    wrong = wrong || std::count(ok.begin(), ok.end(), 0) > 0;

    const std::string file = (dir / "dd.bin").string();
    const std::string count = "bs=1M count=" + std::to_string(bytes >> 20);
    const double dw = timed_dd("if=/dev/zero of=" + file + " " + count + " conv=fdatasync");
    cold = drop_caches() && cold;
    const double dr = timed_dd("if=" + file + " of=/dev/null bs=1M");
    std::filesystem::remove(file);
    if (rep > 0) {
      open_max_s.push_back(*std::max_element(open_s.begin(), open_s.end()));
      write_s.push_back(w);
      read_s.push_back(rd);
      dd_write_s.push_back(dw);
      dd_read_s.push_back(dr);
    }
  }
  std::filesystem::remove_all(dir);

  const double gb = static_cast<double>(bytes) / 1e9;
  const double dd_gb = static_cast<double>((bytes >> 20) << 20) / 1e9;
  const double w = gb / median(write_s), r = gb / median(read_s);
  const double dw = dd_gb / median(dd_write_s), dr = dd_gb / median(dd_read_s);
  std::printf("checkpoint of %.1f MB (%zu tensors) at %d ranks, median of %d runs after a warm-up\n",
              gb * 1e3, state.size(), ranks, reps);
  std::printf("%-8s %14s %14s %8s\n", "", "noeira GB/s", "dd GB/s", "ratio");
  std::printf("%-8s %14.3f %14.3f %7.0f%%\n", "write", w, dw, 100.0 * w / dw);
  std::printf("%-8s %14.3f %14.3f %7.0f%%\n", "read", r, dr, 100.0 * r / dr);
  std::printf("(of the read time, %.1f ms is opening: every rank validates every rank file's "
              "metadata)\n", 1e3 * median(open_max_s));
  if (!cold) {
    std::printf("note: /proc/sys/vm/drop_caches is not writable here: the reads (ours and dd's) "
                "come from the page cache\n");
  }
  if (wrong) {
    std::fprintf(stderr, "bench_checkpoint: data read back differs from what was written\n");
    return 1;
  }
  return 0;
}

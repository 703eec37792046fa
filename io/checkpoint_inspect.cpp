// print_checkpoint_summary: what `noeira inspect PATH` shows (io/checkpoint_reader.hpp).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "io/checkpoint_reader.hpp"

namespace noeira::io {

namespace {

// Sum of squares in double, in element order: the printed norm does not depend on how many rank
// files the tensor is cut into.
double l2_norm(const CheckpointReader& ckpt, const std::string& name) {
  constexpr std::int64_t kChunk = 1 << 20;
  const std::int64_t numel = shape_numel(ckpt.shape(name));
  std::vector<float> buffer;
  double sum = 0.0;
  for (std::int64_t pos = 0; pos < numel; pos += kChunk) {
    buffer.resize(static_cast<std::size_t>(std::min(kChunk, numel - pos)));
    ckpt.read(name, pos, buffer);
    for (const float x : buffer) sum += static_cast<double>(x) * static_cast<double>(x);
  }
  return std::sqrt(sum);
}

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

std::string bytes_string(std::int64_t bytes) {
  char buf[32];
  if (bytes < 1024) {
    std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(bytes));
  } else if (bytes < 1024 * 1024) {
    std::snprintf(buf, sizeof buf, "%.1f KiB", static_cast<double>(bytes) / 1024.0);
  } else {
    std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  }
  return buf;
}

// A label as one line of plain text: a newline (a vocabulary has several) as \n, any other
// control byte as \xNN, so that no file can move the terminal's cursor or split the summary.
std::string printable(const std::string& v) {
  std::string out;
  for (const char c : v) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\n') {
      out += "\\n";
    } else if (u < 0x20 || u == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", u);
      out += buf;
    } else {
      out.push_back(c);
    }
  }
  return out;
}

template <class Map, class Format>
void print_map(std::ostream& os, const char* title, const Map& map, Format format) {
  if (map.empty()) return;
  os << title << ":";
  for (const auto& [key, value] : map) os << " " << key << "=" << format(value);
  os << "\n";
}

}  // namespace

void print_checkpoint_summary(std::ostream& os, const std::filesystem::path& path) {
  const CheckpointReader ckpt = CheckpointReader::open(path);
  const CheckpointMeta& meta = ckpt.meta();
  os << "checkpoint " << ckpt.dir().string() << "\n";
  os << "step " << meta.step << ", epoch " << meta.epoch << ", samples seen " << meta.samples_seen
     << ", world size " << meta.world_size << ", policy "
     << (meta.policy.empty() ? "-" : meta.policy) << ", format version "
     << ckpt.format_version() << "\n";
  os << "optimizer: t=" << meta.optimizer.t << " beta1^t=" << number(meta.optimizer.beta1_pow)
     << " beta2^t=" << number(meta.optimizer.beta2_pow) << "\n";
  print_map(os, "scalars", meta.scalars, [](double v) { return number(v); });
  print_map(os, "counters", meta.counters, [](std::uint64_t v) { return std::to_string(v); });
  print_map(os, "labels", meta.labels, [](const std::string& v) { return printable(v); });

  std::int64_t total = 0;
  std::size_t width = 0;
  for (const std::string& name : ckpt.tensor_names()) {
    total += shape_numel(ckpt.shape(name));
    width = std::max(width, name.size());
  }
  os << "tensors: " << ckpt.tensor_names().size() << ", " << total << " elements, "
     << bytes_string(total * static_cast<std::int64_t>(sizeof(float))) << "\n";
  for (const std::string& name : ckpt.tensor_names()) {
    const std::string shape = shape_string(ckpt.shape(name));
    os << "  " << name << std::string(width - name.size() + 2, ' ') << shape
       << std::string(shape.size() < 14 ? 14 - shape.size() : 1, ' ') << "norm "
       << number(l2_norm(ckpt, name)) << "\n";
  }
}

}  // namespace noeira::io

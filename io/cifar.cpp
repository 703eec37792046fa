#include "io/cifar.hpp"

#include <cstdio>
#include <cstring>
#include <memory>

#include "io/file_kind.hpp"
#include "kernels/error.hpp"

namespace noeira::io {

void read_cifar_batch(const std::filesystem::path& file, CifarBatch& out) {
  require_regular_file(file);
  std::error_code ec;
  const std::uintmax_t size = std::filesystem::file_size(file, ec);
  if (ec) {
    throw InputError(detail::concat(file.string(), ": cannot read its size (", ec.message(), ")"));
  }
  if (size == 0 || size % kCifarRecordBytes != 0) {
    throw InputError(detail::concat(file.string(), ": size ", size,
                                    " bytes is not a positive multiple of the CIFAR-10 record (",
                                    kCifarRecordBytes, " bytes: 1 label + 3072 pixels)"));
  }
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(file.c_str(), "rb"), &std::fclose);
  if (!f) {
    throw InputError(detail::concat(file.string(), ": cannot open (", std::strerror(errno), ")"));
  }
  const std::int64_t records = static_cast<std::int64_t>(size) / kCifarRecordBytes;
  std::vector<std::uint8_t> raw(static_cast<std::size_t>(size));
  if (std::fread(raw.data(), 1, raw.size(), f.get()) != raw.size()) {
    throw InputError(detail::concat(file.string(), ": short read of ", size, " bytes"));
  }
  const std::size_t base = out.pixels.size();
  out.pixels.resize(base + static_cast<std::size_t>(records * kCifarImageBytes));
  out.labels.reserve(out.labels.size() + static_cast<std::size_t>(records));
  for (std::int64_t r = 0; r < records; ++r) {
    const std::uint8_t* rec = raw.data() + r * kCifarRecordBytes;
    if (rec[0] >= kCifar10Classes) {
      throw InputError(detail::concat(file.string(), ": record ", r, " has label ", int{rec[0]},
                                      ", expected 0..9 (not a CIFAR-10 batch?)"));
    }
    out.labels.push_back(rec[0]);
    std::memcpy(out.pixels.data() + base + static_cast<std::size_t>(r * kCifarImageBytes), rec + 1,
                static_cast<std::size_t>(kCifarImageBytes));
  }
  out.count += records;
}

}  // namespace noeira::io

#include "io/checkpoint_format.hpp"

#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <charconv>
#include <cstdio>

#include "io/h5.hpp"
#include "kernels/error.hpp"

namespace noeira::io {

std::string param_tensor_name(std::string_view param, std::string_view kind) {
  return detail::concat("params/", param, "/", kind);
}

std::string step_dir_name(std::int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "step-%08lld", static_cast<long long>(step));
  return buf;
}

namespace test_hooks {
namespace {
std::atomic<CheckpointHook> g_hook{nullptr};
}
void set_checkpoint_hook(CheckpointHook hook) { g_hook.store(hook); }
CheckpointHook checkpoint_hook() { return g_hook.load(); }
}  // namespace test_hooks

namespace ckpt {

// Checksums and the file format are defined on little-endian float32 bytes.
static_assert(std::endian::native == std::endian::little, "checkpoints assume a little-endian host");

void hook(std::string_view stage) {
  if (auto* h = test_hooks::checkpoint_hook()) h(stage);
}

std::string rank_file_name(int rank) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "rank-%05d.h5", rank);
  return buf;
}

std::string tmp_dir_name(std::int64_t step) { return ".tmp-" + step_dir_name(step); }

std::int64_t parse_step_dir(std::string_view name) {
  constexpr std::string_view prefix = "step-";
  if (name.size() < prefix.size() + 8 || name.substr(0, prefix.size()) != prefix) return -1;
  const std::string_view digits = name.substr(prefix.size());
  if (!std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return -1;
  }
  std::int64_t step = -1;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), step);
  if (ec != std::errc() || end != digits.data() + digits.size()) return -1;
  return step;
}

std::int64_t checksum_block(std::int64_t length) {
  constexpr std::int64_t kBlock = 256 * 1024;
  constexpr std::int64_t kMaxBlocks = 4096;
  return std::max(kBlock, (length + kMaxBlocks - 1) / kMaxBlocks);
}

std::uint32_t crc32_of(std::span<const float> data) {
  return static_cast<std::uint32_t>(
      crc32_z(0L, reinterpret_cast<const Bytef*>(data.data()), data.size_bytes()));
}

SliceChecksums slice_checksums(std::span<const float> data) {
  SliceChecksums sums;
  const auto length = static_cast<std::int64_t>(data.size());
  sums.block = checksum_block(length);
  for (std::int64_t begin = 0; begin < length; begin += sums.block) {
    const std::int64_t count = std::min(sums.block, length - begin);
    sums.blocks.push_back(crc32_of(data.subspan(static_cast<std::size_t>(begin),
                                                static_cast<std::size_t>(count))));
  }
  sums.whole = combine_block_crcs(sums.blocks, sums.block, length);
  return sums;
}

std::uint32_t combine_block_crcs(std::span<const std::uint32_t> blocks, std::int64_t block,
                                 std::int64_t length) {
  uLong crc = crc32_z(0L, nullptr, 0);
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    const std::int64_t begin = static_cast<std::int64_t>(i) * block;
    const std::int64_t count = std::min(block, length - begin);
    crc = crc32_combine(crc, blocks[i], static_cast<z_off_t>(count * sizeof(float)));
  }
  return static_cast<std::uint32_t>(crc);
}

std::string signature_text(const Signature& signature) {
  std::string text;
  for (const SignatureEntry& e : signature) {
    text += e.name;
    text += ' ';
    if (e.shape.empty()) text += '-';
    for (std::size_t i = 0; i < e.shape.size(); ++i) {
      if (i > 0) text += ',';
      text += std::to_string(e.shape[i]);
    }
    text += '\n';
  }
  return text;
}

Signature parse_signature(std::string_view text, const std::filesystem::path& file) {
  Signature signature;
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::size_t eol = std::min(text.find('\n', pos), text.size());
    const std::string_view line = text.substr(pos, eol - pos);
    pos = eol + 1;
    const auto bad = [&] {
      return InputError(detail::concat(file.string(), ": malformed model signature line '", line,
                                       "'"));
    };
    const std::size_t space = line.find(' ');
    if (space == std::string_view::npos || space == 0) throw bad();
    SignatureEntry entry{std::string(line.substr(0, space)), {}};
    std::string_view dims = line.substr(space + 1);
    if (dims != "-") {
      while (true) {
        const std::size_t comma = std::min(dims.find(','), dims.size());
        std::int64_t d = -1;
        const auto [end, ec] = std::from_chars(dims.data(), dims.data() + comma, d);
        if (ec != std::errc() || end != dims.data() + comma || d < 0) throw bad();
        entry.shape.push_back(d);
        if (comma == dims.size()) break;
        dims.remove_prefix(comma + 1);
      }
    }
    signature.push_back(std::move(entry));
  }
  return signature;
}

namespace {
bool valid_component(std::string_view c) {
  if (c.empty() || c == "." || c == "..") return false;
  return std::all_of(c.begin(), c.end(),
                     [](char ch) { return static_cast<unsigned char>(ch) > ' ' && ch != 0x7f; });
}

bool valid_path(std::string_view name) {
  if (name.empty()) return false;
  std::size_t pos = 0;
  while (true) {
    const std::size_t slash = std::min(name.find('/', pos), name.size());
    if (!valid_component(name.substr(pos, slash - pos))) return false;
    if (slash == name.size()) return true;
    pos = slash + 1;
  }
}
}  // namespace

bool valid_tensor_name(std::string_view name) {
  return valid_path(name) && name.substr(0, name.find('/')) != kMetaGroup;
}

bool valid_param_name(std::string_view name) {
  return valid_component(name);
}

std::string_view param_of_tensor(std::string_view tensor) {
  constexpr std::string_view prefix = "params/";
  if (tensor.substr(0, prefix.size()) != prefix) return {};
  const std::string_view rest = tensor.substr(prefix.size());
  const std::size_t slash = rest.find('/');
  if (slash == std::string_view::npos || rest.find('/', slash + 1) != std::string_view::npos) {
    return {};
  }
  return rest.substr(0, slash);
}

namespace {

using h5::Handle;

Handle create_group(hid_t loc, const char* name, const std::filesystem::path& file) {
  return Handle(NOEIRA_H5_CHECK(H5Gcreate2(loc, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), file),
                H5Gclose);
}

Handle open_group(hid_t loc, const char* name, const std::filesystem::path& file) {
  if (!h5::path_exists(loc, name, file)) {
    throw InputError(detail::concat(file.string(), ": group '", name, "' is missing"));
  }
  return Handle(NOEIRA_H5_CHECK_INPUT(H5Gopen2(loc, name, H5P_DEFAULT), file), H5Gclose);
}

}  // namespace

void write_meta(hid_t file_id, const std::filesystem::path& file, const CheckpointMeta& meta,
                int rank) {
  h5::Lock held = h5::lock();
  h5::write_string_attr(file_id, "format", kFormat, file);
  h5::write_i64_attr(file_id, "format_version", kCheckpointFormatVersion, file);
  h5::write_i64_attr(file_id, "rank", rank, file);
  h5::write_i64_attr(file_id, "world_size", meta.world_size, file);
  h5::write_i64_attr(file_id, "step", meta.step, file);
  h5::write_i64_attr(file_id, "epoch", meta.epoch, file);
  h5::write_i64_attr(file_id, "samples_seen", meta.samples_seen, file);
  h5::write_string_attr(file_id, "policy", meta.policy, file);
  h5::write_i64_attr(file_id, "optimizer_t", meta.optimizer.t, file);
  h5::write_f64_attr(file_id, "optimizer_beta1_pow", meta.optimizer.beta1_pow, file);
  h5::write_f64_attr(file_id, "optimizer_beta2_pow", meta.optimizer.beta2_pow, file);

  Handle group = create_group(file_id, kMetaGroup, file);
  h5::write_string_dataset(group.get(), "signature", signature_text(meta.signature), file);
  Handle scalars = create_group(group.get(), "scalars", file);
  for (const auto& [key, value] : meta.scalars) {
    h5::write_f64_attr(scalars.get(), key.c_str(), value, file);
  }
  Handle counters = create_group(group.get(), "counters", file);
  for (const auto& [key, value] : meta.counters) {
    h5::write_u64_attr(counters.get(), key.c_str(), value, file);
  }
  Handle labels = create_group(group.get(), "labels", file);
  for (const auto& [key, value] : meta.labels) {
    h5::write_string_attr(labels.get(), key.c_str(), value, file);
  }
}

CheckpointMeta read_meta(hid_t file_id, const std::filesystem::path& file, int& rank,
                         int& version) {
  h5::Lock held = h5::lock();
  constexpr std::string_view root = "root group";
  if (!h5::has_attr(file_id, "format", file) ||
      h5::read_string_attr(file_id, "format", file, root) != kFormat) {
    throw InputError(detail::concat(file.string(), ": not a noeira checkpoint file (no format = '",
                                    kFormat, "' attribute)"));
  }
  const std::int64_t stored = h5::read_i64_attr(file_id, "format_version", file, root);
  if (stored < 1 || stored > kCheckpointFormatVersion) {
    throw InputError(detail::concat(file.string(), ": checkpoint format version ", stored,
                                    ", this build reads versions 1 to ",
                                    kCheckpointFormatVersion));
  }
  version = static_cast<int>(stored);
  CheckpointMeta meta;
  rank = static_cast<int>(h5::read_i64_attr(file_id, "rank", file, root));
  meta.world_size = static_cast<int>(h5::read_i64_attr(file_id, "world_size", file, root));
  meta.step = h5::read_i64_attr(file_id, "step", file, root);
  meta.epoch = h5::read_i64_attr(file_id, "epoch", file, root);
  meta.samples_seen = h5::read_i64_attr(file_id, "samples_seen", file, root);
  meta.policy = h5::read_string_attr(file_id, "policy", file, root);
  meta.optimizer.t = h5::read_i64_attr(file_id, "optimizer_t", file, root);
  meta.optimizer.beta1_pow = h5::read_f64_attr(file_id, "optimizer_beta1_pow", file, root);
  meta.optimizer.beta2_pow = h5::read_f64_attr(file_id, "optimizer_beta2_pow", file, root);

  Handle group = open_group(file_id, kMetaGroup, file);
  meta.signature = parse_signature(h5::read_string_dataset(group.get(), "signature", file), file);
  Handle scalars = open_group(group.get(), "scalars", file);
  for (const std::string& key : h5::attr_names(scalars.get(), file)) {
    meta.scalars[key] = h5::read_f64_attr(scalars.get(), key.c_str(), file, "meta/scalars");
  }
  Handle counters = open_group(group.get(), "counters", file);
  for (const std::string& key : h5::attr_names(counters.get(), file)) {
    meta.counters[key] = h5::read_u64_attr(counters.get(), key.c_str(), file, "meta/counters");
  }
  Handle labels = open_group(group.get(), "labels", file);
  for (const std::string& key : h5::attr_names(labels.get(), file)) {
    meta.labels[key] = h5::read_string_attr(labels.get(), key.c_str(), file, "meta/labels");
  }
  return meta;
}

}  // namespace ckpt
}  // namespace noeira::io

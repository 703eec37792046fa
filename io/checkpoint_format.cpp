#include "io/checkpoint_format.hpp"

#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <charconv>
#include <cstdio>
#include <limits>
#include <set>

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

bool known_policy(std::string_view policy) {
  return std::find(kPolicies.begin(), kPolicies.end(), policy) != kPolicies.end();
}

std::int64_t checked_numel(std::span<const std::int64_t> shape) {
  std::int64_t n = 1;
  for (const std::int64_t d : shape) {
    if (d < 0) return -1;
    if (d != 0 && n > std::numeric_limits<std::int64_t>::max() / d) return -1;
    n *= d;
  }
  return n;
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
  std::set<std::string_view> names;
  std::size_t pos = 0;
  while (pos < text.size()) {
    const std::size_t eol = std::min(text.find('\n', pos), text.size());
    const std::string_view line = text.substr(pos, eol - pos);
    pos = eol + 1;
    const auto bad = [&](std::string_view why) {
      // The line quoted with its length bounded: the message stays one short line.
      std::string shown;
      for (const char c : line.substr(0, 80)) {
        shown.push_back(static_cast<unsigned char>(c) >= 0x20 && c != 0x7f ? c : '?');
      }
      return InputError(detail::concat(file.string(), ": dataset 'meta/signature': ", why,
                                       " in line '", shown, line.size() > 80 ? "...'" : "'"));
    };
    const std::size_t space = line.find(' ');
    if (space == std::string_view::npos || space == 0) throw bad("malformed model signature");
    const std::string_view name = line.substr(0, space);
    if (!valid_param_name(name) || name.size() > kMaxNameBytes) {
      throw bad("a parameter name that cannot be stored");
    }
    if (!names.insert(name).second) throw bad("a parameter named twice");
    SignatureEntry entry{std::string(name), {}};
    std::string_view dims = line.substr(space + 1);
    if (dims != "-") {
      while (true) {
        const std::size_t comma = std::min(dims.find(','), dims.size());
        std::int64_t d = -1;
        const auto [end, ec] = std::from_chars(dims.data(), dims.data() + comma, d);
        if (ec != std::errc() || end != dims.data() + comma || d < 0 || comma == 0 ||
            dims[0] == '+' || dims[0] == '-') {
          throw bad("malformed model signature");
        }
        entry.shape.push_back(d);
        if (entry.shape.size() > kMaxDims) throw bad("more dimensions than a tensor can have");
        if (comma == dims.size()) break;
        dims.remove_prefix(comma + 1);
      }
    }
    if (checked_numel(entry.shape) < 0) throw bad("an element count that overflows");
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

namespace {

// The checks of read_meta: each names the file, the object and the attribute.
class MetaReader {
 public:
  MetaReader(hid_t obj, const std::filesystem::path& file, std::string_view where)
      : obj_(obj), file_(file), where_(where) {}

  [[noreturn]] void refuse(const char* name, std::string_view problem) const {
    throw InputError(detail::concat(file_.string(), ": ", where_, ": attribute '", name, "' ",
                                    problem));
  }

  std::int64_t integer(const char* name, std::int64_t lo, std::int64_t hi) const {
    const std::int64_t v = h5::read_i64_attr(obj_, name, file_, where_);
    if (v < lo || v > hi) refuse(name, detail::concat("is ", v, ", expected ", lo, " to ", hi));
    return v;
  }

  double power(const char* name) const {
    const double v = h5::read_f64_attr(obj_, name, file_, where_);
    if (!(v >= 0.0 && v <= 1.0)) refuse(name, detail::concat("is ", v, ", expected 0 to 1"));
    return v;
  }

  std::string text(const char* name, std::size_t max) const {
    return h5::read_string_attr(obj_, name, file_, where_, max);
  }

 private:
  hid_t obj_;
  const std::filesystem::path& file_;
  std::string_view where_;
};

// The keys of /meta/scalars, /meta/counters or /meta/labels: names that can be stored.
std::vector<std::string> meta_keys(hid_t group, const std::filesystem::path& file,
                                   std::string_view where) {
  std::vector<std::string> keys = h5::attr_names(group, file);
  for (const std::string& key : keys) {
    if (!valid_param_name(key) || key.size() > kMaxNameBytes) {
      std::string shown;
      for (const char c : key.substr(0, 80)) {
        shown.push_back(static_cast<unsigned char>(c) >= 0x20 && c != 0x7f ? c : '?');
      }
      throw InputError(detail::concat(file.string(), ": ", where, ": attribute name '", shown,
                                      "' is not a key noeira writes (empty, whitespace, '/', "
                                      "or over ", kMaxNameBytes, " bytes)"));
    }
  }
  return keys;
}

}  // namespace

CheckpointMeta read_meta(hid_t file_id, const std::filesystem::path& file, int& rank,
                         int& version) {
  h5::Lock held = h5::lock();
  constexpr std::string_view root = "root group";
  const MetaReader at(file_id, file, root);
  if (!h5::has_attr(file_id, "format", file) || at.text("format", kMaxNameBytes) != kFormat) {
    throw InputError(detail::concat(file.string(), ": not a noeira checkpoint file (no format = '",
                                    kFormat, "' attribute)"));
  }
  const std::int64_t stored = h5::read_i64_attr(file_id, "format_version", file, root);
  if (stored < 1 || stored > kCheckpointFormatVersion) {
    throw InputError(detail::concat(file.string(), ": root group: attribute 'format_version': "
                                    "checkpoint format version ", stored,
                                    ", this build reads versions 1 to ",
                                    kCheckpointFormatVersion));
  }
  version = static_cast<int>(stored);
  CheckpointMeta meta;
  meta.world_size = static_cast<int>(at.integer("world_size", 1, kMaxWorldSize));
  rank = static_cast<int>(at.integer("rank", 0, meta.world_size - 1));
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  meta.step = at.integer("step", 0, kMax);
  meta.epoch = at.integer("epoch", 0, kMax);
  meta.samples_seen = at.integer("samples_seen", 0, kMax);
  meta.policy = at.text("policy", kMaxNameBytes);
  if (!meta.policy.empty() && !known_policy(meta.policy)) {
    std::string known;
    for (const std::string_view p : kPolicies) known += detail::concat(known.empty() ? "" : ", ", p);
    at.refuse("policy", detail::concat("names no sharding policy (", known, ")"));
  }
  // One optimizer step per training step at most.
  meta.optimizer.t = at.integer("optimizer_t", 0, meta.step);
  meta.optimizer.beta1_pow = at.power("optimizer_beta1_pow");
  meta.optimizer.beta2_pow = at.power("optimizer_beta2_pow");
  if (meta.optimizer.t == 0 &&
      (meta.optimizer.beta1_pow != 1.0 || meta.optimizer.beta2_pow != 1.0)) {
    at.refuse("optimizer_beta1_pow", "and 'optimizer_beta2_pow' must be 1 before the first "
                                     "optimizer step (optimizer_t = 0)");
  }

  meta.signature =
      parse_signature(h5::read_string_dataset(file_id, "meta/signature", file, kMaxTextBytes),
                      file);
  Handle scalars = h5::open_group(file_id, "meta/scalars", file);
  for (const std::string& key : meta_keys(scalars.get(), file, "meta/scalars")) {
    meta.scalars[key] = h5::read_f64_attr(scalars.get(), key.c_str(), file, "meta/scalars");
  }
  Handle counters = h5::open_group(file_id, "meta/counters", file);
  for (const std::string& key : meta_keys(counters.get(), file, "meta/counters")) {
    meta.counters[key] = h5::read_u64_attr(counters.get(), key.c_str(), file, "meta/counters");
  }
  Handle labels = h5::open_group(file_id, "meta/labels", file);
  for (const std::string& key : meta_keys(labels.get(), file, "meta/labels")) {
    meta.labels[key] =
        h5::read_string_attr(labels.get(), key.c_str(), file, "meta/labels", kMaxTextBytes);
  }
  return meta;
}

}  // namespace ckpt
}  // namespace noeira::io

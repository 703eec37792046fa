#include "io/safetensors.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <optional>
#include <nlohmann/json.hpp>
#include <set>
#include <system_error>

#include "io/file_kind.hpp"
#include "io/half.hpp"
#include "io/json_text.hpp"
#include "io/temporary_file.hpp"
#include "kernels/error.hpp"

namespace noeira::io {

// The data section is copied to and from memory as it lies in the file.
static_assert(std::endian::native == std::endian::little,
              "safetensors is little-endian: a big-endian host needs byte swaps here");

namespace {

struct DtypeInfo {
  StDtype dtype;
  std::string_view name;
  std::int64_t bytes;
};

constexpr DtypeInfo kDtypes[] = {
    {StDtype::F64, "F64", 8},  {StDtype::F32, "F32", 4}, {StDtype::F16, "F16", 2},
    {StDtype::BF16, "BF16", 2}, {StDtype::I64, "I64", 8}, {StDtype::I32, "I32", 4},
    {StDtype::I16, "I16", 2},  {StDtype::I8, "I8", 1},   {StDtype::U8, "U8", 1},
    {StDtype::BOOL, "BOOL", 1},
};

const DtypeInfo& info(StDtype dtype) {
  for (const DtypeInfo& d : kDtypes) {
    if (d.dtype == dtype) return d;
  }
  throw Error("safetensors: a dtype without an entry in kDtypes");
}

// Beyond this, a tensor's size in bytes could overflow int64 arithmetic; no real file is near it.
constexpr std::uint64_t kMaxBytes = std::uint64_t{1} << 60;

[[noreturn]] void fail(const std::filesystem::path& file, const std::string& what) {
  throw InputError(detail::concat(file.string(), ": ", what));
}

// A name from the header as an error message shows it: a header may hold a name of a megabyte,
// and an error stays one readable line.
std::string shown_name(const std::string& name) {
  constexpr std::size_t kShown = 96;
  return name.size() > kShown ? name.substr(0, kShown) + "..." : name;
}

template <class T>
void widen(const std::vector<unsigned char>& bytes, std::vector<float>& out) {
  for (std::size_t i = 0; i < out.size(); ++i) {
    T v;
    std::memcpy(&v, bytes.data() + i * sizeof(T), sizeof(T));
    out[i] = static_cast<float>(v);
  }
}

// The entry of header key `name` (its JSON `spec`), checked on its own; the caller checks the
// entries against each other and the data section.
StEntry parse_entry(const std::filesystem::path& file, const std::string& name,
                    const nlohmann::json& spec) {
  const std::string tensor = detail::concat("tensor '", shown_name(name), "'");
  if (!spec.is_object()) fail(file, tensor + ": not a JSON object");
  for (const char* key : {"dtype", "shape", "data_offsets"}) {
    if (!spec.contains(key)) fail(file, detail::concat(tensor, ": no \"", key, "\""));
  }
  StEntry e;
  e.name = name;
  const nlohmann::json& dtype = spec["dtype"];
  if (!dtype.is_string()) fail(file, tensor + ": \"dtype\" is not a string");
  const std::string dtype_name = dtype.get<std::string>();
  const auto known = std::find_if(std::begin(kDtypes), std::end(kDtypes),
                                  [&](const DtypeInfo& d) { return d.name == dtype_name; });
  if (known == std::end(kDtypes)) {
    fail(file, detail::concat(tensor, ": unknown dtype '", shown_name(dtype_name),
                              "' (known: F64 F32 F16 BF16 I64 I32 I16 I8 U8 BOOL)"));
  }
  e.dtype = known->dtype;
  const nlohmann::json& shape = spec["shape"];
  if (!shape.is_array()) fail(file, tensor + ": \"shape\" is not an array");
  std::uint64_t elements = 1;
  for (const nlohmann::json& d : shape) {
    if (!d.is_number_unsigned()) fail(file, tensor + ": a dimension is not a whole number >= 0");
    const std::uint64_t n = d.get<std::uint64_t>();
    if (n > kMaxBytes || (n != 0 && elements > kMaxBytes / n)) {
      fail(file, tensor + ": shape too large");
    }
    elements *= n;
    e.shape.push_back(static_cast<std::int64_t>(n));
  }
  const nlohmann::json& offsets = spec["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
      !offsets[1].is_number_unsigned()) {
    fail(file, tensor + ": \"data_offsets\" is not [begin, end] of whole numbers");
  }
  e.begin = offsets[0].get<std::uint64_t>();
  e.end = offsets[1].get<std::uint64_t>();
  if (e.end < e.begin) fail(file, tensor + ": data_offsets end before they begin");
  const auto bytes = static_cast<std::uint64_t>(known->bytes);
  if (elements > kMaxBytes / bytes) fail(file, tensor + ": shape too large");
  if (elements * bytes != e.end - e.begin) {
    fail(file, detail::concat(tensor, ": shape ", shape_string(e.shape), " of ", dtype_name,
                              " needs ", elements * bytes, " bytes, data_offsets [", e.begin, ", ",
                              e.end, ") give ", e.end - e.begin));
  }
  return e;
}

}  // namespace

std::string_view to_string(StDtype dtype) { return info(dtype).name; }
std::int64_t dtype_bytes(StDtype dtype) { return info(dtype).bytes; }
bool is_floating(StDtype dtype) {
  return dtype == StDtype::F64 || dtype == StDtype::F32 || dtype == StDtype::F16 ||
         dtype == StDtype::BF16;
}

bool is_safetensors_path(const std::filesystem::path& file) {
  return file.extension() == ".safetensors";
}

void save_safetensors(const std::filesystem::path& file, const std::vector<StTensorOut>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  // Everything is checked and laid out before the file is created: a refused write leaves nothing.
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::vector<std::int64_t> counters;  // the I64 tensors' values, in order
  std::uint64_t at = 0;
  for (const StTensorOut& t : tensors) {
    const std::string tensor = detail::concat("tensor '", t.name, "'");
    if (t.name == "__metadata__" || header.contains(t.name)) {
      fail(file, tensor + ": named twice (or named __metadata__)");
    }
    if (t.dtype != StDtype::F32 && t.dtype != StDtype::I64) {
      fail(file, tensor + ": only F32 and I64 are written");
    }
    if (shape_numel(t.shape) != static_cast<std::int64_t>(t.values.size())) {
      fail(file, detail::concat(tensor, ": ", t.values.size(), " values for shape ",
                                shape_string(t.shape)));
    }
    if (t.dtype == StDtype::I64) {
      for (const float v : t.values) {
        if (!(std::abs(v) < 9.2e18f) || v != std::trunc(v)) {
          fail(file, detail::concat(tensor, ": value ", v, " is not a whole number for I64"));
        }
        counters.push_back(static_cast<std::int64_t>(v));
      }
    }
    const std::uint64_t bytes = t.values.size() * static_cast<std::uint64_t>(dtype_bytes(t.dtype));
    header[t.name] = {{"dtype", to_string(t.dtype)},
                      {"shape", t.shape},
                      {"data_offsets", {at, at + bytes}}};
    at += bytes;
  }
  std::string text = header.dump();
  // Padding keeps the data section 8-byte aligned, as the format's writers do.
  text.append((8 - text.size() % 8) % 8, ' ');
  // Never write what the reader would refuse.
  if (text.size() > kSafetensorsMaxHeader) {
    fail(file, detail::concat("the header would take ", text.size(),
                              " bytes, more than the cap of ", kSafetensorsMaxHeader,
                              " (metadata too large?)"));
  }

  TemporaryFile written(file);
  const std::filesystem::path& tmp = written.path();
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw written.cannot_create();
    const std::uint64_t length = text.size();
    out.write(reinterpret_cast<const char*>(&length), sizeof length);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    std::size_t next_counter = 0;
    for (const StTensorOut& t : tensors) {
      if (t.dtype == StDtype::F32) {
        out.write(reinterpret_cast<const char*>(t.values.data()),
                  static_cast<std::streamsize>(t.values.size() * sizeof(float)));
      } else {
        out.write(reinterpret_cast<const char*>(counters.data() + next_counter),
                  static_cast<std::streamsize>(t.values.size() * sizeof(std::int64_t)));
        next_counter += t.values.size();
      }
    }
    out.close();
    if (!out) fail(tmp, "cannot write the file (disk full?)");
  }
  written.commit();
}

SafetensorsFile SafetensorsFile::open(const std::filesystem::path& file) {
  require_regular_file(file, "a safetensors file");
  std::error_code ec;
  const std::uint64_t file_size = std::filesystem::file_size(file, ec);
  if (ec) fail(file, detail::concat("cannot read its size (", ec.message(), ")"));
  if (file_size < 8) {
    fail(file, detail::concat("not a safetensors file: ", file_size,
                              " bytes, shorter than the 8-byte header length"));
  }
  std::ifstream in(file, std::ios::binary);
  if (!in) fail(file, "cannot open the file");
  std::uint64_t length = 0;
  in.read(reinterpret_cast<char*>(&length), sizeof length);
  if (length > kSafetensorsMaxHeader) {
    fail(file, detail::concat("header length ", length, " exceeds the cap of ",
                              kSafetensorsMaxHeader,
                              " bytes (noeira's models need a few KB; not a safetensors file?)"));
  }
  if (length > file_size - 8) {
    fail(file, detail::concat("truncated: header length ", length, " but only ", file_size - 8,
                              " bytes follow"));
  }
  std::string text(length, '\0');
  in.read(text.data(), static_cast<std::streamsize>(length));
  if (!in) fail(file, "cannot read the header");
  nlohmann::json header;
  if (const std::optional<JsonProblem> problem = parse_json(text, header)) {
    // A tensor named twice is the one problem whose text is a name: a name may be long.
    if (problem->line == 0) {
      fail(file, detail::concat("safetensors header names tensor '", shown_name(problem->token),
                                "' twice"));
    }
    fail(file, detail::concat("safetensors header is ", problem->what, " at line ", problem->line,
                              ", column ", problem->column));
  }
  if (!header.is_object()) fail(file, "safetensors header is not a JSON object");

  SafetensorsFile out;
  out.path_ = file;
  out.data_start_ = 8 + length;
  for (const auto& [key, value] : header.items()) {
    if (key == "__metadata__") {
      if (!value.is_object()) fail(file, "\"__metadata__\" is not a JSON object");
      for (const auto& [name, text_value] : value.items()) {
        if (!text_value.is_string()) {
          fail(file, detail::concat("\"__metadata__\" entry '", shown_name(name),
                                    "' is not a string"));
        }
        out.metadata_[name] = text_value.get<std::string>();
      }
      continue;
    }
    out.entries_.push_back(parse_entry(file, key, value));
  }
  // In data order, every tensor must begin where the previous one ended: no overlap, no gap,
  // and the last one ends where the file does.
  std::sort(out.entries_.begin(), out.entries_.end(), [](const StEntry& a, const StEntry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  const std::uint64_t data_size = file_size - out.data_start_;
  std::uint64_t covered = 0;
  const StEntry* previous = nullptr;
  for (const StEntry& e : out.entries_) {
    const std::string tensor = detail::concat("tensor '", shown_name(e.name), "'");
    if (e.end > data_size) {
      fail(file, detail::concat(tensor, ": data_offsets [", e.begin, ", ", e.end,
                                ") run past the data section's ", data_size, " bytes"));
    }
    if (e.begin < covered) {
      fail(file, detail::concat(tensor, ": data_offsets [", e.begin, ", ", e.end,
                                ") overlap tensor '", shown_name(previous->name), "'"));
    }
    if (e.begin > covered) {
      fail(file, detail::concat(tensor, ": bytes [", covered, ", ", e.begin,
                                ") before it belong to no tensor"));
    }
    covered = e.end;
    previous = &e;
  }
  if (covered != data_size) {
    fail(file, detail::concat("the data section's last ", data_size - covered,
                              " bytes belong to no tensor"));
  }
  return out;
}

const StEntry* SafetensorsFile::find(std::string_view name) const {
  for (const StEntry& e : entries_) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

std::vector<unsigned char> SafetensorsFile::read_bytes(const StEntry& entry) const {
  std::vector<unsigned char> bytes(entry.end - entry.begin);
  std::ifstream in(path_, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(data_start_ + entry.begin));
  in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!in) fail(path_, detail::concat("tensor '", entry.name, "': cannot read its data"));
  return bytes;
}

bool SafetensorsFile::same_bytes(const StEntry& a, const StEntry& b) const {
  if (a.dtype != b.dtype || a.shape != b.shape || a.end - a.begin != b.end - b.begin) return false;
  std::ifstream in_a(path_, std::ios::binary), in_b(path_, std::ios::binary);
  in_a.seekg(static_cast<std::streamoff>(data_start_ + a.begin));
  in_b.seekg(static_cast<std::streamoff>(data_start_ + b.begin));
  std::vector<char> block_a(std::size_t{1} << 20), block_b(block_a.size());
  for (std::uint64_t left = a.end - a.begin; left > 0;) {
    const auto n = static_cast<std::streamsize>(std::min<std::uint64_t>(left, block_a.size()));
    in_a.read(block_a.data(), n);
    in_b.read(block_b.data(), n);
    if (!in_a || !in_b) fail(path_, detail::concat("tensor '", a.name, "': cannot read its data"));
    if (std::memcmp(block_a.data(), block_b.data(), static_cast<std::size_t>(n)) != 0) return false;
    left -= static_cast<std::uint64_t>(n);
  }
  return true;
}

std::vector<float> SafetensorsFile::read_float(const StEntry& entry) const {
  if (!is_floating(entry.dtype)) {
    fail(path_, detail::concat("tensor '", entry.name, "' is ", to_string(entry.dtype),
                               ", expected floating point (F32, F64, F16 or BF16)"));
  }
  const std::vector<unsigned char> bytes = read_bytes(entry);
  std::vector<float> out(static_cast<std::size_t>(shape_numel(entry.shape)));
  switch (entry.dtype) {
    case StDtype::F32:
      std::memcpy(out.data(), bytes.data(), bytes.size());
      break;
    case StDtype::F64:
      widen<double>(bytes, out);
      break;
    case StDtype::F16:
    case StDtype::BF16:
      for (std::size_t i = 0; i < out.size(); ++i) {
        std::uint16_t h;
        std::memcpy(&h, bytes.data() + 2 * i, 2);
        // bfloat16 is float32's upper half.
        out[i] = entry.dtype == StDtype::F16
                     ? half_to_float(h)
                     : std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16);
      }
      break;
    default:
      break;
  }
  return out;
}

std::vector<float> SafetensorsFile::read_counter(const StEntry& entry) const {
  if (is_floating(entry.dtype)) return read_float(entry);
  const std::vector<unsigned char> bytes = read_bytes(entry);
  std::vector<float> out(static_cast<std::size_t>(shape_numel(entry.shape)));
  const auto size = static_cast<std::size_t>(dtype_bytes(entry.dtype));
  const bool is_signed = entry.dtype == StDtype::I64 || entry.dtype == StDtype::I32 ||
                         entry.dtype == StDtype::I16 || entry.dtype == StDtype::I8;
  for (std::size_t i = 0; i < out.size(); ++i) {
    std::uint64_t raw = 0;
    std::memcpy(&raw, bytes.data() + i * size, size);  // little-endian: the low bytes
    std::int64_t v = static_cast<std::int64_t>(raw);
    if (is_signed && size < 8 && (raw >> (8 * size - 1)) != 0) {
      v = static_cast<std::int64_t>(raw | (~std::uint64_t{0} << (8 * size)));  // sign-extend
    }
    // float32 holds every whole number up to 2^24 exactly; a counter past it would be rounded.
    if (v > (1 << 24) || v < -(1 << 24)) {
      fail(path_, detail::concat("tensor '", entry.name, "': value ", v,
                                 " is beyond float32's exact whole numbers (2^24)"));
    }
    out[i] = static_cast<float>(v);
  }
  return out;
}

}  // namespace noeira::io

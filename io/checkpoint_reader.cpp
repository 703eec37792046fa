#include "io/checkpoint_reader.hpp"

#include <fcntl.h>
#include <hdf5.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <system_error>

#include "io/checkpoint_format.hpp"
#include "io/checkpoint_fs.hpp"
#include "io/file_kind.hpp"
#include "io/h5.hpp"
#include "kernels/error.hpp"

namespace noeira::io {

namespace {

using h5::Handle;

// Elements per read (16 MiB): bounds the bounce buffer of a read that starts or ends inside a
// checksum block, and the latency between checksum checks.
constexpr std::int64_t kChunkElems = 4 * 1024 * 1024;
// Bytes at the start of a rank file read ahead before HDF5 opens it (the writer's first metadata
// block and the superblock before it).
constexpr off_t kMetaPrefetchBytes = 512 * 1024;

// One rank file's slice of a tensor.
struct SliceRef {
  int file = 0;
  Handle dataset;
  std::int64_t data_offset = -1;  // bytes into the file when contiguous (pread), else -1
  std::int64_t offset = 0;  // in the logical tensor
  std::int64_t length = 0;
  std::int64_t block = 0;
  std::vector<std::uint32_t> blocks;
};

struct TensorInfo {
  Shape shape;
  std::int64_t numel = 0;
  std::vector<SliceRef> slices;  // by offset, covering [0, numel) exactly once after open
};

std::string hex(std::uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

// Rank files present in a step directory: rank number -> path.
std::map<int, std::filesystem::path> find_rank_files(const std::filesystem::path& dir) {
  std::map<int, std::filesystem::path> files;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    int rank = -1;
    char tail = 0;
    if (name.size() == 13 && std::sscanf(name.c_str(), "rank-%5d.h5%c", &rank, &tail) == 1 &&
        rank >= 0 && name == ckpt::rank_file_name(rank)) {
      files[rank] = entry.path();
    }
  }
  if (ec) throw InputError(detail::concat(dir.string(), ": cannot list (", ec.message(), ")"));
  return files;
}

Handle open_file(const std::filesystem::path& file) {
  require_regular_file(file, "an HDF5 file");
  {
    // HDF5 reads the metadata in many small pieces; on a cold cache each is a disk round trip.
    // The writer packs it at the start of the file (meta block size), so ask for that region in
    // one read-ahead before HDF5 starts.
    const ckpt::Fd fd(file, O_RDONLY);
    ::posix_fadvise(fd.get(), 0, kMetaPrefetchBytes, POSIX_FADV_WILLNEED);
  }
  return h5::open_for_reading(file);
}

// The first field in which two files' metadata differ, for the error message.
std::string first_difference(const CheckpointMeta& a, const CheckpointMeta& b) {
  if (a.step != b.step) return detail::concat("step ", b.step, " vs ", a.step);
  if (a.world_size != b.world_size) {
    return detail::concat("world size ", b.world_size, " vs ", a.world_size);
  }
  if (a.policy != b.policy) return detail::concat("policy ", b.policy, " vs ", a.policy);
  if (a.signature != b.signature) return "model signature";
  return "metadata";
}

}  // namespace

struct CheckpointReader::Impl {
  std::filesystem::path dir;
  std::vector<std::filesystem::path> files;  // [world_size]
  std::vector<Handle> handles;               // [world_size], open read-only
  std::vector<ckpt::Fd> fds;                 // [world_size], the same files for pread
  CheckpointMeta meta;
  int version = 0;
  std::map<std::string, TensorInfo, std::less<>> tensors;
  std::vector<std::string> order;

  void open_files();
  void index_file(int rank);
  void check_coverage();
  const TensorInfo& tensor(std::string_view name) const;
  void read_slice_part(const SliceRef& s, std::string_view name, std::int64_t begin,
                       std::int64_t end, std::int64_t want_begin, std::int64_t want_end,
                       float* out) const;
};

void CheckpointReader::Impl::open_files() {
  const auto present = find_rank_files(dir);
  if (present.empty()) {
    throw InputError(detail::concat(dir.string(), ": checkpoint without rank-*.h5 files"));
  }
  // Any present file says how many there should be; all of them are then checked to agree.
  const auto& [first_rank, first_file] = *present.begin();
  Handle first = open_file(first_file);
  {
    int rank = 0;
    meta = ckpt::read_meta(first.get(), first_file, rank, version);
  }
  // The step directory's name is the step the files say (commit_checkpoint names it so).
  const std::int64_t dir_step = ckpt::parse_step_dir(dir.filename().string());
  if (dir_step >= 0 && dir_step != meta.step) {
    throw InputError(detail::concat(first_file.string(), ": root group: attribute 'step' is ",
                                    meta.step, ", but the directory is ",
                                    dir.filename().string()));
  }
  for (int r = 0; r < meta.world_size; ++r) {
    if (present.count(r) == 0) {
      throw InputError(detail::concat((dir / ckpt::rank_file_name(r)).string(),
                                      ": missing rank file (the checkpoint was written by ",
                                      meta.world_size, " ranks)"));
    }
  }
  const int last = present.rbegin()->first;
  if (last >= meta.world_size) {
    throw InputError(detail::concat(present.rbegin()->second.string(),
                                    ": rank file beyond the checkpoint's world size ",
                                    meta.world_size));
  }
  for (int r = 0; r < meta.world_size; ++r) {
    const std::filesystem::path& file = present.at(r);
    files.push_back(file);
    handles.push_back(r == first_rank ? std::move(first) : open_file(file));
    fds.emplace_back(file, O_RDONLY);
    int file_rank = -1;
    int file_version = 0;
    const CheckpointMeta m = ckpt::read_meta(handles.back().get(), file, file_rank, file_version);
    if (file_rank != r) {
      throw InputError(detail::concat(file.string(), ": holds rank ", file_rank, ", not ", r));
    }
    if (!(m == meta) || file_version != version) {
      throw InputError(detail::concat(file.string(),
                                      ": belongs to another checkpoint than ",
                                      files.front().filename().string(), " (",
                                      first_difference(meta, m), ")"));
    }
  }
}

void CheckpointReader::Impl::index_file(int rank) {
  h5::Lock held = h5::lock();
  const std::filesystem::path& file = files[static_cast<std::size_t>(rank)];
  const hid_t f = handles[static_cast<std::size_t>(rank)].get();
  const std::string_view skip[] = {ckpt::kMetaGroup};
  std::map<std::string_view, const Shape*> signature;
  for (const SignatureEntry& e : meta.signature) signature[e.name] = &e.shape;

  // Every link in the file is a hard link to a group or a dataset (h5::dataset_paths), every
  // dataset outside meta/ a slice, opened through h5::open_dataset: a 1-D little-endian float32
  // dataset stored in this file, allocated, contiguous or chunked.
  for (const std::string& name : h5::dataset_paths(f, file, skip)) {
    const std::string where = detail::concat("dataset '", name, "'");
    const auto bad = [&](std::string_view problem) {
      return InputError(detail::concat(file.string(), ": tensor '", name, "': ", problem));
    };
    if (!ckpt::valid_tensor_name(name)) {
      throw InputError(detail::concat(file.string(), ": dataset ", h5::quote_name(name),
                                      " is not a tensor name noeira writes"));
    }
    // params/<name>/{val,m,v}: a parameter's value or Adam moments, nothing else under params/.
    const std::string_view param = ckpt::param_of_tensor(name);
    if (name.starts_with("params/")) {
      const std::string_view kind = std::string_view(name).substr(name.rfind('/') + 1);
      if (param.empty() || (kind != "val" && kind != "m" && kind != "v")) {
        throw bad("not a parameter's val, m or v (params/<name>/val|m|v)");
      }
    }
    h5::Dataset ds = h5::open_dataset(f, name, h5::DatasetSpec{H5T_IEEE_F32LE, 0, 1}, file);
    SliceRef s;
    s.file = rank;
    s.dataset = std::move(ds.handle);
    const hid_t id = s.dataset.get();

    // The attributes, each checked before the next one is sized by it.
    const Shape shape =
        h5::read_i64_array_attr(id, ckpt::kAttrGlobalShape, file, where, ckpt::kMaxDims);
    const std::int64_t numel = ckpt::checked_numel(shape);
    if (numel < 0) {
      throw bad(detail::concat("global_shape ", shape_string(shape),
                               " has a negative dimension or too many elements"));
    }
    s.offset = h5::read_i64_attr(id, ckpt::kAttrOffset, file, where);
    s.length = h5::read_i64_attr(id, ckpt::kAttrLength, file, where);
    if (s.length != ds.points || s.length < 1 || s.offset < 0 || s.offset > numel - s.length) {
      throw bad(detail::concat("slice offset ", s.offset, ", length ", s.length,
                               " does not fit its dataset of ", ds.points,
                               " elements or a tensor of shape ", shape_string(shape)));
    }
    const std::uint32_t whole = h5::read_u32_attr(id, ckpt::kAttrCrc, file, where);
    s.block = h5::read_i64_attr(id, ckpt::kAttrBlockElems, file, where);
    // The writer's block (ckpt::checksum_block) is never longer than both the slice and
    // 256 Ki elements; a longer one would only serve to overflow the reader's arithmetic.
    if (s.block < 1 || s.block > std::max(s.length, ckpt::checksum_block(1))) {
      throw bad(detail::concat("crc32_block ", s.block, " is not 1 to ",
                               std::max(s.length, ckpt::checksum_block(1)),
                               " elements (corrupted file)"));
    }
    const auto count = static_cast<std::size_t>((s.length - 1) / s.block + 1);
    s.blocks = h5::read_u32_array_attr(id, ckpt::kAttrBlockCrcs, file, where, count);
    if (s.blocks.size() != count) {
      throw bad(detail::concat("crc32_blocks holds ", s.blocks.size(), " checksums, but length ",
                               s.length, " in blocks of crc32_block ", s.block, " makes ", count,
                               " (corrupted file)"));
    }
    if (ckpt::combine_block_crcs(s.blocks, s.block, s.length) != whole) {
      throw bad("crc32 disagrees with crc32_blocks (corrupted file)");
    }
    s.data_offset = ds.file_offset;
    if (!param.empty()) {
      const auto it = signature.find(param);
      if (it == signature.end()) throw bad("its parameter is not in the model signature");
      if (*it->second != shape) {
        throw bad(detail::concat("shape ", shape_string(shape), ", the signature says ",
                                 shape_string(*it->second)));
      }
    }
    auto [it, fresh] = tensors.try_emplace(name);
    TensorInfo& t = it->second;
    if (fresh) {
      t.shape = shape;
      t.numel = numel;
    } else if (t.shape != shape) {
      throw bad(detail::concat("shape ", shape_string(shape), ", but ",
                               files[static_cast<std::size_t>(t.slices.front().file)].string(),
                               " says ", shape_string(t.shape)));
    }
    t.slices.push_back(std::move(s));
  }
}

void CheckpointReader::Impl::check_coverage() {
  for (auto& [name, t] : tensors) {
    std::sort(t.slices.begin(), t.slices.end(),
              [](const SliceRef& a, const SliceRef& b) { return a.offset < b.offset; });
    std::int64_t next = 0;
    const SliceRef* prev = nullptr;
    for (const SliceRef& s : t.slices) {
      if (s.offset < next) {
        throw InputError(detail::concat(
            dir.string(), ": tensor '", name, "': the slices in ",
            files[static_cast<std::size_t>(prev->file)].filename().string(), " and ",
            files[static_cast<std::size_t>(s.file)].filename().string(), " overlap"));
      }
      if (s.offset > next) break;
      next = s.offset + s.length;
      prev = &s;
    }
    if (next != t.numel) {
      throw InputError(detail::concat(dir.string(), ": tensor '", name, "': elements from ", next,
                                      " of ", t.numel, " are in no rank file"));
    }
  }
  std::vector<std::string> rest;
  for (const auto& [name, t] : tensors) rest.push_back(name);
  for (const SignatureEntry& e : meta.signature) {
    for (const char* kind : {"val", "m", "v"}) {
      const std::string name = param_tensor_name(e.name, kind);
      if (tensors.count(name) != 0) {
        order.push_back(name);
        rest.erase(std::find(rest.begin(), rest.end(), name));
      }
    }
  }
  order.insert(order.end(), rest.begin(), rest.end());
}

const TensorInfo& CheckpointReader::Impl::tensor(std::string_view name) const {
  const auto it = tensors.find(name);
  if (it == tensors.end()) {
    throw InputError(detail::concat(dir.string(), ": the checkpoint has no tensor '", name, "'"));
  }
  return it->second;
}

// Reads whole checksum blocks [begin, end) (slice-local elements, block-aligned) of one slice,
// verifies them, and copies the part inside [want_begin, want_end) to out[want_begin - ...].
// `out` points at the element want_begin of the caller's range.
void CheckpointReader::Impl::read_slice_part(const SliceRef& s, std::string_view name,
                                             std::int64_t begin, std::int64_t end,
                                             std::int64_t want_begin, std::int64_t want_end,
                                             float* out) const {
  const std::filesystem::path& file = files[static_cast<std::size_t>(s.file)];
  const bool direct = begin == want_begin && end == want_end;
  std::vector<float> bounce;
  float* dst = out;
  if (!direct) {
    bounce.resize(static_cast<std::size_t>(end - begin));
    dst = bounce.data();
  }
  if (s.data_offset >= 0) {
    // The common case, outside the HDF5 lock: ranks of one process read in parallel.
    const ckpt::Fd& fd = fds[static_cast<std::size_t>(s.file)];
    if (!ckpt::pread_all(fd, dst, static_cast<std::size_t>(end - begin) * sizeof(float),
                         s.data_offset + begin * static_cast<std::int64_t>(sizeof(float)), file)) {
      throw InputError(detail::concat(file.string(), ": truncated (tensor '", name,
                                      "' ends past the end of the file)"));
    }
  } else {
    h5::Lock held = h5::lock();
    const hsize_t start[1] = {static_cast<hsize_t>(begin)};
    const hsize_t count[1] = {static_cast<hsize_t>(end - begin)};
    Handle fspace(NOEIRA_H5_CHECK_INPUT(H5Dget_space(s.dataset.get()), file), H5Sclose);
    NOEIRA_H5_CHECK_INPUT(
        H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, start, nullptr, count, nullptr), file);
    Handle mspace(NOEIRA_H5_CHECK_INPUT(H5Screate_simple(1, count, nullptr), file), H5Sclose);
    NOEIRA_H5_CHECK_INPUT(
        H5Dread(s.dataset.get(), H5T_NATIVE_FLOAT, mspace.get(), fspace.get(), H5P_DEFAULT, dst),
        file);
  }
  // Checksums outside the lock: simulated ranks reading at once verify in parallel.
  for (std::int64_t b = begin; b < end; b += s.block) {
    const std::int64_t n = std::min(s.block, end - b);
    const std::uint32_t crc = ckpt::crc32_of(
        std::span<const float>(dst + (b - begin), static_cast<std::size_t>(n)));
    const std::uint32_t stored = s.blocks[static_cast<std::size_t>(b / s.block)];
    if (crc != stored) {
      throw InputError(detail::concat(
          file.string(), ": checksum mismatch in tensor '", name, "' elements [", s.offset + b,
          ", ", s.offset + b + n, ") (stored ", hex(stored), ", read ", hex(crc),
          "): the file is corrupted"));
    }
  }
  if (!direct) {
    std::copy(dst + (want_begin - begin), dst + (want_end - begin), out);
  }
}

CheckpointReader CheckpointReader::open(const std::filesystem::path& path) {
  auto impl = std::make_unique<Impl>();
  impl->dir = resolve_checkpoint(path);
  impl->open_files();
  for (int r = 0; r < impl->meta.world_size; ++r) impl->index_file(r);
  impl->check_coverage();
  return CheckpointReader(std::move(impl));
}

CheckpointReader::CheckpointReader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CheckpointReader::CheckpointReader(CheckpointReader&&) noexcept = default;
CheckpointReader& CheckpointReader::operator=(CheckpointReader&&) noexcept = default;
CheckpointReader::~CheckpointReader() = default;

const std::filesystem::path& CheckpointReader::dir() const { return impl_->dir; }
const CheckpointMeta& CheckpointReader::meta() const { return impl_->meta; }
int CheckpointReader::format_version() const { return impl_->version; }
const std::vector<std::string>& CheckpointReader::tensor_names() const { return impl_->order; }

bool CheckpointReader::has(std::string_view name) const {
  return impl_->tensors.find(name) != impl_->tensors.end();
}

const Shape& CheckpointReader::shape(std::string_view name) const {
  return impl_->tensor(name).shape;
}

void CheckpointReader::check_signature(const Signature& expected) const {
  const Signature& stored = impl_->meta.signature;
  const std::string file = impl_->files.front().string();
  std::map<std::string_view, const Shape*> by_name;
  for (const SignatureEntry& e : stored) by_name[e.name] = &e.shape;
  for (const SignatureEntry& e : expected) {
    const auto it = by_name.find(e.name);
    if (it == by_name.end()) {
      throw InputError(detail::concat(file, ": written for another model: parameter '", e.name,
                                      "' of the model is not in the checkpoint"));
    }
    if (*it->second != e.shape) {
      throw InputError(detail::concat(file, ": written for another model: parameter '", e.name,
                                      "' has shape ", shape_string(*it->second),
                                      " in the checkpoint, ", shape_string(e.shape),
                                      " in the model"));
    }
    by_name.erase(it);
  }
  if (!by_name.empty()) {
    throw InputError(detail::concat(file, ": written for another model: parameter '",
                                    by_name.begin()->first, "' is not in the model"));
  }
  if (stored != expected) {
    throw InputError(detail::concat(file, ": written for another model: same parameters in "
                                          "another walk order"));
  }
}

void CheckpointReader::read(std::string_view name, std::int64_t offset,
                            std::span<float> out) const {
  const TensorInfo& t = impl_->tensor(name);
  const auto length = static_cast<std::int64_t>(out.size());
  NOEIRA_CHECK(offset >= 0 && offset <= t.numel - length, "range [", offset, ", ",
               offset + length, ") is outside tensor '", name, "' of ", t.numel, " elements");
  const std::int64_t end = offset + length;
  // First slice that ends after offset.
  auto it = std::upper_bound(t.slices.begin(), t.slices.end(), offset,
                             [](std::int64_t pos, const SliceRef& s) {
                               return pos < s.offset + s.length;
                             });
  std::int64_t pos = offset;
  for (; pos < end; ++it) {
    const SliceRef& s = *it;
    const std::int64_t local_end = std::min(end, s.offset + s.length) - s.offset;
    // Whole checksum blocks, read a bounded number at a time.
    const std::int64_t step = std::max(s.block, kChunkElems / s.block * s.block);
    std::int64_t local = pos - s.offset;
    while (local < local_end) {
      const std::int64_t begin = local / s.block * s.block;
      const std::int64_t block_end =
          std::min({begin + step, (local_end + s.block - 1) / s.block * s.block, s.length});
      const std::int64_t want_end = std::min(block_end, local_end);
      impl_->read_slice_part(s, name, begin, block_end, local, want_end,
                             out.data() + (s.offset + local - offset));
      local = want_end;
    }
    pos = s.offset + local_end;
  }
}

std::vector<float> CheckpointReader::read_all(std::string_view name) const {
  std::vector<float> values(static_cast<std::size_t>(impl_->tensor(name).numel));
  read(name, 0, values);
  return values;
}

void CheckpointReader::verify() const {
  std::vector<float> buffer;
  for (const std::string& name : impl_->order) {
    const TensorInfo& t = impl_->tensor(name);
    for (std::int64_t pos = 0; pos < t.numel; pos += kChunkElems) {
      buffer.resize(static_cast<std::size_t>(std::min(kChunkElems, t.numel - pos)));
      read(name, pos, buffer);
    }
  }
}

}  // namespace noeira::io

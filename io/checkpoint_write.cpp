// write_rank_file: one rank's HDF5 file of a checkpoint (io/checkpoint.hpp).
#include <fcntl.h>
#include <hdf5.h>

#include <map>
#include <set>
#include <system_error>

#include "io/checkpoint.hpp"
#include "io/checkpoint_format.hpp"
#include "io/checkpoint_fs.hpp"
#include "io/h5.hpp"
#include "kernels/error.hpp"

namespace noeira::io {

namespace {

using h5::Handle;

constexpr hsize_t kMetaBlockBytes = 256 * 1024;

void check_meta(const CheckpointMeta& meta, int rank) {
  NOEIRA_CHECK(meta.world_size >= 1, "checkpoint world size ", meta.world_size, " is not >= 1");
  NOEIRA_CHECK(rank >= 0 && rank < meta.world_size, "rank ", rank, " is outside world size ",
               meta.world_size);
  NOEIRA_CHECK(meta.step >= 0, "checkpoint step ", meta.step, " is negative");
  std::set<std::string_view> names;
  for (const SignatureEntry& e : meta.signature) {
    NOEIRA_CHECK(ckpt::valid_param_name(e.name), "signature name '", e.name,
                 "' cannot be stored (empty, '/', whitespace)");
    NOEIRA_CHECK(names.insert(e.name).second, "signature name '", e.name, "' appears twice");
    for (const std::int64_t d : e.shape) {
      NOEIRA_CHECK(d >= 0, "signature entry '", e.name, "' has a negative dimension");
    }
  }
  const auto check_keys = [](const auto& map, const char* what) {
    for (const auto& [key, value] : map) {
      (void)value;
      NOEIRA_CHECK(ckpt::valid_param_name(key), what, " key '", key,
                   "' cannot be stored (empty, '/', whitespace)");
    }
  };
  check_keys(meta.scalars, "scalar");
  check_keys(meta.counters, "counter");
  check_keys(meta.labels, "label");
}

void check_slices(const CheckpointMeta& meta, std::span<const TensorSlice> slices) {
  std::map<std::string_view, const Shape*> signature;
  for (const SignatureEntry& e : meta.signature) signature[e.name] = &e.shape;
  std::set<std::string_view> names;
  for (const TensorSlice& s : slices) {
    NOEIRA_CHECK(ckpt::valid_tensor_name(s.name), "tensor name '", s.name,
                 "' cannot be stored (empty component, whitespace or under meta/)");
    NOEIRA_CHECK(names.insert(s.name).second, "tensor '", s.name,
                 "' is given twice: a rank writes at most one slice per tensor");
    for (const std::int64_t d : s.global_shape) {
      NOEIRA_CHECK(d >= 0, "tensor '", s.name, "' has a negative dimension");
    }
    const std::int64_t numel = shape_numel(s.global_shape);
    const auto length = static_cast<std::int64_t>(s.data.size());
    NOEIRA_CHECK(s.offset >= 0 && s.offset + length <= numel, "slice [", s.offset, ", ",
                 s.offset + length, ") of tensor '", s.name, "' is outside its ", numel,
                 " elements");
    const std::string_view param = ckpt::param_of_tensor(s.name);
    if (!param.empty()) {
      const auto it = signature.find(param);
      NOEIRA_CHECK(it != signature.end(), "tensor '", s.name, "' belongs to parameter '", param,
                   "', which is not in the model signature");
      NOEIRA_CHECK(*it->second == s.global_shape, "tensor '", s.name, "' has shape ",
                   shape_string(s.global_shape), ", the signature says ",
                   shape_string(*it->second));
    }
  }
}

// Creates a slice's dataset with its attributes and returns where its bytes go in the file. The
// space is allocated now (contiguous, early, never filled) and the bytes are written later with
// pwrite outside the HDF5 lock: HDF5 runs one thread at a time (io/h5.hpp), and the raw data is
// nearly all of a checkpoint, so this is what lets the ranks of one process write in parallel.
// The result is an ordinary HDF5 file; H5Dget_offset is HDF5's interface for this direct access.
std::int64_t create_slice(hid_t file_id, hid_t lcpl, hid_t dcpl, const std::filesystem::path& file,
                          const TensorSlice& slice, const ckpt::SliceChecksums& sums) {
  const hsize_t dims[1] = {static_cast<hsize_t>(slice.data.size())};
  Handle space(NOEIRA_H5_CHECK(H5Screate_simple(1, dims, nullptr), file), H5Sclose);
  Handle ds(NOEIRA_H5_CHECK(H5Dcreate2(file_id, slice.name.c_str(), H5T_IEEE_F32LE, space.get(),
                                       lcpl, dcpl, H5P_DEFAULT),
                            file),
            H5Dclose);
  h5::write_i64_array_attr(ds.get(), ckpt::kAttrGlobalShape, slice.global_shape, file);
  h5::write_i64_attr(ds.get(), ckpt::kAttrOffset, slice.offset, file);
  h5::write_i64_attr(ds.get(), ckpt::kAttrLength, static_cast<std::int64_t>(slice.data.size()),
                     file);
  h5::write_u32_attr(ds.get(), ckpt::kAttrCrc, sums.whole, file);
  h5::write_i64_attr(ds.get(), ckpt::kAttrBlockElems, sums.block, file);
  h5::write_u32_array_attr(ds.get(), ckpt::kAttrBlockCrcs, sums.blocks, file);
  const haddr_t addr = H5Dget_offset(ds.get());
  if (addr == HADDR_UNDEF) {
    throw LibraryError(detail::concat(file.string(), ": HDF5 allocated no contiguous storage for '",
                                      slice.name, "'"));
  }
  return static_cast<std::int64_t>(addr);
}

}  // namespace

void write_rank_file(const std::filesystem::path& ckpt_dir, int rank, const CheckpointMeta& meta,
                     std::span<const TensorSlice> slices) {
  check_meta(meta, rank);
  check_slices(meta, slices);

  // Checksums first, outside the HDF5 lock: the ranks of one process compute them in parallel.
  std::vector<const TensorSlice*> todo;
  std::vector<ckpt::SliceChecksums> sums;
  for (const TensorSlice& s : slices) {
    if (s.data.empty()) continue;
    todo.push_back(&s);
    sums.push_back(ckpt::slice_checksums(s.data));
  }

  const std::filesystem::path dir = ckpt_dir / ckpt::tmp_dir_name(meta.step);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);  // another rank may have made it: not an error
  if (ec && !std::filesystem::is_directory(dir)) {
    throw InputError(detail::concat(dir.string(), ": cannot create the checkpoint directory (",
                                    ec.message(), ")"));
  }
  const std::filesystem::path file = dir / ckpt::rank_file_name(rank);
  std::filesystem::path part = file;
  part += ".part";
  // A rank file left by an earlier, crashed attempt at this step must not pass for this
  // attempt's: commit_checkpoint takes the presence of rank-r.h5 as "rank r finished".
  std::filesystem::remove(file, ec);
  std::filesystem::remove(part, ec);

  std::vector<std::int64_t> addrs;
  {
    h5::Lock held = h5::lock();
    Handle fapl = h5::file_access(part);
    // The 1.8 object format or newer: object headers and the superblock carry checksums, so a
    // flipped byte in the metadata is an error on open rather than a misread.
    NOEIRA_H5_CHECK(H5Pset_libver_bounds(fapl.get(), H5F_LIBVER_V18, H5F_LIBVER_LATEST), part);
    // Metadata packed in blocks of this size rather than 2 KiB ones between the slices: a reader
    // opening the file reads a few blocks instead of seeking to every dataset's header.
    NOEIRA_H5_CHECK(H5Pset_meta_block_size(fapl.get(), kMetaBlockBytes), part);
    // Slices of 64 KiB and more start on a page boundary: whole-page writes and reads.
    NOEIRA_H5_CHECK(H5Pset_alignment(fapl.get(), 64 * 1024, 4096), part);
    const hid_t id = H5Fcreate(part.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get());
    if (id < 0) throw InputError(detail::concat(part.string(), ": cannot create the file"));
    Handle f(id, H5Fclose);
    ckpt::hook("rank_file_open");
    ckpt::write_meta(f.get(), part, meta, rank);
    Handle lcpl(NOEIRA_H5_CHECK(H5Pcreate(H5P_LINK_CREATE), part), H5Pclose);
    NOEIRA_H5_CHECK(H5Pset_create_intermediate_group(lcpl.get(), 1), part);
    Handle dcpl(NOEIRA_H5_CHECK(H5Pcreate(H5P_DATASET_CREATE), part), H5Pclose);
    NOEIRA_H5_CHECK(H5Pset_layout(dcpl.get(), H5D_CONTIGUOUS), part);
    NOEIRA_H5_CHECK(H5Pset_alloc_time(dcpl.get(), H5D_ALLOC_TIME_EARLY), part);
    NOEIRA_H5_CHECK(H5Pset_fill_time(dcpl.get(), H5D_FILL_TIME_NEVER), part);
    for (std::size_t i = 0; i < todo.size(); ++i) {
      addrs.push_back(create_slice(f.get(), lcpl.get(), dcpl.get(), part, *todo[i], sums[i]));
    }
    f.close(part);  // writes the metadata; a failure here (disk full) must not pass silently
  }
  {
    // Outside the lock: the ranks of one process write and flush in parallel.
    const ckpt::Fd fd(part, O_WRONLY);
    for (std::size_t i = 0; i < todo.size(); ++i) {
      ckpt::pwrite_all(fd, todo[i]->data.data(), todo[i]->data.size_bytes(), addrs[i], part);
      ckpt::hook("slice_written");
    }
    ckpt::fsync_fd(fd, part);
  }
  ckpt::hook("rank_file_synced");
  ckpt::rename_replacing(part, file);
  ckpt::hook("rank_file_renamed");
}

}  // namespace noeira::io

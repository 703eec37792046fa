#pragma once
// The pieces of the checkpoint format that the writer and the reader share: names, checksums,
// the metadata block. Private to io/. docs/checkpoint-format.md is the user's description of the
// same; change both together (and kCheckpointFormatVersion when old readers would misread).
#include <hdf5.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "io/checkpoint.hpp"

namespace noeira::io::ckpt {

inline constexpr const char* kFormat = "noeira-checkpoint";
inline constexpr const char* kMetaGroup = "meta";  // no tensor lives below it

// Per-slice dataset attributes.
inline constexpr const char* kAttrGlobalShape = "global_shape";
inline constexpr const char* kAttrOffset = "offset";
inline constexpr const char* kAttrLength = "length";
inline constexpr const char* kAttrCrc = "crc32";
inline constexpr const char* kAttrBlockElems = "crc32_block";
inline constexpr const char* kAttrBlockCrcs = "crc32_blocks";

// What the readers hold a file to, beyond what the writers produce (docs/checkpoint-format.md
// "What loading refuses"). A value outside these is a lie of the file, refused by name before it
// sizes anything.
//
// Rank files are named rank-%05d.h5, so a checkpoint has at most 100000 of them.
inline constexpr std::int64_t kMaxWorldSize = 100000;
// Dimensions of a tensor (HDF5's own limit).
inline constexpr std::size_t kMaxDims = 32;
// A string attribute that names something (a format, a policy, a preset, a key): bytes.
inline constexpr std::size_t kMaxNameBytes = 256;
// A text attribute or dataset (a vocabulary, the model signature): bytes. A char vocabulary of
// every Unicode scalar value is about 8 MiB.
inline constexpr std::size_t kMaxTextBytes = 16 * 1024 * 1024;
// The sharding policies a checkpoint may name (distributed/residency.hpp's kPolicyNames, which
// io/ cannot include; tests/test_h5_hostile.cpp checks they agree), or none ("").
inline constexpr std::array<std::string_view, 4> kPolicies = {"ddp", "zero1", "zero2", "zero3"};
bool known_policy(std::string_view policy);

// The element count of a shape, or -1 when a dimension is negative or the count overflows
// int64 (a shape read from a file).
std::int64_t checked_numel(std::span<const std::int64_t> shape);

// "rank-00003.h5".
std::string rank_file_name(int rank);
// "step-00000120" -> 120; -1 when the name is not a committed step directory's.
std::int64_t parse_step_dir(std::string_view name);
// ".tmp-step-00000120".
std::string tmp_dir_name(std::int64_t step);

// Checksums of one slice: CRC-32 (zlib's, the same as Python's zlib.crc32) of the little-endian
// float32 bytes, per block of `block` elements and of the whole slice. Blocks let a reader that
// needs only part of a slice (a different rank count cuts tensors elsewhere) verify just the
// blocks it reads; the whole-slice value is what a user checks with h5py.
struct SliceChecksums {
  std::int64_t block = 0;
  std::vector<std::uint32_t> blocks;
  std::uint32_t whole = 0;
};
// The block size for a slice of `length` elements: 256 Ki elements (1 MiB), larger for slices
// over 4096 such blocks so that the attribute stays small.
std::int64_t checksum_block(std::int64_t length);
SliceChecksums slice_checksums(std::span<const float> data);
std::uint32_t crc32_of(std::span<const float> data);
// The whole-slice CRC from block CRCs (zlib's crc32_combine), to check the attributes agree.
std::uint32_t combine_block_crcs(std::span<const std::uint32_t> blocks, std::int64_t block,
                                 std::int64_t length);

// "0.weight 256,784" lines, one per parameter; a 0-d shape is written as "0.weight -".
std::string signature_text(const Signature& signature);
// InputError naming `file` on a malformed line: a name that cannot be stored (valid_param_name)
// or given twice, a dimension that is not a non-negative decimal, more than kMaxDims of them, or
// an element count that overflows.
Signature parse_signature(std::string_view text, const std::filesystem::path& file);

// A tensor or parameter name we can store: non-empty "/"-separated components, none empty, "."
// or "..", no whitespace; tensors not under meta/.
bool valid_tensor_name(std::string_view name);
bool valid_param_name(std::string_view name);

// "params/0.weight/val" -> "0.weight"; empty when the name is not of that form.
std::string_view param_of_tensor(std::string_view tensor);

// Root attributes, /meta/{scalars,counters,labels} and /meta/signature of one rank file. The
// caller holds the HDF5 lock.
void write_meta(hid_t file_id, const std::filesystem::path& file, const CheckpointMeta& meta,
                int rank);
// Reads them back, checking every value against the values it can take and the others it must
// agree with (format and version, 0 <= rank < world_size <= kMaxWorldSize, non-negative step,
// epoch and samples, 0 <= optimizer_t <= step, beta powers in [0, 1] and 1 at t = 0, a known
// policy, keys that can be stored, texts of sane length); `rank` and `version` get the file's.
// Every refusal is an InputError naming the file and the attribute.
CheckpointMeta read_meta(hid_t file_id, const std::filesystem::path& file, int& rank,
                         int& version);

// Calls the test hook, if any.
void hook(std::string_view stage);

}  // namespace noeira::io::ckpt

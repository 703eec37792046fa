#pragma once
// A model's parameters in a small HDF5 file (the final weights of `noeira train`, read by
// `noeira eval`). The layout is the one checkpoints have (docs/checkpoint-format.md), so h5py, h5dump and later the
// checkpoint reader understand it:
//
//   /                        attributes: format = "noeira-params", format_version = 2,
//                                        model = "<preset name>", and for a language model
//                                        vocabulary = its tokenizer (train/tokenizer.hpp)
//   /params/<dotted.name>/val  float32 dataset with the parameter's shape
//   /buffers/<dotted.name>     float32 dataset with the buffer's shape (BatchNorm's running
//                              statistics: state that is not a parameter, core/module.hpp)
//
// Dotted names come from the parameter walk ("0.weight", "2.bias").
//
// Integrity: from format_version 2 on, every tensor dataset carries a uint32 attribute "crc32",
// the CRC-32 of its little-endian float32 bytes (the checkpoints' checksum,
// io/checkpoint_format.hpp), which loading verifies. A version-1 file (written before checksums)
// still loads, unchecked unless a dataset happens to carry "crc32"; a version-2 file whose tensor
// lacks one is refused. Reading refuses anything but plain datasets stored in the file itself
// (h5::open_dataset) and any root attribute outside the values it can take (read_params_attributes).
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/finite.hpp"
#include "core/param.hpp"
#include "io/checkpoint.hpp"

namespace noeira::io {

inline constexpr int kParamsFormatVersion = 2;
// The first version whose tensors carry the "crc32" attribute.
inline constexpr int kParamsChecksumVersion = 2;

// Writes the parameters `signature` names (walk order) with their values, concatenated in the
// same order in host memory (what ShardingPolicy::full_parameters returns), the buffers `buffers`
// names with theirs laid out alike in `buffer_values`, and string
// attributes of the root group beside `model` (a language model's "vocabulary"). The file is
// written under "<file>.tmp" and renamed, so a crashed write never leaves a file that looks
// complete. A NaN or infinity in the values is an InputError naming the parameter, and no file is
// written, unless `non_finite` allows it.
void save_params(const std::filesystem::path& file, std::string_view model,
                 const Signature& signature, std::span<const float> values,
                 const std::map<std::string, std::string>& attributes = {},
                 NonFinite non_finite = NonFinite::Refuse, const Signature& buffers = {},
                 std::span<const float> buffer_values = {});

// The string attributes of the root group that noeira knows ("model", "data", "vocabulary", the
// description train/model_description.hpp writes), each checked against the values it can take
// and the others it must agree with: a name of sane length and characters for model and data, a
// decimal count for parameters and block, char, byte or gpt2 for tokenizer (the vocabulary's kind),
// texts of bounded length. Also checks format and format_version (1 or 2). Any other attribute
// is not read. InputError naming the file and the attribute when it is not such a file.
std::map<std::string, std::string> read_params_attributes(const std::filesystem::path& file);

// A string attribute of the root group, if the file has it (InputError when it is not such a
// file, or as read_params_attributes for the attributes it knows).
std::optional<std::string> read_params_attribute(const std::filesystem::path& file,
                                                 const std::string& name);

// The model preset a parameters file was written for (InputError when it is not such a file).
std::string read_params_model(const std::filesystem::path& file);

// Reads every parameter's and buffer's value. A different model name, a "parameters" attribute
// other than the parameters' element count, a missing tensor, an extra one, a shape mismatch, a
// dataset that is not a plain float32 one stored in this file (h5::open_dataset), a link that is
// not a hard link, or a checksum mismatch is an InputError naming the file and the tensor; so is a
// non-finite value unless `non_finite` allows it.
void load_params(const std::filesystem::path& file, std::string_view model,
                 const std::vector<NamedParam>& params, NonFinite non_finite = NonFinite::Refuse,
                 const std::vector<NamedBuffer>& buffers = {});

}  // namespace noeira::io

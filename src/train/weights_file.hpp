#pragma once
// A model's weights in a safetensors file (io/safetensors.hpp) under a name map
// (train/name_map.hpp): what `noeira export` writes, and what `train --init-from` and
// `eval --params` read, from noeira or from PyTorch.
//
// The file's __metadata__ holds format = "noeira-safetensors", format_version, model (the preset),
// names (the name map) and the string attributes model.h5 has beside its parameters (a language
// model's vocabulary), so that `noeira eval` knows the preset. A file written by PyTorch has none
// of them: the preset is then the one --model names, the map the one --names names (or the one
// its tensor names show).
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/finite.hpp"
#include "distributed/param_store.hpp"
#include "io/safetensors.hpp"
#include "train/name_map.hpp"

namespace noeira {

inline constexpr std::string_view kSafetensorsFormat = "noeira-safetensors";

// Writes every parameter and buffer of the walk (host copies) under `names`, with the metadata
// above. A non-finite value is an InputError naming the tensor unless `non_finite` allows it.
void save_weights_safetensors(const std::filesystem::path& file, std::string_view model,
                              const NameMap& names, const dist::WalkUnits& walk,
                              const std::map<std::string, std::string>& attributes,
                              NonFinite non_finite);

// The name map to read `file` with for the preset `model`: `requested` (noeira, pytorch) when
// given, else the one the file's metadata names, else noeira when the file has every parameter
// of the walk under its own name, else pytorch.
NameMap reading_name_map(const io::SafetensorsFile& file, std::optional<NameScheme> requested,
                         std::string_view model, const dist::WalkUnits& walk);

// Fills every parameter and buffer of the walk from `file`. A file written for another preset, a
// missing tensor, one of another shape or dtype, one the model does not have (beyond those the
// map may leave unread; a copy of a tied tensor only when it is the same bits as what it copies),
// or a non-finite value (unless allowed) is an InputError naming the file and the tensor. The
// table of contents is checked whole before a value is read.
void load_weights_safetensors(const io::SafetensorsFile& file, std::string_view model,
                              const NameMap& names, const dist::WalkUnits& walk,
                              NonFinite non_finite);

// Before the model of preset `model` is built: the file's tensors (names and shapes, read
// through the map `requested` names, or the file's) against the preset's walk, with the errors
// load_weights_safetensors would give, where the walk is known without building the model (the
// GPT presets, gpt2-124m's 124 M parameters among them). A 92-byte file that names gpt2-124m is
// refused without the model's gigabyte. Other presets: nothing is checked here.
void check_weights_before_building(const io::SafetensorsFile& file, std::string_view model,
                                   std::optional<NameScheme> requested);

// The walk check_weights_before_building compares with (empty where it knows none): names and
// shapes in the walk's order, for the test that holds it to built models.
std::vector<std::pair<std::string, Shape>> unbuilt_walk_for_tests(std::string_view model);

// The weights of `file` into the walk, whatever the file is: a .safetensors (through the map
// `requested` names, or the file's) or a model.h5 of the same preset. Another extension is an
// InputError.
void load_weights_file(const std::filesystem::path& file, std::string_view model,
                       std::optional<NameScheme> requested, const dist::WalkUnits& walk,
                       NonFinite non_finite);

}  // namespace noeira

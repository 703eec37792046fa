#pragma once
// `noeira export`: a saved model (model.h5, a .safetensors or a checkpoint) written as a
// safetensors file under a name map (train/name_map.hpp), for PyTorch or for noeira.
#include <cstdint>
#include <optional>
#include <string>

#include "train/name_map.hpp"

namespace noeira {

struct ExportConfig {
  std::string params;         // model.h5 or a .safetensors
  std::string checkpoint;     // or a checkpoint (directory, step directory or latest file)
  std::string model;          // the preset; empty: the one the source names
  std::string format = "safetensors";
  NameScheme names = NameScheme::Noeira;   // the map the written file follows
  std::optional<NameScheme> source_names;  // the map a .safetensors source follows (none: its own)
  std::string out;               // the file to write (.safetensors)
  bool allow_non_finite = false;
};

struct ExportResult {
  std::string model;
  std::int64_t tensors = 0;
};

// Reads the source into its preset, then writes `out` (under "<out>.tmp", renamed when
// complete). An unknown format, an output name that is not <name>.safetensors, a preset without
// the map asked for, or a source that does not fit its preset is an InputError.
ExportResult run_export(const ExportConfig& config);

}  // namespace noeira

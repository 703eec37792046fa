#pragma once
// What model.h5 says of the model beside its tensors, so that a reader without noeira (h5py and
// numpy, PyTorch after an export) can use the weights: the preset and its sizes, how inputs were
// prepared, what the outputs mean. Fashion-MNIST inputs are (pixel / 255 - 0.2860) / 0.3530: a
// reader who feeds raw pixels / 255 instead gets a fraction of the accuracy. docs/
// checkpoint-format.md lists the attributes; examples/read_model_h5.py uses them.
//
// Every value is a string (HDF5 string attributes, and what safetensors' metadata can hold);
// lists and numbers in them are JSON.
#include <cstdint>
#include <map>
#include <string>

#include "core/module.hpp"
#include "train/config.hpp"

namespace noeira {

// A model's sizes as a reader needs them.
struct ModelSizes {
  std::int64_t in_dim = 0;      // floats per input row (an image's C·H·W), or 1 per token
  std::int64_t out_dim = 0;     // logits per row (classes, or a language model's vocabulary)
  std::int64_t block = 0;       // a language model's context length; 0 for a classifier
  std::int64_t parameters = 0;  // scalars in all parameters
};

template <Module M>
ModelSizes sizes_of(std::int64_t parameters) {
  ModelSizes s{M::in_dim, M::out_dim, 0, parameters};
  if constexpr (requires { M::block; }) s.block = M::block;
  return s;
}

// The root attributes of model.h5 beyond "model" (io/params_file.hpp): "data", "parameters",
// "input", "output", and for images "input_shape", "input_mean", "input_std", "labels" (a user's
// arrays, --data npy, have none of these four); for
// text "tokenizer", "block", "vocabulary".
std::map<std::string, std::string> saved_attributes(const TrainConfig& cfg, const ModelSizes& m);

}  // namespace noeira

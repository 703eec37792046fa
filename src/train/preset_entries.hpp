#pragma once
// The presets' catalogue entries, compiled in three files so that the trainer's instantiations
// for fifteen models build in parallel (preset_catalogue.cpp puts them in --help's order).
#include <vector>

#include "train/model_catalogue.hpp"

namespace noeira {

void add_image_preset_entries(std::vector<ModelEntry>& out);   // MLPs, CNN, ViT
void add_resnet_preset_entries(std::vector<ModelEntry>& out);  // the ResNets
void add_text_preset_entries(std::vector<ModelEntry>& out);    // GPTs, LSTMs, GRU

}  // namespace noeira

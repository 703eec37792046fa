#pragma once
// noeira for a program of its own: one include gives the command line over the program's models
// (run_command_line, model_entry), the trainer beneath it and the layers to build a model from.
// docs/library.md walks through it; examples/ holds programs built against the installed package.
#include "cli/command_line.hpp"
#include "io/memory_array.hpp"
#include "nn/activation.hpp"
#include "nn/batchnorm.hpp"
#include "nn/conv2d.hpp"
#include "nn/dropout.hpp"
#include "nn/embedding.hpp"
#include "nn/flatten.hpp"
#include "nn/gpt.hpp"
#include "nn/layernorm.hpp"
#include "nn/linear.hpp"
#include "nn/pool2d.hpp"
#include "nn/residual.hpp"
#include "nn/rmsnorm.hpp"
#include "nn/sequential.hpp"
#include "train/fit.hpp"
#include "train/model_entry.hpp"
#include "train/presets.hpp"
#include "train/run.hpp"

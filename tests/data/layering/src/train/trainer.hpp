// Fixture for layering_catches_wrong_way: train may include core, also through "../".
#pragma once
#include "../core/tensor.hpp"
#include "kernels/table.hpp"

// Fixture for layering_catches_wrong_way: includes that are fine (a lower layer, a sibling).
#pragma once
#include "kernels/table.hpp"
#include "wrong.hpp"

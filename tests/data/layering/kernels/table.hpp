// Fixture for the ctest test layering_catches_wrong_way: a tree in which one include
// (src/core/wrong.hpp, line 4) runs the wrong way and every other one is fine.
#pragma once
#include <cstddef>

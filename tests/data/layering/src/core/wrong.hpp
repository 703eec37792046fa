// Fixture for layering_catches_wrong_way: core includes train, the one wrong-way include.
#pragma once

#include "train/trainer.hpp"

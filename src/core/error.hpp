#pragma once
// Errors of the whole project: the base types live with the kernels (the bottom layer); library
// check macros that need more than the kernels know (MPI, HDF5) are added beside their wrappers.
#include "kernels/error.hpp"

#pragma once
// An array named on the command line (--train-x and its siblings): a NumPy file, "part.npy"; an
// array of a NumPy archive, "data.npz:x" ("data.npz" alone: its only array; io/npz.hpp); an HDF5
// dataset, "file.h5:/group/x" (".h5", ".hdf5" or ".he5", and the dataset's path in it); an
// array of the program's memory, "memory:NAME" (io/memory_array.hpp); or
// shards of either, joined by commas ("part-0.npy,part-1.npy,more.h5:/x"), read as one array
// whose rows are the shards' rows in the order given. Shards must agree on everything but their
// number of rows: the shape of a row and whether they hold floats. Refused in one line naming the
// shard: an unknown file type, an HDF5 file without a dataset named, an empty shard in the list,
// shards that disagree.
#include <memory>
#include <string_view>

#include "io/array_source.hpp"

namespace noeira::io {

std::unique_ptr<ArraySource> open_array_spec(std::string_view spec);

}  // namespace noeira::io

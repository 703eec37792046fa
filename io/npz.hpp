#pragma once
// NumPy's .npz archives (numpy.savez and numpy.savez_compressed): a zip file of .npy members, read
// through libzip. An array is named as "file.npz:x" (the member x.npy, NumPy's np.load(f)["x"]);
// "file.npz" alone names the archive's only array.
//
// A member numpy.savez stores uncompressed is read in place, row by row (zip_fseek): an array
// larger than memory costs only the rows that are read. A deflated member (savez_compressed)
// cannot be read from the middle, so it is inflated into memory once, when it is opened. Either
// way every byte of the member is checked against its CRC-32 once, when it is opened.
//
// Refused, each in one line naming the archive and the member: a file that is not a zip archive
// (or whose directory is inconsistent), a missing member (the message lists the arrays there), an
// archive of several arrays named without one, an encrypted member, a compression other than
// deflate, a CRC mismatch, and whatever io/npy.hpp refuses of the member's .npy bytes.
#include <filesystem>
#include <memory>
#include <string>

#include "io/array_source.hpp"

namespace noeira::io {

// `member` is the array's name (empty: the archive's only one).
std::unique_ptr<ArraySource> open_npz_source(const std::filesystem::path& file,
                                             const std::string& member);

}  // namespace noeira::io

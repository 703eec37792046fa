#pragma once
// The error type every layer throws. It lives at the bottom of the dependency graph (kernels know
// nothing of the rest) so the kernels, the library wrappers and the trainer share one type.
// Run-time failures always throw: never assert, which vanishes in Release builds.
#include <sstream>
#include <stdexcept>
#include <string>

namespace noeira {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A call into an external library (CUDA, cuBLAS, NCCL, MPI, HDF5, BLAS) failed.
class LibraryError : public Error {
 public:
  using Error::Error;
};

// The user gave something we cannot use: a flag, a file, a shape.
class InputError : public Error {
 public:
  using Error::Error;
};

// An InputError that every rank of a job raises alike, from what all of them know (the ranks
// disagree, the batch is too small for the world): nobody waits for anybody, so the job ends
// without MPI_Abort, and rank 0 alone prints it (src/cli/command_line.cpp).
class AgreedError : public InputError {
 public:
  using InputError::InputError;
};

namespace detail {
template <class... Parts>
std::string concat(const Parts&... parts) {
  std::ostringstream os;
  (os << ... << parts);
  return os.str();
}
}  // namespace detail

}  // namespace noeira

// Precondition on run-time values: throws noeira::Error naming the condition and the location.
#define NOEIRA_CHECK(cond, ...)                                                             \
  do {                                                                                      \
    if (!(cond)) {                                                                          \
      throw ::noeira::Error(::noeira::detail::concat(__VA_ARGS__, " [", #cond, " at ",      \
                                                     __FILE__, ":", __LINE__, "]"));        \
    }                                                                                       \
  } while (0)

#pragma once
// The MPI check macro: a failed MPI call throws LibraryError naming the call, the rank, the MPI
// error string and file:line. Communicators we create return errors (MPI_ERRORS_RETURN) instead
// of aborting, so this macro sees them.
#include <mpi.h>

namespace noeira::dist {

[[noreturn]] void mpi_fail(int code, const char* call, const char* file, int line);

}  // namespace noeira::dist

#define NOEIRA_MPI_CHECK(call)                                               \
  do {                                                                       \
    const int noeira_mpi_code_ = (call);                                     \
    if (noeira_mpi_code_ != MPI_SUCCESS) {                                   \
      ::noeira::dist::mpi_fail(noeira_mpi_code_, #call, __FILE__, __LINE__); \
    }                                                                        \
  } while (0)

#include "distributed/mpi_check.hpp"

#include <cstdio>

#include "kernels/error.hpp"

namespace noeira::dist {

void mpi_fail(int code, const char* call, const char* file, int line) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS)
    std::snprintf(text, sizeof text, "code %d", code);
  int initialized = 0, finalized = 0, rank = -1;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  throw LibraryError(
      detail::concat(call, " failed on rank ", rank, ": ", text, " [", file, ":", line, "]"));
}

}  // namespace noeira::dist

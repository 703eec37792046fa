#pragma once
// The NCCL check macro: a failed NCCL call throws LibraryError naming the call, the rank (MPI's
// world rank: NCCL is bootstrapped through MPI), NCCL's error string, its last error message and
// file:line. Includes nccl.h: only the NCCL backend's sources include this header, so that the
// rest of the build never needs NCCL's headers.
#include <nccl.h>

namespace noeira::dist {

[[noreturn]] void nccl_fail(ncclResult_t code, const char* call, const char* file, int line);

}  // namespace noeira::dist

#define NCCL_CHECK(call)                                                       \
  do {                                                                         \
    const ncclResult_t noeira_nccl_code_ = (call);                             \
    if (noeira_nccl_code_ != ncclSuccess) {                                    \
      ::noeira::dist::nccl_fail(noeira_nccl_code_, #call, __FILE__, __LINE__); \
    }                                                                          \
  } while (0)

namespace noeira::dist {

// Posts NCCL calls as one group. The group is closed even when posting throws: a group left open
// holds back every later NCCL call of this thread (nccl.h: nothing starts until ncclGroupEnd),
// the communicator's abort and destroy at teardown among them.
template <class Post>
void in_nccl_group(Post&& post) {
  NCCL_CHECK(ncclGroupStart());
  try {
    post();
  } catch (...) {
    (void)ncclGroupEnd();  // the first error is the one to report
    throw;
  }
  NCCL_CHECK(ncclGroupEnd());
}

}  // namespace noeira::dist

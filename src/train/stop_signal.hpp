#pragma once
// Preemption (issue 7): SIGTERM and SIGUSR1 ask the run to stop at the next step boundary, after
// a checkpoint, with kStoppedExitCode. The handler only sets a flag (async-signal-safe); the
// trainer polls it once per step and the ranks agree by an allreduce, since each rank (process)
// may see the signal at a different step.
#include <csignal>

namespace noeira {

// "Stopped to be resumed": EX_TEMPFAIL, apart from success (0) and failure (1, 2, 3).
inline constexpr int kStoppedExitCode = 75;

// Installs the handlers for SIGTERM and SIGUSR1 (idempotent).
void install_stop_handlers();
// Keeps SIGTERM and SIGUSR1 off every thread that computes: blocks them in the calling thread,
// and so in every thread started from it later, and starts one thread that alone receives them
// (their handlers, or their default action, run there). A signal landing in one of oneDNN's JIT
// GEMM kernels corrupts the heap (docs/design.md, "Signals reach one thread"). Call it first in
// main(), before any thread exists; idempotent.
void route_stop_signals_to_one_thread();
// The calling thread's signal mask without the two stop signals: what a child process starts
// with (a blocked SIGTERM would otherwise never end it).
sigset_t child_signal_mask();
// The signal that asked to stop, 0 when none did.
int stop_signal();
// "SIGTERM", "SIGUSR1", or "signal N".
const char* signal_name(int signal);

}  // namespace noeira

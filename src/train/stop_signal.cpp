#include "train/stop_signal.hpp"

#include <pthread.h>
#include <unistd.h>

#include <cstdio>
#include <mutex>
#include <thread>

namespace noeira {

namespace {
volatile std::sig_atomic_t g_stop_signal = 0;

// The first signal asks for a checkpoint at the next step. A second SIGTERM means the run is
// stuck (in a blocking read, a collective) or the user will not wait: it ends the process as the
// default action would (SIGINT is never caught, so Ctrl-C always does). A SIGTERM after SIGUSR1
// is a scheduler's time limit arriving while the asked-for checkpoint is written: that one goes
// on. signal() and raise() are async-signal-safe.
extern "C" void on_stop_signal(int signal) {
  if (signal == SIGTERM && g_stop_signal == SIGTERM) {
    std::signal(signal, SIG_DFL);
    std::raise(signal);
    return;
  }
  if (g_stop_signal == 0) g_stop_signal = signal;
}
}  // namespace

void install_stop_handlers() {
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // a signal must not fail an I/O call mid-checkpoint
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGUSR1, &action, nullptr);
}

namespace {
sigset_t stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGUSR1);
  return set;
}
}  // namespace

void route_stop_signals_to_one_thread() {
  static std::once_flag once;
  std::call_once(once, [] {
    const sigset_t stops = stop_signals();
    pthread_sigmask(SIG_BLOCK, &stops, nullptr);
    // The receiver sleeps in pause(): a signal interrupts it at a system call, never inside a
    // kernel, and the only thread that has the signals unblocked is where the kernel delivers a
    // signal sent to the process.
    std::thread([stops] {
      pthread_sigmask(SIG_UNBLOCK, &stops, nullptr);
      for (;;) pause();
    }).detach();
  });
}

sigset_t child_signal_mask() {
  sigset_t mask;
  pthread_sigmask(SIG_SETMASK, nullptr, &mask);
  sigdelset(&mask, SIGTERM);
  sigdelset(&mask, SIGUSR1);
  return mask;
}

int stop_signal() { return g_stop_signal; }

const char* signal_name(int signal) {
  if (signal == SIGTERM) return "SIGTERM";
  if (signal == SIGUSR1) return "SIGUSR1";
  static thread_local char buf[32];
  std::snprintf(buf, sizeof buf, "signal %d", signal);
  return buf;
}

}  // namespace noeira

#pragma once
// One run owns a checkpoint directory for as long as it lives: two runs writing one directory
// would replace each other's step directories and prune each other's checkpoints. The owner holds
// flock(2) on <ckpt_dir>/lock, so the kernel releases it when the process ends however it ends
// (a crashed or killed run never blocks the next), and writes who it is into the file, so the
// run refused can name it.
//
// Under MPI one rank takes it (rank 0, which commits, points `latest` and prunes): the other
// ranks write only into the temporary directory of a step that rank 0 then commits, and a lock
// per rank would make the ranks of one job refuse each other.
#include <filesystem>
#include <string_view>

namespace noeira::io {

// The lock's file inside the checkpoint directory.
inline constexpr const char* kCheckpointLockFile = "lock";

class CheckpointDirLock {
 public:
  // Creates ckpt_dir if needed and takes its lock. Writing the holder's line (host, pid, start
  // time) and fsyncing it is also the check that the directory can be written at all, before a
  // run trains for hours towards a first save that cannot happen. InputErrors, one line each,
  // naming `flag` and the directory: not a directory, cannot be created or written (errno's
  // text), or in use by another run (its host, pid and start time). `flag` is the option that
  // named the directory: another command's directory that one run owns (tokenize's -o) takes
  // the same lock.
  static CheckpointDirLock acquire(const std::filesystem::path& ckpt_dir,
                                   std::string_view flag = "--checkpoint-dir");

  CheckpointDirLock(CheckpointDirLock&& other) noexcept : fd_(other.fd_), held_(other.held_) {
    other.fd_ = -1;
  }
  CheckpointDirLock& operator=(CheckpointDirLock&&) = delete;
  CheckpointDirLock(const CheckpointDirLock&) = delete;
  CheckpointDirLock& operator=(const CheckpointDirLock&) = delete;
  // Closing the descriptor releases the lock. The file stays: removing it would let a third run
  // lock a new file while a second still waits on the old one.
  ~CheckpointDirLock();

  // False on a file system without flock(2) (ENOSYS, EOPNOTSUPP, ENOLCK): the directory was
  // checked for writing, but nothing keeps a second run out; the caller should say so.
  bool held() const { return held_; }

 private:
  explicit CheckpointDirLock(int fd) : fd_(fd) {}
  int fd_ = -1;
  bool held_ = true;
};

}  // namespace noeira::io

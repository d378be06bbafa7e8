// The launcher's stderr as the user reads it. When a rank exits with a code,
// Open MPI's mpirun wraps the rank's own one-line message in two boxed
// banners ("Primary job terminated normally, but 1 process returned a
// non-zero exit code...", "mpirun detected that one or more processes exited
// with non-zero status..."), ten lines that bury a refusal the ranks found
// (bad data, a resume that changes the batch). The supervisor reports the
// exit code itself, so it reads mpirun's stderr through a StderrRelay, which
// passes every line through but those two banners. Every other box (mpirun's
// own errors: not enough slots, a host unreachable, a rank killed by a
// signal) is printed as it came.
//
// MpirunBannerFilter is pure (text in, text to print out); StderrRelay owns
// a pipe and the thread that copies it to this process's stderr. Neither is
// thread-safe; the relay's thread is its own.
#pragma once
#include <atomic>
#include <string>
#include <string_view>
#include <thread>

#include "core/status.h"

namespace crucible::runtime {

class MpirunBannerFilter {
 public:
  // What of `chunk` (any piece of the stream) to print now: whole lines,
  // with a boxed block held until its closing rule, then dropped when it is
  // one of the exit-code banners.
  std::string feed(std::string_view chunk);
  // At the end of the stream: whatever is still held (an unclosed box, a
  // last line without its newline).
  std::string finish();

 private:
  std::string partial_;  // the current line, before its newline
  std::string box_;      // the lines of an open box, its opening rule first
  bool in_box_ = false;
};

class StderrRelay {
 public:
  StderrRelay() = default;
  StderrRelay(const StderrRelay&) = delete;
  StderrRelay& operator=(const StderrRelay&) = delete;
  // Waits for the stream's end (every writer gone: the launcher and its
  // ranks), at most 2 s after the call, then stops: the lines come out
  // before the caller reports how the job ended.
  ~StderrRelay();

  // The pipe (both ends close-on-exec); write_fd() is what the child dup2s
  // onto its stderr.
  Status open();
  int write_fd() const { return write_fd_; }
  // In the parent after fork: closes the write end here and starts copying.
  void start();

 private:
  void copy();
  int read_fd_ = -1, write_fd_ = -1;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace crucible::runtime

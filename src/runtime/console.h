// Console: the one output path of a run. Messages go to stderr and, once a
// run directory is open, to RUN/log.txt. Progress goes to one live line when
// stderr is a terminal (redrawn in place, messages printed above it), and
// otherwise to a plain line at most every `interval_s` seconds, so logs of
// batch jobs stay readable. Not thread-safe: the training thread owns it.
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>

#include "core/format.h"

namespace crucible::runtime {

class Console {
 public:
  explicit Console(double interval_s = 5.0);
  // A quiet console prints nothing (ranks other than 0 of a data-parallel job).
  void set_quiet(bool quiet) { quiet_ = quiet; }
  ~Console();
  Console(const Console&) = delete;
  Console& operator=(const Console&) = delete;

  // Also append messages to `path` from now on, starting with those printed
  // before (false if it cannot be opened).
  bool open_log(const std::string& path);
  void info(const std::string& msg);
  // Appends to the log file only (the message that main prints as it exits,
  // so RUN/log.txt ends with why the run ended).
  void log_only(const std::string& msg);
  // A progress update; `force` prints a plain line even within the interval.
  void progress(const std::string& line, bool force = false);
  // Ends the live line (leaves its last state on screen).
  void finish_progress();
  bool is_tty() const { return tty_; }

 private:
  void clear_live_line();
  bool tty_;
  bool quiet_ = false;
  double interval_s_;
  int64_t last_plain_ns_ = 0;
  bool live_shown_ = false;
  FILE* log_ = nullptr;
  std::string before_log_;  // messages printed before open_log()
};

// "2m13s", "1h04m", "45s"
std::string format_duration(double seconds);
// "2.71k", "1.20M" (core/format.h)
using crucible::format_si;

}  // namespace crucible::runtime

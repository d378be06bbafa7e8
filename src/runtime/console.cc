#include "runtime/console.h"

#include <unistd.h>

#include <cmath>

#include "core/clock.h"
#include "core/output_path.h"

namespace crucible::runtime {

Console::Console(double interval_s) : tty_(isatty(STDERR_FILENO)), interval_s_(interval_s) {}

Console::~Console() {
  finish_progress();
  if (log_) std::fclose(log_);
}

bool Console::open_log(const std::string& path) {
  if (log_) std::fclose(log_);
  log_ = nullptr;
  // Appended to, not replaced, but judged like every output (core/output_path.h).
  if (!check_output_path(path).is_ok()) return false;
  log_ = std::fopen(path.c_str(), "a");
  if (!log_) return false;
  std::fputs(before_log_.c_str(), log_);
  std::fflush(log_);
  before_log_.clear();
  return true;
}

void Console::clear_live_line() {
  if (live_shown_) {
    std::fputs("\r\x1b[K", stderr);
    live_shown_ = false;
  }
}

void Console::info(const std::string& msg) {
  if (quiet_) return;
  clear_live_line();
  std::fprintf(stderr, "%s\n", msg.c_str());
  std::fflush(stderr);
  if (log_) {
    std::fprintf(log_, "%s\n", msg.c_str());
    std::fflush(log_);
  } else {
    before_log_ += msg + "\n";
  }
}

void Console::log_only(const std::string& msg) {
  if (quiet_ || !log_) return;
  std::fprintf(log_, "%s\n", msg.c_str());
  std::fflush(log_);
}

void Console::progress(const std::string& line, bool force) {
  if (quiet_) return;
  if (tty_) {
    std::fprintf(stderr, "\r\x1b[K%s", line.c_str());
    std::fflush(stderr);
    live_shown_ = true;
    if (force && log_) {
      std::fprintf(log_, "%s\n", line.c_str());
      std::fflush(log_);
    }
    return;
  }
  int64_t now = now_ns();
  if (!force && last_plain_ns_ != 0 && (now - last_plain_ns_) * 1e-9 < interval_s_) return;
  last_plain_ns_ = now;
  info(line);
}

void Console::finish_progress() {
  if (live_shown_) {
    std::fputc('\n', stderr);
    live_shown_ = false;
  }
}

std::string format_duration(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  long t = std::lround(s);
  char buf[32];
  if (t >= 3600)
    std::snprintf(buf, sizeof buf, "%ldh%02ldm", t / 3600, (t % 3600) / 60);
  else if (t >= 60)
    std::snprintf(buf, sizeof buf, "%ldm%02lds", t / 60, t % 60);
  else
    std::snprintf(buf, sizeof buf, "%lds", t);
  return buf;
}


}  // namespace crucible::runtime

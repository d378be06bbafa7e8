#include "runtime/event_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>

#include "core/clock.h"
#include "core/file_io.h"

namespace crucible::runtime {

std::string fmt_s(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", s);
  return buf;
}

EventLog::~EventLog() {
  if (fd_ >= 0) ::close(fd_);
}

Status EventLog::open(const std::string& path) {
  // Appended to, not replaced, but judged like every output (core/output_path.h).
  CRUCIBLE_RETURN_IF_ERROR(check_output_path(path, "[launch]"));
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd_ < 0) return Status::io("[launch] cannot open " + path + ": " + errno_str());
  t0_ = now_ns() * 1e-9;
  return Status::ok();
}

void EventLog::emit(const std::string& event, nlohmann::json fields, const std::string& line) {
  using nlohmann::json;
  json j = {{"time", wall_time("%Y-%m-%dT%H:%M:%S", false)},
            {"t_s", std::round((now_ns() * 1e-9 - t0_) * 1000) / 1000},
            {"event", event}};
  j.update(fields);
  const std::string text = j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
  if (fd_ >= 0 &&
      (::write(fd_, text.data(), text.size()) != ssize_t(text.size()) || ::fsync(fd_) != 0))
    std::fprintf(stderr, "[supervisor] warning: events.jsonl: %s\n", errno_str().c_str());
  std::fprintf(stderr, "[supervisor] %s\n", line.c_str());
  std::fflush(stderr);
}

}  // namespace crucible::runtime

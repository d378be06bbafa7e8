// RUN/events.jsonl, the supervised job's history (docs/fault_tolerance.md,
// "Events"): one JSON object per event, appended and fsync'ed (a crash must
// not lose its last lines), and the same event as one line on the terminal.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "core/status.h"

namespace crucible::runtime {

class EventLog {
 public:
  EventLog() = default;
  EventLog(const EventLog&) = delete;
  EventLog& operator=(const EventLog&) = delete;
  ~EventLog();
  Status open(const std::string& path);
  // {"time", "t_s" (seconds since open), "event", ...fields}; `line` goes to
  // the terminal after "[supervisor] ".
  void emit(const std::string& event, nlohmann::json fields, const std::string& line);

 private:
  int fd_ = -1;
  double t0_ = 0;
};

// "12.3 s", the way every event line writes a duration.
std::string fmt_s(double s);

}  // namespace crucible::runtime

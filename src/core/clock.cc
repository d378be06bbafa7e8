#include "core/clock.h"

#include <ctime>

namespace crucible {

std::string wall_time(const char* format, bool utc) {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  if (utc)
    gmtime_r(&t, &tm);
  else
    localtime_r(&t, &tm);
  char buf[64];
  size_t n = std::strftime(buf, sizeof buf, format, &tm);
  return std::string(buf, n);
}

}  // namespace crucible

#include "core/format.h"

#include <charconv>
#include <cmath>
#include <cstdio>

namespace crucible {

std::string format_double(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, v);  // shortest round trip
  return std::string(buf, res.ptr);
}

std::string format_si(double v) {
  const double a = std::fabs(v);
  char buf[32];
  if (a >= 1e9)
    std::snprintf(buf, sizeof buf, "%.2fG", v / 1e9);
  else if (a >= 1e6)
    std::snprintf(buf, sizeof buf, "%.2fM", v / 1e6);
  else if (a >= 1e3)
    std::snprintf(buf, sizeof buf, "%.2fk", v / 1e3);
  else
    std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

}  // namespace crucible

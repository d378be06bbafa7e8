#include "core/format.h"

#include <charconv>
#include <cmath>

namespace crucible {

std::string format_double(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, v);  // shortest round trip
  return std::string(buf, res.ptr);
}

}  // namespace crucible

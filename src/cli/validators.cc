#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "cli/commands.h"

namespace crucible::cli {

namespace {

std::string number_text(long double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6Lg", v);
  return buf;
}

}  // namespace

CLI::Validator number_in(double min, double max, bool min_inclusive) {
  const std::string range = std::string(min_inclusive ? "[" : "(") + number_text(min) + ", " +
                            (std::isinf(max) ? std::string("inf)") : number_text(max) + "]");
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        errno = 0;
        char* end = nullptr;
        const long double v = std::strtold(text.c_str(), &end);
        if (text.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(v))
          return "'" + text + "' is not a finite number";
        if (v < min || (!min_inclusive && v == min) || v > max)
          return "'" + text + "' is not in " + range;
        return "";
      },
      "NUMBER in " + range);
}

CLI::Validator integer_in(int64_t min, int64_t max) {
  const std::string range = "[" + std::to_string(min) + ", " + std::to_string(max) + "]";
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        errno = 0;
        char* end = nullptr;
        const long long v = std::strtoll(text.c_str(), &end, 10);
        if (text.empty() || *end != '\0') return "'" + text + "' is not an integer";
        if (errno == ERANGE || v < min || v > max) return "'" + text + "' is not in " + range;
        return "";
      },
      "INTEGER in " + range);
}

}  // namespace crucible::cli

#include "profile/load_watch.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <string>

#include "core/clock.h"

namespace crucible::profile {

namespace {

// Busy seconds of all CPUs since boot (/proc/stat's first line: user nice
// system idle iowait irq softirq steal ...; busy is all but idle and iowait).
double busy_seconds() {
  std::ifstream in("/proc/stat");
  std::string cpu;
  double v[8] = {};
  if (!(in >> cpu) || cpu != "cpu") return NAN;
  for (double& x : v)
    if (!(in >> x)) return NAN;
  const double ticks = double(sysconf(_SC_CLK_TCK));
  return (v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / ticks;
}

double self_seconds() {
  rusage ru{};
  if (getrusage(RUSAGE_SELF, &ru) != 0) return NAN;
  return double(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + 1e-6 * double(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

}  // namespace

LoadWatch::LoadWatch() : wall0_ns_(now_ns()), busy0_s_(busy_seconds()), self0_s_(self_seconds()) {}

double LoadWatch::others_share() const {
  const double wall = double(now_ns() - wall0_ns_) * 1e-9;
  const double cpus = double(sysconf(_SC_NPROCESSORS_ONLN));
  const double busy = busy_seconds() - busy0_s_, self = self_seconds() - self0_s_;
  if (!std::isfinite(busy) || !std::isfinite(self) || wall <= 0 || cpus <= 0) return NAN;
  // /proc/stat ticks at 100 Hz: below a few ticks the share is noise.
  if (wall < 0.1) return NAN;
  return std::clamp((busy - self) / (wall * cpus), 0.0, 1.0);
}

nlohmann::json LoadWatch::to_json() const {
  const double s = others_share();
  if (!std::isfinite(s)) return {{"others_share", nullptr}, {"reliable", true}};
  return {{"others_share", s}, {"reliable", s < kBusyShare}};
}

}  // namespace crucible::profile

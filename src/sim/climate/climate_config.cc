#include "sim/climate/climate_config.h"

#include <cmath>
#include <string>

namespace crucible::sim {

std::vector<config::Field> climate_fields(ClimateConfig& c) {
  return {
      {"climate.case", &c.test_case},
      {"climate.nlat", &c.nlat},
      {"climate.days", &c.days},
      {"climate.dt_s", &c.dt_s},
      {"climate.alpha_deg", &c.alpha_deg},
      {"climate.polar_filter_lat_deg", &c.polar_filter_lat_deg},
      {"climate.damping_time_h", &c.damping_time_h},
      {"climate.output_every_h", &c.output_every_h},
      {"climate.diag_every", &c.diag_every},
  };
}

namespace {
Status bad(const char* key, const std::string& why) {
  return Status::invalid(std::string("[config] ") + key + ": " + why);
}
std::string num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", v);
  return b;
}
}  // namespace

Status validate_climate(const ClimateConfig& c) {
  if (c.test_case != 2 && c.test_case != 5 && c.test_case != 6)
    return bad("climate.case", std::to_string(c.test_case) +
                                   " is not a Williamson test case this model runs (2, 5 or 6)");
  if (c.nlat < 8 || c.nlat % 2 != 0 || c.nlat > 4096)
    return bad("climate.nlat", std::to_string(c.nlat) + " must be even and in [8, 4096]");
  if (!std::isfinite(c.days) || c.days <= 0 || c.days > 3650)
    return bad("climate.days", num(c.days) + " must be in (0, 3650]");
  if (!std::isfinite(c.dt_s) || c.dt_s < 0)
    return bad("climate.dt_s", num(c.dt_s) + " must be >= 0 seconds (0: automatic)");
  if (!std::isfinite(c.alpha_deg) || c.alpha_deg < 0 || c.alpha_deg > 90)
    return bad("climate.alpha_deg", num(c.alpha_deg) + " must be in [0, 90] degrees");
  if (c.alpha_deg != 0 && c.test_case != 2)
    return bad("climate.alpha_deg", "only case 2 has a rotation angle (climate.case = " +
                                        std::to_string(c.test_case) + ")");
  if (!std::isfinite(c.polar_filter_lat_deg) || c.polar_filter_lat_deg < 30 ||
      c.polar_filter_lat_deg > 90)
    return bad("climate.polar_filter_lat_deg",
               num(c.polar_filter_lat_deg) + " must be in [30, 90] degrees (90: no filter)");
  if (!std::isfinite(c.damping_time_h) || c.damping_time_h < 0)
    return bad("climate.damping_time_h",
               num(c.damping_time_h) + " must be >= 0 hours (0: no damping)");
  if (!std::isfinite(c.output_every_h) || c.output_every_h <= 0)
    return bad("climate.output_every_h", num(c.output_every_h) + " must be > 0 hours");
  if (c.output_every_h * 3600.0 * 1000 < c.days * 86400.0)
    return bad(
        "climate.output_every_h",
        num(c.output_every_h) + " h gives more than 1000 snapshots over " + num(c.days) + " days");
  if (c.diag_every < 1)
    return bad("climate.diag_every", std::to_string(c.diag_every) + " must be >= 1");
  return Status::ok();
}

}  // namespace crucible::sim

#include "sim/md/md_config.h"

#include <cmath>
#include <string>

namespace crucible::sim {

std::vector<config::Field> md_fields(MdConfig& c) {
  return {
      {"md.cells", &c.cells},
      {"md.density", &c.density},
      {"md.temperature", &c.temperature},
      {"md.dt", &c.dt},
      {"md.steps", &c.steps},
      {"md.equil_steps", &c.equil_steps},
      {"md.thermostat_tau", &c.thermostat_tau},
      {"md.cutoff", &c.cutoff},
      {"md.skin", &c.skin},
      {"md.neighbor_every", &c.neighbor_every},
      {"md.thermo_every", &c.thermo_every},
      {"md.dump_every", &c.dump_every},
      {"md.reproducible", &c.reproducible},
      {"md.start_file", &c.start_file},
      {"md.max_energy_jump", &c.max_energy_jump},
  };
}

double md_box_length(const MdConfig& c) { return std::cbrt(double(md_atom_count(c)) / c.density); }

namespace {
Status bad(const char* key, const std::string& why) {
  return Status::invalid(std::string("[config] md.") + key + ": " + why);
}
std::string num(double v) {
  char b[64];
  std::snprintf(b, sizeof b, "%g", v);
  return b;
}
}  // namespace

Status validate_md(const MdConfig& c) {
  if (c.cells < 1 || c.cells > 200)
    return bad("cells", "must be in [1, 200] (N = 4 cells^3 atoms), got " + num(c.cells));
  if (!(c.density > 0) || !std::isfinite(c.density))
    return bad("density", "must be > 0, got " + num(c.density));
  if (!(c.temperature > 0) || !std::isfinite(c.temperature))
    return bad("temperature", "must be > 0, got " + num(c.temperature));
  if (!(c.dt > 0) || !(c.dt < 0.1)) return bad("dt", "must be in (0, 0.1) tau, got " + num(c.dt));
  if (c.steps < 1) return bad("steps", "must be >= 1, got " + num(double(c.steps)));
  if (c.equil_steps < 0 || c.equil_steps >= c.steps)
    return bad("equil_steps", "must be in [0, md.steps) so that some NVE steps remain, got " +
                                  num(double(c.equil_steps)));
  if (!(c.thermostat_tau >= c.dt))
    return bad("thermostat_tau", "must be >= md.dt, got " + num(c.thermostat_tau));
  if (!(c.cutoff >= 1.0)) return bad("cutoff", "must be >= 1 sigma, got " + num(c.cutoff));
  if (!(c.skin >= 0) || !(c.skin <= c.cutoff))
    return bad("skin", "must be in [0, md.cutoff], got " + num(c.skin));
  if (c.neighbor_every < 0)
    return bad("neighbor_every", "must be >= 0, got " + num(c.neighbor_every));
  if (c.thermo_every < 1) return bad("thermo_every", "must be >= 1, got " + num(c.thermo_every));
  if (c.dump_every < 0) return bad("dump_every", "must be >= 0, got " + num(c.dump_every));
  if (!(c.max_energy_jump > 0))
    return bad("max_energy_jump", "must be > 0, got " + num(c.max_energy_jump));
  // FCC nearest-neighbour distance a / sqrt(2), a = (4 / rho)^(1/3): closer
  // than 0.5 sigma the pair energy is > 4e3 epsilon and the first step explodes.
  const double d_nn = std::cbrt(4.0 / c.density) / std::sqrt(2.0);
  if (d_nn < 0.5)
    return bad("density", num(c.density) + " packs the FCC start with neighbours " + num(d_nn) +
                              " sigma apart (overlapping atoms: < 0.5 sigma)");
  const double L = md_box_length(c), need = 2 * (c.cutoff + c.skin);
  if (L < need)
    return bad("cells", "box length " + num(L) + " sigma is smaller than two cut-offs plus skin (" +
                            num(need) + "): raise md.cells or lower md.cutoff");
  return Status::ok();
}

}  // namespace crucible::sim

#include "sim/md/initial_state.h"

#include <cmath>

#include "core/rng.h"

namespace crucible::sim::md {

InitialAtoms initial_atoms(int cells, double box, int64_t n, const std::vector<double>& given_pos,
                           uint64_t seed, double temperature) {
  InitialAtoms out;
  out.vel.resize(size_t(3 * n));
  double com[3] = {0, 0, 0};
  for (int64_t id = 0; id < n; ++id) {
    Rng rng(seed, uint64_t(id));
    for (int d = 0; d < 3; ++d) com[d] += (out.vel[3 * id + d] = double(rng.normal()));
  }
  double ke = 0;
  for (int64_t id = 0; id < n; ++id)
    for (int d = 0; d < 3; ++d) {
      double& v = out.vel[3 * id + d];
      v -= com[d] / double(n);
      ke += 0.5 * v * v;
    }
  const double scale =
      n > 1 && ke > 0 ? std::sqrt(temperature / (2.0 * ke / (3.0 * n - 3.0))) : 0.0;
  for (double& v : out.vel) v *= scale;

  if (!given_pos.empty()) {
    out.pos = given_pos;
    return out;
  }
  const double a = box / cells;
  const double basis[4][3] = {{0, 0, 0}, {0.5, 0.5, 0}, {0.5, 0, 0.5}, {0, 0.5, 0.5}};
  out.pos.resize(size_t(3 * n));
  for (int64_t id = 0; id < n; ++id) {
    const int64_t cell = id / 4, b = id % 4;
    out.pos[3 * id] = (double(cell % cells) + basis[b][0]) * a;
    out.pos[3 * id + 1] = (double((cell / cells) % cells) + basis[b][1]) * a;
    out.pos[3 * id + 2] = (double(cell / (int64_t(cells) * cells)) + basis[b][2]) * a;
  }
  return out;
}

}  // namespace crucible::sim::md

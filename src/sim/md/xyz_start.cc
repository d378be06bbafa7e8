#include "sim/md/xyz_start.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

#include "core/file_io.h"

namespace crucible::sim::md {

namespace {

Status bad(const std::string& path, const std::string& why) {
  return Status::invalid("[config] md.start_file " + path + ": " + why);
}

}  // namespace

double min_pair_distance(const std::vector<double>& pos, double L, int64_t* a, int64_t* b) {
  const int64_t n = int64_t(pos.size() / 3);
  double best2 = std::numeric_limits<double>::infinity();
  if (n < 2) return best2;
  // Cells of >= 1 sigma: an overlap (< 0.5) lies within neighbouring cells;
  // a larger minimum is found exactly only if it is below one cell edge,
  // which is all the check needs.
  int nc = std::max(1, std::min(int(L / 1.0), 1000));
  if (nc < 3) nc = 1;  // with fewer than 3 cells per edge, neighbouring cells would repeat
  const double cs = L / nc;
  std::vector<std::vector<int64_t>> cells(size_t(nc) * nc * nc);
  auto cell = [&](double v) { return std::clamp(int(v / cs), 0, nc - 1); };
  for (int64_t i = 0; i < n; ++i)
    cells[(size_t(cell(pos[3 * i + 2])) * nc + cell(pos[3 * i + 1])) * nc + cell(pos[3 * i])]
        .push_back(i);
  const int reach = nc >= 3 ? 1 : 0;
  for (int cz = 0; cz < nc; ++cz)
    for (int cy = 0; cy < nc; ++cy)
      for (int cx = 0; cx < nc; ++cx)
        for (int64_t i : cells[(size_t(cz) * nc + cy) * nc + cx])
          for (int dz = -reach; dz <= reach; ++dz)
            for (int dy = -reach; dy <= reach; ++dy)
              for (int dx = -reach; dx <= reach; ++dx) {
                const int kx = (cx + dx + nc) % nc, ky = (cy + dy + nc) % nc,
                          kz = (cz + dz + nc) % nc;
                for (int64_t j : cells[(size_t(kz) * nc + ky) * nc + kx]) {
                  if (j <= i) continue;
                  double r2 = 0;
                  for (int d = 0; d < 3; ++d) {
                    double s = pos[3 * i + d] - pos[3 * j + d];
                    s -= L * std::round(s / L);
                    r2 += s * s;
                  }
                  if (r2 < best2) best2 = r2, *a = i, *b = j;
                }
              }
  return std::sqrt(best2);
}

Result<StartConfig> read_xyz_start(const std::string& path) {
  auto text = read_file(path);
  if (!text) return bad(path, text.status().message());
  std::istringstream in(*text);
  std::string line;
  long long n = -1;
  if (!std::getline(in, line) || std::sscanf(line.c_str(), "%lld", &n) != 1 || n < 1)
    return bad(path, "the first line must be the atom count");
  if (!std::getline(in, line)) return bad(path, "no comment line");
  const size_t at = line.find("Lattice=\"");
  double m[9];
  if (at == std::string::npos ||
      std::sscanf(line.c_str() + at + 9, "%lf %lf %lf %lf %lf %lf %lf %lf %lf", &m[0], &m[1], &m[2],
                  &m[3], &m[4], &m[5], &m[6], &m[7], &m[8]) != 9)
    return bad(path, "the comment line has no Lattice=\"ax ay az bx by bz cx cy cz\"");
  const double L = m[0];
  const bool cubic = L > 0 && std::isfinite(L) && m[4] == L && m[8] == L && m[1] == 0 &&
                     m[2] == 0 && m[3] == 0 && m[5] == 0 && m[6] == 0 && m[7] == 0;
  if (!cubic) return bad(path, "the lattice must be a cubic box L 0 0 0 L 0 0 0 L");
  StartConfig s;
  s.box = L;
  s.pos.resize(size_t(3 * n));
  for (long long i = 0; i < n; ++i) {
    char species[64];
    double p[3];
    if (!std::getline(in, line) ||
        std::sscanf(line.c_str(), "%63s %lf %lf %lf", species, &p[0], &p[1], &p[2]) != 4)
      return bad(path, "atom line " + std::to_string(i + 1) + " of " + std::to_string(n) +
                           " is missing or not 'species x y z'");
    for (int d = 0; d < 3; ++d) {
      if (!std::isfinite(p[d]))
        return bad(path, "atom " + std::to_string(i) + " has a non-finite coordinate");
      s.pos[3 * i + d] = p[d] - L * std::floor(p[d] / L);
      if (s.pos[3 * i + d] >= L) s.pos[3 * i + d] = 0;
    }
  }
  int64_t a = -1, b = -1;
  const double dmin = min_pair_distance(s.pos, L, &a, &b);
  if (dmin < kMinStartDistance) {
    char buf[160];
    std::snprintf(buf, sizeof buf,
                  "atoms %lld and %lld are %.3g sigma apart (< %g): overlapping atoms",
                  static_cast<long long>(a), static_cast<long long>(b), dmin, kMinStartDistance);
    return bad(path, buf);
  }
  return s;
}

}  // namespace crucible::sim::md

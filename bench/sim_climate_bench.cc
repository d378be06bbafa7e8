// sim_climate_bench: how close the shallow-water step comes to the memory
// ceiling, and how it scales over ranks (docs/sim/climate.md, "Figures").
//
//   sim_climate_bench [--nlat N] [--steps K]
//       1. STREAM triad of this machine (profile/probe_memory.h, quick), on
//          1 thread and on all;
//       2. the RK4 step's achieved bandwidth on an nlat x 2 nlat grid (default
//          720: 1.04 M cells, ~100 MB of fields, far beyond the last-level
//          cache), counted as STREAM counts (SweSolver::bytes_per_step: each
//          array element read or written once per stage), polar filter off
//          so that the stencil alone is timed; printed as a ratio to triad
//          at the same thread count;
//       3. the default configuration's step (case 6, nlat 96, filter from
//          60 degrees): time per step, and the share of the polar filter.
//   sim_climate_bench --default-run
//       the whole default configuration (configs/sim/climate.toml: case 6,
//          nlat 120, 14 days) through the Workload interface, as `crucible
//          sim climate` runs it: wall time, steps, and the summary's figures.
//   sim_climate_bench --convergence
//       Williamson case 2 (5 days) at nlat 24, 48, 96 for alpha 0 and 45:
//          the normalised l1, l2, linf errors of h and the observed orders.
//   mpirun -n P sim_climate_bench --scaling-point [--nlat N] [--steps K]
//       one point of strong scaling: the climate workload (case 6, polar
//          filter on) over P ranks; rank 0 prints "scaling_point P cells_steps_per_s".
//   sim_climate_bench --scaling-analyse 1:X 2:Y 4:Z
//       speedups, efficiency, Karp-Flatt and the Amdahl fit
//          (profile/scaling.h, as `crucible bench scaling` prints them).
// bench/sim_climate_bench.sh runs all three.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "comm/comm.h"
#include "core/clock.h"
#include "profile/probe_memory.h"
#include "profile/scaling.h"
#include "sim/climate/climate.h"
#include "sim/climate/swe_solver.h"

using namespace crucible;
using namespace crucible::sim::climate;

namespace {

struct Timing {
  double best_s = 0, median_s = 0;
};

// Times `steps` RK4 steps (after two warm-up steps) one by one.
Timing time_steps(SweSolver& s, int steps, double dt) {
  for (int k = 0; k < 2; ++k)
    if (!s.step(dt).is_ok()) std::exit(1);
  std::vector<double> t;
  for (int k = 0; k < steps; ++k) {
    const int64_t t0 = now_ns();
    if (!s.step(dt).is_ok()) std::exit(1);
    t.push_back((now_ns() - t0) * 1e-9);
  }
  std::sort(t.begin(), t.end());
  return {t.front(), t[t.size() / 2]};
}

double triad_gbs(const nlohmann::json& mem, const char* which) {
  return mem[which]["triad"]["best_gbs"];
}

int bandwidth(int nlat, int steps) {
  std::printf("== memory ceiling: STREAM triad (profile/probe_memory.h, quick)\n");
  profile::MemoryOptions mo;
  mo.quick = true;
  const nlohmann::json mem = profile::probe_memory(mo);
  const int threads_all = mem["threads_all"]["threads"];
  std::printf("triad: %.1f GB/s on 1 thread, %.1f GB/s on %d threads (arrays of %.0f MiB)\n",
              triad_gbs(mem, "threads_1"), triad_gbs(mem, "threads_all"), threads_all,
              double(mem["array_bytes"]) / (1 << 20));

  auto comm = comm::make_single_comm();
  const Grid g(nlat);
  const Williamson w(6, 0.0);
  std::printf("\n== RK4 step, stencil alone (polar filter off), %d x %d cells\n", g.nlat, g.nlon);
  for (int threads : {1, threads_all}) {
    omp_set_num_threads(threads);
    SweSolver s(g, w, 90.0, 0.0, *comm);
    s.set_initial();
    // dt: the timing does not depend on it; 1 s keeps the unfiltered polar rows stable.
    const Timing t = time_steps(s, steps, 1.0);
    const double bytes = s.bytes_per_step();
    const double gbs = bytes / t.best_s * 1e-9, gbs_med = bytes / t.median_s * 1e-9;
    const double ceiling = triad_gbs(mem, threads == 1 ? "threads_1" : "threads_all");
    std::printf(
        "%d thread(s): %.1f ms/step best, %.1f median; %.0f MB/step counted -> %.1f GB/s best "
        "(%.2f x triad), %.1f GB/s median (%.2f x triad)\n",
        threads, t.best_s * 1e3, t.median_s * 1e3, bytes * 1e-6, gbs, gbs / ceiling, gbs_med,
        gbs_med / ceiling);
  }

  std::printf("\n== the default configuration's step (case 6, nlat 96, %d threads)\n", threads_all);
  const int nd = 96;
  const Grid gd(nd);
  SweSolver on(gd, w, 60.0, 0.0, *comm), off(gd, w, 90.0, 0.0, *comm);
  on.set_initial();
  off.set_initial();
  const Timing t_on = time_steps(on, 4 * steps, 1.0), t_off = time_steps(off, 4 * steps, 1.0);
  std::printf(
      "%.2f ms/step median with the polar filter (%d rows), %.2f without: the filter is %.0f%% of "
      "the step\n",
      t_on.median_s * 1e3, on.filter().filtered_rows(), t_off.median_s * 1e3,
      100 * (1 - t_off.median_s / t_on.median_s));
  return 0;
}

int scaling_point(int nlat, int steps) {
  auto world = comm::world();
  if (!world) return 1;
  comm::Comm& comm = **world;
  sim::ClimateConfig c;
  c.nlat = nlat;
  c.days = 365;  // never reached: only `steps` steps run
  c.output_every_h = 24 * 365;
  c.diag_every = 1000000;
  auto w = sim::make_climate_workload(c, comm, 0);
  if (!w) {
    std::fprintf(stderr, "%s\n", w.status().message().c_str());
    return 2;
  }
  if (!(*w)->begin(".").is_ok()) return 1;
  for (int k = 0; k < 3; ++k)
    if (!(*w)->step().is_ok()) return 1;
  std::vector<double> t;
  for (int k = 0; k < steps; ++k) {
    if (!comm.barrier().is_ok()) return 1;
    const int64_t t0 = now_ns();
    if (!(*w)->step().is_ok()) return 1;
    if (!comm.barrier().is_ok()) return 1;
    t.push_back((now_ns() - t0) * 1e-9);
  }
  std::sort(t.begin(), t.end());
  const double cells = 2.0 * nlat * nlat;
  if (comm.rank() == 0)
    std::printf("scaling_point %d %.6e  (median %.2f ms/step, %d x %d cells)\n", comm.size(),
                cells / t[t.size() / 2], t[t.size() / 2] * 1e3, nlat, 2 * nlat);
  return 0;
}

int default_run() {
  auto comm = comm::make_single_comm();
  sim::ClimateConfig c;  // the defaults of configs/sim/climate.toml but nlat
  c.nlat = 120;
  const int64_t t0 = now_ns();
  auto w = sim::make_climate_workload(c, *comm, 0);
  if (!w) return 2;
  const std::string dir = "/tmp";
  if (!(*w)->begin(dir).is_ok()) return 1;
  while ((*w)->steps_done() < (*w)->total_steps())
    if (!(*w)->step().is_ok()) return 1;
  auto r = (*w)->finish(dir);
  if (!r) return 1;
  const double s = (now_ns() - t0) * 1e-9;
  nlohmann::json j = *r;
  j.erase("maps");
  std::printf("default run: %.1f s wall for %lld steps on %d threads (%.2f ms/step)\n%s\n", s,
              (long long)(*w)->total_steps(), omp_get_max_threads(),
              s * 1e3 / double((*w)->total_steps()), j.dump().c_str());
  return 0;
}

int convergence() {
  auto comm = comm::make_single_comm();
  for (double alpha : {0.0, 45.0}) {
    double prev[3] = {0, 0, 0};
    std::printf(
        "case 2, alpha %g, 5 days:\n  nlat  steps      l1        l2        linf     order l1  l2  "
        "linf\n",
        alpha);
    for (int nlat : {24, 48, 96}) {
      sim::ClimateConfig c;
      c.test_case = 2;
      c.nlat = nlat;
      c.days = 5;
      c.alpha_deg = alpha;
      c.output_every_h = 120;
      c.diag_every = 1000000;
      auto w = sim::make_climate_workload(c, *comm, 0);
      if (!w || !(*w)->begin("/tmp").is_ok()) return 1;
      while ((*w)->steps_done() < (*w)->total_steps())
        if (!(*w)->step().is_ok()) return 1;
      const nlohmann::json m = (*w)->metrics();
      const double e[3] = {m["h_l1"], m["h_l2"], m["h_linf"]};
      std::printf("  %4d  %5lld  %.3e %.3e %.3e", nlat, (long long)(*w)->total_steps(), e[0], e[1],
                  e[2]);
      if (prev[0] > 0)
        std::printf("   %.2f %.2f %.2f", std::log2(prev[0] / e[0]), std::log2(prev[1] / e[1]),
                    std::log2(prev[2] / e[2]));
      std::printf("\n");
      std::copy(e, e + 3, prev);
    }
  }
  return 0;
}

int scaling_analyse(int argc, char** argv, int first) {
  std::vector<std::pair<int, double>> pts;
  for (int i = first; i < argc; ++i) {
    const char* colon = std::strchr(argv[i], ':');
    if (!colon) return 2;
    pts.emplace_back(std::atoi(argv[i]), std::atof(colon + 1));
  }
  auto r = profile::analyze_scaling(pts);
  if (!r) {
    std::fprintf(stderr, "%s\n", r.status().message().c_str());
    return 2;
  }
  std::printf("(throughput column: grid cells x steps per second)\n%s",
              profile::scaling_table(*r).c_str());
  std::printf("Amdahl fit: serial fraction %.3f (rms residual of 1/S %.3f); Karp-Flatt e:",
              r->fit.serial_fraction, r->fit.rms_residual);
  for (const auto& p : r->points)
    if (p.ranks > r->points.front().ranks) std::printf(" %d ranks %.3f", p.ranks, p.karp_flatt);
  std::printf("\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int nlat = 720, steps = 10, mode = 0, first_point = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--nlat" && i + 1 < argc)
      nlat = std::atoi(argv[++i]);
    else if (a == "--steps" && i + 1 < argc)
      steps = std::atoi(argv[++i]);
    else if (a == "--scaling-point")
      mode = 1;
    else if (a == "--convergence")
      mode = 4;
    else if (a == "--default-run")
      mode = 3;
    else if (a == "--scaling-analyse") {
      mode = 2;
      first_point = i + 1;
      break;
    } else {
      std::fprintf(stderr,
                   "usage: sim_climate_bench [--nlat N] [--steps K] [--default-run | "
                   "--scaling-point | --scaling-analyse 1:X 2:Y ...]\n");
      return 2;
    }
  }
  if (mode == 1) return scaling_point(nlat, steps);
  if (mode == 2) return scaling_analyse(argc, argv, first_point);
  if (mode == 3) return default_run();
  if (mode == 4) return convergence();
  return bandwidth(nlat, steps);
}

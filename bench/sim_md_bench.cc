// sim_md_bench: time steps per second of `crucible sim md` on LAMMPS's own
// `in.lj` benchmark (3d LJ melt: fcc 0.8442, 20x20x20 cells = 32,000 atoms,
// velocity 3.0, lj/cut 2.5, neighbor 0.3 bin, neigh_modify delay 0 every 20
// check no, fix nve, run 100), against Debian's serial `lmp` running that
// input in the same process tree, one core each (OMP_NUM_THREADS=1), with
// its default lj/cut and with the OPT package's lj/cut/opt (-sf opt).
// Prints both rates, their ratio, and where crucible's step time went (from
// its tracer). The reproducible mode (full sorted lists, exact sums) is
// timed beside the fast one. Usage: sim_md_bench [--steps N] [--cells N] [--lmp PATH] [--reps R]
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "comm/comm.h"
#include "core/clock.h"
#include "core/trace.h"
#include "sim/md/md.h"

using namespace crucible;

namespace {

// LAMMPS's loop time for `steps` steps of in.lj (seconds), or < 0.
double run_lammps(const std::string& lmp, int cells, int steps, const std::string& dir,
                  const char* suffix) {
  const std::string in = dir + "/in.lj";
  std::ofstream f(in);
  f << "units lj\natom_style atomic\nlattice fcc 0.8442\n"
    << "region box block 0 " << cells << " 0 " << cells << " 0 " << cells << "\n"
    << "create_box 1 box\ncreate_atoms 1 box\nmass 1 1.0\nvelocity all create 3.0 87287 loop geom\n"
    << "pair_style lj/cut 2.5\npair_coeff 1 1 1.0 1.0 2.5\nneighbor 0.3 bin\n"
    << "neigh_modify delay 0 every 20 check no\nfix 1 all nve\nrun " << steps << "\n";
  f.close();
  const std::string cmd = "cd " + dir + " && OMP_NUM_THREADS=1 " + lmp +
                          " -in in.lj -log none -echo none" +
                          (*suffix ? std::string(" -sf ") + suffix : std::string()) + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return -1;
  char line[512];
  double loop = -1;
  while (std::fgets(line, sizeof line, p)) {
    if (std::strncmp(line, "Loop time of ", 13) == 0) loop = std::atof(line + 13);
    if (std::strstr(line, "Pair  ") || std::strstr(line, "Neigh ") || std::strstr(line, "Comm  "))
      std::printf("  lammps%s%s %s", *suffix ? " -sf " : "", suffix, line);
  }
  pclose(p);
  return loop;
}

}  // namespace

int main(int argc, char** argv) {
  int steps = 100, cells = 20, reps = 3;
  std::string lmp = "lmp";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--steps")) steps = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--cells")) cells = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--lmp")) lmp = argv[i + 1];
    if (!std::strcmp(argv[i], "--reps")) reps = std::atoi(argv[i + 1]);
  }
  omp_set_num_threads(1);
  sim::MdConfig c;
  c.cells = cells, c.density = 0.8442, c.temperature = 3.0, c.dt = 0.005;
  c.steps = steps, c.equil_steps = 0, c.thermostat_tau = 1.0;
  c.cutoff = 2.5, c.skin = 0.3, c.neighbor_every = 20, c.thermo_every = steps;
  const std::string dir =
      std::filesystem::temp_directory_path() / ("sim_md_bench." + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  auto comm = comm::make_single_comm();

  double best_ours = 1e30, best_lmp = 1e30, best_opt = 1e30, best_repro = 1e30;
  std::map<std::string, double> phase;  // of the best crucible repetition
  for (int r = 0; r < reps; ++r) {
    auto w = sim::make_md_workload(c, *comm, 87287);
    if (!w) {
      std::fprintf(stderr, "%s\n", w.status().message().c_str());
      return 2;
    }
    if (Status s = (*w)->begin(dir); !s.is_ok())
      return std::fprintf(stderr, "%s\n", s.message().c_str()), 1;
    trace::clear();
    trace::set_active(true);
    const int64_t t0 = now_ns();
    for (int s = 0; s < steps; ++s)
      if (Status st = (*w)->step(); !st.is_ok())
        return std::fprintf(stderr, "%s\n", st.message().c_str()), 1;
    const double secs = (now_ns() - t0) * 1e-9;
    trace::set_active(false);
    if (secs < best_ours) {
      best_ours = secs;
      phase.clear();
      for (const trace::Event& e : trace::take_events()) phase[e.name] += e.dur_ns * 1e-9;
    }
    std::printf("crucible rep %d: %.3f s for %d steps\n", r, secs, steps);
    {
      sim::MdConfig rc = c;
      rc.reproducible = true;
      auto wr = sim::make_md_workload(rc, *comm, 87287);
      if (!wr || !(*wr)->begin(dir).is_ok()) return 1;
      const int64_t r0 = now_ns();
      for (int s = 0; s < steps; ++s)
        if (!(*wr)->step().is_ok()) return 1;
      best_repro = std::min(best_repro, (now_ns() - r0) * 1e-9);
    }
    const double l = run_lammps(lmp, cells, steps, dir, "");
    if (l > 0) best_lmp = std::min(best_lmp, l);
    // The OPT package's lj/cut/opt: LAMMPS's own faster kernel, a second peer.
    const double o = run_lammps(lmp, cells, steps, dir, "opt");
    if (o > 0) best_opt = std::min(best_opt, o);
    std::printf("lammps   rep %d: %.3f s (lj/cut), %.3f s (-sf opt)\n", r, l, o);
  }
  std::filesystem::remove_all(dir);
  const int64_t atoms = 4LL * cells * cells * cells;
  std::printf("\n%lld atoms, %d steps, 1 core each, best of %d\n", static_cast<long long>(atoms),
              steps, reps);
  std::printf("crucible sim md: %8.2f steps/s  (%.3g atom-steps/s)\n", steps / best_ours,
              atoms * steps / best_ours);
  std::printf("crucible reproducible mode: %8.2f steps/s  (%.2fx the fast mode's time)\n",
              steps / best_repro, best_repro / best_ours);
  if (best_lmp < 1e30) {
    std::printf("LAMMPS lmp     : %8.2f steps/s  (%.3g atom-steps/s)\n", steps / best_lmp,
                atoms * steps / best_lmp);
    std::printf("ratio crucible/LAMMPS time: %.3f (target <= 1.5)\n", best_ours / best_lmp);
    if (best_opt < 1e30)
      std::printf("LAMMPS -sf opt : %8.2f steps/s; ratio crucible/LAMMPS-opt time: %.3f\n",
                  steps / best_opt, best_ours / best_opt);
  } else {
    std::printf("LAMMPS (%s) not run\n", lmp.c_str());
  }
  std::printf("crucible step time by phase (best rep):\n");
  for (const auto& [name, s] : phase)
    std::printf("  %-16s %7.3f s  %5.1f%%\n", name.c_str(), s, 100 * s / best_ours);
  return 0;
}

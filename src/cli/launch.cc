// `crucible launch -n N [--hostfile F] [--threads T] -- train [CONFIG] [options]`:
// starts N ranks of this same binary through the cluster's launcher — srun
// under Slurm (SLURM_JOB_ID set), mpirun otherwise — and replaces itself with
// it. Running `mpirun -n N crucible train ...` by hand works as well; launch
// only adds what one would otherwise have to know:
//   - as root, Open MPI refuses to start without --allow-run-as-root;
//   - on one machine with fewer cores than ranks, mpirun refuses without
//     --oversubscribe, and N ranks each running all-cores OpenMP pools would
//     thrash: each rank gets OMP_NUM_THREADS = max(1, cores / N) unless
//     --threads says otherwise;
//   - without a hostfile, the job stays on this machine: shared-memory and
//     loopback transports only (no probing of absent networks).
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "core/threads.h"

namespace crucible::cli {

namespace {

struct LaunchOptions {
  int ranks = 2;
  std::string hostfile;
  int threads = 0;  // per rank; 0: cores / ranks on one machine
  std::vector<std::string> command;
};

std::string self_path() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "crucible";
  buf[n] = '\0';
  return buf;
}

[[noreturn]] void run_launch(const LaunchOptions& o) {
  if (o.command.empty())
    throw ExitError(2, "[launch] nothing to run: crucible launch -n N -- train [CONFIG] ...");
  const bool slurm = std::getenv("SLURM_JOB_ID") != nullptr;
  const int threads = o.threads > 0        ? o.threads
                      : o.hostfile.empty() ? std::max(1, hardware_threads() / o.ranks)
                                           : 0;
  std::vector<std::string> argv;
  if (slurm) {
    argv = {"srun", "-n", std::to_string(o.ranks)};
    if (threads > 0) argv.push_back("--cpus-per-task=" + std::to_string(threads));
  } else {
    argv = {"mpirun", "-n", std::to_string(o.ranks)};
    if (::geteuid() == 0) argv.push_back("--allow-run-as-root");
    if (o.hostfile.empty()) {
      if (o.ranks > hardware_threads()) argv.push_back("--oversubscribe");
      // One machine: shared memory and self only, bind nothing (threads are
      // set per rank below; binding N ranks to cores fights OpenMP).
      for (const char* a : {"--mca", "btl", "self,vader", "--bind-to", "none"}) argv.push_back(a);
    } else {
      argv.insert(argv.end(), {"--hostfile", o.hostfile});
    }
  }
  if (threads > 0) {
    ::setenv("OMP_NUM_THREADS", std::to_string(threads).c_str(), 1);
    if (!slurm) argv.insert(argv.end(), {"-x", "OMP_NUM_THREADS"});
  }
  argv.push_back(self_path());
  argv.insert(argv.end(), o.command.begin(), o.command.end());
  std::string line;
  for (const auto& a : argv) line += (line.empty() ? "" : " ") + a;
  std::fprintf(stderr, "[launch] %s\n", line.c_str());
  std::fflush(stderr);
  std::vector<char*> cargv;
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  ::execvp(cargv[0], cargv.data());
  throw ExitError(2, std::string("[launch] cannot run ") + cargv[0] + ": " + std::strerror(errno) +
                         (slurm ? "" : " (install openmpi-bin)"));
}

}  // namespace

void add_launch_command(CLI::App& app) {
  auto o = std::make_shared<LaunchOptions>();
  auto* cmd = app.add_subcommand(
      "launch", "Run a command on N ranks (mpirun, or srun under Slurm): launch -n N -- train ...");
  cmd->add_option("-n,--ranks", o->ranks, "Number of ranks")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--hostfile", o->hostfile, "Open MPI hostfile (default: this machine)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--threads", o->threads,
                  "Threads per rank (default on one machine: cores / ranks, at least 1)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("command", o->command, "The crucible command to run on every rank, after --");
  cmd->callback([o] { run_launch(*o); });
}

}  // namespace crucible::cli

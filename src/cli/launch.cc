// `crucible launch -n N [--hostfile F] [--threads T] [--min-ranks M] -- COMMAND ...`:
// starts N ranks of this same binary through the cluster's launcher — srun
// under Slurm (SLURM_JOB_ID set), mpirun otherwise. Running `mpirun -n N
// crucible train ...` by hand works as well; launch adds what one would
// otherwise have to know (runtime/supervisor.h, launcher_command) and, for
// `train` and `sim`, supervision: heartbeats, hang detection, restarts from the newest
// valid checkpoint, preemption, elastic fallback (docs/fault_tolerance.md).
// Other commands are handed to the launcher as they are.
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "core/process.h"
#include "runtime/launcher_stderr.h"
#include "runtime/supervisor.h"

namespace crucible::cli {

namespace {

struct LaunchOptions {
  runtime::LaunchSpec spec;
  int min_ranks = 0;
  bool requeue = false;
  std::vector<std::string> command;
};

pid_t g_launcher = 0;  // the launcher a signal to `crucible launch` is passed on to

// Runs the launcher on the command (not `train`: no supervision); its exit
// code is launch's. Its stderr comes through runtime::StderrRelay, without the
// banners mpirun puts around a rank's exit code; SIGTERM, SIGHUP and SIGUSR1
// sent to this process are passed on to it (Ctrl-C on a terminal reaches
// both: one process group).
void run_unsupervised(const LaunchOptions& o) {
  std::vector<std::string> argv = runtime::launcher_command(o.spec, self_executable(), o.command);
  std::string line;
  for (const auto& a : argv) line += (line.empty() ? "" : " ") + a;
  std::fprintf(stderr, "[launch] %s\n", line.c_str());
  std::fflush(stderr);
  std::vector<char*> cargv;
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  int code = 0;
  {
    runtime::StderrRelay relay;
    const bool relayed = relay.open().is_ok();
    const pid_t child = ::fork();
    if (child == 0) {
      if (relayed) ::dup2(relay.write_fd(), STDERR_FILENO);
      ::execvp(cargv[0], cargv.data());
      std::fprintf(stderr, "[launch] cannot run %s: %s (install openmpi-bin)\n", cargv[0],
                   std::strerror(errno));
      ::_exit(2);
    }
    if (child < 0) throw ExitError(2, "[launch] fork: " + std::string(std::strerror(errno)));
    relay.start();
    g_launcher = child;
    for (int sig : {SIGTERM, SIGHUP, SIGUSR1}) ::signal(sig, [](int s) { ::kill(g_launcher, s); });
    ::signal(SIGINT,
             SIG_IGN);  // the terminal's Ctrl-C reaches the launcher itself, which ends the ranks
    int st = 0;
    while (::waitpid(child, &st, 0) < 0 && errno == EINTR) {
    }
    code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  }  // the relay prints what is left before the exit
  if (code > 128 && code < 128 + NSIG)
    throw ExitError(code, "[launch] " + std::string(cargv[0]) + " ended by signal " +
                              std::to_string(code - 128) + " (" + strsignal(code - 128) + ")");
  if (code != 0) throw ExitError(code, "");
}

// `launch -- sim WORKLOAD ...`: parsed as `crucible sim` would, supervised.
void run_sim_supervised(const LaunchOptions& o) {
  runtime::SuperviseOptions so;
  so.launch = o.spec;
  so.min_ranks = o.min_ranks;
  so.requeue = o.requeue;
  runtime::SimRequest req;
  int64_t stop_at = 0;
  CLI::App parser{"crucible sim"};
  add_sim_options(parser, req, stop_at);
  std::vector<std::string> rest(o.command.rbegin(), o.command.rend() - 1);  // CLI11: reversed
  try {
    parser.parse(rest);
  } catch (const CLI::ParseError& e) {
    throw ExitError(2, std::string("[launch] sim: ") + e.what());
  }
  auto code = runtime::supervise_sim(so, req, stop_at);
  if (!code) throw ExitError(exit_code(code.status()), code.status().message());
  if (*code != 0) throw ExitError(*code, "");
}

void run_launch(const LaunchOptions& o) {
  if (o.command.empty())
    throw ExitError(2, "[launch] nothing to run: crucible launch -n N -- train [CONFIG] ...");
  if (o.min_ranks > o.spec.ranks)
    throw ExitError(2, "[launch] --min-ranks " + std::to_string(o.min_ranks) +
                           " is more than -n " + std::to_string(o.spec.ranks));
  if (o.command[0] == "sim") return run_sim_supervised(o);
  if (o.command[0] != "train") return run_unsupervised(o);
  // Parse the train command as `crucible train` would, to know its run.
  runtime::SuperviseOptions so;
  so.launch = o.spec;
  so.min_ranks = o.min_ranks;
  so.requeue = o.requeue;
  CLI::App parser{"crucible train"};
  add_train_options(parser, so.request, so.stop_at, &so.metrics_port, &so.metrics_bind);
  std::vector<std::string> rest(o.command.rbegin(), o.command.rend() - 1);  // CLI11: reversed
  try {
    parser.parse(rest);
  } catch (const CLI::ParseError& e) {
    throw ExitError(2, std::string("[launch] train: ") + e.what());
  }
  if (so.metrics_port > 0 && so.metrics_port + o.spec.ranks - 1 > 65535)
    throw ExitError(2, "[launch] --metrics-port " + std::to_string(so.metrics_port) + ": rank r serves on port + r, and " +
                           std::to_string(so.metrics_port + o.spec.ranks - 1) + " (rank " +
                           std::to_string(o.spec.ranks - 1) + ") is beyond 65535");
  auto code = runtime::supervise(so);
  if (!code) throw ExitError(exit_code(code.status()), code.status().message());
  if (*code != 0) throw ExitError(*code, "");
}

}  // namespace

void add_launch_command(CLI::App& app) {
  auto o = std::make_shared<LaunchOptions>();
  auto* cmd = app.add_subcommand(
      "launch",
      "Run a command on N ranks (mpirun, or srun under Slurm); `train` runs supervised: "
      "launch -n N -- train ...");
  cmd->add_option("-n,--ranks", o->spec.ranks, "Number of ranks")
      ->capture_default_str()
      ->check(positive());
  cmd->add_option("--hostfile", o->spec.hostfile, "Open MPI hostfile (default: this machine)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--threads", o->spec.threads,
                  "Threads per rank (default on one machine: cores / ranks, at least 1)")
      ->check(non_negative());
  cmd->add_option("--min-ranks", o->min_ranks,
                  "Elastic fallback: when relaunching at full size keeps failing, continue on "
                  "fewer ranks (at least this many), same global batch")
      ->check(positive());
  cmd->add_flag("--requeue", o->requeue,
                "Under Slurm: after a stop by a signal (SIGUSR1/SIGTERM) and a clean checkpoint, requeue "
                "the job (scontrol requeue; submit with sbatch --requeue)");
  cmd->add_option("command", o->command, "The crucible command to run on every rank, after --");
  cmd->callback([o] { run_launch(*o); });
}

}  // namespace crucible::cli

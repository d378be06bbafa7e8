// Starting the ranks of a job: the launcher command line (mpirun on this
// machine or with a hostfile, srun under Slurm) and the check that a hostfile
// can hold the job. Used by the supervisor (runtime/supervisor.h).
#pragma once
#include <string>
#include <vector>

#include "core/status.h"

namespace crucible::runtime {

// How to start N copies of this binary: mpirun on this machine or with a
// hostfile, srun under Slurm (SLURM_JOB_ID set). Also sets OMP_NUM_THREADS in
// this process's environment for the ranks to inherit.
struct LaunchSpec {
  int ranks = 2;
  std::string hostfile;
  int threads = 0;  // per rank; 0: cores / ranks on one machine
  std::vector<std::string> env_to_forward;  // variables the ranks must see (mpirun -x)
};
std::vector<std::string> launcher_command(const LaunchSpec& spec, const std::string& self,
                                          const std::vector<std::string>& command);

// An Open MPI hostfile that can hold `ranks` ranks: readable, at least one
// host, every slots=/max_slots= a positive integer, and (when every host
// gives slots=) enough slots. A hostfile that cannot work is bad input, not
// a failure to retry.
Status check_hostfile(const std::string& path, int ranks);

// The hosts a hostfile names, in its order (empty when it cannot be read).
std::vector<std::string> hostfile_hosts(const std::string& path);
// The address of this machine that the first of `hosts` it is not itself
// reaches it by (the source address the kernel routes from), for what ranks
// on other hosts must send to: the supervisor's heartbeat socket. Empty when
// every host is this machine or none resolves.
std::string address_facing(const std::vector<std::string>& hosts);

// Writes to `to` the hostfile `from` without the hosts named in `drop` (host
// names or addresses: a line goes when its host is one of them or resolves
// to one), for the attempt after a host was lost. Returns the slots the kept
// lines give (-1 when one of them gives none: Open MPI then counts cores).
Result<int> write_hostfile_without(const std::string& from, const std::vector<std::string>& drop,
                                   const std::string& to);

}  // namespace crucible::runtime

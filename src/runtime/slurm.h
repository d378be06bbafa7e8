// What a supervised job learns from Slurm when it runs inside an allocation
// (SLURM_JOB_ID set): how long it waited in the queue and why, for
// events.jsonl's "queue" event and the report (docs/cluster.md, "Slurm").
#pragma once
#include <optional>
#include <string>

namespace crucible::runtime {

struct SlurmJob {
  std::string id;
  std::string submit, eligible, start;  // as Slurm prints them: 2026-12-02T18:19:26 (local time)
  double wait_s = -1;                   // submit -> start (a requeue submits again); -1 when unknown
  std::string reason;                   // Slurm's Reason field ("None" once running)
  int restarts = 0;                     // Restarts: requeues so far
};

// The job's fields from `scontrol show job -o ID`'s one line of KEY=VALUE
// words. Pure; unknown or missing fields stay empty.
SlurmJob parse_scontrol_job(const std::string& line);

// $SLURM_JOB_ID when this process runs inside a Slurm job and it is a job
// number (it goes into scontrol's command line); "" otherwise.
std::string slurm_job_id();

// Runs `scontrol show job -o $SLURM_JOB_ID`; nothing when not inside a Slurm
// job or when scontrol cannot tell.
std::optional<SlurmJob> current_slurm_job();

}  // namespace crucible::runtime

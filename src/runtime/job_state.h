// RUN/job.json, the supervisor's account of its job: what state the job is
// in, its attempt number and world size, and the supervisor's pid (what
// `kill -HUP` or `kill -TERM` is sent to). Written atomically at every
// change; the one reader and writer of that file.
#pragma once
#include <string>

namespace crucible::runtime {

struct JobState {
  std::string state;  // "running" | "stopped" | "finished" | "preempted" | "failed"; "" when none
  int attempt = -1;   // the newest attempt's number (-1: none yet)
  int world = 0;
  int full_world = 0;  // the -n asked for (world is smaller after an elastic shrink)
  int pid = 0;
};

// The job's state; state "" when RUN/job.json is missing or does not parse.
JobState read_job_state(const std::string& run_dir);
// Writes RUN/job.json atomically; a failure is a warning (the job goes on).
void write_job_state(const std::string& run_dir, const JobState& s);

// The newest runs/<name>-* that a supervisor left unfinished (a state other
// than "finished") and that holds a checkpoint: "run the same command again"
// continues it. "" when there is none.
std::string newest_unfinished_run(const std::string& name);

}  // namespace crucible::runtime

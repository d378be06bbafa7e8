// `crucible curate`: runs the curation passes of data/curate.h over the ranks
// of the job and the threads of each rank, resumably (docs/curation.md).
//
// Work split: chunk c belongs to rank c % ranks, key partition p to rank
// p % ranks; within a rank, OpenMP threads take units dynamically. The plan
// does not depend on ranks or threads, so neither does the output: 2 ranks
// write the same shards, byte for byte, as 1. Ranks exchange the LSH bucket
// keys through OUT/.work (each rank's chunks' key files are read, partition by
// partition, by the partition's owner), so OUT must be on a file system every
// rank sees, as with checkpoints on a multi-host job.
// Between passes the ranks agree (runtime/world.h): a failure on one rank
// stops every rank with the same message.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/status.h"
#include "comm/comm.h"
#include "runtime/config.h"
#include "runtime/console.h"

namespace crucible::runtime {

// OUT/.lock (core/dir_lock.h): held by rank 0 of the curation writing OUT.
inline constexpr const char* kCurateLock = ".lock";

struct CurateRequest {
  std::vector<std::string> inputs;
  std::string format = "auto";
  std::string out;
  Config cfg;            // [curate] and its tables
  bool dry_run = false;  // print the plan and the estimate; write nothing
  // Another process curating into `out`: wait this long for it (the cache
  // under `crucible train`), 0: refuse at once (`crucible curate`).
  double lock_wait_s = 0;
  // Test facility (docs/curation.md, "Testing resume"): "PASS:N" kills this
  // process with SIGKILL after it finished N units of pass PASS (scan, dedup,
  // output), as a crash or a node loss would.
  std::string kill_after;
};

struct CurateResult {
  nlohmann::json report;  // OUT/report.json (rank 0; others: empty)
  bool already_done = false;
};

// The curation spec a config describes, with the profile resolved ("auto":
// short when any input is in fortunes format). Lists the inputs to decide.
Result<data::CurateSpec> curate_spec(Config cfg, const std::vector<std::string>& inputs,
                                     const std::string& format);

Result<CurateResult> run_curate(const CurateRequest& req, comm::Comm& comm, Console& console);

}  // namespace crucible::runtime

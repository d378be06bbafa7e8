// Naming the culprit of a hang from the ranks' last heartbeats.
//
// Every rank runs the same sequence of phases, so heartbeat sequence numbers
// are comparable across ranks. When a collective hangs, the ranks that reached
// it wait there while the culprit is behind: still in an earlier phase (a
// computation that never finished, a rank stuck in I/O), or silent. The
// diagnosis names the ranks with the smallest sequence number and what each
// was last doing, and the place the others wait; when every rank is at the
// same point it says whether that point is a collective (the communication
// itself is stuck) or a computation. In a pipeline's schedule (where the
// stages' actions differ and a sequence number says nothing) the culprits are
// the ranks stuck in a computation while the others wait in receives; when
// every rank waits in a receive, the messages themselves are stuck.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/heartbeat.h"

namespace crucible::runtime {

struct RankView {
  int rank = 0;
  bool seen = false;   // sent at least one heartbeat
  int64_t step = 0;    // the step its phase belongs to (setup: the step resumed from)
  Phase phase = Phase::kSetup;
  uint64_t seq = 0;
  double idle_s = 0;   // since its position last changed (or since launch when unseen)
  // In the pipeline phase: its schedule action (parallel::Op; -1: none yet),
  // micro-batch, chunk and stage (heartbeat_action).
  int op = -1, micro = -1, chunk = -1, stage = -1;
};

struct HangDiagnosis {
  std::vector<int> culprits;
  std::string message;  // one line, e.g. "rank 1 never arrived at gradient allreduce of step 6: ..."
};

// "forward of step 6"; setup names the step it resumes from.
std::string describe_position(int64_t step, Phase phase);
// The same with a pipeline rank's action: "recv_grad of micro-batch 3 (stage 1,
// chunk 0) in the pipeline schedule of step 6".
std::string describe_position(const RankView& r);

HangDiagnosis diagnose_hang(const std::vector<RankView>& ranks);

}  // namespace crucible::runtime

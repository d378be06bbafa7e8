// Heartbeats: how the ranks of a supervised job (`crucible launch`) tell the
// supervisor where they are, and how it tells them to stop.
//
// Each rank keeps its position — step, phase, and a sequence number counting
// phase changes — in atomics that the training thread updates for the cost of
// a store. A background thread sends that position to the supervisor as one
// UDP datagram every kBeatInterval and listens for its commands ("stop":
// checkpoint at the next step boundary and exit). Every rank runs the same
// program, so equal sequence numbers mean the same point of it: a rank with a
// smaller one is behind the others (docs/fault_tolerance.md, "Culprits").
//
// The thread also watches the supervisor: when it is gone (killed with
// SIGKILL, say; on another host: nothing heard from it for CRUCIBLE_FENCE_S)
// the rank exits, so no orphaned job keeps writing into a run directory that
// a relaunch is about to use.
//
// Not supervised (no CRUCIBLE_SUPERVISOR in the environment): every call is a
// no-op. Thread-safe.
#pragma once
#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace crucible::runtime {

// Where a rank is. The order is the order within a step; `collective` phases
// wait for every rank.
enum class Phase : int {
  kSetup = 0,    // config, data, model, resume (collective agreements inside)
  kData,         // waiting for the next batch
  kForward,
  kBackward,     // includes overlapped gradient reductions
  kReduce,       // waiting for gradient reductions
  kOptimizer,
  kGather,       // parameter all-gather (ZeRO)
  kSync,         // step-end agreement: loss, stop, metrics
  kEval,         // validation (ends in an allreduce)
  kCheckpoint,   // snapshot and the agreement on the save
  kDone,         // finished; no longer expected to progress
  // Pipeline parallelism: the step's schedule (data, forward and backward of
  // every micro-batch, the stage-to-stage messages). Stages run different
  // actions, so within it a rank reports its action (heartbeat_action), which
  // does not count in the sequence number; its receives wait for other stages.
  kPipeline,
};
const char* phase_name(Phase p);
bool phase_is_collective(Phase p);

inline constexpr std::chrono::milliseconds kBeatInterval{200};

// The environment variables the supervisor sets for its ranks.
inline constexpr const char* kSupervisorEnv = "CRUCIBLE_SUPERVISOR";  // host:port
inline constexpr const char* kSupervisorPidEnv = "CRUCIBLE_SUPERVISOR_PID";
inline constexpr const char* kSupervisorHostEnv = "CRUCIBLE_SUPERVISOR_HOST";
inline constexpr const char* kAttemptEnv = "CRUCIBLE_ATTEMPT";
// Seconds without a word from the supervisor after which a rank on another
// host than the supervisor's fences itself (exits): the supervisor tells its
// ranks it is there twice a second, and one that went silent (killed, or cut
// off by the network) is continuing the job without them.
inline constexpr const char* kFenceEnv = "CRUCIBLE_FENCE_S";
// Exit code of a rank whose supervisor vanished.
inline constexpr int kExitOrphaned = 5;

// Starts the heartbeat of this process as `rank` of `world` (once; later
// calls only update rank/world). No-op when not supervised.
void heartbeat_start(int rank, int world);
// Records the position: `step` is the step the phase belongs to (1-based;
// in setup, the step the run resumes from). Cheap: atomic stores.
void heartbeat_phase(int64_t step, Phase p);
// Where this rank is in the step, told once per phase change: the
// supervisor hears it (heartbeat_phase) and, inside the trace window, the
// phase that ends becomes a trace event.
class PhaseMarker {
 public:
  void enter(int64_t step, Phase p);

 private:
  const char* name_ = "";
  int64_t t0_ = 0;
  bool open_ = false;
};
// Records the pipeline schedule action this rank is in (an Op of
// parallel/schedule.h, its micro-batch and chunk, the rank's stage), until
// the next action or phase. Not counted in the sequence number (stages run
// different lists), but it is progress: a rank whose action changes is not hung.
void heartbeat_action(int op, int micro, int chunk, int stage);
// True once the supervisor asked this rank to stop (checkpoint and exit).
bool heartbeat_stop_requested();
// Sends the final report (synchronously) before the process exits.
void heartbeat_exit(int code, const std::string& message);

// ---- wire format (JSON datagrams), shared with the supervisor ----
struct Beat {
  std::string type;  // "hb" | "exit"
  int rank = -1, world = 0, attempt = 0;
  int64_t pid = 0;
  std::string host;
  int64_t step = 0;
  Phase phase = Phase::kSetup;
  uint64_t seq = 0;
  int op = -1, micro = -1, chunk = -1, stage = -1;  // heartbeat_action's (op -1: none)
  int code = 0;         // exit
  std::string message;  // exit
};
std::string encode(const Beat& b);
bool decode(const std::string& text, Beat& out);

}  // namespace crucible::runtime

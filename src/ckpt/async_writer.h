// AsyncCheckpointWriter: writes checkpoints on one background thread from a
// host Snapshot, so the training loop pays only for take_snapshot's copy;
// serialisation, checksums, fsync, the read-back and the rename happen while
// training goes on.
//
// One save is in flight at most, and the writer owns the one Snapshot it
// writes from (reused from save to save: no per-save allocation of the big
// buffers). The protocol, on the owning thread:
//   auto done = writer.wait();   // blocks while a save is in flight; reports it
//   ckpt::take_snapshot(state, params, opt, writer.buffer());
//   writer.start();              // returns at once; the thread writes buffer()
// Invariants (CRUCIBLE_CHECK): buffer() is not touched while a save is in
// flight; start() follows the wait() that reported the previous save, so no
// outcome, in particular no failure, goes unreported.
//
// Thread-safety: wait(), buffer(), start() and the destructor are for one
// owning thread; busy() may be called from any thread. The background thread
// reads buffer() only between start() and the end of that save. It sleeps on
// a condition variable between saves (no polling: it would steal a core from
// training).
#pragma once
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "ckpt/checkpoint.h"
#include "core/status.h"

namespace crucible::ckpt {

class AsyncCheckpointWriter {
 public:
  // How a save is written: write_checkpoint, or in tests a stand-in that can
  // hold the write back to observe the writer mid-save.
  using WriteFn = std::function<Status(const std::string& ckpt_dir, const Snapshot&, int keep)>;

  // Saves go to ckpt_dir, keeping the `keep` newest (see write_checkpoint).
  AsyncCheckpointWriter(std::string ckpt_dir, int keep, WriteFn write = write_checkpoint);
  // Waits for the save in flight, then joins the thread. A failure no wait()
  // reported is printed to stderr (call wait() first to handle it).
  ~AsyncCheckpointWriter();
  AsyncCheckpointWriter(const AsyncCheckpointWriter&) = delete;
  AsyncCheckpointWriter& operator=(const AsyncCheckpointWriter&) = delete;

  struct Outcome {
    bool had_save = false;  // a save was in flight (or finished unreported) since the last wait()
    int64_t step = 0;       // its step
    // Its result: ok, or write_checkpoint's error + where a resume would now
    // start: "; latest still names step_NNNNNNN" / "; no earlier checkpoint
    // exists" / "; no valid earlier checkpoint exists either" (Status::io).
    Status status;
    double write_s = 0;   // how long the background write took
    double waited_s = 0;  // how long wait() blocked the caller
  };

  // Blocks until no save is in flight; reports the last started save (once).
  Outcome wait();
  // The buffer to fill with take_snapshot(...): only between wait() and start().
  Snapshot& buffer();
  // Starts writing buffer() in the background and returns.
  void start();
  // A save is in flight (started and not yet finished).
  bool busy() const;

 private:
  enum class State { kIdle, kWriting, kDone };  // kDone: finished, not yet reported
  void run();                                   // the background thread

  const std::string ckpt_dir_;
  const int keep_;
  const WriteFn write_;
  Snapshot buffer_;  // the owner's between wait() and start(), the thread's while kWriting

  mutable std::mutex mu_;
  std::condition_variable cv_;  // state_ or stop_ changed
  State state_ = State::kIdle;  // guarded
  bool stop_ = false;           // guarded
  Outcome last_;                // guarded: the save in flight or last finished

  std::thread thread_;  // last member: started after everything above exists
};

}  // namespace crucible::ckpt

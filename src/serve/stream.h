// Stream: one completion request as the engine and its HTTP handler share it.
// The handler fills the request part and submits it; the engine's thread
// appends each token as it is drawn and ends the stream once; the handler
// waits for tokens (wait()) and turns them into text. The handler cancels
// (a stop sequence was seen, the client went away): the engine frees the
// request's slot and KV blocks at its next step. Thread-safe.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "nn/sampler.h"

namespace crucible::serve {

using SteadyTime = std::chrono::steady_clock::time_point;

enum class Finish { none, length, stop, cancelled, deadline, shutdown };
// OpenAI's finish_reason ("length", "stop"), or ours for the rest.
const char* finish_name(Finish f);

struct Stream {
  // The request, set before submit().
  std::vector<int32_t> prompt;  // never empty (an empty prompt starts from the end-of-text id)
  int max_tokens = 16;
  nn::SamplingConfig sampling;
  uint64_t seed = 0;
  bool ignore_eos = false;  // the end-of-text id does not end it
  SteadyTime arrival{}, deadline{};

  // The engine's output.
  struct Snapshot {
    size_t n_tokens = 0;
    Finish finish = Finish::none;
  };
  // Appends a token (engine thread).
  void push(int32_t token);
  // Ends the stream (engine thread; once).
  void end(Finish why);
  // Waits until more than `seen` tokens exist or the stream ended, or until
  // `until`; copies the tokens from `seen` on into `out`.
  Snapshot wait(size_t seen, std::vector<int32_t>& out, SteadyTime until);

  void cancel() { cancelled_.store(true, std::memory_order_relaxed); }
  bool cancelled() const { return cancelled_.load(std::memory_order_relaxed); }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<int32_t> tokens_;
  Finish finish_ = Finish::none;
  std::atomic<bool> cancelled_{false};
};

}  // namespace crucible::serve

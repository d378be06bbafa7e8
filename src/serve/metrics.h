// ServeMetrics: what `GET /metrics` shows, in the Prometheus text format,
// through prometheus-cpp's registry (Debian prometheus-cpp-dev, already the
// trainer's exporter): queue depth, running batch, KV blocks in use, time to
// first token and inter-token latency histograms, tokens per second (over
// the last 5 s, beside the counters rate() wants), and requests by outcome.
// Thread-safe (the engine's thread observes, HTTP threads count rejections
// and render).
#pragma once
#include <memory>
#include <string>

#include "serve/stream.h"

namespace crucible::serve {

class ServeMetrics {
 public:
  explicit ServeMetrics(const std::string& model);
  ~ServeMetrics();

  void queue_depth(int n);
  void kv_blocks(int used, int total);
  void first_token(double seconds);
  void inter_token(double seconds);
  // A step of the engine: sequences and rows it ran, tokens it drew.
  void step(int seqs, int rows, int tokens, double seconds);
  void prompt_tokens(int n);
  void request_ended(Finish why);
  // A request answered without running: "queue_full" (429), "draining"
  // (503), "bad_request" (400).
  void rejected(const char* why);
  // The exposition text.
  std::string render();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace crucible::serve

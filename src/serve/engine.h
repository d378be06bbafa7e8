// Engine: continuous batching over one model, on the thread that calls run().
//
// Each step runs one nn::Decoder forward over every running request: one row
// for each request that is decoding, and chunks of the prompts of newly
// admitted ones, up to step_tokens rows. Requests join the running batch
// between steps as soon as a slot (max_batch) and the KV blocks their prompt
// plus max_tokens can fill are free, and leave it the step they end, so a
// short request never waits for a long one. Decoding rows go first in a
// step, and a long prompt is prefilled in chunks, so the running streams'
// inter-token latency stays bounded while new requests come in.
//
// Results do not depend on the batch: the Decoder computes each sequence's
// logits bitwise as it would alone, and each request samples with its own
// Rng(seed) exactly as `crucible generate --seed` does, so a request's tokens
// are those of a single-request run (tests/serve).
//
// Waiting requests sit in a bounded queue: submit() refuses when it is full
// (the HTTP layer answers 429) or the engine is draining (503). A request
// still waiting at its deadline ends with Finish::deadline; a running one that
// reaches it ends then too, with the tokens it has. Thread-safe.
#pragma once
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "core/rng.h"
#include "nn/decoder.h"
#include "nn/gpt.h"
#include "serve/kv_pool.h"
#include "serve/metrics.h"
#include "serve/stream.h"

namespace crucible::serve {

struct EngineOptions {
  int max_batch = 32;     // requests decoding at once
  int max_queue = 64;     // requests waiting for a slot
  int step_tokens = 128;  // rows a step runs (decode rows + prefill chunks)
  int block_tokens = 16;  // positions per KV block
  int kv_blocks = 0;      // 0: enough for max_batch requests of model.seq_len positions
  int32_t eos = -1;       // ends a request when drawn (-1: none)
};

enum class Admit { queued, queue_full, draining };

class Engine {
 public:
  // `model` must outlive the engine. Packs the weights, allocates the KV pool
  // and creates every GEMM primitive a step can use, on the calling thread,
  // which should be the one that then calls run(): OpenMP keeps a pool of
  // workers per thread that opens parallel regions, and two pools on two
  // cores (the model loaded or the weights packed on one thread, the steps
  // run on another) made a one-row step 2-4x slower here.
  Engine(const nn::GPT& model, const EngineOptions& options, ServeMetrics* metrics);
  ~Engine();  // stop()s; a run() must have returned

  // The engine's loop: steps while there is work, sleeps while there is none,
  // returns after stop(); every request still queued or running then ends
  // with Finish::shutdown.
  void run();
  void stop();

  Admit submit(std::shared_ptr<Stream> stream);
  // Stops admitting (submit answers draining) and returns when every request
  // queued or running has ended.
  void drain();

  size_t kv_bytes() const { return pool_->bytes(); }
  const EngineOptions& options() const { return opt_; }

 private:
  struct Slot {
    std::shared_ptr<Stream> stream;
    std::vector<int32_t> blocks;  // block table
    int prefilled = 0;            // prompt tokens in the cache
    int generated = 0;            // tokens drawn
    int32_t last = 0;             // the newest token, the next row to decode
    Rng rng{0, 0};
    SteadyTime last_token{};
  };
  // Under mu_: ends queued requests past their deadline, admits what fits.
  void admit_locked(SteadyTime now);
  // Ends slot i (frees its blocks) and removes it from running_.
  void retire(size_t i, Finish why);
  void step();

  EngineOptions opt_;
  ServeMetrics* metrics_;
  int seq_len_;
  std::unique_ptr<nn::Decoder> decoder_;
  std::unique_ptr<KvBlockPool> pool_;

  std::mutex mu_;
  std::condition_variable cv_;     // work arrived / stop
  std::condition_variable idle_;   // queue and batch became empty
  std::deque<std::shared_ptr<Stream>> queue_;
  bool draining_ = false, stop_ = false;
  size_t running_count_ = 0;       // running_.size(), readable under mu_

  std::vector<Slot> running_;      // run()'s own
  std::vector<nn::DecodeSeq> seqs_;
  std::vector<int> seq_slot_;      // seqs_[j] belongs to running_[seq_slot_[j]]
  std::vector<Finish> ends_;       // per running slot, this step
};

}  // namespace crucible::serve

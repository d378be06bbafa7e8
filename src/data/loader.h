// Loader: deterministic, resumable, prefetching batches of (tokens, targets)
// from a TokenShard. What it returns is a pure function of (shard, seq_len,
// batch, world, accum, seed, shuffle, rank, position), so a resumed run and an
// uninterrupted one see the same data.
//
// Order (the contract; tests/data/loader_test.cc recomputes it naively):
//  - Samples. The shard's n tokens are cut into S = floor((n-1)/T) samples of
//    T+1 tokens; sample s is tokens [s*T, s*T + T] (the last token of a sample
//    is the first of the next). Its row of `tokens` is [s*T, s*T+T), its row of
//    `targets` is [s*T+1, s*T+T+1): targets are tokens shifted by one.
//  - Epoch order. epoch_order(): a permutation of [0, S), the identity when
//    shuffle = false, else Fisher–Yates: order = identity; for i = S-1 .. 1:
//    j = uniform index in [0, i], swap(order[i], order[j]); draws come from
//    Rng(seed, kLoaderRngStream + epoch). A uniform index in [0, m) takes two
//    next_u32() draws x = (first << 32) | second, rejects x >= m*floor((2^64-1)/m)
//    (and draws again), else is x % m.
//  - Steps. One optimizer step consumes a global batch of G = batch*world*accum
//    samples: step g of an epoch takes order[g*G, (g+1)*G). Micro-batch m of
//    rank r takes the `batch` samples order[g*G + (m*world + r)*batch, +batch),
//    in that order as rows. The set of samples of a step is thus independent of
//    how it is split over ranks and micro-batches.
//  - Epochs. An epoch has floor(S / G) steps; leftover samples are dropped and
//    the next epoch starts with a fresh permutation.
//
// Thread-safety: a Loader owns one background thread that prepares the next
// micro-batch while the caller trains. next() and restore() must be called from
// one thread at a time (the training loop); state() may be called from any.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <nlohmann/json_fwd.hpp>
#include <thread>
#include <vector>

#include "core/hash.h"
#include "core/status.h"
#include "data/shard.h"

namespace crucible::data {

struct LoaderConfig {
  int batch = 8;      // B: sequences per micro-batch on this rank
  int seq_len = 256;  // T
  uint64_t seed = 0;
  int rank = 0, world = 1;  // data-parallel position
  int accum = 1;            // micro-batches per optimizer step on each rank
  bool shuffle = true;      // false: samples in file order (validation)
};

// Position in the data, identical on every rank (checkpoint manifests store it).
struct LoaderState {
  uint64_t epoch = 0;
  uint64_t step = 0;   // optimizer steps consumed within this epoch
  uint64_t micro = 0;  // micro-batches consumed within the current step on this rank
  bool operator==(const LoaderState&) const = default;
};

nlohmann::json to_json(const LoaderState& s);  // {"epoch": e, "step": g, "micro": m}
Result<LoaderState> loader_state_from_json(const nlohmann::json& j);

// The Rng stream of epoch e is kLoaderRngStream + e.
inline constexpr uint64_t kLoaderRngStream = fnv1a64("crucible.data.loader");

// Writes epoch `epoch`'s sample order (see above) into order[0, samples);
// resizes `order` only if it is too small.
void epoch_order(uint64_t samples, uint64_t seed, uint64_t epoch, bool shuffle,
                 std::vector<uint64_t>& order);

class Loader {
 public:
  // Fails on an impossible config or when the shard holds fewer than one global
  // batch of samples.
  static Result<std::unique_ptr<Loader>> create(std::shared_ptr<const TokenShard> shard,
                                                const LoaderConfig& cfg);
  ~Loader();  // stops and joins the background thread
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  // tokens, targets: (B,T) int32 row-major. Blocks until the micro-batch at
  // state() is ready, copies it out and advances. Returns the seconds spent
  // waiting for it (the step's "data wait"; ~0 when prefetch kept up).
  double next(int32_t* tokens, int32_t* targets);

  // The position of the micro-batch the next next() returns (not of what the
  // background thread has prefetched).
  LoaderState state() const;
  // Subsequent next() calls return exactly what they would after reaching `s`;
  // any prefetched batch is discarded. Fails, changing nothing, when `s` is not
  // a position of this config (micro >= accum, or step >= steps_per_epoch(),
  // e.g. a checkpoint from another shard or batch size).
  Status restore(const LoaderState& s);

  uint64_t samples_per_epoch() const { return samples_; }  // S
  uint64_t steps_per_epoch() const { return steps_per_epoch_; }
  const LoaderConfig& config() const { return cfg_; }

 private:
  Loader(std::shared_ptr<const TokenShard> shard, const LoaderConfig& cfg);
  LoaderState advance(LoaderState s) const;
  void prefetch_loop();               // the background thread
  void fill(const LoaderState& pos);  // background thread only: staging <- batch at pos

  const std::shared_ptr<const TokenShard> shard_;
  const LoaderConfig cfg_;
  const uint64_t samples_;          // S
  const uint64_t global_batch_;     // G = B * world * accum
  const uint64_t steps_per_epoch_;  // floor(S / G)

  // Owned by the background thread.
  std::vector<uint64_t> order_;  // (S) sample order of epoch order_epoch_
  uint64_t order_epoch_ = UINT64_MAX;

  // The staging buffers, each (B,T): written by the background thread while
  // !ready_, read by next() while ready_.
  std::vector<int32_t> staged_tokens_, staged_targets_;

  mutable std::mutex mu_;
  std::condition_variable ready_cv_;   // the staged batch became ready
  std::condition_variable wanted_cv_;  // staging became free, or stop
  LoaderState pos_;                    // guarded: what next() returns next
  bool ready_ = false;                 // guarded: staging holds the batch at pos_
  uint64_t generation_ = 0;  // guarded: bumped by restore(); a fill of an older one is dropped
  bool stop_ = false;        // guarded

  std::thread thread_;  // last member: started after everything above exists
};

}  // namespace crucible::data

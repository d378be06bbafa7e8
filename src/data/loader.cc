#include "data/loader.h"

#include <cstring>
#include <nlohmann/json.hpp>
#include <utility>

#include "core/threads.h"
#include "core/check.h"
#include "core/clock.h"
#include "core/rng.h"

namespace crucible::data {
namespace {

// Uniform in [0, m) without modulo bias (the rule is part of the order contract).
uint64_t uniform_below(Rng& rng, uint64_t m) {
  const uint64_t limit = m * (UINT64_MAX / m);
  for (;;) {
    uint64_t hi = rng.next_u32();
    uint64_t x = (hi << 32) | rng.next_u32();
    if (x < limit) return x % m;
  }
}

std::string state_str(const LoaderState& s) {
  return "{epoch " + std::to_string(s.epoch) + ", step " + std::to_string(s.step) + ", micro " +
         std::to_string(s.micro) + "}";
}

}  // namespace

nlohmann::json to_json(const LoaderState& s) {
  return nlohmann::json{{"epoch", s.epoch}, {"step", s.step}, {"micro", s.micro}};
}

Result<LoaderState> loader_state_from_json(const nlohmann::json& j) {
  if (!j.is_object()) return Status::invalid("[data] loader state: expected a JSON object");
  LoaderState s;
  for (auto [key, field] :
       {std::pair{"epoch", &s.epoch}, std::pair{"step", &s.step}, std::pair{"micro", &s.micro}}) {
    auto it = j.find(key);
    if (it == j.end())
      return Status::invalid(std::string("[data] loader state: missing '") + key + "'");
    if (it->is_number_unsigned()) {
      *field = it->get<uint64_t>();
    } else if (it->is_number_integer() && it->get<int64_t>() >= 0) {
      *field = uint64_t(it->get<int64_t>());
    } else {
      return Status::invalid(std::string("[data] loader state: '") + key +
                             "' must be a non-negative integer, got " + it->dump());
    }
  }
  return s;
}

void epoch_order(uint64_t samples, uint64_t seed, uint64_t epoch, bool shuffle,
                 std::vector<uint64_t>& order) {
  if (order.size() < samples) order.resize(samples);
  for (uint64_t i = 0; i < samples; ++i) order[i] = i;
  if (!shuffle) return;
  Rng rng(seed, kLoaderRngStream + epoch);
  for (uint64_t i = samples; i-- > 1;) std::swap(order[i], order[uniform_below(rng, i + 1)]);
}

Result<std::unique_ptr<Loader>> Loader::create(std::shared_ptr<const TokenShard> shard,
                                               const LoaderConfig& cfg) {
  if (!shard) return Status::invalid("[data] loader: no shard");
  if (cfg.batch < 1 || cfg.seq_len < 1 || cfg.accum < 1 || cfg.world < 1)
    return Status::invalid("[data] loader: batch " + std::to_string(cfg.batch) + ", seq_len " +
                           std::to_string(cfg.seq_len) + ", accum " + std::to_string(cfg.accum) +
                           " and world " + std::to_string(cfg.world) + " must all be >= 1");
  if (cfg.rank < 0 || cfg.rank >= cfg.world)
    return Status::invalid("[data] loader: rank " + std::to_string(cfg.rank) +
                           " is outside [0, world " + std::to_string(cfg.world) + ")");
  const uint64_t T = uint64_t(cfg.seq_len);
  const uint64_t n = shard->size();
  const uint64_t samples = n == 0 ? 0 : (n - 1) / T;
  const uint64_t global = uint64_t(cfg.batch) * uint64_t(cfg.world) * uint64_t(cfg.accum);
  if (samples < global)
    return Status::invalid(
        "[data] shard " + shard->path() +
        ": too small for one global batch: " + std::to_string(global) + " samples (batch " +
        std::to_string(cfg.batch) + " x world " + std::to_string(cfg.world) + " x accum " +
        std::to_string(cfg.accum) + ") of seq_len " + std::to_string(T) + " need " +
        std::to_string(global * T + 1) + " tokens, the shard has " + std::to_string(n));
  return std::unique_ptr<Loader>(new Loader(std::move(shard), cfg));
}

Loader::Loader(std::shared_ptr<const TokenShard> shard, const LoaderConfig& cfg)
    : shard_(std::move(shard)),
      cfg_(cfg),
      samples_((shard_->size() - 1) / uint64_t(cfg.seq_len)),
      global_batch_(uint64_t(cfg.batch) * uint64_t(cfg.world) * uint64_t(cfg.accum)),
      steps_per_epoch_(samples_ / global_batch_),
      order_(samples_),
      staged_tokens_(size_t(cfg.batch) * size_t(cfg.seq_len)),
      staged_targets_(size_t(cfg.batch) * size_t(cfg.seq_len)),
      thread_([this] { prefetch_loop(); }) {}

Loader::~Loader() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  wanted_cv_.notify_one();
  thread_.join();
}

LoaderState Loader::advance(LoaderState s) const {
  if (++s.micro < uint64_t(cfg_.accum)) return s;
  s.micro = 0;
  if (++s.step < steps_per_epoch_) return s;
  s.step = 0;
  ++s.epoch;
  return s;
}

double Loader::next(int32_t* tokens, int32_t* targets) {
  Stopwatch waited;
  std::unique_lock<std::mutex> lk(mu_);
  ready_cv_.wait(lk, [&] { return ready_; });
  const double seconds = waited.elapsed_s();
  lk.unlock();
  // While ready_, the background thread leaves staging alone, and only this
  // (the consumer) thread clears ready_: the copy needs no lock.
  const size_t bytes = staged_tokens_.size() * sizeof(int32_t);
  std::memcpy(tokens, staged_tokens_.data(), bytes);
  std::memcpy(targets, staged_targets_.data(), bytes);
  lk.lock();
  ready_ = false;
  pos_ = advance(pos_);
  lk.unlock();
  wanted_cv_.notify_one();
  return seconds;
}

LoaderState Loader::state() const {
  std::lock_guard<std::mutex> lk(mu_);
  return pos_;
}

Status Loader::restore(const LoaderState& s) {
  if (s.micro >= uint64_t(cfg_.accum) || s.step >= steps_per_epoch_)
    return Status::invalid("[data] loader: cannot restore position " + state_str(s) +
                           ": an epoch of " + shard_->path() + " has " +
                           std::to_string(steps_per_epoch_) + " steps of " +
                           std::to_string(cfg_.accum) +
                           " micro-batches (was the shard, batch, world or accum changed?)");
  {
    std::lock_guard<std::mutex> lk(mu_);
    pos_ = s;
    ready_ = false;  // a prefetched batch is for the old position
    ++generation_;   // and so is a fill in progress
  }
  wanted_cv_.notify_one();
  return Status::ok();
}

void Loader::prefetch_loop() {
  block_stop_signals_in_this_thread();
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    wanted_cv_.wait(lk, [&] { return stop_ || !ready_; });
    if (stop_) return;
    const LoaderState pos = pos_;
    const uint64_t generation = generation_;
    lk.unlock();
    fill(pos);
    lk.lock();
    if (generation == generation_) {  // else restore() moved on: fill the new position
      ready_ = true;
      ready_cv_.notify_one();
    }
  }
}

void Loader::fill(const LoaderState& pos) {
  if (pos.epoch != order_epoch_) {
    epoch_order(samples_, cfg_.seed, pos.epoch, cfg_.shuffle, order_);
    order_epoch_ = pos.epoch;
  }
  const size_t T = size_t(cfg_.seq_len);
  const uint64_t first =
      pos.step * global_batch_ +
      (pos.micro * uint64_t(cfg_.world) + uint64_t(cfg_.rank)) * uint64_t(cfg_.batch);
  CRUCIBLE_CHECK(first + uint64_t(cfg_.batch) <= samples_, "micro-batch within the epoch");
  for (size_t b = 0; b < size_t(cfg_.batch); ++b) {
    const size_t start = size_t(order_[first + b]) * T;
    shard_->copy(start, T, staged_tokens_.data() + b * T);
    shard_->copy(start + 1, T, staged_targets_.data() + b * T);
  }
}

}  // namespace crucible::data

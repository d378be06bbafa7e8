#include "serve/engine.h"

#include <algorithm>
#include <utility>

#include "core/check.h"
#include "nn/sampler.h"

namespace crucible::serve {
namespace {

int default_blocks(const EngineOptions& o, int seq_len) {
  return o.max_batch * ((seq_len + o.block_tokens - 1) / o.block_tokens);
}

}  // namespace

Engine::Engine(const nn::GPT& model, const EngineOptions& options, ServeMetrics* metrics)
    : opt_(options), metrics_(metrics), seq_len_(model.config().seq_len) {
  decoder_ = std::make_unique<nn::Decoder>(model, std::max(opt_.step_tokens, opt_.max_batch), opt_.max_batch,
                                           /*pack_weights=*/true);
  pool_ = std::make_unique<KvBlockPool>(opt_.kv_blocks > 0 ? opt_.kv_blocks : default_blocks(opt_, seq_len_),
                                        opt_.block_tokens, decoder_->block_floats(opt_.block_tokens));
  CRUCIBLE_CHECK(pool_->blocks_total() >= pool_->blocks_for(seq_len_),
                 "[serve] the KV pool must hold one request of model.seq_len positions");
  if (metrics_) metrics_->kv_blocks(0, pool_->blocks_total());
  decoder_->warm_up();
  running_.reserve(size_t(opt_.max_batch));
  seqs_.reserve(size_t(opt_.max_batch));
  seq_slot_.reserve(size_t(opt_.max_batch));
}

Engine::~Engine() { stop(); }

void Engine::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
}

Admit Engine::submit(std::shared_ptr<Stream> stream) {
  CRUCIBLE_CHECK(!stream->prompt.empty() && stream->max_tokens >= 1 &&
                     int(stream->prompt.size()) + stream->max_tokens <= seq_len_ + 1,
                 "[serve] Engine::submit: a request that does not fit the context");
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (draining_ || stop_) return Admit::draining;
    // max_batch running and max_queue waiting, counted as one capacity: a
    // request queued for a slot that is free (the engine takes it at its next
    // step) is not yet running, and must not make the next one wait less or
    // be refused sooner depending on when that step comes.
    const int free_slots = std::max(0, opt_.max_batch - int(running_count_));
    if (int(queue_.size()) >= opt_.max_queue + free_slots) return Admit::queue_full;
    queue_.push_back(std::move(stream));
    if (metrics_) metrics_->queue_depth(int(queue_.size()));
  }
  cv_.notify_all();
  return Admit::queued;
}

void Engine::drain() {
  std::unique_lock<std::mutex> lock(mu_);
  draining_ = true;
  idle_.wait(lock, [&] { return stop_ || (queue_.empty() && running_count_ == 0); });
}

void Engine::admit_locked(SteadyTime now) {
  for (auto it = queue_.begin(); it != queue_.end();) {
    Finish why = (*it)->cancelled() ? Finish::cancelled : now >= (*it)->deadline ? Finish::deadline : Finish::none;
    if (why == Finish::none) {
      ++it;
      continue;
    }
    (*it)->end(why);
    if (metrics_) metrics_->request_ended(why);
    it = queue_.erase(it);
  }
  // First come, first served: the head waits for blocks rather than being
  // overtaken by smaller requests forever.
  while (!queue_.empty() && int(running_.size()) < opt_.max_batch) {
    const Stream& s = *queue_.front();
    const int positions = int(s.prompt.size()) + s.max_tokens - 1;
    Slot slot;
    slot.blocks.reserve(size_t(pool_->blocks_for(positions)));
    if (!pool_->take(pool_->blocks_for(positions), slot.blocks)) break;
    slot.stream = std::move(queue_.front());
    queue_.pop_front();
    slot.rng = Rng(slot.stream->seed, 0x6e6e);  // as `crucible generate --seed`
    running_.push_back(std::move(slot));
    if (metrics_) metrics_->kv_blocks(pool_->blocks_total() - pool_->blocks_free(), pool_->blocks_total());
  }
  if (metrics_) metrics_->queue_depth(int(queue_.size()));
}

void Engine::retire(size_t i, Finish why) {
  running_[i].stream->end(why);
  if (metrics_) metrics_->request_ended(why);
  pool_->give_back(running_[i].blocks);
  running_[i] = std::move(running_.back());
  running_.pop_back();
  if (metrics_) metrics_->kv_blocks(pool_->blocks_total() - pool_->blocks_free(), pool_->blocks_total());
}

void Engine::run() {
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (stop_) break;
      admit_locked(std::chrono::steady_clock::now());
      running_count_ = running_.size();
      if (running_.empty()) {
        if (queue_.empty()) idle_.notify_all();
        // Wake for new work, or at the soonest queued deadline.
        if (queue_.empty()) cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        continue;
      }
    }
    step();
  }
  // Shutting down: nothing more is computed.
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& s : queue_) s->end(Finish::shutdown);
  queue_.clear();
  while (!running_.empty()) retire(running_.size() - 1, Finish::shutdown);
  running_count_ = 0;
  idle_.notify_all();
}

void Engine::step() {
  const auto t0 = std::chrono::steady_clock::now();
  for (size_t i = running_.size(); i-- > 0;) {
    const Stream& s = *running_[i].stream;
    if (s.cancelled()) retire(i, Finish::cancelled);
    else if (t0 >= s.deadline) retire(i, Finish::deadline);
  }
  if (running_.empty()) return;
  // Decoding rows first: the running streams' next tokens never wait for a
  // prompt. Then prompt chunks with the rows left.
  seqs_.clear();
  seq_slot_.clear();
  int rows = 0;
  for (size_t i = 0; i < running_.size(); ++i) {
    Slot& s = running_[i];
    const int P = int(s.stream->prompt.size());
    if (s.prefilled < P) continue;
    seqs_.push_back({&s.last, 1, P + s.generated - 1, s.blocks.data(), true});
    seq_slot_.push_back(int(i));
    ++rows;
  }
  const int decode_rows = rows;
  for (size_t i = 0; i < running_.size() && rows < decoder_->max_rows(); ++i) {
    Slot& s = running_[i];
    const int P = int(s.stream->prompt.size());
    if (s.prefilled >= P) continue;
    const int n = std::min(P - s.prefilled, decoder_->max_rows() - rows);
    seqs_.push_back({s.stream->prompt.data() + s.prefilled, n, s.prefilled, s.blocks.data(),
                     s.prefilled + n == P});
    seq_slot_.push_back(int(i));
    rows += n;
  }
  const float* logits = decoder_->forward(seqs_.data(), int(seqs_.size()), pool_->view());
  const auto t1 = std::chrono::steady_clock::now();

  const int V = decoder_->config().vocab_size;
  std::vector<Finish>& ends = ends_;
  ends.assign(running_.size(), Finish::none);
  int k = 0, drawn = 0;
  for (size_t j = 0; j < seqs_.size(); ++j) {
    Slot& s = running_[size_t(seq_slot_[j])];
    if (j >= size_t(decode_rows)) s.prefilled += seqs_[j].n;
    if (!seqs_[j].logits) continue;
    Stream& st = *s.stream;
    const int Vs = st.sampling.vocab > 0 ? std::min(st.sampling.vocab, V) : V;
    const int32_t tok = nn::sample_token(logits + size_t(k++) * V, Vs, st.sampling, s.rng);
    ++drawn;
    s.last = tok;
    ++s.generated;
    st.push(tok);
    if (metrics_) {
      const double dt = std::chrono::duration<double>(t1 - (s.generated == 1 ? st.arrival : s.last_token)).count();
      if (s.generated == 1) metrics_->first_token(dt);
      else metrics_->inter_token(dt);
    }
    s.last_token = t1;
    if (tok == opt_.eos && !st.ignore_eos) ends[size_t(seq_slot_[j])] = Finish::stop;
    else if (s.generated >= st.max_tokens) ends[size_t(seq_slot_[j])] = Finish::length;
  }
  for (size_t i = running_.size(); i-- > 0;)
    if (ends[i] != Finish::none) retire(i, ends[i]);
  if (metrics_) {
    metrics_->step(int(seqs_.size()), rows, drawn, std::chrono::duration<double>(t1 - t0).count());
  }
}

}  // namespace crucible::serve

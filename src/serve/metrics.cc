#include "serve/metrics.h"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <chrono>
#include <deque>
#include <mutex>
#include <utility>

namespace crucible::serve {

namespace pm = prometheus;

struct ServeMetrics::Impl {
  std::shared_ptr<pm::Registry> registry = std::make_shared<pm::Registry>();
  pm::Labels labels;
  pm::Gauge *queue = nullptr, *batch = nullptr, *rows = nullptr, *kv_used = nullptr,
            *kv_total = nullptr, *tps = nullptr;
  pm::Histogram *ttft = nullptr, *itl = nullptr, *step = nullptr, *step_seqs = nullptr;
  pm::Counter *generated = nullptr, *prompt = nullptr;
  pm::Family<pm::Counter>* requests = nullptr;
  // Tokens drawn per step in the last 5 s, for the tokens/s gauge.
  std::mutex mu;
  std::deque<std::pair<std::chrono::steady_clock::time_point, int>> window;
  int window_tokens = 0;

  pm::Gauge* gauge(const std::string& name, const std::string& help) {
    return &pm::BuildGauge().Name(name).Help(help).Register(*registry).Add(labels);
  }
  pm::Counter* counter(const std::string& name, const std::string& help) {
    return &pm::BuildCounter().Name(name).Help(help).Register(*registry).Add(labels);
  }
  pm::Histogram* histogram(const std::string& name, const std::string& help,
                           pm::Histogram::BucketBoundaries b) {
    return &pm::BuildHistogram().Name(name).Help(help).Register(*registry).Add(labels, std::move(b));
  }
  // Drops steps older than 5 s and sets the gauge (mu held).
  void refresh_tps(std::chrono::steady_clock::time_point now) {
    while (!window.empty() && now - window.front().first > std::chrono::seconds(5)) {
      window_tokens -= window.front().second;
      window.pop_front();
    }
    const double span = window.empty() ? 0.0 : std::chrono::duration<double>(now - window.front().first).count();
    tps->Set(span > 0 ? window_tokens / span : 0.0);
  }
  void request(const char* outcome) {
    pm::Labels l = labels;
    l["outcome"] = outcome;
    requests->Add(l).Increment();
  }
};

ServeMetrics::ServeMetrics(const std::string& model) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.labels = {{"model", model}};
  m.queue = m.gauge("crucible_serve_queue_depth", "Requests waiting for a slot");
  m.batch = m.gauge("crucible_serve_batch_size", "Requests in the last engine step");
  m.rows = m.gauge("crucible_serve_step_rows", "Token rows in the last engine step (decode + prefill)");
  m.kv_used = m.gauge("crucible_serve_kv_blocks_used", "KV-cache blocks held by running requests");
  m.kv_total = m.gauge("crucible_serve_kv_blocks_total", "KV-cache blocks in the pool");
  m.tps = m.gauge("crucible_serve_tokens_per_second", "Tokens generated per second over the last 5 s");
  const pm::Histogram::BucketBoundaries latency{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                                0.25,  0.5,    1,     2.5,  5,     10};
  m.ttft = m.histogram("crucible_serve_time_to_first_token_seconds",
                       "From a request's arrival to its first token", latency);
  m.itl = m.histogram("crucible_serve_inter_token_latency_seconds",
                      "Between consecutive tokens of a request", latency);
  m.step = m.histogram("crucible_serve_step_seconds", "One engine step (a batched forward)", latency);
  m.step_seqs = m.histogram("crucible_serve_step_sequences", "Requests an engine step ran together",
                            {1, 2, 4, 8, 16, 32, 64, 128, 256});
  m.generated = m.counter("crucible_serve_generated_tokens_total", "Tokens generated");
  m.prompt = m.counter("crucible_serve_prompt_tokens_total", "Prompt tokens of admitted requests");
  m.requests = &pm::BuildCounter()
                    .Name("crucible_serve_requests_total")
                    .Help("Requests by outcome: length, stop, cancelled (client gone), deadline, "
                          "shutdown, queue_full (429), draining (503), bad_request (400)")
                    .Register(*m.registry);
}

ServeMetrics::~ServeMetrics() = default;

void ServeMetrics::queue_depth(int n) { impl_->queue->Set(n); }
void ServeMetrics::kv_blocks(int used, int total) {
  impl_->kv_used->Set(used);
  impl_->kv_total->Set(total);
}
void ServeMetrics::first_token(double s) { impl_->ttft->Observe(s); }
void ServeMetrics::inter_token(double s) { impl_->itl->Observe(s); }
void ServeMetrics::prompt_tokens(int n) { impl_->prompt->Increment(n); }
void ServeMetrics::request_ended(Finish why) { impl_->request(finish_name(why)); }
void ServeMetrics::rejected(const char* why) { impl_->request(why); }

void ServeMetrics::step(int seqs, int rows, int tokens, double seconds) {
  Impl& m = *impl_;
  m.batch->Set(seqs);
  m.rows->Set(rows);
  m.step->Observe(seconds);
  m.step_seqs->Observe(seqs);
  m.generated->Increment(tokens);
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lock(m.mu);
  m.window.emplace_back(now, tokens);
  m.window_tokens += tokens;
  m.refresh_tps(now);
}

std::string ServeMetrics::render() {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->refresh_tps(std::chrono::steady_clock::now());
  }
  return pm::TextSerializer().Serialize(impl_->registry->Collect());
}

}  // namespace crucible::serve

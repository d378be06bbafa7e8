#include "nn/sampler.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include "core/check.h"

namespace crucible::nn {
namespace {

int32_t argmax(const float* logits, int V) {
  int32_t best = 0;
  for (int i = 1; i < V; ++i)
    if (logits[i] > logits[best]) best = i;  // strict: the lowest index wins ties
  return best;
}

}  // namespace

int32_t sample_token(const float* logits, int V, const SamplingConfig& cfg, Rng& rng) {
  CRUCIBLE_CHECK(V >= 1, "[nn] sample_token needs at least one logit");
  if (cfg.temperature <= 0.0f) return argmax(logits, V);
  const float u = rng.uniform();  // exactly one draw per sampled token
  const int k = (cfg.top_k <= 0 || cfg.top_k >= V) ? V : cfg.top_k;
  if (k == 1) return argmax(logits, V);

  // weight (V): the unnormalised probability of each token, 0 outside the top k.
  thread_local std::vector<float> weight;
  weight.resize(size_t(V));
  float threshold = -INFINITY;  // the k-th largest logit
  int at_threshold = V;         // how many logits equal to it may still be kept
  if (k < V) {
    std::copy(logits, logits + V, weight.begin());
    std::nth_element(weight.begin(), weight.begin() + (k - 1), weight.end(), std::greater<>());
    threshold = weight[size_t(k - 1)];
    int above = 0;
    for (int i = 0; i < V; ++i) above += logits[i] > threshold;
    at_threshold = k - above;
  }
  float mx = -INFINITY;
  for (int i = 0; i < V; ++i) mx = std::max(mx, logits[i]);
  // exp((l - max) / T): the largest weight is 1, so nothing overflows.
  const float inv_t = 1.0f / cfg.temperature;
  double total = 0;
  for (int i = 0; i < V; ++i) {
    bool keep = logits[i] > threshold || (logits[i] == threshold && at_threshold-- > 0);
    weight[size_t(i)] = keep ? std::exp((logits[i] - mx) * inv_t) : 0.0f;
    total += weight[size_t(i)];
  }
  // Inverse CDF in index order.
  const double target = double(u) * total;
  double cum = 0;
  int32_t last_kept = 0;
  for (int i = 0; i < V; ++i) {
    if (weight[size_t(i)] == 0.0f) continue;
    cum += weight[size_t(i)];
    last_kept = i;
    if (target < cum) return i;
  }
  return last_kept;  // u * total rounded up to the sum
}

}  // namespace crucible::nn

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

// Zeroes every weight outside the nucleus: the fewest largest weights (ties
// towards the lower index) whose sum reaches top_p * total. Returns the new
// total. Sorts only as many candidates as it needs: the largest m by
// nth_element, doubling m until they reach the mass (a peaked distribution
// stops at the first 64).
double keep_nucleus(std::vector<float>& weight, double total, float top_p) {
  thread_local std::vector<int32_t> order;
  order.clear();
  for (int32_t i = 0; i < int32_t(weight.size()); ++i)
    if (weight[size_t(i)] > 0.0f) order.push_back(i);
  auto larger = [&](int32_t a, int32_t b) {
    return weight[size_t(a)] > weight[size_t(b)] || (weight[size_t(a)] == weight[size_t(b)] && a < b);
  };
  const double want = double(top_p) * total;
  size_t kept = order.size();
  for (size_t m = 64;; m *= 2) {
    m = std::min(m, order.size());
    std::nth_element(order.begin(), order.begin() + (m - 1), order.end(), larger);
    std::sort(order.begin(), order.begin() + m, larger);
    double cum = 0;
    size_t i = 0;
    while (i < m && cum < want) cum += weight[size_t(order[i++])];
    if (cum >= want || m == order.size()) {
      kept = std::max<size_t>(i, 1);
      break;
    }
  }
  double new_total = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    if (i < kept) new_total += weight[size_t(order[i])];
    else weight[size_t(order[i])] = 0.0f;
  }
  return new_total;
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
  if (cfg.top_p < 1.0f) total = keep_nucleus(weight, total, cfg.top_p);
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

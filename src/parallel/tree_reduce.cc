#include "parallel/tree_reduce.h"

#include <cstring>

#include "core/check.h"
#include "core/clock.h"

namespace crucible::parallel {

namespace {

void add_into(float* acc, const float* x, size_t n) {
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; ++i) acc[i] += x[i];
}

int log2_exact(int n) {
  int k = 0;
  while ((1 << k) < n) ++k;
  return k;
}

}  // namespace

int bit_reversed(int i, int n) {
  const int bits = log2_exact(n);
  int r = 0;
  for (int b = 0; b < bits; ++b)
    if (i & (1 << b)) r |= 1 << (bits - 1 - b);
  return r;
}

TreeReducer::TreeReducer(comm::Comm& comm, nn::ParamRegistry& params, int accum)
    : comm_(comm), params_(params), accum_(accum) {
  CRUCIBLE_CHECK((accum & (accum - 1)) == 0 && (comm.size() & (comm.size() - 1)) == 0,
                 "[dist] reproducible reduction needs power-of-two accum and world size");
  const int64_t n = int64_t(params.numel());
  for (int i = 0; i <= log2_exact(accum); ++i)
    buffers_.push_back(Tensor::zeros(Shape{n}, DType::f32, "dist.tree"));
  if (comm.size() > 1) recv_ = Tensor::zeros(Shape{n}, DType::f32, "dist.tree_recv");
}

void TreeReducer::add_quantum() {
  const size_t n = params_.numel();
  // A free buffer for the new leaf: the stack holds at most one per level.
  std::vector<bool> used(buffers_.size(), false);
  for (auto [level, idx] : stack_) used[size_t(idx)] = true;
  int slot = 0;
  while (used[size_t(slot)]) ++slot;
  std::memcpy(buffers_[size_t(slot)].f32(), params_.grads(), n * sizeof(float));
  params_.zero_grad();
  int level = 0;
  // Binary counter: equal levels merge (the earlier subtree + the later one).
  while (!stack_.empty() && stack_.back().first == level) {
    int left = stack_.back().second;
    stack_.pop_back();
    add_into(buffers_[size_t(left)].f32(), buffers_[size_t(slot)].f32(), n);
    slot = left;
    ++level;
  }
  stack_.push_back({level, slot});
}

Result<double> TreeReducer::finish() {
  CRUCIBLE_CHECK(stack_.size() == 1, "[dist] every micro-batch of the step was added");
  const size_t n = params_.numel();
  float* g = params_.grads();
  std::memcpy(g, buffers_[size_t(stack_.back().second)].f32(), n * sizeof(float));
  stack_.clear();
  Stopwatch sw;
  for (int d = comm_.size() / 2; d >= 1; d /= 2) {
    const int partner = comm_.rank() ^ d;
    CRUCIBLE_RETURN_IF_ERROR(comm_.sendrecv(g, n * sizeof(float), partner, recv_.f32(),
                                            n * sizeof(float), partner, 7100 + d));
    add_into(g, recv_.f32(), n);
  }
  return sw.elapsed_s();
}

}  // namespace crucible::parallel

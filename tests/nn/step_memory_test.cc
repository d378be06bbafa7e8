// The steady-state training step performs no allocation: after the first
// step, forward + backward + AdamW take nothing from crucible's allocator
// (pool hits included). oneDNN's primitive execute builds a small argument
// map with operator new on every call (inside libdnnl, out of our reach), so
// for the C++ heap the test asserts what matters: every byte newed during a
// step is deleted within it (no growth), and each step news the same amount.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "core/allocator.h"
#include "nn/gpt.h"
#include "optim/adamw.h"

namespace {
std::atomic<long> g_news{0}, g_deletes{0};
}

void* operator new(size_t n) {
  g_news.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept {
  if (p) g_deletes.fetch_add(1, std::memory_order_relaxed);
  std::free(p);
}
void operator delete(void* p, size_t) noexcept {
  if (p) g_deletes.fetch_add(1, std::memory_order_relaxed);
  std::free(p);
}

namespace crucible {
namespace {

TEST(StepMemory, SteadyStateStepAllocatesNothing) {
  nn::GPTConfig cfg{2, 2, 32, 50, 16};
  nn::GPT gpt(cfg);
  gpt.init_weights(1);
  optim::AdamW opt(gpt.params(), optim::AdamWConfig{});
  Arena arena("step.activations");
  const int B = 3, T = 16, accum = 2;
  std::vector<int32_t> tok(B * T), tgt(B * T);
  for (int i = 0; i < B * T; ++i) tok[i] = i % 50, tgt[i] = (i * 7) % 50;
  auto step = [&](int s) {
    gpt.params().zero_grad();
    float loss = 0;
    for (int m = 0; m < accum; ++m) {
      arena.reset();
      loss += gpt.forward(arena, tok.data(), tgt.data(), B, T, 1.0f / accum);
      gpt.backward(arena);
    }
    opt.step(optim::lr_schedule(s, 1e-3f, 2, 10));
    return loss / accum;
  };
  float first = step(0);
  step(1);
  AllocatorStats before = Allocator::global().stats();
  float last = 0;
  std::vector<long> news_per_step;
  for (int s = 2; s < 6; ++s) {
    long n0 = g_news.load(), d0 = g_deletes.load();
    last = step(s);
    long n1 = g_news.load(), d1 = g_deletes.load();
    EXPECT_EQ(n1 - n0, d1 - d0) << "heap objects allocated in step " << s << " outlive it";
    news_per_step.push_back(n1 - n0);
  }
  AllocatorStats after = Allocator::global().stats();
  for (long n : news_per_step) EXPECT_EQ(n, news_per_step[0]) << "heap use varies between steps";
  EXPECT_EQ(after.allocs, before.allocs) << "the pool was asked for memory in a steady-state step";
  EXPECT_EQ(after.os_allocs, before.os_allocs);
  EXPECT_EQ(after.in_use, before.in_use) << "in-use memory grew across steps (a leak)";
  EXPECT_LT(last, first) << "training on one batch should lower its loss";
}

}  // namespace
}  // namespace crucible

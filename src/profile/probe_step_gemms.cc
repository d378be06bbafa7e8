#include "profile/probe_step_gemms.h"

#include <algorithm>
#include <cmath>

#include "core/clock.h"
#include "core/dtype.h"
#include "core/rng.h"
#include "core/threads.h"
#include "kernels/gemm.h"
#include "kernels/kernels.h"
#include "profile/probe_memory.h"

namespace crucible::profile {

namespace {

// One call's operands as kernels::gemm takes them: A stored (m, k), or (k, m)
// when transposed; B (k, n), or (n, k); C (m, n). Inputs f32 or bf16, C f32
// or (a bf16 forward's output) bf16.
struct Operands {
  std::vector<float> a, b, c;
  std::vector<bf16> ah, bh, ch;
};

bool bf16_output(const GemmShape& s, bool half) { return half && s.bf16_out && !s.accumulate; }

size_t call_bytes(const GemmShape& s, bool half) {
  const size_t in = half ? 2 : 4, out = bf16_output(s, half) ? 2 : 4;
  return in * (size_t(s.m) * s.k + size_t(s.k) * s.n) + out * size_t(s.m) * s.n;
}

Operands make_operands(const GemmShape& s, bool half, Rng& rng) {
  Operands o;
  const size_t na = size_t(s.m) * s.k, nb = size_t(s.k) * s.n, nc = size_t(s.m) * s.n;
  auto fill = [&](std::vector<float>& f, std::vector<bf16>& h, size_t n) {
    f.resize(n);
    rng.fill_uniform(f.data(), n, -1, 1);
    if (!half) return;
    h.resize(n);
    for (size_t i = 0; i < n; ++i) h[i] = to_bf16(f[i]);
    std::vector<float>().swap(f);  // the bf16 copy is the operand
  };
  fill(o.a, o.ah, na);
  fill(o.b, o.bh, nb);
  if (bf16_output(s, half)) o.ch.assign(nc, bf16{});
  else o.c.assign(nc, 0.0f);
  return o;
}

void call(const GemmShape& s, bool half, Operands& o) {
  const int lda = s.trans_a ? s.m : s.k, ldb = s.trans_b ? s.k : s.n;
  const DType in = half ? DType::bf16 : DType::f32, out = bf16_output(s, half) ? DType::bf16 : DType::f32;
  const void* A = half ? static_cast<const void*>(o.ah.data()) : o.a.data();
  const void* B = half ? static_cast<const void*>(o.bh.data()) : o.b.data();
  void* C = out == DType::bf16 ? static_cast<void*>(o.ch.data()) : o.c.data();
  kernels::gemm(in, out, s.trans_a, s.trans_b, s.m, s.n, s.k, A, lda, B, ldb, C, s.n, s.accumulate);
}

// The worst of `samples` entries of a clean product against a double
// reference, relative to sum |a||b| (probe_compute.h's check, for strided
// and transposed operands).
double spot_error(const GemmShape& s, bool half, Operands& o, uint64_t seed) {
  if (s.accumulate) std::fill(o.c.begin(), o.c.end(), 0.0f);
  call(s, half, o);
  auto at = [&](const std::vector<float>& f, const std::vector<bf16>& h, size_t i) {
    return half ? double(to_f32(h[i])) : double(f[i]);
  };
  Rng rng(seed, 0x57e9);
  double worst = 0;
  for (int t = 0; t < 16; ++t) {
    const size_t i = rng.next_u32() % uint32_t(s.m), j = rng.next_u32() % uint32_t(s.n);
    double dot = 0, mag = 0;
    for (size_t p = 0; p < size_t(s.k); ++p) {
      const double a = at(o.a, o.ah, s.trans_a ? p * s.m + i : i * s.k + p);
      const double b = at(o.b, o.bh, s.trans_b ? j * s.k + p : p * s.n + j);
      dot += a * b, mag += std::fabs(a * b);
    }
    const double c = o.ch.empty() ? double(o.c[i * s.n + j]) : double(to_f32(o.ch[i * s.n + j]));
    worst = std::max(worst, std::fabs(dot - c) / std::max(mag, 1e-30));
  }
  return worst;
}

}  // namespace

std::vector<nlohmann::json> measure_step_gemms(const StepGemms& step, bool half, int threads, double min_seconds,
                                               double peak_gflops) {
  constexpr int kMinPasses = 5;  // a median of fewer is one stalled pass away from a spike
  const int saved = num_threads();
  set_num_threads(threads);
  const std::vector<StepGemm>& calls = step.calls;
  // Blocks replayed: each its own operands, enough that a block's are gone
  // from the caches when its backward reads them.
  size_t block_bytes = 0;
  for (const StepGemm& c : calls)
    if (c.block) block_bytes += call_bytes(c.call, half);
  const size_t sweep = 4 * std::max<size_t>(last_level_cache_bytes(), size_t(8) << 20);
  const int R = block_bytes == 0 ? 1
                                 : std::clamp(int((sweep + block_bytes - 1) / block_bytes), 1,
                                              std::max(1, step.blocks));
  Rng rng(0x5eb, uint64_t(calls.size()));
  std::vector<std::vector<Operands>> ops(calls.size());
  for (size_t i = 0; i < calls.size(); ++i)
    for (int r = 0; r < (calls[i].block ? R : 1); ++r) ops[i].push_back(make_operands(calls[i].call, half, rng));

  // Each call's time per pass; a call's figure is its median pass: a shared
  // VM's neighbours stall single passes by 2-4x (one row read 29 GFLOP/s
  // against 114 in the next run), and the run's prediction is compared with
  // its median step, which such stalls do not move.
  std::vector<std::vector<double>> per_pass(calls.size());
  std::vector<double> seconds(calls.size(), 0.0);
  auto run_call = [&](size_t i, int r, bool timed) {
    Stopwatch sw;
    call(calls[i].call, half, ops[i][size_t(r)]);
    if (timed) seconds[i] += sw.elapsed_s();
  };
  // One step: the blocks forward, the head (forward, then backward), the
  // blocks backward in reverse; a block's calls in list order.
  auto pass = [&](bool timed) {
    for (int r = 0; r < R; ++r)
      for (size_t i = 0; i < calls.size(); ++i)
        if (calls[i].block && !calls[i].backward) run_call(i, r, timed);
    for (bool backward : {false, true})
      for (size_t i = 0; i < calls.size(); ++i)
        if (!calls[i].block && calls[i].backward == backward) run_call(i, 0, timed);
    for (int r = R - 1; r >= 0; --r)
      for (size_t i = 0; i < calls.size(); ++i)
        if (calls[i].block && calls[i].backward) run_call(i, r, timed);
  };
  pass(false);  // primitives made, pages touched
  Stopwatch total;
  int passes = 0;
  do {
    std::fill(seconds.begin(), seconds.end(), 0.0);
    pass(true);
    for (size_t i = 0; i < calls.size(); ++i) per_pass[i].push_back(seconds[i]);
    ++passes;
  } while (passes < kMinPasses || (passes < 10 && total.elapsed_s() < min_seconds));
  for (size_t i = 0; i < calls.size(); ++i) {
    std::vector<double>& v = per_pass[i];
    std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
    seconds[i] = v[v.size() / 2] * passes;  // as if every pass took the median's time
  }

  // Per planner shape: the flops of its calls over their time, in order of first appearance.
  struct Key {
    int m, n, k;
    double flops = 0, seconds = 0, error = 0;
    bool valid = true;
  };
  std::vector<Key> keys;
  for (size_t i = 0; i < calls.size(); ++i) {
    const StepGemm& c = calls[i];
    auto it = std::find_if(keys.begin(), keys.end(),
                           [&](const Key& q) { return q.m == c.m && q.n == c.n && q.k == c.k; });
    if (it == keys.end()) it = keys.insert(keys.end(), Key{c.m, c.n, c.k});
    const double reps = double(passes) * (c.block ? R : 1);
    it->flops += reps * 2.0 * c.call.m * c.call.n * c.call.k;
    it->seconds += seconds[i];
    const double err = spot_error(c.call, half, ops[i][0], 7 + i);
    // A bf16 output's rounding is 2^-8 of |c| <= sum |a||b|.
    const double tol = bf16_output(c.call, half) ? 1e-2 : half ? 1e-3 : 1e-5;
    it->error = std::max(it->error, err);
    it->valid &= err < tol;
  }
  set_num_threads(saved);
  std::vector<nlohmann::json> rows;
  for (const Key& q : keys) {
    const double gflops = q.flops / std::max(q.seconds, 1e-9) * 1e-9;
    rows.push_back({{"name", "step " + std::to_string(q.m) + "x" + std::to_string(q.n) + "x" + std::to_string(q.k)},
                    {"m", q.m},
                    {"n", q.n},
                    {"k", q.k},
                    {"dtype", half ? "bf16" : "f32"},
                    {"threads", threads},
                    {"gflops", gflops},
                    {"fraction_of_peak", gflops / peak_gflops},
                    {"max_rel_error", q.error},
                    {"valid", q.valid},
                    {"form", nlohmann::json::array({"in_step"})}});
  }
  return rows;
}

nlohmann::json measure_step_attention(const StepAttention& a, bool half, int threads, double min_seconds,
                                      double peak_gflops) {
  const int saved = num_threads();
  set_num_threads(threads);
  const size_t n = size_t(a.B) * a.T * a.C, nl = size_t(a.B) * a.NH * a.T;
  Rng rng(0xa77, n);
  std::vector<float> qkv(3 * n), dout(n), out(n), lse(nl), dqkv(3 * n);
  rng.fill_uniform(qkv.data(), qkv.size(), -1, 1);
  rng.fill_uniform(dout.data(), dout.size(), -1, 1);
  std::vector<bf16> qkv16, out16, dqkv16;
  if (half) {
    qkv16.resize(3 * n), out16.resize(n), dqkv16.resize(3 * n);
    for (size_t i = 0; i < qkv.size(); ++i) qkv16[i] = to_bf16(qkv[i]);
  }
  auto pass = [&] {
    if (half) {
      kernels::attention_forward_bf16(out16.data(), lse.data(), qkv16.data(), a.B, a.T, a.C, a.NH);
      kernels::attention_backward_bf16(dqkv16.data(), dout.data(), qkv16.data(), out16.data(), lse.data(), a.B, a.T,
                                       a.C, a.NH);
    } else {
      kernels::attention_forward(out.data(), lse.data(), qkv.data(), a.B, a.T, a.C, a.NH);
      kernels::attention_backward(dqkv.data(), dout.data(), qkv.data(), out.data(), lse.data(), a.B, a.T, a.C, a.NH);
    }
  };
  pass();  // first touch
  Stopwatch total;
  int passes = 0;
  do {
    pass();
    ++passes;
  } while (passes < 20 && total.elapsed_s() < min_seconds);
  const double seconds = total.elapsed_s();
  set_num_threads(saved);
  bool finite = true;
  for (size_t i = 0; i < 3 * n; i += 97) finite &= std::isfinite(half ? to_f32(dqkv16[i]) : dqkv[i]);
  const double hs = double(a.C) / a.NH;
  const double flops = 3.5 * 2.0 * a.B * a.NH * double(a.T) * a.T * hs;  // forward 2 B NH T^2 hs, backward 2.5x
  const double gflops = flops * passes / std::max(seconds, 1e-9) * 1e-9;
  return {{"name", "step attention " + std::to_string(a.B) + "x" + std::to_string(a.T) + "x" + std::to_string(a.C) +
                       "x" + std::to_string(a.NH)},
          {"B", a.B},
          {"T", a.T},
          {"C", a.C},
          {"NH", a.NH},
          {"dtype", half ? "bf16" : "f32"},
          {"threads", threads},
          {"gflops", gflops},
          {"fraction_of_peak", gflops / peak_gflops},
          {"valid", finite},
          {"form", nlohmann::json::array({"in_step"})}};
}

bool gemm_row_is_in_step(const nlohmann::json& row) {
  if (!row.is_object() || !row.contains("form") || !row["form"].is_array()) return false;
  const nlohmann::json& form = row["form"];
  return std::find(form.begin(), form.end(), nlohmann::json("in_step")) != form.end();
}

}  // namespace crucible::profile

// attention_paged (contract in signatures.inc): the decode-time attention of
// single query rows over a paged KV cache, compiled once per ISA.
//
// One task per (row, head), dealt out dynamically (rows attend to different
// numbers of keys). A task makes three passes over its row's keys:
//   scores  s_j = q . k_j / sqrt(hs), vectorised along hs, into a per-thread
//           scratch of pos+1 floats;
//   softmax their max, then exp(s_j - max) and the sum, vectorised along keys;
//   values  out = sum_j p_j v_j / sum, vectorised along hs.
// Every sum runs in an order fixed by the row's own length and hs, so a row's
// result is the same whatever rows share the call, and the thread count does
// not matter either. Keys of a block are contiguous (bt rows of C floats),
// values follow them; blocks are wherever the row's table says.
#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "kernels/isa/isa.h"
#include "kernels/isa/vec.h"

namespace crucible::kernels::CRUCIBLE_ISA {
namespace {

constexpr int kMaxHs = 256;

// The lanes' sum by halving (lane i += lane i + w, w = kW/2 .. 1): a fixed
// order like hsum's, in log2(kW) dependent adds instead of kW (the scores
// pass does one per key and head).
inline float hsum_halving(vf v) {
  float t[kW];
  store(t, v);
  for (int w = kW / 2; w >= 1; w /= 2)
    for (int i = 0; i < w; ++i) t[i] += t[i + w];
  return t[0];
}

// q . k over hs floats, vectorised; the tail in a partial vector.
inline float dot(const float* q, const float* k, int hs) {
  vf acc{};
  int c = 0;
  for (; c + kW <= hs; c += kW) acc = fma(load(q + c), load(k + c), acc);
  if (c < hs) acc = fma(load_partial(q + c, hs - c), load_partial(k + c, hs - c), acc);
  return hsum_halving(acc);
}

}  // namespace

void attention_paged(float* out, const float* q, int ldq, const float* kv, size_t block_stride, int bt,
                     const int32_t* const* tables, const int32_t* pos, int R, int C, int NH) {
  const int hs = C / NH;
  CRUCIBLE_CHECK(hs <= kMaxHs && hs * NH == C, "[kernels] attention_paged: head size must divide C, <= 256");
  const float scale = 1.0f / std::sqrt(float(hs));
  double work = 0;
  for (int r = 0; r < R; ++r) work += double(pos[r] + 1) * C;
#pragma omp parallel for schedule(dynamic, 1) if (work > 65536.0)
  for (int t = 0; t < R * NH; ++t) {
    const int r = t / NH, h = t % NH, n = pos[r] + 1;
    const int32_t* table = tables[r];
    auto key = [&](int s) {
      return kv + size_t(table[s / bt]) * block_stride + size_t(s % bt) * C + size_t(h) * hs;
    };
    float* sc = thread_scratch<2>(size_t(n) + kW);
    const float* qh = q + size_t(r) * ldq + size_t(h) * hs;
    for (int s = 0; s < n; ++s) sc[s] = dot(qh, key(s), hs) * scale;
    vf vm = splat(-INFINITY);
    int s = 0;
    for (; s + kW <= n; s += kW) vm = vmax(vm, load(sc + s));
    if (s < n) vm = vmax(vm, load_partial(sc + s, n - s, -INFINITY));
    const vf mx = splat(hmax(vm));
    vf vsum{};
    for (s = 0; s + kW <= n; s += kW) {
      const vf e = vexp(load(sc + s) - mx);
      store(sc + s, e);
      vsum += e;
    }
    if (s < n) {
      const vf e = vexp(load_partial(sc + s, n - s, -INFINITY) - mx);  // exp(-inf) = 0
      store_partial(sc + s, e, n - s);
      vsum += e;
    }
    const float inv = 1.0f / hsum(vsum);
    float acc[kMaxHs + kW];
    std::fill(acc, acc + hs, 0.0f);
    for (s = 0; s < n; ++s) {
      const vf p = splat(sc[s]);
      const float* v = key(s) + size_t(bt) * C;
      int c = 0;
      for (; c + kW <= hs; c += kW) store(acc + c, fma(p, load(v + c), load(acc + c)));
      for (; c < hs; ++c) acc[c] += sc[s] * v[c];
    }
    float* o = out + size_t(r) * C + size_t(h) * hs;
    for (int c = 0; c < hs; ++c) o[c] = acc[c] * inv;
  }
}

}  // namespace crucible::kernels::CRUCIBLE_ISA

#include "kernels/gemm.h"

#include <algorithm>
#include <map>
#include <unordered_map>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <tuple>

#include "core/allocator.h"
#include "core/check.h"
#include "core/kernel_stats.h"

namespace crucible::kernels {
namespace {

using Key = std::tuple<bool, bool, int, int, int, int, int, int, bool, bool, bool>;

struct Entry {
  dnnl::matmul prim;
  dnnl::memory a, b, c, bias;
  size_t scratch_bytes;
  // Built once; executing repeats only set_data_handle, so a cached call
  // allocates nothing on crucible's side.
  std::unordered_map<int, dnnl::memory> args;
  void* scratch_bound = nullptr;
};

struct Gemm {
  dnnl::engine eng{dnnl::engine::kind::cpu, 0};
  dnnl::stream strm{eng};
  std::mutex mu;
  std::map<Key, Entry> cache;
  void* scratch = nullptr;
  size_t scratch_bytes = 0;
  dnnl::memory scratch_mem;
  int bf16_native = -1;  // unknown / 0 / 1
  // Up-converted inputs for CPUs whose oneDNN has no bf16 matmul (pre-AVX-512 cores).
  float* up = nullptr;
  size_t up_elems = 0;
};

Gemm& state() {
  static Gemm* g = new Gemm();  // never destroyed: avoids teardown-order issues with oneDNN
  return *g;
}

Entry make_entry(Gemm& g, bool ta, bool tb, int M, int N, int K, int lda, int ldb, int ldc,
                 bool acc, bool has_bias, bool bf) {
  using dt = dnnl::memory::data_type;
  using dims = dnnl::memory::dims;
  dt in = bf ? dt::bf16 : dt::f32;
  dnnl::memory::desc a_md(dims{M, K}, in, ta ? dims{1, lda} : dims{lda, 1});
  dnnl::memory::desc b_md(dims{K, N}, in, tb ? dims{1, ldb} : dims{ldb, 1});
  dnnl::memory::desc c_md(dims{M, N}, dt::f32, dims{ldc, 1});
  dnnl::memory::desc bias_md(dims{1, N}, dt::f32, dims{N, 1});
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (acc) {
    dnnl::post_ops po;
    po.append_sum(1.0f);
    attr.set_post_ops(po);
  }
  auto desc = has_bias ? dnnl::matmul::desc(a_md, b_md, bias_md, c_md)
                       : dnnl::matmul::desc(a_md, b_md, c_md);
  dnnl::matmul::primitive_desc pd(desc, attr, g.eng);
  Entry e{dnnl::matmul(pd),
          dnnl::memory(a_md, g.eng, nullptr),
          dnnl::memory(b_md, g.eng, nullptr),
          dnnl::memory(c_md, g.eng, nullptr),
          dnnl::memory(bias_md, g.eng, nullptr),
          pd.scratchpad_desc().get_size()};
  return e;
}

void run(bool ta, bool tb, int M, int N, int K, const void* A, int lda, const void* B, int ldb,
         float* C, int ldc, bool acc, const float* bias, bool bf) {
  CRUCIBLE_CHECK(M > 0 && N > 0 && K > 0, "[gemm] empty problem");
  // Traffic: each operand once (oneDNN blocks for cache), C read too when
  // accumulating. bf16 operands are half the bytes.
  const double ab = bf ? 2.0 : 4.0;
  ScopedKernelTimer timer(KernelClass::gemm, 2.0 * M * N * K,
                          ab * (double(M) * K + double(K) * N) + 4.0 * M * N * (acc ? 2 : 1));
  Gemm& g = state();
  std::lock_guard<std::mutex> lock(g.mu);
  Key key{ta, tb, M, N, K, lda, ldb, ldc, acc, bias != nullptr, bf};
  auto it = g.cache.find(key);
  if (it == g.cache.end())
    it = g.cache.emplace(key, make_entry(g, ta, tb, M, N, K, lda, ldb, ldc, acc, bias != nullptr, bf))
             .first;
  Entry& e = it->second;
  if (!g.scratch || e.scratch_bytes > g.scratch_bytes) {
    // One scratchpad shared by all problems, grown to the largest one.
    if (g.scratch) Allocator::global().release(g.scratch);
    g.scratch_bytes = std::max<size_t>(e.scratch_bytes, 4096);
    g.scratch = Allocator::global().allocate(g.scratch_bytes, "gemm.scratchpad", true);
    dnnl::memory::desc s_md(dnnl::memory::dims{int64_t(g.scratch_bytes)},
                            dnnl::memory::data_type::u8, dnnl::memory::dims{1});
    g.scratch_mem = dnnl::memory(s_md, g.eng, g.scratch);
  }
  if (e.args.empty()) {
    e.args = {{DNNL_ARG_SRC, e.a}, {DNNL_ARG_WEIGHTS, e.b}, {DNNL_ARG_DST, e.c}};
    if (bias) e.args.emplace(DNNL_ARG_BIAS, e.bias);
  }
  if (e.scratch_bound != g.scratch) {
    e.args[DNNL_ARG_SCRATCHPAD] = g.scratch_mem;
    e.scratch_bound = g.scratch;
  }
  e.a.set_data_handle(const_cast<void*>(A));
  e.b.set_data_handle(const_cast<void*>(B));
  e.c.set_data_handle(C);
  if (bias) e.bias.set_data_handle(const_cast<float*>(bias));
  e.prim.execute(g.strm, e.args);
  g.strm.wait();
}

}  // namespace

void gemm(bool ta, bool tb, int M, int N, int K, const float* A, int lda, const float* B, int ldb,
          float* C, int ldc, bool accumulate, const float* bias) {
  run(ta, tb, M, N, K, A, lda, B, ldb, C, ldc, accumulate, bias, false);
}

bool gemm_bf16_native() {
  Gemm& g = state();
  std::lock_guard<std::mutex> lock(g.mu);
  if (g.bf16_native < 0) {
    try {
      make_entry(g, false, false, 16, 16, 16, 16, 16, 16, false, false, true);
      g.bf16_native = 1;
    } catch (const dnnl::error&) {
      g.bf16_native = 0;
    }
  }
  return g.bf16_native == 1;
}

void gemm_bf16(bool ta, bool tb, int M, int N, int K, const bf16* A, int lda, const bf16* B,
               int ldb, float* C, int ldc, bool accumulate, const float* bias) {
  if (gemm_bf16_native()) {
    run(ta, tb, M, N, K, A, lda, B, ldb, C, ldc, accumulate, bias, true);
    return;
  }
  // No bf16 matmul on this CPU: widen both operands (exact) and run f32.
  size_t na = size_t(ta ? K : M) * lda, nb = size_t(tb ? N : K) * ldb;
  Gemm& g = state();
  {
    std::lock_guard<std::mutex> lock(g.mu);
    if (na + nb > g.up_elems) {
      if (g.up) Allocator::global().release(g.up);
      g.up = static_cast<float*>(Allocator::global().allocate((na + nb) * 4, "gemm.bf16_widen", true));
      g.up_elems = na + nb;
    }
  }
  float* a = g.up;
  float* b = g.up + na;
#pragma omp parallel for
  for (size_t i = 0; i < na; ++i) a[i] = to_f32(A[i]);
#pragma omp parallel for
  for (size_t i = 0; i < nb; ++i) b[i] = to_f32(B[i]);
  run(ta, tb, M, N, K, a, lda, b, ldb, C, ldc, accumulate, bias, false);
}

size_t gemm_cache_size() {
  std::lock_guard<std::mutex> lock(state().mu);
  return state().cache.size();
}

}  // namespace crucible::kernels

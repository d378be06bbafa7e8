#include "kernels/gemm.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <omp.h>
#include <unordered_map>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <tuple>

#include "core/allocator.h"
#include "core/check.h"
#include "core/kernel_stats.h"
#include "kernels/cuda/cuda.h"
#include "kernels/device_scope.h"
#include "kernels/kernel_timer.h"

namespace crucible::kernels {
namespace {

// The thread count is part of the key: oneDNN fixes a primitive's parallel
// decomposition when it is created (from omp_get_max_threads), so a primitive
// made under 1 thread runs on 1 thread forever after (the probe measured its
// "all threads" GEMMs at the 1-thread rate before this).
using Key = std::tuple<bool, bool, int, int, int, int, int, int, bool, bool, DType, DType, int>;

struct Entry {
  dnnl::matmul prim;
  dnnl::memory a, b, c, bias;
  size_t scratch_bytes;
  // Built once; executing repeats only set_data_handle, so a cached call
  // allocates nothing on crucible's side.
  std::unordered_map<int, dnnl::memory> args;
  void* scratch_bound = nullptr;
  bool packed = false;  // B is a PackedWeights' packed copy
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
  // Without a bf16 matmul (pre-AVX-512 cores): the widened operands and the
  // f32 product of a bf16 output, used under `mu` like everything above.
  float* up = nullptr;
  size_t up_elems = 0;
};

Gemm& state() {
  static Gemm* g = new Gemm();  // never destroyed: avoids teardown-order issues with oneDNN
  return *g;
}

dnnl::memory::data_type dnnl_type(DType t) {
  return t == DType::bf16 ? dnnl::memory::data_type::bf16 : dnnl::memory::data_type::f32;
}

Entry make_entry(Gemm& g, bool ta, bool tb, int M, int N, int K, int lda, int ldb, int ldc,
                 bool acc, bool has_bias, DType in_t, DType out_t) {
  using dt = dnnl::memory::data_type;
  using dims = dnnl::memory::dims;
  const dt in = dnnl_type(in_t);
  dnnl::memory::desc a_md(dims{M, K}, in, ta ? dims{1, lda} : dims{lda, 1});
  dnnl::memory::desc b_md(dims{K, N}, in, tb ? dims{1, ldb} : dims{ldb, 1});
  dnnl::memory::desc c_md(dims{M, N}, dnnl_type(out_t), dims{ldc, 1});
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
          pd.scratchpad_desc().get_size(),
          {}};
  return e;
}

bool native_bf16(Gemm& g) {
  if (g.bf16_native < 0) {
    // A bf16 matmul in hardware: AVX512_BF16 (Zen 4/5, Cooper Lake; every
    // AMX part has it too). Without it oneDNN 2.6 still builds one (gemm:jit
    // emulating bf16 on AVX-512), 3.3x slower than its f32 brgemm on an Ice
    // Lake Xeon (60 against 200 GFLOP/s at 1024^3 on 2 threads) and with a
    // row's bits depending on how many rows ran beside it: widening to f32
    // is faster and batch-invariant.
    // oneDNN's effective ISA: the CPU's, less what the OS or
    // DNNL_MAX_CPU_ISA withholds (which the CPU's own flags do not say).
    const auto isa = unsigned(dnnl::get_effective_cpu_isa()), bf16_isa = unsigned(dnnl::cpu_isa::avx512_core_bf16);
    if ((isa & bf16_isa) != bf16_isa) {
      g.bf16_native = 0;
      return false;
    }
    try {
      make_entry(g, false, false, 16, 16, 16, 16, 16, 16, false, false, DType::bf16, DType::f32);
      make_entry(g, false, false, 16, 16, 16, 16, 16, 16, false, true, DType::bf16, DType::bf16);
      g.bf16_native = 1;
    } catch (const dnnl::error&) {
      g.bf16_native = 0;
    }
  }
  return g.bf16_native == 1;
}

// g.up holds at least n floats (grown, never shrunk).
float* widen_buffer(Gemm& g, size_t n) {
  if (n > g.up_elems) {
    if (g.up) Allocator::global().release(g.up);
    g.up = static_cast<float*>(Allocator::global().allocate(n * 4, "gemm.bf16_widen", true));
    g.up_elems = n;
  }
  return g.up;
}

// Executes a cached problem on these buffers (g.mu held). The shared
// scratchpad grows to the largest problem's.
void run(Gemm& g, Entry& e, const void* A, const void* B, void* C, const float* bias) {
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

// Called with g.mu held.
void execute(Gemm& g, bool ta, bool tb, int M, int N, int K, const void* A, int lda, const void* B,
             int ldb, void* C, int ldc, bool acc, const float* bias, DType in, DType out) {
  Key key{ta, tb, M, N, K, lda, ldb, ldc, acc, bias != nullptr, in, out, omp_get_max_threads()};
  auto it = g.cache.find(key);
  if (it == g.cache.end())
    it = g.cache.emplace(key, make_entry(g, ta, tb, M, N, K, lda, ldb, ldc, acc, bias != nullptr, in, out))
             .first;
  run(g, it->second, A, B, C, bias);
}

// How many rows each call of a product whose rows must not depend on the
// batch runs through one primitive (gemm_rows_invariant, gemm_packed; 0: the
// whole product in one call), by oneDNN's effective ISA (it honours the OS's
// AMX permission and DNNL_MAX_CPU_ISA, which the CPU's flags do not) and the
// type the product runs in. Measured on a 2-vCPU AMX Xeon VM, 2026-12-07,
// emulating the others with DNNL_MAX_CPU_ISA:
// - AMX, bf16: another kernel below 4 rows (brg:avx512_core_bf16, then
//   brg:avx512_core_amx_bf16) and another split of K from ~100 rows at
//   N 768, K 3072. 16 rows, a tile's: one row costs no more than alone.
// - AVX-512 without AMX (f32, AVX512_BF16, and f32 on AMX parts): one order
//   per row at every M from 1 to 300 at the inference shapes: one call.
// - AVX2 (Zen 3, older Intel), f32 and widened bf16: rows of 1, 5 and 40
//   differ. 6 rows, its f32 kernel's register block: within 8- and 32-row
//   calls the rows past the last whole 6 (a 2-row tail kernel) differed from
//   the same rows at other positions; within 4, 6, 12, 16 and 24 none did.
//   At 6 rows one row costs 2.2-2.6x alone and a batch of 256 2.3-2.8x its
//   one call (f32, 768x3072, 3072x768, 2304x768); 16 rows would cost 3.1x and
//   1.3x. A multiple of 6 in one call is not enough: 8 of 44 such calls up to
//   264 rows split their rows otherwise.
// Within such a fixed row count a row's bits did not depend on its position
// (every offset, at 70x96, 768x3072 and 3072x768; 16- and 32-row blocks on
// AMX).
int invariant_rows(DType runs_in) {
  static const unsigned isa = unsigned(dnnl::get_effective_cpu_isa());
  auto has = [](dnnl::cpu_isa i) { return (isa & unsigned(i)) == unsigned(i); };
  if (has(dnnl::cpu_isa::avx512_core_amx)) return runs_in == DType::bf16 ? 16 : 0;
  if (has(dnnl::cpu_isa::avx512_core)) return 0;
  return 6;
}

// Runs `once(a, c)` over M rows of A and C in calls of exactly R rows; a
// last partial block through copies zero-padded to R rows with the same
// strides (lda elements of a_bytes, ldc floats). The copies are this
// thread's, grown once to the largest block.
template <typename Once>
void in_row_blocks(int R, int M, int K, int N, const void* A, int lda, size_t a_bytes, float* C, int ldc,
                   const Once& once) {
  const char* a = static_cast<const char*>(A);
  int r0 = 0;
  for (; r0 + R <= M; r0 += R) once(a + size_t(r0) * lda * a_bytes, C + size_t(r0) * ldc);
  if (r0 == M) return;
  struct Pad {
    void* p = nullptr;
    size_t bytes = 0;
    ~Pad() {
      if (p) Allocator::global().release(p);
    }
  };
  thread_local Pad pad;
  const size_t a_size = size_t(R) * lda * a_bytes, need = a_size + size_t(R) * ldc * sizeof(float);
  if (pad.bytes < need) {
    if (pad.p) Allocator::global().release(pad.p);
    pad.p = Allocator::global().allocate(need, "gemm.row_blocks", true);
    pad.bytes = need;
  }
  char* pad_a = static_cast<char*>(pad.p);
  float* pad_c = reinterpret_cast<float*>(pad_a + a_size);
  const int m = M - r0;
  std::memset(pad_a, 0, a_size);
  std::memcpy(pad_a, a + size_t(r0) * lda * a_bytes, (size_t(m - 1) * lda + K) * a_bytes);
  once(pad_a, pad_c);
  for (int i = 0; i < m; ++i)
    std::memcpy(C + size_t(r0 + i) * ldc, pad_c + size_t(i) * ldc, size_t(N) * sizeof(float));
}

}  // namespace

void gemm_rows_invariant(DType in, bool tb, int M, int N, int K, const void* A, int lda, const void* B, int ldb,
                         float* C, int ldc, const float* bias) {
  CRUCIBLE_CHECK(M > 0 && N > 0 && K > 0, "[gemm] empty problem");
  int R = 0;
  if (current_target().device.is_cpu()) {
    bool native = in == DType::f32;
    if (!native) {
      std::lock_guard<std::mutex> lock(state().mu);
      native = native_bf16(state());
    }
    R = invariant_rows(native ? in : DType::f32);  // bf16 without a bf16 matmul runs widened, in f32
  }
  if (R == 0) {
    gemm(in, DType::f32, false, tb, M, N, K, A, lda, B, ldb, C, ldc, false, bias);
    return;
  }
  in_row_blocks(R, M, K, N, A, lda, dtype_size(in), C, ldc, [&](const void* a, float* c) {
    gemm(in, DType::f32, false, tb, R, N, K, a, lda, B, ldb, c, ldc, false, bias);
  });
}

void gemm(DType in, DType out, bool ta, bool tb, int M, int N, int K, const void* A, int lda,
          const void* B, int ldb, void* C, int ldc, bool accumulate, const float* bias) {
  CRUCIBLE_CHECK(M > 0 && N > 0 && K > 0, "[gemm] empty problem");
  CRUCIBLE_CHECK(!(accumulate && out == DType::bf16), "[gemm] accumulating into bf16 would round twice");
  // Traffic: each operand once (oneDNN blocks for cache), C read too when
  // accumulating. bf16 operands are half the bytes.
  const double ab = double(dtype_size(in)), cb = double(dtype_size(out));
  KernelTimer timer(KernelClass::gemm, 2.0 * M * N * K,
                    ab * (double(M) * K + double(K) * N) + cb * M * N * (accumulate ? 2 : 1));
  if (const ExecTarget& here = current_target(); here.device.is_cuda()) {
    cuda::gemm(in, out, ta, tb, M, N, K, A, lda, B, ldb, C, ldc, accumulate, bias, here.stream);
    return;
  }
  Gemm& g = state();
  std::lock_guard<std::mutex> lock(g.mu);
  if (in == DType::f32 || native_bf16(g)) {
    execute(g, ta, tb, M, N, K, A, lda, B, ldb, C, ldc, accumulate, bias, in, out);
    return;
  }
  // No bf16 matmul on this CPU: widen both operands (exact), run f32, and
  // round a bf16 output once; the shared buffer is used under the lock.
  const size_t na = size_t(ta ? K : M) * lda, nb = size_t(tb ? N : K) * ldb;
  const size_t nc = out == DType::bf16 ? size_t(M) * ldc : 0;
  float* a = widen_buffer(g, na + nb + nc);
  float* b = a + na;
  float* c = out == DType::bf16 ? b + nb : static_cast<float*>(C);
  const bf16* A16 = static_cast<const bf16*>(A);
  const bf16* B16 = static_cast<const bf16*>(B);
#pragma omp parallel for
  for (size_t i = 0; i < na; ++i) a[i] = to_f32(A16[i]);
#pragma omp parallel for
  for (size_t i = 0; i < nb; ++i) b[i] = to_f32(B16[i]);
  execute(g, ta, tb, M, N, K, a, lda, b, ldb, c, ldc, accumulate, bias, DType::f32, DType::f32);
  if (out == DType::bf16) {
    bf16* C16 = static_cast<bf16*>(C);
#pragma omp parallel for
    for (int i = 0; i < M; ++i)
      for (int j = 0; j < N; ++j) C16[size_t(i) * ldc + j] = to_bf16(c[size_t(i) * ldc + j]);
  }
}

bool gemm_gelu_fuses() { return current_target().device.is_cuda(); }

void gemm_bias_gelu_bf16(int M, int N, int K, const bf16* A, const bf16* B, const float* bias, bf16* pre,
                         bf16* act) {
  CRUCIBLE_CHECK(M > 0 && N > 0 && K > 0, "[gemm] empty problem");
  const ExecTarget& here = current_target();
  CRUCIBLE_CHECK(here.device.is_cuda(), "[gemm] the fused GEMM+GELU is a GPU's (gemm_gelu_fuses)");
  CRUCIBLE_CHECK(bias != nullptr, "[gemm] the fused GEMM+GELU adds a bias");
  // One GEMM's FLOPs plus the GELU's; its operands once, pre and act written.
  const double mn = double(M) * N;
  KernelTimer timer(KernelClass::gemm, 2.0 * mn * K + 10 * mn, 2.0 * (double(M) * K + double(K) * N) + 2 * 2 * mn);
  cuda::gemm_bias_gelu_bf16(M, N, K, A, B, bias, pre, act, here.stream);
}

bool gemm_dgelu_bf16(int M, int N, int K, const bf16* dy, const bf16* W, const bf16* pre, bf16* dpre,
                     float* dbias) {
  CRUCIBLE_CHECK(M > 0 && N > 0 && K > 0, "[gemm] empty problem");
  const ExecTarget& here = current_target();
  if (!here.device.is_cuda() || !cuda::gemm_dgelu_fuses(M, N, K, dy, W, pre, dpre, dbias)) return false;
  // One GEMM's FLOPs plus the GELU derivative's and the column sums; its
  // operands and pre read once, dpre written.
  const double mn = double(M) * N;
  KernelTimer timer(KernelClass::gemm, 2.0 * mn * K + 20 * mn, 2.0 * (double(M) * K + double(K) * N) + 2 * 2 * mn);
  cuda::gemm_dgelu_bf16(M, N, K, dy, W, pre, dpre, dbias, here.stream);
  return true;
}

void gemm(bool ta, bool tb, int M, int N, int K, const float* A, int lda, const float* B, int ldb,
          float* C, int ldc, bool accumulate, const float* bias) {
  gemm(DType::f32, DType::f32, ta, tb, M, N, K, A, lda, B, ldb, C, ldc, accumulate, bias);
}

void gemm_bf16(bool ta, bool tb, int M, int N, int K, const bf16* A, int lda, const bf16* B,
               int ldb, float* C, int ldc, bool accumulate, const float* bias) {
  gemm(DType::bf16, DType::f32, ta, tb, M, N, K, A, lda, B, ldb, C, ldc, accumulate, bias);
}

struct PackedWeights::Impl {
  DType in;
  bool trans;
  int N, K, ldb;
  const void* plain;      // B as given: the fallback
  DType packed_in;        // the packed copy's type: `in`, or f32 for bf16 widened once
  dnnl::memory::desc md;  // the packed layout
  void* data = nullptr;   // B in it
  ~Impl() {
    if (data) Allocator::global().release(data);
  }
};

// bf16 weights on a CPU without a bf16 matmul are widened to f32 once, here,
// and packed as f32 weights: each product then widens only its M rows of A,
// not all of B, and runs the f32 packed primitive, whose rows do not depend
// on M. (Through the plain path oneDNN chose a different f32 kernel for one
// row than for five or forty, and a row's bits changed with the batch it was
// in: on a 2-vCPU Xeon with AVX-512 and no AVX512_BF16, 2026-12-07.)
PackedWeights::PackedWeights(DType in, bool trans, int N, int K, const void* B, int ldb) {
  using dims = dnnl::memory::dims;
  Gemm& g = state();
  std::lock_guard<std::mutex> lock(g.mu);
  const bool widen = in == DType::bf16 && !native_bf16(g);
  const DType pin = widen ? DType::f32 : in;
  auto impl = std::make_shared<Impl>(Impl{in, trans, N, K, ldb, B, pin, {}, nullptr});
  std::vector<float> wide;
  const void* src_data = B;
  if (widen) {
    wide.resize(size_t(trans ? N : K) * ldb);
    const bf16* B16 = static_cast<const bf16*>(B);
#pragma omp parallel for
    for (size_t i = 0; i < wide.size(); ++i) wide[i] = to_f32(B16[i]);
    src_data = wide.data();
  }
  const auto t = dnnl_type(pin);
  // The layout of the primitive every product uses (gemm_packed: a fixed
  // row count where rows would otherwise depend on the batch).
  const int rows = std::max(1, invariant_rows(pin));
  dnnl::memory::desc a_md(dims{rows, K}, t, dims{K, 1});
  dnnl::memory::desc c_md(dims{rows, N}, dnnl::memory::data_type::f32, dims{N, 1});
  dnnl::memory::desc any(dims{K, N}, t, dnnl::memory::format_tag::any);
  dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, any, c_md), g.eng);
  impl->md = pd.weights_desc();
  impl->data = Allocator::global().allocate(impl->md.get_size(), "gemm.packed", true);
  dnnl::memory src(dnnl::memory::desc(dims{K, N}, t, trans ? dims{1, ldb} : dims{ldb, 1}), g.eng,
                   const_cast<void*>(src_data));
  dnnl::memory dst(impl->md, g.eng, impl->data);
  dnnl::reorder(src, dst).execute(g.strm, src, dst);
  g.strm.wait();
  impl_ = std::move(impl);
}

namespace {
// One call of gemm_packed's product: M rows through the primitive made for M.
void packed_once(int M, const void* A, int lda, const PackedWeights::Impl& w, float* C, int ldc, const float* bias) {
  Gemm& g = state();
  std::unique_lock<std::mutex> lock(g.mu);
  const bool widened = w.packed_in != w.in;
  const int alda = widened ? w.K : lda;  // widened rows are packed tight
  // Keyed like a plain problem, marked packed by lda < 0 in the ldb slot's place.
  Key key{false, w.trans, M, w.N, w.K, alda, -1, ldc, false, bias != nullptr, w.packed_in, DType::f32,
          omp_get_max_threads()};
  auto it = g.cache.find(key);
  if (it == g.cache.end()) {
    using dims = dnnl::memory::dims;
    const auto t = dnnl_type(w.packed_in);
    dnnl::memory::desc a_md(dims{M, w.K}, t, dims{alda, 1});
    dnnl::memory::desc c_md(dims{M, w.N}, dnnl::memory::data_type::f32, dims{ldc, 1});
    dnnl::memory::desc any(dims{w.K, w.N}, t, dnnl::memory::format_tag::any);
    dnnl::memory::desc bias_md(dims{1, w.N}, dnnl::memory::data_type::f32, dims{w.N, 1});
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    auto desc = bias ? dnnl::matmul::desc(a_md, any, bias_md, c_md) : dnnl::matmul::desc(a_md, any, c_md);
    dnnl::matmul::primitive_desc pd(desc, attr, g.eng);
    const bool packed = pd.weights_desc() == w.md;
    Entry e = packed ? Entry{dnnl::matmul(pd), dnnl::memory(a_md, g.eng, nullptr), dnnl::memory(w.md, g.eng, nullptr),
                             dnnl::memory(c_md, g.eng, nullptr), dnnl::memory(bias_md, g.eng, nullptr),
                             pd.scratchpad_desc().get_size(), {}}
                     // This M wants another layout: the plain B (widened weights: gemm's own path, below).
                     : widened ? Entry{}
                               : make_entry(g, false, w.trans, M, w.N, w.K, lda, w.ldb, ldc, false, bias != nullptr,
                                            w.in, DType::f32);
    e.packed = packed;
    it = g.cache.emplace(key, std::move(e)).first;
  }
  if (!it->second.packed && widened) {  // the plain bf16 weights through gemm's widening path
    lock.unlock();
    gemm(w.in, DType::f32, false, w.trans, M, w.N, w.K, A, lda, w.plain, w.ldb, C, ldc, false, bias);
    return;
  }
  const void* a = A;
  if (widened) {
    float* wa = widen_buffer(g, size_t(M) * w.K);
    const bf16* A16 = static_cast<const bf16*>(A);
#pragma omp parallel for
    for (int i = 0; i < M; ++i)
      for (int k = 0; k < w.K; ++k) wa[size_t(i) * w.K + k] = to_f32(A16[size_t(i) * lda + k]);
    a = wa;
  }
  run(g, it->second, a, it->second.packed ? w.data : w.plain, C, bias);
}
}  // namespace

void gemm_packed(int M, const void* A, int lda, const PackedWeights& B, float* C, int ldc, const float* bias) {
  CRUCIBLE_CHECK(B.impl_ != nullptr, "[gemm] gemm_packed: empty PackedWeights");
  CRUCIBLE_CHECK(current_target().device.is_cpu(), "[gemm] gemm_packed is the CPU's (oneDNN's packed layout)");
  const PackedWeights::Impl& w = *B.impl_;
  const double ab = double(dtype_size(w.in));
  ScopedKernelTimer timer(KernelClass::gemm, 2.0 * M * w.N * w.K,
                          ab * (double(M) * w.K + double(w.K) * w.N) + 4.0 * M * w.N);
  // A fixed row count per call where rows would otherwise depend on the
  // batch (invariant_rows; the weights were packed for it).
  const int R = invariant_rows(w.packed_in);
  if (R == 0) {
    packed_once(M, A, lda, w, C, ldc, bias);
    return;
  }
  in_row_blocks(R, M, w.K, w.N, A, lda, dtype_size(w.in), C, ldc,
                [&](const void* a, float* c) { packed_once(R, a, lda, w, c, ldc, bias); });
}

bool gemm_bf16_native() {
  std::lock_guard<std::mutex> lock(state().mu);
  return native_bf16(state());
}

size_t gemm_cache_size() {
  std::lock_guard<std::mutex> lock(state().mu);
  return state().cache.size();
}

}  // namespace crucible::kernels

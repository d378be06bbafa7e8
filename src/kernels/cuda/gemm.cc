// kernels::gemm on a GPU through cuBLASLt (kernels/cuda/cuda.h).
//
// cuBLASLt is loaded with dlopen at the first GPU GEMM (libcublasLt.so.13,
// the GPU machine's own), so a crucible built with the toolkit still starts
// where CUDA's libraries are absent: that is a machine without a GPU.
//
// Row-major to cuBLASLt's column-major: a row-major (r, c) matrix with
// leading dimension ld is the column-major (c, r) matrix of the same ld, its
// transpose. So C (M,N) = op(A) op(B) is computed as C^T (N,M) = op(B)^T
// op(A)^T: cuBLASLt's first operand is our B, its second our A, each with
// our own transpose flag (an untransposed B read column-major is already
// B^T; a stored-transposed one reads as op(B), which cuBLASLt transposes).
// The bias (N) runs along C^T's
// rows: cuBLASLt's BIAS epilogue. The MLP's first GEMM in bf16 may take
// GELU_AUX_BIAS instead (gemm_bias_gelu_bf16): D = gelu(sum + bias) with
// the GELU's input as the auxiliary matrix, of D's type and shape; and the
// input gradient of its second GEMM DGELU_BGRAD (gemm_dgelu_bf16): D = sum
// gelu'(aux), with D's column sums (C^T's row sums: over the rows of our C)
// written to the bias pointer, f32. f32 accumulation (CUBLAS_COMPUTE_32F: no
// TF32, fp32 stays fp32), alpha 1, beta 1 when accumulating. gemm_tf32 (the
// probe's third row) is the same f32 GEMM with CUBLAS_COMPUTE_32F_FAST_TF32.
//
// One plan (descriptors, layouts, the heuristic's algorithm) per problem and
// GPU, made on first use and kept, like the CPU path's oneDNN primitives; a
// 32 MiB workspace per GPU. Thread-safe (one lock, as the CPU path).
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>

#include "kernels/cuda/cuda.h"

namespace crucible::kernels::cuda {

namespace {

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "[cuda] gemm: %s\n", what.c_str());
  std::abort();
}

// The cuBLASLt entry points crucible uses, resolved from the library.
struct Lt {
  decltype(&cublasLtCreate) create;
  decltype(&cublasLtMatmulDescCreate) desc_create;
  decltype(&cublasLtMatmulDescSetAttribute) desc_set;
  decltype(&cublasLtMatrixLayoutCreate) layout_create;
  decltype(&cublasLtMatmulPreferenceCreate) pref_create;
  decltype(&cublasLtMatmulPreferenceSetAttribute) pref_set;
  decltype(&cublasLtMatmulAlgoGetHeuristic) heuristic;
  decltype(&cublasLtMatmul) matmul;
  decltype(&cublasLtGetStatusString) status_string;
};

const Lt& lt() {
  static const Lt fns = [] {
    void* h = nullptr;
    for (const char* name : {"libcublasLt.so.13", "libcublasLt.so"})
      if ((h = dlopen(name, RTLD_NOW | RTLD_LOCAL))) break;
    if (!h) fail(std::string("cannot load cuBLASLt (libcublasLt.so.13): ") + dlerror());
    auto sym = [&](const char* name) {
      void* p = dlsym(h, name);
      if (!p) fail(std::string("cuBLASLt lacks ") + name);
      return p;
    };
    Lt f;
    f.create = reinterpret_cast<decltype(f.create)>(sym("cublasLtCreate"));
    f.desc_create = reinterpret_cast<decltype(f.desc_create)>(sym("cublasLtMatmulDescCreate"));
    f.desc_set = reinterpret_cast<decltype(f.desc_set)>(sym("cublasLtMatmulDescSetAttribute"));
    f.layout_create = reinterpret_cast<decltype(f.layout_create)>(sym("cublasLtMatrixLayoutCreate"));
    f.pref_create = reinterpret_cast<decltype(f.pref_create)>(sym("cublasLtMatmulPreferenceCreate"));
    f.pref_set = reinterpret_cast<decltype(f.pref_set)>(sym("cublasLtMatmulPreferenceSetAttribute"));
    f.heuristic = reinterpret_cast<decltype(f.heuristic)>(sym("cublasLtMatmulAlgoGetHeuristic"));
    f.matmul = reinterpret_cast<decltype(f.matmul)>(sym("cublasLtMatmul"));
    f.status_string = reinterpret_cast<decltype(f.status_string)>(sym("cublasLtGetStatusString"));
    return f;
  }();
  return fns;
}

// Under a capture a refused call fails the capture, not the process
// (capture_refused): the step then runs uncaptured.
void ok(cublasStatus_t s, const char* what) {
  if (s == CUBLAS_STATUS_SUCCESS) return;
  const std::string why = std::string(what) + ": " + lt().status_string(s);
  if (!capture_refused("gemm: " + why)) fail(why);
}
void ok(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  const std::string why = std::string(what) + ": " + cudaGetErrorString(e);
  if (!capture_refused("gemm: " + why)) fail(why);
}

constexpr size_t kWorkspace = size_t(32) << 20;

struct PerGpu {
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
};

struct Plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t first = nullptr, second = nullptr, out = nullptr;
  cublasLtMatmulAlgo_t algo{};
};

// What the GEMM's epilogue adds: nothing, the bias, the bias then GELU with
// the GELU's input kept (the auxiliary output), or the GELU's gradient at the
// auxiliary input with the bias gradient (written to the bias pointer).
enum class Epilogue : int { kNone, kBias, kGeluAuxBias, kDGeluBGrad };

// The epilogues with the GELU's auxiliary matrix.
bool fused(Epilogue e) { return e == Epilogue::kGeluAuxBias || e == Epilogue::kDGeluBGrad; }

// The problems that have another way where cuBLASLt refuses them: the fused
// epilogues, and an f32 bias on a bf16 output (cuBLASLt's header gives the
// bias D's type outside fp8; gemm_bias_through_f32 below).
bool has_fallback(Epilogue e, DType out) { return fused(e) || (e == Epilogue::kBias && out == DType::bf16); }

// The largest power of two up to 256 dividing p's address: the heuristic
// otherwise assumes 256 bytes for every matrix and may pick a kernel that
// faults on the 32- and 64-byte aligned buffers of the arena and the bf16
// weights (or a fused head's later row chunk). Null (a pointer not known
// when a plan is only checked) counts as 256.
uint32_t alignment(const void* p) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  return a == 0 ? 256u : uint32_t(std::min<uintptr_t>(256, a & (~a + 1)));
}

// One problem's pointers' alignments: cuBLASLt's A (our B), its B (our A),
// C = D (our C), and the epilogue's bias and auxiliary matrix (the least).
struct Aligned {
  uint32_t first, second, out, epi;
  auto tie() const { return std::tie(first, second, out, epi); }
  bool operator<(const Aligned& o) const { return tie() < o.tie(); }
};

using Key = std::tuple<int, bool, bool, int, int, int, int, int, int, bool, Epilogue, DType, DType, bool, Aligned>;

struct State {
  std::mutex mu;
  std::map<int, PerGpu> gpus;
  std::map<Key, std::optional<Plan>> plans;  // nullopt: cuBLASLt has no algorithm for it
};

State& state() {
  static State* s = new State();  // never destroyed: plans outlive static teardown
  return *s;
}

cudaDataType_t cuda_type(DType t) { return t == DType::bf16 ? CUDA_R_16BF : CUDA_R_32F; }

// The plan of one problem, or nullopt where cuBLASLt refuses it (an
// attribute or no algorithm): fatal for the plain GEMM, a fallback where
// has_fallback. bias, aux: the epilogue's buffers (their addresses steer the
// heuristic); al: every operand's alignment.
std::optional<Plan> try_plan(const PerGpu& g, bool ta, bool tb, int M, int N, int K, int lda, int ldb, int ldc,
                             Epilogue epi, DType in, DType out, bool tf32, const float* bias, void* aux,
                             const Aligned& al) {
  const Lt& f = lt();
  Plan p;
  auto ok = [](cublasStatus_t st) { return st == CUBLAS_STATUS_SUCCESS; };
  if (!ok(f.desc_create(&p.op, tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F, CUDA_R_32F)))
    return std::nullopt;
  const cublasOperation_t op_first = tb ? CUBLAS_OP_T : CUBLAS_OP_N, op_second = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  if (!ok(f.desc_set(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &op_first, sizeof op_first)) ||
      !ok(f.desc_set(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &op_second, sizeof op_second)))
    return std::nullopt;
  if (epi != Epilogue::kNone) {
    const cublasLtEpilogue_t e = epi == Epilogue::kBias          ? CUBLASLT_EPILOGUE_BIAS
                                 : epi == Epilogue::kGeluAuxBias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS
                                                                 : CUBLASLT_EPILOGUE_DGELU_BGRAD;
    const cudaDataType_t bias_type = CUDA_R_32F;
    if (!ok(f.desc_set(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof e)) ||
        !ok(f.desc_set(p.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof bias_type)) ||
        (bias && !ok(f.desc_set(p.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias))))
      return std::nullopt;
  }
  if (fused(epi)) {
    // The GELU input, of C's type and shape: (N,M) column-major, ld N.
    const int64_t aux_ld = ldc;
    if (!ok(f.desc_set(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld, sizeof aux_ld)) ||
        !ok(f.desc_set(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux)))
      return std::nullopt;
  }
  // First operand: our B read column-major: (N,K) untransposed, stored (K,N) col-major when tb.
  // Second: our A: (K,M) column-major untransposed, stored (M,K) when ta.
  if (!ok(f.layout_create(&p.first, cuda_type(in), tb ? K : N, tb ? N : K, ldb)) ||
      !ok(f.layout_create(&p.second, cuda_type(in), ta ? M : K, ta ? K : M, lda)) ||
      !ok(f.layout_create(&p.out, cuda_type(out), N, M, ldc)))
    return std::nullopt;
  cublasLtMatmulPreference_t pref = nullptr;
  if (!ok(f.pref_create(&pref)) ||
      !ok(f.pref_set(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &kWorkspace, sizeof kWorkspace)) ||
      !ok(f.pref_set(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al.first, sizeof al.first)) ||
      !ok(f.pref_set(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al.second, sizeof al.second)) ||
      !ok(f.pref_set(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al.out, sizeof al.out)) ||
      !ok(f.pref_set(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al.out, sizeof al.out)))
    return std::nullopt;
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  if (!ok(f.heuristic(g.handle, p.op, p.first, p.second, p.out, p.out, pref, 1, &result, &found)) || found < 1)
    return std::nullopt;
  p.algo = result.algo;
  return p;
}

// This thread's GPU's handle and workspace, made on first use (under st.mu).
PerGpu& gpu_of(State& st, int* device) {
  ok(cudaGetDevice(device), "cudaGetDevice");
  PerGpu& g = st.gpus[*device];
  // Each made until it exists: under a capture a refused call returns
  // (capture_refused) and the next call tries again.
  if (!g.handle) ok(lt().create(&g.handle), "cublasLtCreate");
  if (!g.workspace) ok(cudaMalloc(&g.workspace, kWorkspace), "workspace");
  return g;
}

// C = op(A) op(B) (+ C) with the epilogue (its bias, and for GELU_AUX_BIAS
// the GELU's input written to aux; for DGELU_BGRAD aux read and the bias
// written), on stream s. False where cuBLASLt has no algorithm for a problem
// with another way (has_fallback: the caller takes it); for the others that
// is fatal. plan_only: makes (or finds) the plan and launches nothing (the
// pointers only steer it).
bool matmul(Epilogue epi, bool tf32, DType in, DType out, bool ta, bool tb, int M, int N, int K, const void* A,
            int lda, const void* B, int ldb, void* C, int ldc, bool accumulate, const float* bias, void* aux,
            Stream s, bool plan_only = false) {
  State& st = state();
  std::lock_guard<std::mutex> lock(st.mu);
  int device = 0;
  PerGpu& g = gpu_of(st, &device);
  const Aligned al{alignment(B), alignment(A), alignment(C), std::min(alignment(bias), alignment(aux))};
  const Key key{device, ta, tb, M, N, K, lda, ldb, ldc, accumulate, epi, in, out, tf32, al};
  auto it = st.plans.find(key);
  if (it == st.plans.end())
    it = st.plans.emplace(key, try_plan(g, ta, tb, M, N, K, lda, ldb, ldc, epi, in, out, tf32, bias, aux, al)).first;
  if (!it->second) {
    if (has_fallback(epi, out)) return false;
    fail("no cuBLASLt algorithm for " + std::to_string(M) + "x" + std::to_string(N) + "x" + std::to_string(K));
  }
  if (plan_only) return true;
  Plan& p = *it->second;
  if (bias) ok(lt().desc_set(p.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias), "BIAS_POINTER");
  if (aux) ok(lt().desc_set(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux), "EPILOGUE_AUX_POINTER");
  const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  ok(lt().matmul(g.handle, p.op, &alpha, B, p.first, A, p.second, &beta, C, p.out, C, p.out, &p.algo, g.workspace,
                 kWorkspace, s),
     "cublasLtMatmul");
  return true;
}

}  // namespace

namespace {
// gemm_bias_through_f32's scratch: fixed (a graph records its address), 16
// MiB, at least 83 rows of a 50257-wide head.
constexpr size_t kBiasChunkFloats = size_t(4) << 20;
}  // namespace

void gemm_bias_through_f32(DType in, bool ta, bool tb, int M, int N, int K, const void* A, int lda, const void* B,
                       int ldb, bf16* C, int ldc, bool accumulate, const float* bias, Stream s) {
  const size_t room = std::max(kBiasChunkFloats, size_t(N));
  float* sum = gemm_scratch(room);
  const int rows = int(std::min<size_t>(size_t(M), room / size_t(N)));
  const size_t esize = in == DType::bf16 ? 2 : 4;
  for (int r0 = 0; r0 < M; r0 += rows) {
    const int m = std::min(rows, M - r0);
    // Rows r0.. of op(A): stored (M,K) they start r0 rows in; stored (K,M) r0 columns in.
    const void* Ar = static_cast<const char*>(A) + esize * (ta ? size_t(r0) : size_t(r0) * size_t(lda));
    matmul(Epilogue::kNone, false, in, DType::f32, ta, tb, m, N, K, Ar, lda, B, ldb, sum, N, false, nullptr, nullptr,
           s);
    add_bias_round_bf16(C + size_t(r0) * size_t(ldc), ldc, sum, bias, m, N, accumulate, s);
  }
}

void gemm(DType in, DType out, bool ta, bool tb, int M, int N, int K, const void* A, int lda, const void* B, int ldb,
          void* C, int ldc, bool accumulate, const float* bias, Stream s) {
  if (!matmul(bias ? Epilogue::kBias : Epilogue::kNone, false, in, out, ta, tb, M, N, K, A, lda, B, ldb, C, ldc,
              accumulate, bias, nullptr, s))
    gemm_bias_through_f32(in, ta, tb, M, N, K, A, lda, B, ldb, static_cast<bf16*>(C), ldc, accumulate, bias, s);
}

void gemm_bias_gelu_bf16(int M, int N, int K, const bf16* A, const bf16* B, const float* bias, bf16* pre, bf16* act,
                         Stream s) {
  // N a multiple of 8: the auxiliary matrix's leading dimension rule.
  if (N % 8 == 0 && matmul(Epilogue::kGeluAuxBias, false, DType::bf16, DType::bf16, false, false, M, N, K, A, K, B, N,
                           act, N, false, bias, pre, s))
    return;
  gemm(DType::bf16, DType::bf16, false, false, M, N, K, A, K, B, N, pre, N, false, bias, s);
  bias_gelu_forward_bf16(act, pre, nullptr, M, N, s);
}

namespace {
// dpre (M,N) = dy (M,K) W^T (W (N,K) row-major) through DGELU_BGRAD: one
// problem's plan for the check and the launch.
bool dgelu(int M, int N, int K, const bf16* dy, const bf16* W, const bf16* pre, bf16* dpre, float* dbias, Stream s,
           bool plan_only) {
  // N a multiple of 8: the auxiliary matrix's leading dimension rule.
  return N % 8 == 0 && matmul(Epilogue::kDGeluBGrad, false, DType::bf16, DType::bf16, false, true, M, N, K, dy, K, W,
                              K, dpre, N, false, dbias, const_cast<bf16*>(pre), s, plan_only);
}
}  // namespace

bool gemm_dgelu_fuses(int M, int N, int K, const bf16* dy, const bf16* W, const bf16* pre, const bf16* dpre,
                      const float* dbias) {
  return dgelu(M, N, K, dy, W, pre, const_cast<bf16*>(dpre), const_cast<float*>(dbias), nullptr, true);
}

void gemm_dgelu_bf16(int M, int N, int K, const bf16* dy, const bf16* W, const bf16* pre, bf16* dpre, float* dbias,
                     Stream s) {
  if (!dgelu(M, N, K, dy, W, pre, dpre, dbias, s, false))
    fail("DGELU_BGRAD for " + std::to_string(M) + "x" + std::to_string(N) + "x" + std::to_string(K) +
         " without gemm_dgelu_fuses");
}

void gemm_tf32(int M, int N, int K, const float* A, const float* B, float* C, Stream s) {
  matmul(Epilogue::kNone, true, DType::f32, DType::f32, false, false, M, N, K, A, K, B, N, C, N, false, nullptr, nullptr,
         s);
}

}  // namespace crucible::kernels::cuda

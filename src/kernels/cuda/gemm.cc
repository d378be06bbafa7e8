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
// rows: cuBLASLt's BIAS epilogue. f32 accumulation (CUBLAS_COMPUTE_32F: no
// TF32, fp32 stays fp32), alpha 1, beta 1 when accumulating. gemm_tf32 (the
// probe's third row) is the same f32 GEMM with CUBLAS_COMPUTE_32F_FAST_TF32.
//
// One plan (descriptors, layouts, the heuristic's algorithm) per problem and
// GPU, made on first use and kept, like the CPU path's oneDNN primitives; a
// 32 MiB workspace per GPU. Thread-safe (one lock, as the CPU path).
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
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

void ok(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) fail(std::string(what) + ": " + lt().status_string(s));
}
void ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) fail(std::string(what) + ": " + cudaGetErrorString(e));
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

using Key = std::tuple<int, bool, bool, int, int, int, int, int, int, bool, bool, DType, DType, bool>;

struct State {
  std::mutex mu;
  std::map<int, PerGpu> gpus;
  std::map<Key, Plan> plans;
};

State& state() {
  static State* s = new State();  // never destroyed: plans outlive static teardown
  return *s;
}

cudaDataType_t cuda_type(DType t) { return t == DType::bf16 ? CUDA_R_16BF : CUDA_R_32F; }

Plan make_plan(const PerGpu& g, bool ta, bool tb, int M, int N, int K, int lda, int ldb, int ldc, bool has_bias,
               DType in, DType out, bool tf32) {
  const Lt& f = lt();
  Plan p;
  ok(f.desc_create(&p.op, tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F, CUDA_R_32F),
     "cublasLtMatmulDescCreate");
  const cublasOperation_t op_first = tb ? CUBLAS_OP_T : CUBLAS_OP_N, op_second = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  ok(f.desc_set(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &op_first, sizeof op_first), "TRANSA");
  ok(f.desc_set(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &op_second, sizeof op_second), "TRANSB");
  if (has_bias) {
    const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
    const cudaDataType_t bias_type = CUDA_R_32F;
    ok(f.desc_set(p.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi), "EPILOGUE");
    ok(f.desc_set(p.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof bias_type), "BIAS_DATA_TYPE");
  }
  // First operand: our B read column-major: (N,K) untransposed, stored (K,N) col-major when tb.
  ok(f.layout_create(&p.first, cuda_type(in), tb ? K : N, tb ? N : K, ldb), "layout B");
  // Second: our A: (K,M) column-major untransposed, stored (M,K) when ta.
  ok(f.layout_create(&p.second, cuda_type(in), ta ? M : K, ta ? K : M, lda), "layout A");
  ok(f.layout_create(&p.out, cuda_type(out), N, M, ldc), "layout C");
  cublasLtMatmulPreference_t pref = nullptr;
  ok(f.pref_create(&pref), "cublasLtMatmulPreferenceCreate");
  ok(f.pref_set(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &kWorkspace, sizeof kWorkspace), "workspace");
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  ok(f.heuristic(g.handle, p.op, p.first, p.second, p.out, p.out, pref, 1, &result, &found),
     "cublasLtMatmulAlgoGetHeuristic");
  if (found < 1)
    fail("no cuBLASLt algorithm for " + std::to_string(M) + "x" + std::to_string(N) + "x" + std::to_string(K));
  p.algo = result.algo;
  return p;
}

void gemm_with(bool tf32, DType in, DType out, bool ta, bool tb, int M, int N, int K, const void* A, int lda,
               const void* B, int ldb, void* C, int ldc, bool accumulate, const float* bias, Stream s) {
  State& st = state();
  std::lock_guard<std::mutex> lock(st.mu);
  int device = 0;
  ok(cudaGetDevice(&device), "cudaGetDevice");
  PerGpu& g = st.gpus[device];
  if (!g.handle) {
    ok(lt().create(&g.handle), "cublasLtCreate");
    ok(cudaMalloc(&g.workspace, kWorkspace), "workspace");
  }
  const Key key{device, ta, tb, M, N, K, lda, ldb, ldc, accumulate, bias != nullptr, in, out, tf32};
  auto it = st.plans.find(key);
  if (it == st.plans.end())
    it = st.plans.emplace(key, make_plan(g, ta, tb, M, N, K, lda, ldb, ldc, bias != nullptr, in, out, tf32)).first;
  Plan& p = it->second;
  if (bias) ok(lt().desc_set(p.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias), "BIAS_POINTER");
  const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  ok(lt().matmul(g.handle, p.op, &alpha, B, p.first, A, p.second, &beta, C, p.out, C, p.out, &p.algo, g.workspace,
                 kWorkspace, s),
     "cublasLtMatmul");
}

}  // namespace

void gemm(DType in, DType out, bool ta, bool tb, int M, int N, int K, const void* A, int lda, const void* B, int ldb,
          void* C, int ldc, bool accumulate, const float* bias, Stream s) {
  gemm_with(false, in, out, ta, tb, M, N, K, A, lda, B, ldb, C, ldc, accumulate, bias, s);
}

void gemm_tf32(int M, int N, int K, const float* A, const float* B, float* C, Stream s) {
  gemm_with(true, DType::f32, DType::f32, false, false, M, N, K, A, K, B, N, C, N, false, nullptr, s);
}

}  // namespace crucible::kernels::cuda

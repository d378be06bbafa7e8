// crucible's CUDA backend, host side (DESIGN.md "Devices"; docs/architecture.md
// "The device seam").
//
// This header includes no CUDA header: a stream is CUDA's own opaque
// `CUstream_st*` (what cudaStream_t is), so every layer can name one. A build
// without the CUDA toolkit links no_cuda.cc instead of the .cu/.cc sources:
// compiled() is false, device_count() is 0 and use_device() refuses with one
// line, as on a machine without a GPU or driver.
//
// Kernels take the stream they run on, llm.c's way: one launcher per op, the
// kernel and its geometry side by side in its .cu file, shapes in comments;
// each is checked against its naive reference in kernels/ref on the device
// machine (tests/gpu, ctest label `gpu`, skipped without a GPU). Launchers do
// not synchronise or allocate. Thread-safety: as CUDA's runtime (one device
// per thread; use_device() sets the calling thread's).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/dtype.h"
#include "core/kernel_stats.h"
#include "core/memory_source.h"
#include "core/status.h"
#include "kernels/step_scalars.h"

struct CUstream_st;

namespace crucible::kernels {
struct KernelTable;
}

namespace crucible::kernels::cuda {

using Stream = CUstream_st*;  // nullptr: the legacy default stream

// Whether this build has the CUDA backend.
bool compiled();
// GPUs this process can use; 0 without a GPU, a driver or the backend.
int device_count();

struct DeviceInfo {
  std::string name;
  int major = 0, minor = 0;  // compute capability
  int multiprocessors = 0;
  uint64_t memory_bytes = 0;
  // "0000:65:00.0": how NVML and the PCI topology name this GPU (their order
  // need not be CUDA's).
  std::string pci_bus_id;
};
// invalid, naming the index and how many GPUs there are, when there is none.
Result<DeviceInfo> device_info(int index);

// Makes GPU `index` the calling thread's and registers its memory sources
// (device memory, pinned host memory) with core/memory_source.h, so
// Allocator::on(*find_memory_source(MemoryKind::kDevice, Device::cuda(i)))
// pools it. One line naming the problem when there is no such GPU.
Status use_device(int index);
// Bytes of GPU `index`'s memory free now (cudaMemGetInfo): what a run's
// memory check compares its estimate with.
Result<uint64_t> free_memory(int index);

// Copies and waits, at step edges only. Errors name the call and CUDA's text.
Status copy_to_device(void* dst, const void* src, size_t bytes, Stream s);
Status copy_to_host(void* dst, const void* src, size_t bytes, Stream s);
Status synchronize(Stream s);
// Peer to peer (the probe's GPU-to-GPU bandwidth): whether GPU `from` can
// read and write GPU `to`'s memory directly (NVLink or PCIe P2P), enabling
// it from `from` when it can (an already enabled pair is fine); false where
// copies between them would go through the host.
Result<bool> enable_peer_access(int from, int to);
// bytes from src on GPU src_device to dst on GPU dst_device, on stream s
// (cudaMemcpyPeerAsync: direct where peer access is enabled, else staged by
// the driver through host memory).
Status copy_peer(void* dst, int dst_device, const void* src, int src_device, size_t bytes, Stream s);
// The last launch's error, if any (launchers do not check, so a step checks
// once).
Status last_error(const char* where);

// ---- kernel timing (kernel_timing.cc) ----
// A launch returns before its kernel runs, so a host clock around it times the
// launch. With timing on, every kernels:: call on a GPU (kernels/kernel_timer.h)
// records a pair of CUDA events around its kernel, from a pool made once;
// collect_kernel_times() waits for the stream and adds each kernel's device
// time to core/kernel_stats.h's table, and, with the tracer on, records it on
// the GPU's trace track ("cuda:N kernels"). Off by default: the events cost
// ~2 us of host time per kernel. Thread-safe; meant for the training thread.
Status set_kernel_timing(bool on);
bool kernel_timing();
// A pair's slot, or -1 (timing off, or the pool full: counted as dropped).
int kernel_begin(Stream s);
void kernel_end(int slot, KernelClass cls, Stream s);
struct KernelTimes {
  int64_t kernels = 0;    // pairs read
  int64_t kernel_ns = 0;  // their device time, summed
  int64_t dropped = 0;    // kernels left untimed since the last collect (pool full)
};
Result<KernelTimes> collect_kernel_times(Stream s);

// ---- step parts (part_timing.cc) ----
// A step's parts (kernels/step_parts.h: forward, backward, optimizer) in
// device time: each part's span is a pair of CUDA events around its launches
// on its stream, from a pool made at the first span. Always on (a step
// records a few per micro-batch, ~2 us of host time each). While this thread
// captures a graph with spans (begin_capture), they are the graph's own
// event record nodes instead, recorded again at each of its launches.
// Thread-safe; meant for the training thread.
// A span's slot, or -1 (no pool, the pool full, or a capture without spans).
int part_begin(Stream s);
void part_end(int slot, int part, Stream s);
// Waits for s and adds each ended span's seconds to seconds[part] (parts:
// the array's length): the spans launched kernel by kernel since the last
// collect, and those of each split graph launched since then (its latest
// launch's).
Status collect_part_times(Stream s, double* seconds, int parts);
// Forgets the spans not yet collected (a step abandoned half-way).
void discard_part_times();

// ---- streams and graphs (graph.cc) ----
// A stream of GPU `index` that a graph can be captured on (the legacy
// default stream cannot be): blocking, so it stays ordered with work queued
// on the legacy stream without events.
Result<Stream> create_stream(int index);
void destroy_stream(Stream s);
// One captured and instantiated CUDA graph (cudaGraphExec_t).
struct Graph;
// Starts recording what this thread queues on s (thread-local mode: other
// threads' CUDA calls are unaffected; this thread's synchronising calls fail
// the capture). Nothing recorded runs until the graph is launched. spans:
// the step parts' spans (part_begin) are recorded into the graph as event
// record nodes (cudaEventRecordExternal), so that each launch times its
// parts (the graph is "split"); where the events cannot be made, it is not.
Status begin_capture(Stream s, bool spans);
// Ends the recording begun on s and instantiates it. Always leaves capture
// mode; a capture that failed (an operation that cannot be captured) is one
// line naming CUDA's reason and nothing ran.
Result<Graph*> end_capture(Stream s);
// While this thread captures (begin_capture .. end_capture), an operation
// CUDA or cuBLASLt refuses to record is the capture's failure, not the
// process's: the backend's error checks call capture_refused(what), which
// notes the first refusal and returns true, and return instead of aborting;
// end_capture then fails with it, and nothing recorded ran
// (kernels/step_graph.h runs the step again uncaptured). False outside a
// capture: the caller aborts as before.
bool capture_refused(const std::string& what);
// Whether this thread is capturing a graph now.
bool capturing();
// How many captured graphs exist: the buffers they recorded must stay where
// they are (the backend's scratch may not grow while one does).
int live_graphs();
// Whether the graph records the step parts' spans (begin_capture's spans).
bool graph_split(const Graph* g);
// Queues the whole graph on s.
Status launch_graph(Graph* g, Stream s);
void destroy_graph(Graph* g);
// Makes `waiter` wait for everything queued on `on` so far (an event
// between them; no host wait).
Status stream_wait(Stream waiter, Stream on);

// The backend's kernel table (kernels/device_scope.h dispatches to it under a
// GPU's DeviceScope): every entry launches on the scope's stream; entries the
// backend has not written yet are null. Without the backend: all null.
const KernelTable& kernel_table();

// ---- kernels (contracts as kernels/signatures.inc, plus the stream) ----

// GEMM through cuBLASLt (kernels/cuda/gemm.cc), kernels::gemm's contract:
// C (M,N) = op(A) op(B) (+ C when accumulate) (+ bias (N), f32), row-major
// with leading dimensions; inputs f32 or bf16, C f32 or bf16, f32
// accumulation (no TF32: fp32 stays fp32). cuBLASLt is loaded at the first
// call (the GPU machine's own); its absence or a failed call is one line and
// an abort, as a failed kernel launch is.
void gemm(DType in, DType out, bool trans_a, bool trans_b, int M, int N, int K, const void* A, int lda,
          const void* B, int ldb, void* C, int ldc, bool accumulate, const float* bias, Stream s);
// gemm's way with an f32 bias on a bf16 C where cuBLASLt has no BIAS
// epilogue for it (its header gives the bias D's type outside fp8): the
// product in f32 row chunks into gemm_scratch (device scratch of the current
// GPU, at least `floats`; a fixed size, grown before any graph records it),
// then add_bias_round_bf16 (step_passes.cu): out (rows,N; ld ldo) = bf16(sum
// (rows,N) (+ out when accumulate) + bias (N)), one rounding, as the
// epilogue's. Public for its GPU test.
void gemm_bias_through_f32(DType in, bool trans_a, bool trans_b, int M, int N, int K, const void* A, int lda,
                           const void* B, int ldb, bf16* C, int ldc, bool accumulate, const float* bias, Stream s);
void add_bias_round_bf16(bf16* out, int ldo, const float* sum, const float* bias, int rows, int N, bool accumulate,
                         Stream s);
float* gemm_scratch(size_t floats);
// kernels::gemm_bias_gelu_bf16 (kernels/gemm.h): cuBLASLt's GELU_AUX_BIAS
// epilogue writes act and, as its auxiliary output, pre. Where cuBLASLt has
// no algorithm for it (or N is not a multiple of 8, the auxiliary matrix's
// rule), the GEMM with its bias into pre, then bias_gelu_forward_bf16.
void gemm_bias_gelu_bf16(int M, int N, int K, const bf16* A, const bf16* B, const float* bias, bf16* pre, bf16* act,
                         Stream s);
// kernels::gemm_dgelu_bf16 (kernels/gemm.h): cuBLASLt's DGELU_BGRAD epilogue.
// gemm_dgelu_fuses: whether cuBLASLt has an algorithm for the problem (its
// plan made and kept; the pointers' alignments steer it); gemm_dgelu_bf16 launches
// it (one the check refused is a bug: an abort).
bool gemm_dgelu_fuses(int M, int N, int K, const bf16* dy, const bf16* W, const bf16* pre, const bf16* dpre,
                      const float* dbias);
void gemm_dgelu_bf16(int M, int N, int K, const bf16* dy, const bf16* W, const bf16* pre, bf16* dpre, float* dbias,
                     Stream s);
// C (M,N) = A (M,K) B (K,N), f32 row-major and packed, with TF32 products
// (CUBLAS_COMPUTE_32F_FAST_TF32: 10-bit mantissas in, f32 accumulate). Not for
// training (no crucible precision uses it): the probe's tf32 rows, what a
// PyTorch user with allow_tf32 gets.
void gemm_tf32(int M, int N, int K, const float* A, const float* B, float* C, Stream s);

// AdamW over flat buffers, one thread per element (a grid-stride loop):
// p, m, v (n) f32 updated in place; g (n) f32 read, times s->clip; p_bf16 (n)
// rewritten from p when not null (the bf16 copy). lr, the clip factor and the
// bias corrections are read from s in device memory (adamw_scalars, one
// thread, fills them from the step's norm and count): no host value of the
// step is baked into a launch, so a captured graph serves every step.
void adamw_scalars(StepScalars* s, float max_norm, float beta1, float beta2, Stream st);
void adamw(float* p, bf16* p_bf16, const float* g, float* m, float* v, size_t n, const StepScalars* s, float beta1,
           float beta2, float eps, float weight_decay, Stream st);
void adamw_bf16_moments(float* p, bf16* p_bf16, const float* g, bf16* m, bf16* v, size_t n, const StepScalars* s,
                        float beta1, float beta2, float eps, float weight_decay, Stream st);

// LayerNorm (layernorm.cu), bias + GELU (gelu.cu), softmax cross-entropy
// (cross_entropy.cu): one warp per LayerNorm row, one block per vocabulary
// row; the weight and bias gradients are column sums in a fixed order
// (device_util.cuh), never atomics.
void residual_layernorm_forward(float* resid_out, float* out, float* mean, float* rstd, const float* a, const float* b,
                                const float* w, const float* bias, int N, int C, Stream s);
void residual_layernorm_forward_bf16(float* resid_out, bf16* out, float* mean, float* rstd, const float* a,
                                     const float* b, const float* w, const float* bias, int N, int C, Stream s);
void layernorm_backward(float* dx, float* dw, float* dbias, const float* dout, const float* x, const float* w,
                        const float* mean, const float* rstd, int N, int C, Stream s);
void bias_gelu_forward(float* out, float* pre, const float* bias, int N, int C, Stream s);
void bias_gelu_forward_bf16(bf16* out, bf16* pre, const float* bias, int N, int C, Stream s);
void bias_gelu_backward(float* dpre, float* dbias, const float* dout, const float* pre, int N, int C, Stream s);
void bias_gelu_backward_bf16(bf16* dpre, float* dbias, const float* dout, const bf16* pre, int N, int C, Stream s);
void softmax_cross_entropy(float* losses, float* logits, const int32_t* targets, int N, int V, float dscale,
                           Stream s);
void softmax_cross_entropy_bf16(float* losses, bf16* logits, const int32_t* targets, int N, int V, float dscale,
                                Stream s);
void logsumexp_rows(float* max, float* log_sum, const float* logits, int N, int V, Stream s);
void logsumexp_rows_bf16(float* max, float* log_sum, const bf16* logits, int N, int V, Stream s);
void softmax_xent_backward(float* logits, const float* max, const float* log_sum, const int32_t* targets, int offset,
                           int N, int V, float dscale, Stream s);
void softmax_xent_backward_bf16(bf16* logits, const float* max, const float* log_sum, const int32_t* targets,
                                int offset, int N, int V, float dscale, Stream s);

// Causal attention (attention.cu): tiled, online softmax, no T x T scores;
// backward without atomics (dK, dV per key tile, dQ per query tile). Head
// sizes up to 128.
void attention_forward(float* out, float* lse, const float* qkv, int B, int T, int C, int NH, Stream s);
void attention_forward_bf16(bf16* out, float* lse, const bf16* qkv, int B, int T, int C, int NH, Stream s);
void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* out, const float* lse, int B,
                        int T, int C, int NH, Stream s);
void attention_backward_bf16(bf16* dqkv, const float* dout, const bf16* qkv, const bf16* out, const float* lse, int B,
                             int T, int C, int NH, Stream s);
// The same in bf16 on the tensor cores (attention_tc.cu: WMMA, P, dO and dS
// rounded to bf16 as the CPU's pairs form and FlashAttention-2 do), for head
// sizes 32, 64 and 128; the table runs these where attention_tc_supports().
bool attention_tc_supports(int C, int NH);
void attention_forward_bf16_tc(bf16* out, float* lse, const bf16* qkv, int B, int T, int C, int NH, Stream s);
void attention_backward_bf16_tc(bf16* dqkv, const float* dout, const bf16* qkv, const bf16* out, const float* lse,
                                int B, int T, int C, int NH, Stream s);

// The embedding (embedding.cu): its backward adds each dwte float's terms
// in token order, as the CPU does (the same bits).
void embedding_backward(float* dwte, float* dwpe, const float* dout, const int32_t* idx, int64_t lo, int64_t hi,
                        int B, int T, int C, Stream s);

// The step's small passes and the embedding's forward (step_passes.cu, embedding.cu):
// signatures.inc's contracts, plus the stream. The sums are deterministic
// (a fixed grid of partial sums in double, then one block in a fixed tree)
// and add into a double in device memory: nothing is read back.
void embedding_forward(float* out, const int32_t* idx, const float* wte, const float* wpe, int B, int T, int C,
                       Stream s);
void embedding_lookup(float* out, const int32_t* idx, const float* wte, int64_t lo, int64_t hi, int N, int C,
                      Stream s);
void add_positions(float* out, const float* wpe, int first, int N, int T, int C, Stream s);
void add(float* out, const float* a, const float* b, size_t n, Stream s);
void fill(float* x, size_t n, float value, Stream s);
void copy_bytes(void* dst, const void* src, size_t bytes, Stream s);
void add_mean(double* sum, const float* x, size_t n, Stream s);
void add_sum_squares(double* sum, const float* x, size_t n, Stream s);
void convert_to_bf16(bf16* out, const float* in, size_t n, Stream s);
void convert_to_f32(float* out, const bf16* in, size_t n, Stream s);
void sum_bf16_pieces(float* sum, bf16* rounded, const bf16* pieces, int W, size_t n, Stream s);
void target_logits(float* out, const float* logits, const int32_t* targets, int64_t lo, int64_t hi, int N,
                   Stream s);
void target_logits_bf16(float* out, const bf16* logits, const int32_t* targets, int64_t lo, int64_t hi, int N,
                        Stream s);
void combine_vocab_stats(float* max, float* log_sum, float* losses, const float* all, const int32_t* targets, int R,
                         int N, Stream s);

}  // namespace crucible::kernels::cuda

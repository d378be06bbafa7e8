// The CUDA backend's host API in a build without the CUDA toolkit
// (kernels/cuda/cuda.h): nothing to run on, said in one line.
#include <cstdio>
#include <cstdlib>

#include "kernels/cuda/cuda.h"
#include "kernels/kernels.h"

namespace crucible::kernels::cuda {

namespace {
Status absent() { return Status::invalid("[cuda] this crucible was built without CUDA (no nvcc at build time)"); }
// Unreachable: no GPU scope can be opened without the backend (use_device refuses).
[[noreturn]] void unreachable() {
  std::fprintf(stderr, "%s\n", absent().message().c_str());
  std::abort();
}
}  // namespace

const KernelTable& kernel_table() {
  static const KernelTable none{};
  return none;
}

bool compiled() { return false; }
int device_count() { return 0; }
Result<DeviceInfo> device_info(int) { return absent(); }
Status use_device(int) { return absent(); }
Result<uint64_t> free_memory(int) { return absent(); }
Status copy_to_device(void*, const void*, size_t, Stream) { return absent(); }
Status copy_to_host(void*, const void*, size_t, Stream) { return absent(); }
Status synchronize(Stream) { return absent(); }
Result<bool> enable_peer_access(int, int) { return absent(); }
Status copy_peer(void*, int, const void*, int, size_t, Stream) { return absent(); }
Status last_error(const char*) { return absent(); }
Result<Stream> create_stream(int) { return absent(); }
void destroy_stream(Stream) {}
Status begin_capture(Stream, bool) { return absent(); }
bool graph_split(const Graph*) { return false; }
Result<Graph*> end_capture(Stream) { return absent(); }
Status launch_graph(Graph*, Stream) { return absent(); }
bool capture_refused(const std::string&) { return false; }
int live_graphs() { return 0; }
void destroy_graph(Graph*) {}
Status stream_wait(Stream, Stream) { return absent(); }
Status set_kernel_timing(bool) { return absent(); }
bool kernel_timing() { return false; }
int kernel_begin(Stream) { return -1; }
void kernel_end(int, KernelClass, Stream) {}
Result<KernelTimes> collect_kernel_times(Stream) { return absent(); }
int part_begin(Stream) { return -1; }
void part_end(int, int, Stream) {}
Status collect_part_times(Stream, double*, int) { return Status::ok(); }
void discard_part_times() {}
bool capturing() { return false; }
void adamw_scalars(StepScalars*, float, float, float, Stream) { unreachable(); }
void adamw(float*, bf16*, const float*, float*, float*, size_t, const StepScalars*, float, float, float, float,
           Stream) {
  unreachable();
}
void gemm(DType, DType, bool, bool, int, int, int, const void*, int, const void*, int, void*, int, bool, const float*,
          Stream) {
  unreachable();
}
void gemm_tf32(int, int, int, const float*, const float*, float*, Stream) { unreachable(); }
void gemm_bias_through_f32(DType, bool, bool, int, int, int, const void*, int, const void*, int, bf16*, int, bool,
                           const float*, Stream) {
  unreachable();
}
void gemm_bias_gelu_bf16(int, int, int, const bf16*, const bf16*, const float*, bf16*, bf16*, Stream) {
  unreachable();
}
bool gemm_dgelu_fuses(int, int, int, const bf16*, const bf16*, const bf16*, const bf16*, const float*) {
  return false;
}
void gemm_dgelu_bf16(int, int, int, const bf16*, const bf16*, const bf16*, bf16*, float*, Stream) { unreachable(); }
void embedding_forward(float*, const int32_t*, const float*, const float*, int, int, int, Stream) { unreachable(); }
void embedding_lookup(float*, const int32_t*, const float*, int64_t, int64_t, int, int, Stream) { unreachable(); }
void add_positions(float*, const float*, int, int, int, int, Stream) { unreachable(); }
void add(float*, const float*, const float*, size_t, Stream) { unreachable(); }
void fill(float*, size_t, float, Stream) { unreachable(); }
void copy_bytes(void*, const void*, size_t, Stream) { unreachable(); }
void add_mean(double*, const float*, size_t, Stream) { unreachable(); }
void add_sum_squares(double*, const float*, size_t, Stream) { unreachable(); }
void convert_to_bf16(bf16*, const float*, size_t, Stream) { unreachable(); }
void convert_to_f32(float*, const bf16*, size_t, Stream) { unreachable(); }
void sum_bf16_pieces(float*, bf16*, const bf16*, int, size_t, Stream) { unreachable(); }
void target_logits(float*, const float*, const int32_t*, int64_t, int64_t, int, Stream) { unreachable(); }
void target_logits_bf16(float*, const bf16*, const int32_t*, int64_t, int64_t, int, Stream) { unreachable(); }
void combine_vocab_stats(float*, float*, float*, const float*, const int32_t*, int, int, Stream) { unreachable(); }
void adamw_bf16_moments(float*, bf16*, const float*, bf16*, bf16*, size_t, const StepScalars*, float, float, float,
                        float, Stream) {
  unreachable();
}
void residual_layernorm_forward(float*, float*, float*, float*, const float*, const float*, const float*, const float*,
                                int, int, Stream) {
  unreachable();
}
void residual_layernorm_forward_bf16(float*, bf16*, float*, float*, const float*, const float*, const float*,
                                     const float*, int, int, Stream) {
  unreachable();
}
void layernorm_backward(float*, float*, float*, const float*, const float*, const float*, const float*, const float*,
                        int, int, Stream) {
  unreachable();
}
void bias_gelu_forward(float*, float*, const float*, int, int, Stream) { unreachable(); }
void bias_gelu_forward_bf16(bf16*, bf16*, const float*, int, int, Stream) { unreachable(); }
void bias_gelu_backward(float*, float*, const float*, const float*, int, int, Stream) { unreachable(); }
void bias_gelu_backward_bf16(bf16*, float*, const float*, const bf16*, int, int, Stream) { unreachable(); }
void softmax_cross_entropy(float*, float*, const int32_t*, int, int, float, Stream) { unreachable(); }
void softmax_cross_entropy_bf16(float*, bf16*, const int32_t*, int, int, float, Stream) { unreachable(); }
void logsumexp_rows(float*, float*, const float*, int, int, Stream) { unreachable(); }
void logsumexp_rows_bf16(float*, float*, const bf16*, int, int, Stream) { unreachable(); }
void softmax_xent_backward(float*, const float*, const float*, const int32_t*, int, int, int, float, Stream) {
  unreachable();
}
void softmax_xent_backward_bf16(bf16*, const float*, const float*, const int32_t*, int, int, int, float, Stream) {
  unreachable();
}
void embedding_backward(float*, float*, const float*, const int32_t*, int64_t, int64_t, int, int, int, Stream) {
  unreachable();
}
void attention_forward(float*, float*, const float*, int, int, int, int, Stream) { unreachable(); }
bool attention_tc_supports(int, int) { return false; }
void attention_forward_bf16_tc(bf16*, float*, const bf16*, int, int, int, int, Stream) { unreachable(); }
void attention_backward_bf16_tc(bf16*, const float*, const bf16*, const bf16*, const float*, int, int, int, int,
                                Stream) {
  unreachable();
}
void attention_forward_bf16(bf16*, float*, const bf16*, int, int, int, int, Stream) { unreachable(); }
void attention_backward(float*, const float*, const float*, const float*, const float*, int, int, int, int, Stream) {
  unreachable();
}
void attention_backward_bf16(bf16*, const float*, const bf16*, const bf16*, const float*, int, int, int, int, Stream) {
  unreachable();
}

}  // namespace crucible::kernels::cuda

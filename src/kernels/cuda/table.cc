// The CUDA backend's kernel table (kernels/cuda/cuda.h): signatures.inc's
// entries as launches on the calling thread's stream
// (kernels/device_scope.h). Entries the backend has not written yet stay
// null, and kernels.h's wrappers refuse them by name.
#include "kernels/cuda/cuda.h"
#include "kernels/device_scope.h"
#include "kernels/kernels.h"

namespace crucible::kernels::cuda {

namespace {

Stream stream() { return current_target().stream; }

const KernelTable table = {
    .isa = "cuda",
    .embedding_forward = [](float* out, const int32_t* idx, const float* wte, const float* wpe, int B, int T,
                            int C) { embedding_forward(out, idx, wte, wpe, B, T, C, stream()); },
    .embedding_backward = [](float* dwte, float* dwpe, const float* dout, const int32_t* idx, int64_t lo, int64_t hi,
                             int B, int T,
                             int C) { embedding_backward(dwte, dwpe, dout, idx, lo, hi, B, T, C, stream()); },
    .embedding_lookup = [](float* out, const int32_t* idx, const float* wte, int64_t lo, int64_t hi, int N,
                           int C) { embedding_lookup(out, idx, wte, lo, hi, N, C, stream()); },
    .add_positions = [](float* out, const float* wpe, int first, int N, int T,
                        int C) { add_positions(out, wpe, first, N, T, C, stream()); },
    .residual_layernorm_forward = [](float* resid_out, float* out, float* mean, float* rstd, const float* a,
                                     const float* b, const float* w, const float* bias, int N, int C) {
      residual_layernorm_forward(resid_out, out, mean, rstd, a, b, w, bias, N, C, stream());
    },
    .layernorm_backward = [](float* dx, float* dw, float* dbias, const float* dout, const float* x, const float* w,
                             const float* mean, const float* rstd, int N,
                             int C) { layernorm_backward(dx, dw, dbias, dout, x, w, mean, rstd, N, C, stream()); },
    .bias_gelu_forward = [](float* out, float* pre, const float* bias, int N,
                            int C) { bias_gelu_forward(out, pre, bias, N, C, stream()); },
    .bias_gelu_backward = [](float* dpre, float* dbias, const float* dout, const float* pre, int N,
                             int C) { bias_gelu_backward(dpre, dbias, dout, pre, N, C, stream()); },
    .attention_forward = [](float* out, float* lse, const float* qkv, int B, int T, int C,
                            int NH) { attention_forward(out, lse, qkv, B, T, C, NH, stream()); },
    .attention_backward = [](float* dqkv, const float* dout, const float* qkv, const float* out, const float* lse,
                             int B, int T, int C,
                             int NH) { attention_backward(dqkv, dout, qkv, out, lse, B, T, C, NH, stream()); },
    .attention_paged = nullptr,  // serving on the GPU: not written yet
    .softmax_cross_entropy = [](float* losses, float* logits, const int32_t* targets, int N, int V,
                                float dscale) { softmax_cross_entropy(losses, logits, targets, N, V, dscale, stream()); },
    .logsumexp_rows = [](float* max, float* log_sum, const float* logits, int N,
                         int V) { logsumexp_rows(max, log_sum, logits, N, V, stream()); },
    .softmax_xent_backward = [](float* logits, const float* max, const float* log_sum, const int32_t* targets,
                                int offset, int N, int V, float dscale) {
      softmax_xent_backward(logits, max, log_sum, targets, offset, N, V, dscale, stream());
    },
    .adamw_scalars = [](StepScalars* s, float max_norm, float beta1,
                        float beta2) { adamw_scalars(s, max_norm, beta1, beta2, stream()); },
    .adamw = [](float* p, bf16* p_bf16, const float* g, float* m, float* v, size_t n, const StepScalars* s,
                float beta1, float beta2, float eps,
                float weight_decay) { adamw(p, p_bf16, g, m, v, n, s, beta1, beta2, eps, weight_decay, stream()); },
    .adamw_bf16_moments = [](float* p, bf16* p_bf16, const float* g, bf16* m, bf16* v, size_t n, const StepScalars* s,
                             float beta1, float beta2, float eps, float weight_decay) {
      adamw_bf16_moments(p, p_bf16, g, m, v, n, s, beta1, beta2, eps, weight_decay, stream());
    },
    .add_sum_squares = [](double* sum, const float* x, size_t n) { add_sum_squares(sum, x, n, stream()); },
    .add = [](float* out, const float* a, const float* b, size_t n) { add(out, a, b, n, stream()); },
    .fill = [](float* x, size_t n, float value) { fill(x, n, value, stream()); },
    .copy_bytes = [](void* dst, const void* src, size_t bytes) { copy_bytes(dst, src, bytes, stream()); },
    .add_mean = [](double* sum, const float* x, size_t n) { add_mean(sum, x, n, stream()); },
    .target_logits = [](float* out, const float* logits, const int32_t* targets, int64_t lo, int64_t hi,
                        int N) { target_logits(out, logits, targets, lo, hi, N, stream()); },
    .target_logits_bf16 = [](float* out, const bf16* logits, const int32_t* targets, int64_t lo, int64_t hi,
                             int N) { target_logits_bf16(out, logits, targets, lo, hi, N, stream()); },
    .combine_vocab_stats = [](float* max, float* log_sum, float* losses, const float* all, const int32_t* targets,
                              int R, int N) { combine_vocab_stats(max, log_sum, losses, all, targets, R, N, stream()); },
    .residual_layernorm_forward_bf16 = [](float* resid_out, bf16* out, float* mean, float* rstd, const float* a,
                                          const float* b, const float* w, const float* bias, int N, int C) {
      residual_layernorm_forward_bf16(resid_out, out, mean, rstd, a, b, w, bias, N, C, stream());
    },
    .bias_gelu_forward_bf16 = [](bf16* out, bf16* pre, const float* bias, int N,
                                 int C) { bias_gelu_forward_bf16(out, pre, bias, N, C, stream()); },
    .bias_gelu_backward_bf16 = [](bf16* dpre, float* dbias, const float* dout, const bf16* pre, int N,
                                  int C) { bias_gelu_backward_bf16(dpre, dbias, dout, pre, N, C, stream()); },
    // bf16 attention on the tensor cores where the head size allows
    // (attention_tc.cu), else the CUDA-core kernels.
    .attention_forward_bf16 = [](bf16* out, float* lse, const bf16* qkv, int B, int T, int C, int NH) {
      if (attention_tc_supports(C, NH)) return attention_forward_bf16_tc(out, lse, qkv, B, T, C, NH, stream());
      attention_forward_bf16(out, lse, qkv, B, T, C, NH, stream());
    },
    .attention_backward_bf16 = [](bf16* dqkv, const float* dout, const bf16* qkv, const bf16* out, const float* lse,
                                  int B, int T, int C, int NH) {
      if (attention_tc_supports(C, NH))
        return attention_backward_bf16_tc(dqkv, dout, qkv, out, lse, B, T, C, NH, stream());
      attention_backward_bf16(dqkv, dout, qkv, out, lse, B, T, C, NH, stream());
    },
    .attention_forward_bf16_pairs = nullptr,  // the CPU's emulation of vdpbf16ps: no GPU counterpart
    .attention_backward_bf16_pairs = nullptr,
    .softmax_cross_entropy_bf16 = [](float* losses, bf16* logits, const int32_t* targets, int N, int V,
                                     float dscale) {
      softmax_cross_entropy_bf16(losses, logits, targets, N, V, dscale, stream());
    },
    .logsumexp_rows_bf16 = [](float* max, float* log_sum, const bf16* logits, int N,
                              int V) { logsumexp_rows_bf16(max, log_sum, logits, N, V, stream()); },
    .softmax_xent_backward_bf16 = [](bf16* logits, const float* max, const float* log_sum, const int32_t* targets,
                                     int offset, int N, int V, float dscale) {
      softmax_xent_backward_bf16(logits, max, log_sum, targets, offset, N, V, dscale, stream());
    },
    .convert_to_bf16 = [](bf16* out, const float* in, size_t n) { convert_to_bf16(out, in, n, stream()); },
    .convert_to_f32 = [](float* out, const bf16* in, size_t n) { convert_to_f32(out, in, n, stream()); },
    .sum_bf16_pieces = [](float* sum, bf16* rounded, const bf16* pieces, int W,
                          size_t n) { sum_bf16_pieces(sum, rounded, pieces, W, n, stream()); },
};

}  // namespace

const KernelTable& kernel_table() { return table; }

}  // namespace crucible::kernels::cuda

#include "kernels/gemm.h"
#include "kernels/kernels.h"
#include "nn/layers.h"

namespace crucible::nn {

// x (N,C) -> pre (N,H) = x W_fc (+ b_fc) ; act = gelu(pre (+ b_fc)) ; out (N,C) =
// act W_proj + b_proj; sequence parallel: x and out are (N/tp, C) rows (as
// CausalSelfAttention). x, pre, act of act_type: f32 adds b_fc in the GELU
// kernel, bf16 in the GEMM (pre is rounded once, from the biased sum).
// bf16 on a device whose GEMM fuses the GELU (a GPU: cuBLASLt's epilogue)
// writes pre and act in the GEMM's pass (kernels/gemm.h); not where
// selective recompute makes act again from pre with the kernel (its bits
// must be the forward's), nor with the sequence-parallel gather.
void MLP::forward(Arena& arena, float* out, const void* x, int N) {
  const int H = c_fc.out;
  const bool bf = act_type == DType::bf16;
  pre = arena_act(arena, size_t(N) * H, act_type);
  const bool fused = bf && !recompute && !tp.sequence && kernels::gemm_gelu_fuses();
  if (fused) {
    act = arena_act(arena, size_t(N) * H, act_type);
    c_fc.forward_gelu(pre, act, x, N);
    c_proj.x = act;
  } else {
    tp.first_forward(arena, c_fc, pre, x, N, /*with_bias=*/bf);
  }
  Arena::Mark m = arena.mark();
  if (!fused) gelu(arena, N, bf ? nullptr : c_fc.b.value);
  tp.last_forward(arena, c_proj, out, act, N);
  if (recompute) arena.rewind(m);  // act is made again by backward
}

// act (N,H) = gelu(pre (+ bias)), act from the arena. Again in backward,
// pre already holds its bias: bias null.
void MLP::gelu(Arena& arena, int N, const float* bias) {
  const int H = c_fc.out;
  act = arena_act(arena, size_t(N) * H, act_type);
  if (act_type == DType::bf16)
    kernels::bias_gelu_forward_bf16(static_cast<bf16*>(act), static_cast<bf16*>(pre), bias, N, H);
  else
    kernels::bias_gelu_forward(static_cast<float*>(act), static_cast<float*>(pre), bias, N, H);
  c_proj.x = act;
}

// dout (N,C) -> dx (N,C); sequence parallel: (N/tp, C) rows of each.
void MLP::backward(Arena& arena, float* dx, const float* dout, int N, BackwardPass pass) {
  const int H = c_fc.out;
  if (pass == BackwardPass::kWeight) {
    c_proj.backward(nullptr, nullptr, N, true, pass);
    tp.first_backward(arena, c_fc, nullptr, nullptr, N, false, pass);
    return;
  }
  const bool keep = pass == BackwardPass::kInput;  // the weight pass reads these later
  Arena::Mark m = arena.mark();
  if (recompute) gelu(arena, N, nullptr);
  const void* dproj = tp.output_grad(arena, c_proj, dout, N, keep);
  // c_proj's input gradient (f32), then through the GELU into dpre. bf16 on
  // a device that fuses the two (kernels::gemm_dgelu_bf16: a GPU's cuBLASLt
  // epilogue) never stores dact; its room is kept all the same and holds
  // only the bias gradient, so that the arena's peak (nn::GPT::
  // activation_bytes, which the run's memory check allows for) is the same
  // whether or not cuBLASLt fuses the problem, which only the run knows.
  float* dact = arena.allocate_array<float>(size_t(N) * H);
  void* dpre = dact;  // f32: in place
  if (act_type == DType::bf16) {
    dpre = arena_act(arena, size_t(N) * H, act_type);
    const bf16* pre16 = static_cast<const bf16*>(pre);
    if (c_proj.backward_dgelu(static_cast<bf16*>(dpre), dact, dproj, pre16, N, pass)) {
      kernels::add(c_fc.b.grad, c_fc.b.grad, dact, size_t(H));
    } else {
      c_proj.backward(dact, dproj, N, true, pass);
      kernels::bias_gelu_backward_bf16(static_cast<bf16*>(dpre), c_fc.b.grad, dact, pre16, N, H);
    }
  } else {
    c_proj.backward(dact, dproj, N, true, pass);
    kernels::bias_gelu_backward(dact, c_fc.b.grad, dact, static_cast<const float*>(pre), N, H);
  }
  tp.first_backward(arena, c_fc, dx, dpre, N, /*with_bias=*/false, pass);
  if (!keep) arena.rewind(m);
}

}  // namespace crucible::nn

// Test oracles for attention whose products run in bf16 (the CPU's pairs
// form, the GPU's tensor-core kernels), in double. Shared by
// tests/kernels/bf16_kernels_test.cc and tests/gpu/cuda_kernels_test.cc.
#pragma once
#include <vector>

namespace crucible::testing {

// The attention gradient as a kernel that reads `out` computes it, in
// double: D_i = dO_i . out_i from the out given, where ref::attention_backward
// recomputes D_i = sum_j P_ij dP_ij exactly and ignores out. With the exact
// out the two agree; with the bf16-rounded out the backward reads, D is off
// by dD_i = dO_i . (bf16(O_i) - O_i), up to 2^-8 sum_c |dO_ic O_ic|, and dQ_i
// by -scale dD_i sum_j P_ij k_j, dK_j by -scale sum_i P_ij dD_i q_i (dV does
// not use D): absolute errors of up to ~1e-3 at these shapes (hs 64), so
// many bf16 ulps of the smaller entries. That is the storage's effect, not
// the kernel's, so the kernel's dQ and dK are checked against this.
//   dqkv (B,T,3C) = ; dout, out (B,T,C) ; qkv (B,T,3C)
std::vector<float> attention_backward_reading_out(const std::vector<float>& dout, const std::vector<float>& qkv,
                                                  const std::vector<float>& out, int B, int T, int C, int NH);

// How far the fast kernels may be from the exact results because they run
// every product of attention in bf16 pairs (tile_gemm<uint32_t>: vdpbf16ps on
// AVX512_BF16, its arithmetic in two FMAs elsewhere), as FlashAttention-2
// does in bf16, while the references keep f32 operands. With u = 2^-8, one
// rounding's relative error, and P, dP, D, dS the exact values (D from the
// stored out, as the kernel reads it):
//   out_ic  P rounded:            u sum_j P_ij |v_jc|
//   dv_jc   P and dO rounded:     (2u + u^2) sum_i P_ij |dO_ic|
//   dS_ij   dO rounded in dP and D alike, so dS moves by
//           P_ij (dO'_i - dO_i) . (v_j - out_i):  e_ij = u P_ij sum_c |dO_ic| |v_jc - out_ic|,
//           then rounded:         f_ij = (1 + u) e_ij + u |dS_ij|
//   dk_jc   scale sum_i f_ij |q_ic|        dq_ic   scale sum_j f_ij |k_jc|
// Each is a worst case (every rounding one way); the f32 kernels' own
// tolerances and the output's bf16 rounding come on top.
//   out (B,T,C) ; dqkv (B,T,3C) ; qkv (B,T,3C), dout, out_stored (B,T,C)
struct DotBounds {
  std::vector<double> out, dqkv;
};
DotBounds dot_bounds(const std::vector<float>& qkv, const std::vector<float>& dout,
                     const std::vector<float>& out_stored, int B, int T, int C, int NH);

}  // namespace crucible::testing

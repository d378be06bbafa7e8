// Included by every per-ISA kernel source. Those sources are compiled once per
// instruction set (see CMakeLists.txt) with CRUCIBLE_ISA naming the namespace
// (isa_generic, isa_avx2, isa_avx512); this header declares the fast kernels
// of signatures.inc in that namespace and the table that exports them.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/kernels.h"

#ifndef CRUCIBLE_ISA
#error "isa/*.cc must be compiled with -DCRUCIBLE_ISA=<namespace>"
#endif

namespace crucible::kernels::CRUCIBLE_ISA {

#include "kernels/signatures.inc"

// attention_*_bf16 with every product in bf16 pairs (isa/tile_gemm.h), what
// the avx512bf16 table's attention_*_bf16 are; on every ISA, for tests.
void attention_forward_bf16_pairs(bf16* out, float* lse, const bf16* qkv, int B, int T, int C,
                                  int NH);
void attention_backward_bf16_pairs(bf16* dqkv, const float* dout, const bf16* qkv,
                                   const bf16* out, const float* lse, int B, int T, int C, int NH);

extern const KernelTable table;

}  // namespace crucible::kernels::CRUCIBLE_ISA

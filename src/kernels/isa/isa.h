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

extern const KernelTable table;

}  // namespace crucible::kernels::CRUCIBLE_ISA

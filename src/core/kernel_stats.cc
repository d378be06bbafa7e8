#include "core/kernel_stats.h"

namespace crucible {

const char* kernel_class_name(KernelClass c) {
  switch (c) {
    case KernelClass::gemm: return "gemm";
    case KernelClass::attention: return "attention";
    case KernelClass::layernorm: return "layernorm";
    case KernelClass::gelu: return "gelu";
    case KernelClass::embedding: return "embedding";
    case KernelClass::cross_entropy: return "cross_entropy";
    case KernelClass::optimizer: return "optimizer";
    case KernelClass::other: return "other";
    case KernelClass::count: break;
  }
  return "?";
}

KernelStatsTable& kernel_stats() {
  static KernelStatsTable t{};
  return t;
}

void reset_kernel_stats() { kernel_stats() = KernelStatsTable{}; }

}  // namespace crucible

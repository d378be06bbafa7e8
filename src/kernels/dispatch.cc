// Chooses the kernel table at run time from what the CPU supports.
#include <string>

#include "kernels/kernels.h"

namespace crucible::kernels {
namespace isa_generic { extern const KernelTable table; }
namespace isa_avx2 { extern const KernelTable table; }
namespace isa_avx512 { extern const KernelTable table; }
namespace isa_avx512bf16 { extern const KernelTable table; }

namespace {
bool cpu_supports(const KernelTable* t) {
  std::string name = t->isa;
  __builtin_cpu_init();
  if (name == "avx2") return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  if (name == "avx512") return avx512;
  if (name == "avx512bf16") return avx512 && __builtin_cpu_supports("avx512bf16");
  return true;
}

const KernelTable*& current() {
  static const KernelTable* t = supported_tables().back();
  return t;
}
}  // namespace

std::vector<const KernelTable*> compiled_tables() {
  return {&isa_generic::table, &isa_avx2::table, &isa_avx512::table, &isa_avx512bf16::table};
}

std::vector<const KernelTable*> supported_tables() {
  std::vector<const KernelTable*> out;
  for (auto* t : compiled_tables())
    if (cpu_supports(t)) out.push_back(t);
  return out;
}

const KernelTable& active() { return *current(); }

bool select_isa(const std::string& name) {
  for (auto* t : supported_tables())
    if (name == t->isa) {
      current() = t;
      return true;
    }
  return false;
}

}  // namespace crucible::kernels

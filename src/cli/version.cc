#include <cstdio>

#include "cli/commands.h"
#include "core/threads.h"
#include "kernels/kernels.h"

namespace crucible::cli {

void print_version() {
  std::printf("crucible %s (kernels: %s, threads: %d)\n", CRUCIBLE_VERSION_STRING,
              kernels::active().isa, num_threads());
}

}  // namespace crucible::cli

// The one harness every kernel test uses: for every ISA table this CPU can
// run and every shape given, the test body fills fresh random inputs (a new
// seed each run, printed on failure so it can be replayed with
// CRUCIBLE_TEST_SEED=<seed>), runs the fast kernel and its naive reference,
// and returns the buffers to compare. The harness checks each pair within
// its tolerance and reports the worst element.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/rng.h"
#include "kernels/kernels.h"

namespace crucible::testing {

struct Compare {
  std::string what;
  std::vector<float> got;   // from the fast kernel
  std::vector<float> want;  // from the reference
  double atol = 1e-5;
  double rtol = 1e-4;
};

using KernelShape = std::vector<int>;
using KernelBody = std::function<std::vector<Compare>(const kernels::KernelTable& k,
                                                      const KernelShape& shape, Rng& rng)>;

// Runs body for every supported ISA x shape; records gtest failures.
void check_kernel(const std::string& kernel, const std::vector<KernelShape>& shapes,
                  const KernelBody& body);

// Seed for this test process (CRUCIBLE_TEST_SEED or fresh from the clock).
uint64_t test_seed();

std::vector<float> random_vector(Rng& rng, size_t n, float lo = -1.0f, float hi = 1.0f);

// AdamW's step scalars for step t at learning rate lr with clip factor clip,
// formed by the reference adamw_scalars (from a norm that gives that clip
// factor, or none: clip 1).
kernels::StepScalars adamw_step(float lr, float clip, int t, float beta1, float beta2);

}  // namespace crucible::testing

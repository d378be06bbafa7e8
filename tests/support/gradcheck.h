// Finite-difference gradient checks for the nn layers. The layers compute in
// f32; the check evaluates the scalar loss in double (sum of f32 outputs times
// fixed random weights, accumulated in double) and takes central differences
// x +- eps, which cancels the first-order error term. For each checked buffer
// it compares the analytic gradient at the element of largest magnitude and
// at several random elements:
//   |fd - analytic| <= rtol * max(|fd|, |analytic|) + atol_frac * max|analytic| .
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "core/rng.h"

namespace crucible::testing {

struct GradTarget {
  std::string name;
  float* x;               // the input or parameter being perturbed
  size_t n;
  const float* analytic;  // its analytic gradient (computed before the check)
};

struct GradCheckOptions {
  double eps = 1e-2;
  double rtol = 2e-2;
  double atol_frac = 2e-3;
  int random_samples = 6;
};

// loss() recomputes the forward pass from the current buffer contents.
void grad_check(const std::function<double()>& loss, const std::vector<GradTarget>& targets,
                Rng& rng, const GradCheckOptions& opt = {});

// sum_i w[i] * y[i] in double.
double weighted_sum(const float* y, const std::vector<float>& w);

}  // namespace crucible::testing

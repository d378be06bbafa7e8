// Comparing the weights of two runs' checkpoints.
#pragma once
#include <string>

namespace crucible::testutil {

// ||a - b|| / ||a|| over every tensor of two safetensors files (L2), with a
// gtest failure if either cannot be read or their tensors differ. Not a max
// over elements: the key bias has no gradient in exact arithmetic, so two
// layouts update it with Adam-normalised rounding noise (see
// tests/parity/gpt_parity_test.cc) and single elements differ at the 1e-4
// level whatever the reduction order.
double weight_difference(const std::string& a_path, const std::string& b_path);

}  // namespace crucible::testutil

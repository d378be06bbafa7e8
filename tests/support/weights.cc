#include "support/weights.h"

#include <gtest/gtest.h>

#include <cmath>

#include "ckpt/safetensors.h"

namespace crucible::testutil {

double weight_difference(const std::string& a_path, const std::string& b_path) {
  auto a = ckpt::read_safetensors(a_path);
  auto b = ckpt::read_safetensors(b_path);
  EXPECT_TRUE(a && b) << a_path << " / " << b_path;
  if (!a || !b) return 1e9;
  EXPECT_EQ(a->tensors.size(), b->tensors.size()) << "the same tensors, whatever the layout";
  double diff = 0, norm = 0;
  for (const auto& [name, t] : a->tensors) {
    const ckpt::LoadedTensor* u = b->find(name);
    EXPECT_NE(u, nullptr) << name;
    if (!u) return 1e9;
    for (int64_t i = 0; i < t.numel(); ++i) {
      double d = double(t.f32()[i]) - u->f32()[i];
      diff += d * d;
      norm += double(t.f32()[i]) * t.f32()[i];
    }
  }
  return std::sqrt(diff / norm);
}

}  // namespace crucible::testutil

// Element types crucible stores: f32 and bf16 (the upper half of an IEEE f32).
// bf16 conversion rounds to nearest even; NaN stays NaN.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace crucible {

enum class DType : uint8_t { f32, bf16 };

constexpr size_t dtype_size(DType t) { return t == DType::f32 ? 4 : 2; }
constexpr std::string_view dtype_name(DType t) { return t == DType::f32 ? "f32" : "bf16"; }
// The element type a validated precision name stands for: "bf16", or f32
// ("f32", "fp32": config keys and flags spell both).
constexpr DType dtype_named(std::string_view name) { return name == "bf16" ? DType::bf16 : DType::f32; }

struct bf16 {
  uint16_t bits;
};

inline bf16 to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return bf16{uint16_t((u >> 16) | 0x40)};  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return bf16{uint16_t(u >> 16)};
}

inline float to_f32(bf16 h) {
  uint32_t u = uint32_t(h.bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

}  // namespace crucible

// Stable 64-bit FNV-1a string hash: identical on every platform and build,
// unlike std::hash, so it can key RNG streams that must reproduce across runs.
#pragma once
#include <cstdint>
#include <string_view>

namespace crucible {

constexpr uint64_t fnv1a64(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (char c : s) {
    h ^= uint8_t(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

}  // namespace crucible

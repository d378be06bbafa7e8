// Hash helpers. Stable 64-bit FNV-1a string hash: identical on every platform and build,
// unlike std::hash, so it can key RNG streams that must reproduce across runs.
#pragma once
#include <cstdint>
#include <string>
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

// 16 lowercase hex digits: how checksums and fingerprints are written in files
// and messages.
inline std::string hex64(uint64_t v) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s(16, '0');
  for (int i = 15; i >= 0; --i, v >>= 4) s[size_t(i)] = kDigits[v & 15];
  return s;
}

}  // namespace crucible

// Where memory lives and kernels run: a kind and an index, written "cpu" or
// "cuda:N" (DESIGN.md "Devices"). A value type; thread-safe.
#pragma once
#include <cstdint>
#include <string>

#include "core/status.h"

namespace crucible {

enum class DeviceKind : uint8_t { kCpu, kCuda };

struct Device {
  DeviceKind kind = DeviceKind::kCpu;
  int index = 0;

  static Device cpu() { return {}; }
  static Device cuda(int index) { return {DeviceKind::kCuda, index}; }
  bool is_cpu() const { return kind == DeviceKind::kCpu; }
  bool is_cuda() const { return kind == DeviceKind::kCuda; }
  bool operator==(const Device& o) const { return kind == o.kind && index == o.index; }
  bool operator!=(const Device& o) const { return !(*this == o); }
  // "cpu", "cuda:0".
  std::string str() const;
  // "cpu", "cuda" (index 0), "cuda:N"; anything else is invalid, named.
  static Result<Device> parse(const std::string& text);
};

}  // namespace crucible

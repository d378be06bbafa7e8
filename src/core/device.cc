#include "core/device.h"

#include <cctype>

namespace crucible {

std::string Device::str() const { return is_cpu() ? "cpu" : "cuda:" + std::to_string(index); }

Result<Device> Device::parse(const std::string& text) {
  if (text == "cpu") return Device::cpu();
  if (text == "cuda") return Device::cuda(0);
  if (text.rfind("cuda:", 0) == 0 && text.size() > 5 && text.size() <= 9) {
    int index = 0;
    for (size_t i = 5; i < text.size(); ++i) {
      if (!std::isdigit(static_cast<unsigned char>(text[i]))) goto bad;
      index = index * 10 + (text[i] - '0');
    }
    return Device::cuda(index);
  }
bad:
  return Status::invalid("[device] '" + text + "' is not a device (cpu, cuda or cuda:N)");
}

}  // namespace crucible

#include "runtime/faults.h"

#include <string>

#include "ckpt/checkpoint.h"

namespace crucible::runtime {

Status apply_fault_injection(const FaultConfig& cfg) {
  for (const std::string& e : cfg.inject) {
    auto bad = [&] {
      return Status::invalid("[config] fault.inject: '" + e +
                             "' is not a known fault (expected ckpt_write_error@STEP[:FILE])");
    };
    auto at = e.find('@');
    if (at == std::string::npos) return bad();
    std::string kind = e.substr(0, at), rest = e.substr(at + 1);
    if (kind != "ckpt_write_error") return bad();
    std::string file = "optimizer.safetensors";
    if (auto colon = rest.find(':'); colon != std::string::npos) {
      file = rest.substr(colon + 1);
      rest = rest.substr(0, colon);
    }
    char* end = nullptr;
    long long step = std::strtoll(rest.c_str(), &end, 10);
    if (rest.empty() || *end != '\0' || step < 1) return bad();
    ckpt::inject_checkpoint_write_fault(step, file);
  }
  return Status::ok();
}

}  // namespace crucible::runtime

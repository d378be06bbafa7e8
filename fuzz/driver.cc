// libFuzzer entry for one target (CRUCIBLE_FUZZ_TARGET, set per binary by CMake).
#include "fuzz/targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return crucible::fuzz::CRUCIBLE_FUZZ_TARGET(data, size);
}

// fault.inject: a test facility (docs/training.md, "Fault injection") that makes a run fail in a
// chosen way at a chosen step, so tests exercise the recovery paths with real
// processes and files. Entries:
//   "ckpt_write_error@STEP[:FILE]"  the checkpoint of STEP fails while writing
//                                   FILE (default optimizer.safetensors), as a
//                                   full disk would.
#pragma once
#include "core/status.h"
#include "runtime/config.h"

namespace crucible::runtime {

// Arms every entry of cfg.inject; an unknown entry is an error naming it.
Status apply_fault_injection(const FaultConfig& cfg);

}  // namespace crucible::runtime

// CUDA runtime errors as Status, for comm's CUDA files (not installed beyond
// src/comm/cuda: the rest of comm and the layers above know no CUDA).
#pragma once
#include "core/status.h"

namespace crucible::comm {
// Ok for cudaSuccess, else "[dist] <op>: <call> failed: <CUDA's string>"
// (clearing CUDA's sticky last error).
Status cuda_status(const char* op, const char* call, int err);
namespace detail {
// True when p is in a GPU's device memory (not host, pinned or managed memory).
bool on_cuda_device(const void* p);
}  // namespace detail
}  // namespace crucible::comm

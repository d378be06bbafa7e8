// The shared column sums' second pass and the device scratch (kernels/cuda/device_util.cuh).
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "kernels/cuda/device_util.cuh"

namespace crucible::kernels::cuda {

__global__ void column_finish_kernel(const float* partial, int C, float* out0, float* out1) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  float s0 = 0, s1 = 0;
  for (int r = 0; r < kRowChunks; ++r) {
    s0 += partial[size_t(r) * C + c];
    s1 += partial[size_t(kRowChunks + r) * C + c];
  }
  out0[c] += s0;
  if (out1) out1[c] += s1;
}

float* device_scratch(ScratchSlot slot, size_t floats) {
  static std::mutex mu;
  static float* scratch[64][kScratchSlots] = {};
  static size_t have[64][kScratchSlots] = {};
  int device = 0;
  cudaGetDevice(&device);
  std::lock_guard<std::mutex> lock(mu);
  float*& buf = scratch[device][slot];
  if (have[device][slot] < floats) {
    if (live_graphs() > 0) {  // a graph recorded the old buffer: a bug, not bad input
      std::fprintf(stderr, "[cuda] scratch slot %d grew to %zu floats after a CUDA graph recorded it\n", int(slot),
                   floats);
      std::abort();
    }
    if (buf) {
      cudaDeviceSynchronize();  // kernels in flight may still read the old one
      cudaFree(buf);
    }
    if (cudaMalloc(&buf, floats * sizeof(float)) != cudaSuccess) {
      std::fprintf(stderr, "[cuda] no device memory for %zu floats of scratch\n", floats);
      std::abort();
    }
    have[device][slot] = floats;
  }
  return buf;
}

float* gemm_scratch(size_t floats) { return device_scratch(kGemmBias, floats); }

}  // namespace crucible::kernels::cuda

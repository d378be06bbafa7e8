// The CUDA backend's host API in a build without the CUDA toolkit
// (kernels/cuda/cuda.h): nothing to run on, said in one line.
#include "kernels/cuda/cuda.h"

namespace crucible::kernels::cuda {

namespace {
Status absent() { return Status::invalid("[cuda] this crucible was built without CUDA (no nvcc at build time)"); }
}  // namespace

bool compiled() { return false; }
int device_count() { return 0; }
Result<DeviceInfo> device_info(int) { return absent(); }
Status use_device(int) { return absent(); }
Status copy_to_device(void*, const void*, size_t, Stream) { return absent(); }
Status copy_to_host(void*, const void*, size_t, Stream) { return absent(); }
Status synchronize(Stream) { return absent(); }
Status last_error(const char*) { return absent(); }
void adamw(float*, bf16*, const float*, float*, float*, size_t, float, float, float, float, float, float, int,
           Stream) {}

}  // namespace crucible::kernels::cuda

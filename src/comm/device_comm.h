// Collectives on GPU buffers: the two device-aware Comms of a job whose ranks
// train on GPUs (docs/parallelism.md, "Ranks on GPUs").
//
// Both wrap the MPI Comm of the same ranks, which keeps the control plane
// (agreement, heartbeats, errors, host buffers): every call whose buffers are
// host memory goes to it unchanged, so a GPU job's config broadcast, norms and
// host names work as on CPUs. Only buffers in a GPU's memory take the device
// path:
//   NCCL    one rank per GPU (NCCL refuses two ranks on one device): NCCL's
//           collectives on the GPU's buffers, stream-ordered (comm_nccl.cc)
//   staged  ranks that share a GPU (the lent one-GPU machine, tests of every
//           layout there): each device buffer is copied into pinned host
//           memory, the MPI call runs on the copy, and the result is copied
//           back (comm_staged.cc). For correctness and layout tests, not speed:
//           every call waits for the GPU's queued work and crosses PCIe twice.
// choose_device_path() picks between them from where the ranks' GPUs are.
#pragma once
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "comm/comm.h"
#include "core/status.h"

struct CUstream_st;  // cudaStream_t, without CUDA's headers

namespace crucible::comm {

enum class DevicePath { kNccl, kStaged };
const char* path_name(DevicePath path);  // "nccl" | "staged"

// kStaged when two ranks of `comm` on one host name the same GPU (`gpu_id`:
// a name unique on its machine, the PCI bus id), else kNccl. Collective.
Result<DevicePath> choose_device_path(Comm& comm, const std::string& gpu_id);

// What the staged path needs of a GPU: where a pointer lives, and copies that
// are complete when they return. to_host copies after every kernel already
// queued on the device's stream (the data a collective sends is final);
// to_device's copy is complete (the staging buffer may be reused) on return.
// Host buffers are pinned (page-locked), so the copies run at the link's speed.
class DeviceMemory {
 public:
  virtual ~DeviceMemory() = default;
  virtual bool is_device(const void* p) const = 0;
  virtual Status to_host(void* host, const void* device, size_t bytes) = 0;
  virtual Status to_device(void* device, const void* host, size_t bytes) = 0;
  virtual Result<void*> alloc_pinned(size_t bytes) = 0;
  virtual void free_pinned(void* p) = 0;
};

// The CUDA runtime's DeviceMemory for GPU `device` and the stream its kernels
// run on. An error where crucible was built without CUDA.
Result<std::unique_ptr<DeviceMemory>> cuda_device_memory(int device, CUstream_st* stream);

// A Comm over `host` (which must outlive it) staging device buffers through
// pinned host memory from `memory`. Its splits own their MPI sub-Comms.
std::unique_ptr<Comm> make_staged_comm(Comm& host, std::shared_ptr<DeviceMemory> memory);

// An NCCL Comm over the ranks of `host` (which must outlive it): one rank per
// GPU, `device` this rank's, collectives on `stream`'s order. Bootstrapped over
// `host` (rank 0's ncclUniqueId broadcast); collective over `host`. An error
// naming NCCL's where the GPU or NCCL cannot start, or without CUDA.
Result<std::unique_ptr<Comm>> make_nccl_comm(Comm& host, int device, CUstream_st* stream);

namespace detail {
// "ncclSystemError (a system or network call failed: ...)" for an ncclResult_t
// value; NCCL's own last-error text is appended by the caller where it has one.
std::string nccl_result_text(int result);
// What to tell the user about a failed NCCL call: "[dist] <op>: <call> failed
// on rank R of N: <result text>[: <detail>]".
std::string nccl_error(const char* op, const char* call, int rank, int size, int result,
                       const std::string& detail);
// Bootstrap: the NCCL unique id (128 opaque bytes) rank 0 makes, broadcast over
// `host`; `make` is ncclGetUniqueId on rank 0 (a parameter, so the bootstrap is
// tested over MPI where no GPU is).
Status share_unique_id(Comm& host, void* id, size_t bytes,
                       const std::function<Status(void*)>& make);
}  // namespace detail

}  // namespace crucible::comm

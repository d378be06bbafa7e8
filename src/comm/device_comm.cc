// The host-side logic of the device Comms that needs neither CUDA nor NCCL:
// choosing the path, NCCL's errors in words, the unique-id bootstrap.
#include "comm/device_comm.h"

#include <cstring>
#include <set>
#include <utility>

namespace crucible::comm {

const char* path_name(DevicePath path) { return path == DevicePath::kNccl ? "nccl" : "staged"; }

Result<DevicePath> choose_device_path(Comm& comm, const std::string& gpu_id) {
  auto hosts = host_names(comm);
  if (!hosts) return hosts.status();
  constexpr size_t kIdBytes = 64;  // "0000:00:00.0" and room for a UUID
  char mine[kIdBytes] = {0};
  std::strncpy(mine, gpu_id.c_str(), kIdBytes - 1);
  std::vector<char> all(kIdBytes * size_t(comm.size()));
  CRUCIBLE_RETURN_IF_ERROR(comm.allgather_bytes(mine, kIdBytes, all.data()));
  std::set<std::pair<std::string, std::string>> seen;
  for (int r = 0; r < comm.size(); ++r)
    if (!seen.emplace((*hosts)[size_t(r)], std::string(all.data() + size_t(r) * kIdBytes)).second)
      return DevicePath::kStaged;
  return DevicePath::kNccl;
}

namespace detail {

// ncclResult_t's values (nccl.h, stable since NCCL 2.0; 7 since 2.14).
std::string nccl_result_text(int result) {
  switch (result) {
    case 0:
      return "ncclSuccess";
    case 1:
      return "ncclUnhandledCudaError (a CUDA call inside NCCL failed: no usable GPU, or the GPU "
             "faulted)";
    case 2:
      return "ncclSystemError (a system or network call failed: sockets, shared memory, or a peer "
             "died)";
    case 3:
      return "ncclInternalError (NCCL's own invariant broke)";
    case 4:
      return "ncclInvalidArgument (a bad pointer, count, type or rank)";
    case 5:
      return "ncclInvalidUsage (calls out of order or mismatched between ranks)";
    case 6:
      return "ncclRemoteError (a peer rank failed or went away)";
    case 7:
      return "ncclInProgress (a non-blocking call has not finished)";
    default:
      return "ncclResult " + std::to_string(result) + " (unknown to this crucible)";
  }
}

std::string nccl_error(const char* op, const char* call, int rank, int size, int result,
                       const std::string& detail) {
  std::string m = std::string("[dist] ") + op + ": " + call + " failed on rank " +
                  std::to_string(rank) + " of " + std::to_string(size) + ": " +
                  nccl_result_text(result);
  if (!detail.empty()) m += ": " + detail;
  return m;
}

Status share_unique_id(Comm& host, void* id, size_t bytes,
                       const std::function<Status(void*)>& make) {
  // Rank 0's id, or its error, reaches every rank: a rank 0 that cannot make
  // one broadcasts a flag so the others fail with it instead of hanging.
  int32_t ok = 1;
  Status made;
  if (host.rank() == 0) {
    made = make(id);
    ok = made.is_ok() ? 1 : 0;
  }
  CRUCIBLE_RETURN_IF_ERROR(host.broadcast(&ok, sizeof(ok), 0));
  if (!ok)
    return host.rank() == 0
               ? made
               : Status::internal("[dist] NCCL bootstrap: rank 0 could not make the unique id");
  return host.broadcast(id, bytes, 0);
}

}  // namespace detail
}  // namespace crucible::comm

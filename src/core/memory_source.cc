#include "core/memory_source.h"

#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

namespace crucible {

namespace {

constexpr size_t kHugeThreshold = size_t(1) << 20;
constexpr size_t kHugePage = size_t(2) << 20;

class HostMemory final : public MemorySource {
 public:
  Device device() const override { return Device::cpu(); }
  MemoryKind kind() const override { return MemoryKind::kHost; }
  const char* name() const override { return "host"; }

  void* map(size_t bytes) override {
    void* p = nullptr;
    if (bytes >= kHugeThreshold) {
      // Over-map by one huge page to align to 2 MiB, then trim the ends.
      size_t len = bytes + kHugePage;
      char* raw = static_cast<char*>(mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
      if (raw == MAP_FAILED) return nullptr;
      uintptr_t aligned = (uintptr_t(raw) + kHugePage - 1) & ~(uintptr_t(kHugePage) - 1);
      size_t head = aligned - uintptr_t(raw);
      if (head) munmap(raw, head);
      size_t tail = len - head - bytes;
      if (tail) munmap(reinterpret_cast<char*>(aligned) + bytes, tail);
      p = reinterpret_cast<void*>(aligned);
      madvise(p, bytes, MADV_HUGEPAGE);
    } else {
      p = std::aligned_alloc(64, bytes);
      if (!p) return nullptr;
    }
    std::memset(p, 0, bytes);  // pre-fault now, not in the step
    return p;
  }

  void unmap(void* p, size_t bytes) override {
    if (bytes >= kHugeThreshold)
      munmap(p, bytes);
    else
      std::free(p);
  }
};

std::mutex& registry_mu() {
  static std::mutex* mu = new std::mutex();
  return *mu;
}
std::vector<MemorySource*>& registry() {
  static auto* r = new std::vector<MemorySource*>();  // leaked: sources outlive static destruction
  return *r;
}

}  // namespace

void MemorySource::zero(void* p, size_t bytes) { std::memset(p, 0, bytes); }

MemorySource* memory_of(Device device) {
  return find_memory_source(device.is_cpu() ? MemoryKind::kHost : MemoryKind::kDevice, device);
}

MemorySource& host_memory() {
  static HostMemory* h = new HostMemory();
  return *h;
}

void register_memory_source(MemorySource* source) {
  std::lock_guard<std::mutex> lock(registry_mu());
  for (MemorySource* s : registry())
    if (s == source || (s->kind() == source->kind() && s->device() == source->device())) return;
  registry().push_back(source);
}

MemorySource* find_memory_source(MemoryKind kind, Device device) {
  if (kind == MemoryKind::kHost && device.is_cpu()) return &host_memory();
  std::lock_guard<std::mutex> lock(registry_mu());
  for (MemorySource* s : registry())
    if (s->kind() == kind && s->device() == device) return s;
  return nullptr;
}

}  // namespace crucible

#include "core/allocator.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "core/check.h"

namespace crucible {
namespace {
constexpr size_t kMinClass = 256;
constexpr size_t kHugeThreshold = size_t(1) << 20;
constexpr size_t kHugePage = size_t(2) << 20;  // size classes from 1 MiB are whole huge pages
}  // namespace

Allocator& Allocator::global() {
  // Leaked on purpose: tensors held by static objects may be released after
  // static destruction would otherwise have torn the pool down.
  static Allocator* a = new Allocator(host_memory());
  return *a;
}

Allocator& Allocator::of(Device device) {
  if (device.is_cpu()) return global();
  MemorySource* source = memory_of(device);
  CRUCIBLE_CHECK(source != nullptr, "[core] memory of a device no backend registered (use_device first)");
  return on(*source);
}

Allocator* Allocator::pinned() {
  MemorySource* source = find_memory_source(MemoryKind::kPinnedHost, Device::cpu());
  return source ? &on(*source) : nullptr;
}

Allocator& Allocator::on(MemorySource& source) {
  if (&source == &host_memory()) return global();
  static std::mutex* mu = new std::mutex();
  static auto* pools = new std::unordered_map<MemorySource*, Allocator*>();  // leaked, as global()
  std::lock_guard<std::mutex> lock(*mu);
  Allocator*& a = (*pools)[&source];
  if (!a) a = new Allocator(source);
  return *a;
}

size_t Allocator::size_class(size_t bytes) {
  if (bytes <= kMinClass) return kMinClass;
  // Four classes per power of two: waste is at most 25%.
  size_t p = size_t(1) << (63 - __builtin_clzll(bytes - 1));  // largest power of two < bytes
  size_t step = p / 4;
  size_t c = (bytes + step - 1) / step * step;
  if (c >= kHugeThreshold) c = (c + kHugePage - 1) / kHugePage * kHugePage;
  return c;
}

void* Allocator::map_fresh(size_t bytes) { return source_.map(bytes); }

void Allocator::unmap(void* p, size_t bytes) { source_.unmap(p, bytes); }

void* Allocator::allocate(size_t bytes, const char* tag, bool persistent) {
  size_t c = size_class(bytes);
  std::lock_guard<std::mutex> lock(mu_);
  void* p = nullptr;
  auto it = free_.find(c);
  if (it != free_.end() && !it->second.empty()) {
    p = it->second.back();
    it->second.pop_back();
    stats_.cached -= c;
  } else {
    p = map_fresh(c);
    CRUCIBLE_CHECK(p != nullptr, "[core] out of memory");
    stats_.mapped += c;
    stats_.os_allocs++;
  }
  live_.emplace(p, Live{c, tag, persistent});
  stats_.allocs++;
  stats_.in_use += c;
  stats_.peak = std::max(stats_.peak, stats_.in_use);
  return p;
}

void Allocator::release(void* p) {
  if (!p) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(p);
  CRUCIBLE_CHECK(it != live_.end(), "[core] release of a pointer the allocator does not own");
  size_t c = it->second.bytes;
  live_.erase(it);
  stats_.in_use -= c;
  stats_.cached += c;
  free_[c].push_back(p);
}

void Allocator::reset_peak() {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.peak = stats_.in_use;
}

AllocatorStats Allocator::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

std::vector<std::pair<std::string, size_t>> Allocator::live_by_tag() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::unordered_map<std::string, size_t> by;
  for (auto& [p, l] : live_) by[l.tag ? l.tag : "?"] += l.bytes;
  std::vector<std::pair<std::string, size_t>> v(by.begin(), by.end());
  std::sort(v.begin(), v.end(), [](auto& a, auto& b) { return a.second > b.second; });
  return v;
}

size_t Allocator::report_leaks(FILE* out) const {
  std::vector<std::pair<std::string, size_t>> v;
  size_t blocks = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::unordered_map<std::string, size_t> by;
    for (auto& [p, l] : live_)
      if (!l.persistent) {
        by[l.tag ? l.tag : "?"] += l.bytes;
        ++blocks;
      }
    v.assign(by.begin(), by.end());
  }
  if (blocks == 0) return 0;
  std::sort(v.begin(), v.end(), [](auto& a, auto& b) { return a.second > b.second; });
  std::fprintf(out, "[core] leak report: %zu blocks still allocated at shutdown\n", blocks);
  for (auto& [tag, bytes] : v) std::fprintf(out, "  %-32s %12zu bytes\n", tag.c_str(), bytes);
  return blocks;
}

void Allocator::trim() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [c, list] : free_) {
    for (void* p : list) unmap(p, c);
    stats_.mapped -= c * list.size();
    stats_.cached -= c * list.size();
    list.clear();
  }
}

Arena::Arena(const char* tag, Allocator& alloc) : alloc_(alloc), tag_(tag) {}

Arena::~Arena() {
  for (auto& c : chunks_) alloc_.release(c.base);
}

size_t Arena::capacity() const {
  size_t s = 0;
  for (auto& c : chunks_) s += c.size;
  return s;
}

void* Arena::allocate(size_t bytes, size_t align) {
  auto fits = [&](const Chunk& c) {
    size_t off = (c.used + align - 1) / align * align;
    return off + bytes <= c.size;
  };
  while (current_ < chunks_.size() && !fits(chunks_[current_])) {
    if (current_ + 1 == chunks_.size()) break;
    ++current_;
  }
  if (chunks_.empty() || !fits(chunks_[current_])) {
    // Grow: a new chunk at least as large as everything so far, so chains stay short.
    size_t want = std::max(bytes + align, std::max(capacity(), size_t(1) << 20));
    size_t sz = Allocator::size_class(want);
    chunks_.push_back(Chunk{static_cast<char*>(alloc_.allocate(sz, tag_)), sz, 0});
    current_ = chunks_.size() - 1;
  }
  Chunk& c = chunks_[current_];
  size_t off = (c.used + align - 1) / align * align;
  used_total_ += off + bytes - c.used;
  c.used = off + bytes;
  high_water_ = std::max(high_water_, used_total_);
  return c.base + off;
}

Arena::Mark Arena::mark() const {
  return Mark{current_, chunks_.empty() ? 0 : chunks_[current_].used, used_total_};
}

void Arena::rewind(const Mark& m) {
  if (chunks_.empty()) return;
  current_ = m.chunk;
  chunks_[current_].used = m.used;
  for (size_t i = current_ + 1; i < chunks_.size(); ++i) chunks_[i].used = 0;
  used_total_ = m.used_total;
}

void Arena::reserve(size_t bytes) {
  CRUCIBLE_CHECK(used_total_ == 0, "[core] Arena::reserve between steps only");
  if (chunks_.size() == 1 && chunks_[0].size >= bytes) return;
  for (auto& c : chunks_) alloc_.release(c.base);
  chunks_.clear();
  const size_t sz = Allocator::size_class(std::max<size_t>(bytes, 64));
  chunks_.push_back(Chunk{static_cast<char*>(alloc_.allocate(sz, tag_)), sz, 0});
  current_ = 0;
}

void Arena::reset() {
  if (chunks_.size() > 1) {
    // Coalesce into one chunk that holds the whole high-water mark.
    for (auto& c : chunks_) alloc_.release(c.base);
    chunks_.clear();
    size_t sz = Allocator::size_class(high_water_ + 64 * 64);
    chunks_.push_back(Chunk{static_cast<char*>(alloc_.allocate(sz, tag_)), sz, 0});
  }
  for (auto& c : chunks_) c.used = 0;
  current_ = 0;
  used_total_ = 0;
}

}  // namespace crucible

#include "profile/probe_memory.h"

#include <fmt/format.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <vector>

#include "core/clock.h"
#include "core/threads.h"

namespace crucible::profile {
namespace {

constexpr double kScalar = 3.0;  // STREAM's
constexpr size_t kMemoryMiB = size_t(1) << 20;
const char* const kKernels[4] = {"copy", "scale", "add", "triad"};
// Arrays touched per element by each kernel, as STREAM counts them.
constexpr int kArraysMoved[4] = {2, 2, 3, 3};

std::string read_line(const std::string& path) {
  std::ifstream in(path);
  std::string s;
  std::getline(in, s);
  return s;
}

// "32768K" / "8M" / "65536" -> bytes.
size_t parse_cache_size(const std::string& s) {
  char* end = nullptr;
  unsigned long long v = std::strtoull(s.c_str(), &end, 10);
  if (end == s.c_str()) return 0;
  if (*end == 'K' || *end == 'k') v <<= 10;
  if (*end == 'M' || *end == 'm') v <<= 20;
  if (*end == 'G' || *end == 'g') v <<= 30;
  return size_t(v);
}

size_t sysfs_llc_bytes() {
  namespace fs = std::filesystem;
  cpu_set_t set;
  CPU_ZERO(&set);
  bool have_affinity = sched_getaffinity(0, sizeof(set), &set) == 0;
  int top_level = 0;
  std::map<std::string, size_t> top;  // distinct instances of the top level
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (have_affinity && !CPU_ISSET(cpu, &set)) continue;
    std::string dir = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/cache";
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) {
      if (!have_affinity) break;
      continue;
    }
    for (int idx = 0;; ++idx) {
      std::string d = dir + "/index" + std::to_string(idx);
      if (!fs::is_directory(d, ec)) break;
      if (read_line(d + "/type") == "Instruction") continue;
      int level = std::atoi(read_line(d + "/level").c_str());
      size_t bytes = parse_cache_size(read_line(d + "/size"));
      if (level <= 0 || bytes == 0) continue;
      // One instance shared by several CPUs is counted once: keyed by its id,
      // or by the CPUs sharing it where the kernel gives no id.
      std::string id = read_line(d + "/id");
      std::string key = id.empty() ? "cpus " + read_line(d + "/shared_cpu_list") : id;
      if (level > top_level) {
        top_level = level;
        top.clear();
      }
      if (level == top_level) top[key] = bytes;
    }
  }
  size_t sum = 0;
  for (const auto& [key, bytes] : top) sum += bytes;
  return sum;
}

// The value of a, b, c after `iterations` rounds, computed the way the
// kernels compute each element.
void expected_values(int iterations, double scalar, double* ea, double* eb, double* ec) {
  double a = 1.0, b = 2.0, c = 0.0;
  for (int k = 0; k < iterations; ++k) {
    c = a;
    b = scalar * c;
    c = a + b;
    a = b + scalar * c;
  }
  *ea = a;
  *eb = b;
  *ec = c;
}

// Sets a=1, b=2, c=0 with the schedule the kernels use; on fresh memory this
// is the first touch that places each page.
void init_arrays(double* a, double* b, double* c, int64_t n, int threads) {
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t j = 0; j < n; ++j) {
    a[j] = 1.0;
    b[j] = 2.0;
    c[j] = 0.0;
  }
}

// Runs `repeats` rounds of the four kernels on `threads` threads and returns
// the run's json object (timings and validation).
// Past `deadline_ns` (a time budget) it stops after the round under way,
// with two rounds at least (STREAM's average skips the first).
nlohmann::json run_stream(double* __restrict a, double* __restrict b, double* __restrict c,
                          int64_t n, int threads, int repeats, int64_t deadline_ns) {
  init_arrays(a, b, c, n, threads);
  const double s = kScalar;
  std::vector<double> seconds[4];
  int rounds = 0;
  for (int k = 0; k < repeats; ++k) {
    if (k >= 2 && now_ns() > deadline_ns) break;
    ++rounds;
    int64_t t[5];
    t[0] = now_ns();
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t j = 0; j < n; ++j) c[j] = a[j];
    t[1] = now_ns();
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t j = 0; j < n; ++j) b[j] = s * c[j];
    t[2] = now_ns();
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t j = 0; j < n; ++j) c[j] = a[j] + b[j];
    t[3] = now_ns();
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t j = 0; j < n; ++j) a[j] = b[j] + s * c[j];
    t[4] = now_ns();
    for (int i = 0; i < 4; ++i)
      seconds[i].push_back(double(std::max<int64_t>(t[i + 1] - t[i], 1)) * 1e-9);
  }
  nlohmann::json r;
  r["threads"] = threads;
  for (int i = 0; i < 4; ++i) {
    const double bytes = double(kArraysMoved[i]) * sizeof(double) * double(n);
    const auto& ts = seconds[i];
    double best = *std::min_element(ts.begin(), ts.end());
    double sum = 0;
    for (size_t k = 1; k < ts.size(); ++k) sum += ts[k];
    double avg = sum / double(ts.size() - 1);
    r[kKernels[i]] = {{"best_gbs", bytes / best * 1e-9}, {"avg_gbs", bytes / avg * 1e-9}};
  }
  r["rounds"] = rounds;
  Status st = check_stream_arrays(a, b, c, size_t(n), rounds, s);
  r["valid"] = st.is_ok();
  if (!st.is_ok()) r["error"] = st.message();
  return r;
}

// The arrays are mapped the way core/allocator maps large tensors (2 MiB
// aligned, advised for transparent huge pages), so the probe measures the
// memory the kernels will stream, and they are unmapped afterwards rather
// than cached in the allocator's pools for the rest of the process.
class Array {
 public:
  explicit Array(size_t bytes) {
    constexpr size_t kHuge = size_t(2) << 20;
    bytes_ = (bytes + kHuge - 1) / kHuge * kHuge;
    size_t len = bytes_ + kHuge;
    void* raw = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) return;
    uintptr_t aligned = (uintptr_t(raw) + kHuge - 1) & ~uintptr_t(kHuge - 1);
    size_t head = aligned - uintptr_t(raw);
    if (head) ::munmap(raw, head);
    if (len - head - bytes_)
      ::munmap(reinterpret_cast<char*>(aligned) + bytes_, len - head - bytes_);
    p_ = reinterpret_cast<double*>(aligned);
    huge_ = ::madvise(p_, bytes_, MADV_HUGEPAGE) == 0;
  }
  ~Array() {
    if (p_) ::munmap(p_, bytes_);
  }
  Array(const Array&) = delete;
  Array& operator=(const Array&) = delete;
  double* get() const { return p_; }
  bool huge_pages_advised() const { return huge_; }

 private:
  double* p_ = nullptr;
  size_t bytes_ = 0;
  bool huge_ = false;
};

std::string mib(double bytes) { return fmt::format("{:.1f} MiB", bytes / double(kMemoryMiB)); }

}  // namespace

size_t last_level_cache_bytes() {
  size_t bytes = sysfs_llc_bytes();
  if (bytes > 0) return bytes;
  long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
  long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
  return size_t(std::max({l3, l2, 0L}));
}

Status check_stream_arrays(const double* a, const double* b, const double* c, size_t n,
                           int iterations, double scalar) {
  constexpr double kEpsilon = 1e-13;  // STREAM's bound for double
  double expected[3];
  expected_values(iterations, scalar, &expected[0], &expected[1], &expected[2]);
  const double* arrays[3] = {a, b, c};
  const char* names[3] = {"a", "b", "c"};
  for (int i = 0; i < 3; ++i) {
    const double e = expected[i];
    const double* x = arrays[i];
    for (size_t j = 0; j < n; ++j) {
      const double err = std::fabs(x[j] - e);
      // !(err <= bound) also rejects NaN.
      if (!(err <= kEpsilon * std::fabs(e))) {
        const double rel = e != 0 ? err / std::fabs(e) : err;
        return Status::corrupt(fmt::format(
            "[probe] memory: STREAM check failed: {}[{}] = {:.17g}, expected {:.17g} after {} "
            "rounds (relative error {:.3g} > {:g})",
            names[i], j, x[j], e, iterations, rel, kEpsilon));
      }
    }
  }
  return Status::ok();
}

nlohmann::json probe_memory(const MemoryOptions& options) {
  const size_t llc = last_level_cache_bytes();
  size_t array_bytes = options.array_bytes;
  if (array_bytes == 0) array_bytes = std::max(4 * llc, (options.quick ? 32 : 64) * kMemoryMiB);
  const size_t phys =
      size_t(std::max(sysconf(_SC_PHYS_PAGES), 0L)) * size_t(std::max(sysconf(_SC_PAGESIZE), 0L));
  if (phys > 0) array_bytes = std::min(array_bytes, phys / 8);
  array_bytes = std::max(array_bytes / sizeof(double), size_t(1)) * sizeof(double);
  const int64_t n = int64_t(array_bytes / sizeof(double));
  int repeats = options.repeats > 0 ? options.repeats : (options.quick ? 4 : 10);
  repeats = std::clamp(repeats, 2, 100);

  nlohmann::json j;
  j["array_bytes"] = array_bytes;
  j["llc_bytes"] = llc;
  Array a(array_bytes), b(array_bytes), c(array_bytes);
  if (!a.get() || !b.get() || !c.get()) {
    j["valid"] = false;
    j["error"] = fmt::format("[probe] memory: cannot allocate 3 arrays of {} bytes", array_bytes);
    return j;
  }
  j["repeats"] = repeats;
  j["huge_pages"] = a.huge_pages_advised() && b.huge_pages_advised() && c.huge_pages_advised();
  const int all = std::max(num_threads(), 1);
  // First touch with the all-thread schedule: each page lands near the thread
  // that streams it in the all-thread run.
  // The budget: half for each thread count (the first touch counts in it).
  const double budget_s = options.budget_s > 0 ? options.budget_s : options.quick ? 4 : 60;
  const int64_t start = now_ns();
  init_arrays(a.get(), b.get(), c.get(), n, all);
  j["threads_1"] = run_stream(a.get(), b.get(), c.get(), n, 1, repeats, start + int64_t(budget_s * 0.5e9));
  j["threads_all"] = all == 1 ? j["threads_1"]
                              : run_stream(a.get(), b.get(), c.get(), n, all, repeats, start + int64_t(budget_s * 1e9));
  bool valid = j["threads_1"]["valid"].get<bool>() && j["threads_all"]["valid"].get<bool>();
  j["valid"] = valid;
  if (!valid)
    j["error"] = j["threads_1"].value("error", j["threads_all"].value("error", std::string()));
  return j;
}

std::string memory_table(const nlohmann::json& m) {
  std::string s = fmt::format("memory   3 arrays x {} (LLC {})", mib(m.value("array_bytes", 0.0)),
                              mib(m.value("llc_bytes", 0.0)));
  if (m.value("huge_pages", false)) s += ", huge pages advised";
  if (m.contains("repeats")) s += fmt::format(", best of {} rounds", m["repeats"].get<int>());
  s += "\n";
  if (m.contains("threads_1")) {
    s += fmt::format("  {:<10}", "GB/s");
    for (const char* k : kKernels) s += fmt::format("{:>8}", k);
    s += "\n";
    for (const char* run : {"threads_1", "threads_all"}) {
      if (!m.contains(run)) continue;
      const auto& r = m[run];
      int t = r.value("threads", 0);
      s += fmt::format("  {:<10}", fmt::format("{} thread{}", t, t == 1 ? "" : "s"));
      for (const char* k : kKernels)
        s += r.contains(k) ? fmt::format("{:>8.1f}", r[k].value("best_gbs", 0.0))
                           : fmt::format("{:>8}", "-");
      s += "\n";
    }
  }
  if (!m.value("valid", false))
    s += "  INVALID: " + m.value("error", std::string("no result")) + "\n";
  return s;
}

}  // namespace crucible::profile

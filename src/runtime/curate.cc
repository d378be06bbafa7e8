#include "runtime/curate.h"

#include "core/dir_lock.h"
#include "core/json_io.h"

#include <omp.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>

#include "core/checked_file.h"
#include "core/clock.h"
#include "core/file_io.h"
#include "core/threads.h"
#include "runtime/world.h"

namespace crucible::runtime {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string mb(double bytes) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f MB", bytes / 1e6);
  return b;
}

// Threads per rank: curate.threads, else the cores of the host shared by the
// ranks on it (Open MPI tells each rank how many share its node).
int threads_per_rank(const data::CurateSettings& s) {
  if (s.threads > 0) return s.threads;
  int local = 1;
  if (const char* v = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE")) local = std::max(1, std::atoi(v));
  return std::max(1, hardware_threads() / local);
}

struct KillAfter {
  std::string pass;
  long n = -1;
};

Result<KillAfter> parse_kill_after(const std::string& s) {
  KillAfter k;
  if (s.empty()) return k;
  auto colon = s.find(':');
  if (colon == std::string::npos) return Status::invalid("[curate] --kill-after " + s + ": expected PASS:N");
  k.pass = s.substr(0, colon);
  k.n = std::atol(s.c_str() + colon + 1);
  if ((k.pass != "scan" && k.pass != "dedup" && k.pass != "output") || k.n < 0)
    return Status::invalid("[curate] --kill-after " + s + ": PASS is scan, dedup or output, N >= 0");
  return k;
}

// One pass over this rank's units: those already done (their files verify)
// are skipped; the rest run on `threads` OpenMP threads. Returns the first error.
struct PassResult {
  Status status;
  size_t done_before = 0, ran = 0;
  double seconds = 0;
};

// unit_bytes: input bytes of a unit, for the progress line's MB/s (0 if not meaningful).
template <typename IsDone, typename Run, typename Bytes>
PassResult run_pass(const char* name, size_t units, comm::Comm& comm, int threads, const KillAfter& kill,
                    Console& console, IsDone&& is_done, Run&& run, Bytes&& unit_bytes) {
  PassResult r;
  Stopwatch watch;
  std::vector<size_t> todo;
  for (size_t u = size_t(comm.rank()); u < units; u += size_t(comm.size())) {
    std::string problem;
    if (is_done(u, &problem)) {
      ++r.done_before;
    } else {
      if (!problem.empty()) console.info("[curate] " + problem + "; recomputing it");
      todo.push_back(u);
    }
  }
  if (r.done_before > 0)
    console.info("[curate] " + std::string(name) + ": " + std::to_string(r.done_before) +
                 " units already done (resumed), " + std::to_string(todo.size()) + " to go");
  std::atomic<size_t> finished{0};
  std::atomic<uint64_t> bytes{0};
  std::mutex mu;
  Status first;
  const size_t total = todo.size();
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
  for (size_t i = 0; i < total; ++i) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (!first.is_ok()) continue;
    }
    Status s = run(todo[i]);
    if (!s.is_ok()) {
      std::lock_guard<std::mutex> lock(mu);
      if (first.is_ok()) first = s;
      continue;
    }
    size_t n = ++finished;
    bytes += unit_bytes(todo[i]);
    if (kill.pass == name && long(n) >= kill.n) {
      std::lock_guard<std::mutex> lock(mu);
      ::raise(SIGKILL);  // the test facility: die as a crash would
    }
    if (omp_get_thread_num() == 0 && comm.rank() == 0) {
      double s_el = watch.elapsed_s();
      double eta = n ? s_el / double(n) * double(total - n) : 0;
      std::string rate;
      if (uint64_t b = bytes.load(); b > 0)
        rate = ", " + mb(double(b)) + " at " + mb(double(b) / std::max(s_el, 1e-9)) + "/s" +
               (comm.size() > 1 ? " (rank 0)" : "");
      console.progress("[curate] " + std::string(name) + " " + std::to_string(n) + "/" +
                       std::to_string(total) + " units" + rate + ", ETA " +
                       std::to_string(int(eta + 0.5)) + "s");
    }
  }
  if (comm.rank() == 0) console.finish_progress();
  r.status = first;
  r.ran = finished;
  r.seconds = watch.elapsed_s();
  return r;
}

// The state of OUT before a run: fresh (created now), resumable (an unfinished
// run of the same plan) or complete (report.json of the same plan).
enum class OutState { kFresh, kResume, kComplete };

Result<OutState> prepare_out(const data::CurationPlan& plan, const data::CurateLayout& layout) {
  std::error_code ec;
  const std::string report = layout.out + "/report.json";
  if (fs::exists(report, ec)) {
    std::ifstream in(report);
    json r = json::parse(in, nullptr, false);
    if (json_string_or(r, "schema", "") == "crucible-curate/1") {
      if (json_string_or(json_object_or_null(r, "plan"), "fingerprint", "") == plan.fingerprint)
        return OutState::kComplete;
      return Status::invalid("[curate] " + layout.out +
                             " holds a finished curation of other inputs or settings; choose another -o");
    }
  }
  if (fs::exists(layout.plan(), ec)) {
    auto stored = read_checked(layout.plan());
    if (!stored) return Status::corrupt("[curate] " + stored.status().message());
    json j = json::parse(*stored, nullptr, false);
    if (json_string_or(j, "fingerprint", "") != plan.fingerprint)
      return Status::invalid("[curate] " + layout.out +
                             " holds an unfinished curation of other inputs or settings (plan " +
                             json_string_or(j, "fingerprint", "unreadable") +
                             ", this run's is " + plan.fingerprint +
                             "); rerun it with the same inputs and config, or choose another -o");
    return OutState::kResume;
  }
  bool empty = true;  // but for the lock this run holds
  for (auto it = fs::directory_iterator(layout.out, ec); !ec && it != fs::end(it); it.increment(ec))
    if (it->path().filename() != kCurateLock) empty = false;
  if (!empty) {
    fs::remove(layout.out + "/" + kCurateLock, ec);  // the user's directory stays as it was
    return Status::invalid("[curate] " + layout.out +
                           " exists and is not a curation output directory; choose a new -o");
  }
  fs::create_directories(layout.work, ec);
  if (ec) return Status::io("[curate] cannot create " + layout.work + ": " + ec.message());
  CRUCIBLE_RETURN_IF_ERROR(write_checked(layout.plan(), plan.to_json().dump(1)));
  return OutState::kFresh;
}

void print_estimate(const data::CurateSpec& spec, const data::CurationPlan& plan, int ranks, int threads,
                    Console& console) {
  auto e = data::estimate_curation(spec, plan, threads);
  console.info("[curate] dry run: " + std::to_string(plan.files.size()) + " files, " +
               mb(double(plan.input_bytes)) + ", ~" + std::to_string(e.documents) + " documents (mean " +
               std::to_string(int(plan.sampled_doc_bytes)) + " bytes, sampled)");
  console.info("[curate]   " + std::to_string(plan.chunks.size()) + " chunks, " +
               std::to_string(plan.partitions) + " key partitions, " + std::to_string(ranks) +
               " rank(s) x " + std::to_string(threads) + " thread(s), profile " + spec.profile);
  console.info("[curate]   peak memory per rank ~" + mb(double(e.peak_memory)) + " (scan " +
               mb(e.detail["memory_bytes"]["scan_per_thread"].get<double>()) + "/thread, dedup " +
               mb(e.detail["memory_bytes"]["dedup_per_thread"].get<double>()) + "/thread, resolve " +
               mb(e.detail["memory_bytes"]["resolve"].get<double>()) + ")");
  console.info("[curate]   disk: work " + mb(double(e.work_disk)) + " (OUT/.work, removed at the end), output " +
               mb(double(e.output_disk)));
  std::printf("%s\n", json{{"plan", {{"files", plan.files.size()}, {"input_bytes", plan.input_bytes},
                                     {"chunks", plan.chunks.size()}, {"partitions", plan.partitions}}},
                           {"estimate", e.detail}}
                          .dump(1)
                          .c_str());
}

}  // namespace

Result<data::CurateSpec> curate_spec(Config cfg, const std::vector<std::string>& inputs,
                                     const std::string& format) {
  std::string profile = cfg.curate.profile;
  if (profile == "auto") {
    auto detected = detect_curate_profile(inputs, format);
    if (!detected) return detected.status();
    profile = *detected;
  }
  CRUCIBLE_RETURN_IF_ERROR(apply_curate_profile(cfg, profile));
  data::CurateSpec s;
  s.inputs = inputs;
  s.format = format;
  s.profile = cfg.curate.profile;
  s.settings = cfg.curate;
  s.quality = cfg.quality;
  s.repetition = cfg.repetition;
  s.c4 = cfg.c4;
  s.near = cfg.near;
  return s;
}

Result<CurateResult> run_curate(const CurateRequest& req, comm::Comm& comm, Console& console) {
  Stopwatch total;
  auto kill = parse_kill_after(req.kill_after);
  if (!kill) return kill.status();
  auto spec = curate_spec(req.cfg, req.inputs, req.format);
  Result<data::CurationPlan> plan = spec ? data::plan_curation(*spec) : Result<data::CurationPlan>(spec.status());
  // Every rank plans on its own; they must all succeed and agree on the plan
  // (same files, sizes and mtimes as rank 0 sees them), or none proceeds.
  {
    Status local = plan.status();
    char fp[17] = {};
    if (plan) std::snprintf(fp, sizeof fp, "%s", plan->fingerprint.c_str());
    char root[17];
    std::memcpy(root, fp, sizeof fp);
    if (comm.size() > 1) CRUCIBLE_RETURN_IF_ERROR(comm.broadcast(root, sizeof root, 0));
    if (local.is_ok() && std::strncmp(root, fp, sizeof fp) != 0)
      local = Status::invalid("[curate] rank " + std::to_string(comm.rank()) +
                              " sees other inputs than rank 0 (plan " + fp + ", rank 0's " + root +
                              "); OUT and the inputs must be on a file system all ranks share");
    CRUCIBLE_RETURN_IF_ERROR(agree(comm, local));
  }
  const int threads = threads_per_rank(spec->settings);
  if (req.dry_run) {
    if (comm.rank() == 0) print_estimate(*spec, *plan, comm.size(), threads, console);
    return CurateResult{};
  }
  const data::CurateLayout layout(req.out);
  OutState state = OutState::kFresh;
  DirLock out_lock;  // one curation per OUT (rank 0 holds it for the job)
  {
    Status s;
    if (comm.rank() == 0)
      s = out_lock.acquire(req.out, kCurateLock, "crucible curate", req.lock_wait_s,
                           "wait for it to end or choose another -o", [&](const std::string& holder) {
                             console.info("[curate] waiting for " + holder + ", which is writing " + req.out);
                           });
    if (comm.rank() == 0 && s) {
      auto st = prepare_out(*plan, layout);
      if (st) state = *st;
      s = st.status();
    }
    CRUCIBLE_RETURN_IF_ERROR(agree(comm, s));
    double st = double(int(state));
    CRUCIBLE_RETURN_IF_ERROR(comm.broadcast(&st, sizeof st, 0));
    state = OutState(int(st));
  }
  CurateResult result;
  if (state == OutState::kComplete) {
    result.already_done = true;
    if (comm.rank() == 0) {
      std::ifstream in(layout.out + "/report.json");
      result.report = json::parse(in, nullptr, false);
      console.info("[curate] " + layout.out + " is already complete (same inputs and settings)");
    }
    return result;
  }
  if (comm.rank() == 0)
    console.info("[curate] " + std::to_string(plan->files.size()) + " files, " + mb(double(plan->input_bytes)) +
                 " in " + std::to_string(plan->chunks.size()) + " chunks; " + std::to_string(comm.size()) +
                 " rank(s) x " + std::to_string(threads) + " thread(s); profile " + spec->profile +
                 (state == OutState::kResume ? "; resuming" : ""));
  const data::MinHasher hasher(spec->near);
  json seconds, resumed;
  // A fresh run stopped by bad input (a malformed line, a file that changed
  // under it) leaves nothing behind: OUT was made by this run and holds no
  // finished work worth resuming from.
  auto fail = [&](Status s) -> Status {
    if (state == OutState::kFresh && comm.rank() == 0 &&
        (s.code() == Code::kInvalidArgument || s.code() == Code::kNotFound)) {
      std::error_code ec;
      fs::remove_all(layout.out, ec);
    }
    return s;
  };

  auto scan = run_pass(
      "scan", plan->chunks.size(), comm, threads, *kill, console,
      [&](size_t c, std::string* p) { return data::scan_done(*plan, c, layout, p); },
      [&](size_t c) { return data::scan_chunk(*spec, *plan, hasher, c, layout); },
      [&](size_t c) { return plan->chunks[c].bytes; });
  if (Status s = agree(comm, scan.status); !s.is_ok()) return fail(s);
  seconds["scan"] = scan.seconds;
  resumed["scan"] = scan.done_before;

  auto dedup = run_pass(
      "dedup", size_t(plan->partitions), comm, threads, *kill, console,
      [&](size_t p, std::string* pr) { return data::dedup_done(int(p), layout, pr); },
      [&](size_t p) { return data::dedup_partition(*spec, *plan, int(p), layout); },
      [](size_t) { return uint64_t(0); });
  if (Status s = agree(comm, dedup.status); !s.is_ok()) return fail(s);
  seconds["dedup"] = dedup.seconds;
  resumed["dedup"] = dedup.done_before;

  Stopwatch resolve_watch;
  auto removed = data::resolve_duplicates(*plan, layout);
  if (Status s = agree(comm, removed.status()); !s.is_ok()) return fail(s);
  seconds["resolve"] = resolve_watch.elapsed_s();

  auto output = run_pass(
      "output", plan->chunks.size(), comm, threads, *kill, console,
      [&](size_t c, std::string* p) { return data::output_done(c, layout, p); },
      [&](size_t c) { return data::write_output(*spec, *plan, c, *removed, layout); },
      [&](size_t c) { return plan->chunks[c].bytes; });
  if (Status s = agree(comm, output.status); !s.is_ok()) return fail(s);
  seconds["output"] = output.seconds;
  resumed["output"] = output.done_before;

  Status s;
  if (comm.rank() == 0) {
    seconds["total"] = total.elapsed_s();
    json run = {{"ranks", comm.size()},
                {"threads_per_rank", threads},
                {"seconds", seconds},
                {"resumed_units", resumed},
                {"finished", wall_time("%Y-%m-%dT%H:%M:%SZ", true)}};
    auto report = data::build_report(*spec, *plan, layout, run);
    if (report) {
      result.report = *report;
      s = write_file_atomic(layout.out + "/report.json", report->dump(1) + "\n");
    } else {
      s = report.status();
    }
  }
  CRUCIBLE_RETURN_IF_ERROR(agree(comm, s));
  if (comm.rank() == 0 && !spec->settings.keep_work) {
    std::error_code ec;
    fs::remove_all(layout.work, ec);
  }
  return result;
}

}  // namespace crucible::runtime

// Writing checkpoints: snapshot, the .tmp-fsync-verify-rename sequence,
// pruning, and the injected write fault and corruption. Several ranks
// writing one: checkpoint_writers.cc. Reading, verifying and the format
// helpers: checkpoint_verify.cc.
#include "ckpt/checkpoint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#define XXH_STATIC_LINKING_ONLY  // XXH64_state_t on the stack
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "ckpt/checkpoint_internal.h"
#include "ckpt/safetensors.h"
#include "core/check.h"
#include "core/clock.h"
#include "core/file_io.h"

namespace crucible::ckpt {
namespace fs = std::filesystem;
using namespace detail;  // the writing steps checkpoint_writers.cc shares

namespace {

struct InjectedFault {
  int64_t step;
  std::string file;
};
std::mutex g_fault_mu;
std::optional<InjectedFault> g_fault;

// A part's or a ZeRO shard's file answers to its kind's name:
// "model.part-3.safetensors" and "optimizer.part-1.dp-2.safetensors" are
// "model.safetensors" and "optimizer.safetensors" to fault injection.
std::string unparted(const std::string& name) {
  const size_t first = name.find('.'), last = name.rfind('.');
  return first == last ? name : name.substr(0, first) + name.substr(last);
}

// True (once) when a fault is armed for this step and file.
bool take_injected_fault(int64_t step, const std::string& file) {
  std::lock_guard<std::mutex> lock(g_fault_mu);
  if (!g_fault || g_fault->step != step || g_fault->file != unparted(file)) return false;
  g_fault.reset();
  return true;
}

struct InjectedCorruption {
  int64_t step;
  std::string file;
  CorruptAt at;
};
std::vector<InjectedCorruption> g_corruptions;  // guarded by g_fault_mu

// Flips a bit of the byte in the middle of dir/file in place (same inode, no
// rename), as storage corruption would, if a corruption is armed for this step
// and moment and dir holds that file; disarms it when it fires.
Status apply_injected_corruption(int64_t step, CorruptAt at, const std::string& dir,
                                 const std::string& label_dir) {
  std::string file;
  {
    std::lock_guard<std::mutex> lock(g_fault_mu);
    auto it = std::find_if(g_corruptions.begin(), g_corruptions.end(), [&](const auto& c) {
      std::error_code ec;
      return c.step == step && c.at == at && fs::is_regular_file(dir + "/" + c.file, ec);
    });
    if (it == g_corruptions.end()) return Status::ok();
    file = it->file;
    g_corruptions.erase(it);
  }
  const std::string path = dir + "/" + file;
  auto fail = [&] {
    return Status::io("[ckpt] injecting corruption into " + label_dir + "/" + file + ": " +
                      errno_str());
  };
  int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return fail();
  struct stat st {};
  char byte = 0;
  bool ok = ::fstat(fd, &st) == 0 && ::pread(fd, &byte, 1, st.st_size / 2) == 1;
  if (ok) {
    byte ^= 0x04;
    ok = ::pwrite(fd, &byte, 1, st.st_size / 2) == 1;
  }
  Status result = ok ? Status::ok() : fail();
  ::close(fd);
  return result;
}

// Evicts dir's files from the page cache (they are fsync'ed, so their pages
// are clean), so that the read-back before publishing reads what the device
// holds rather than what the cache kept. Advisory: where the file system
// ignores it (tmpfs), the read-back checks the cache.
void drop_cached_pages(const std::string& dir) {
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    int fd = ::open(it->path().c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
  }
}

// A core/file_io error in the checkpoint's terms: "[ckpt] step_0000020/x: ...".
Status in_checkpoint(const std::string& label, const Status& st) {
  std::string msg = st.message();
  if (msg.starts_with("[io] ")) msg.erase(0, 5);
  return Status::io("[ckpt] " + label + ": " + msg);
}

// Writes `parts` as dir/name through AtomicFile (the one durable-write path:
// fsync'ed before it counts), hashing the bytes on the way, and records the
// file's size and xxh64. An injected fault writes half the file and fails, as
// a full disk would; the AtomicFile then removes its temporary.
Status write_checkpoint_file(const std::string& dir, const std::string& label_dir, int64_t step,
                             const std::string& name, const std::vector<const void*>& parts,
                             const std::vector<size_t>& sizes, std::vector<FileRecord>& records) {
  const std::string label = label_dir + "/" + name;
  size_t total = 0;
  for (size_t s : sizes) total += s;
  const size_t fault_at =
      take_injected_fault(step, name) ? total / 2 : std::numeric_limits<size_t>::max();
  XXH64_state_t hash;
  XXH64_reset(&hash, 0);
  AtomicFile file;
  Status st = file.open(dir + "/" + name, OutputScope::kCheckpoint);
  size_t written = 0;
  for (size_t i = 0; st && i < parts.size(); ++i) {
    size_t n = std::min(sizes[i], fault_at - written);
    XXH64_update(&hash, parts[i], n);
    st = file.write(parts[i], n);
    written += n;
    if (st && written == fault_at)
      return Status::io("[ckpt] writing " + label + ": injected write error (fault.inject)");
  }
  if (st) st = file.commit();
  if (!st) return in_checkpoint(label, st);
  records.push_back(FileRecord{name, written, XXH64_digest(&hash)});
  return Status::ok();
}

}  // namespace

namespace detail {

// The safetensors encoding of ckpt/safetensors.h (its header), streamed
// through the checkpoint writer so it is hashed while written and can fail
// part-way under fault injection.
Status write_safetensors_file(const std::string& dir, const std::string& label_dir, int64_t step,
                              const std::string& name, const std::vector<TensorView>& tensors,
                              const std::map<std::string, std::string>& metadata,
                              std::vector<FileRecord>& records) {
  auto header = safetensors_header(tensors, metadata);
  if (!header) return header.status();
  std::vector<const void*> parts;
  std::vector<size_t> sizes;
  header->file_parts(tensors, &parts, &sizes);
  return write_checkpoint_file(dir, label_dir, step, name, parts, sizes, records);
}

}  // namespace detail

namespace {

std::vector<TensorView> tensor_views(const std::vector<nn::ParamSpec>& specs, const float* base,
                                     const std::string& prefix) {
  std::vector<TensorView> views;
  for (const nn::ParamSpec& s : specs) {
    TensorView v{prefix + s.name, "F32", {}, base + s.offset};
    for (int i = 0; i < s.shape.ndim; ++i) v.shape.push_back(s.shape[i]);
    views.push_back(std::move(v));
  }
  return views;
}

std::string utc_now() { return wall_time("%Y-%m-%dT%H:%M:%SZ", true); }

// manifest.json with its self-checksum: the xxh64 of the file's bytes with the
// checksum's 16 digits written as zeros (see manifest_checksum_pos). shards:
// the "shards" member of a checkpoint several ranks wrote.
std::string manifest_text(const Snapshot& snap, const std::vector<FileRecord>& records,
                          const nlohmann::ordered_json* shards) {
  nlohmann::ordered_json m;
  m["format"] = "crucible-checkpoint";
  m["format_version"] = 1;
  m["step"] = snap.state.step;
  m["created"] = utc_now();
  m["world"] = snap.state.world;
  m["config"] = snap.state.config;
  m["loader"] = snap.state.loader;
  m["rng"] = snap.state.rng;
  if (!snap.state.data.is_null()) m["data"] = snap.state.data;
  if (!snap.state.metrics.is_null()) m["metrics"] = snap.state.metrics;
  if (!snap.state.sim.is_null()) m["sim"] = snap.state.sim;
  if (!snap.state.init.is_null()) m["init"] = snap.state.init;
  nlohmann::ordered_json files = nlohmann::ordered_json::array();
  for (const FileRecord& r : records)
    files.push_back({{"name", r.name}, {"bytes", r.bytes}, {"xxh64", xxh64_hex(r.xxh64)}});
  m["files"] = files;
  if (shards) m["shards"] = *shards;
  const std::string zeros(16, '0');
  m[kManifestChecksumKey] = zeros;
  std::string text = m.dump(2) + "\n";
  size_t pos = manifest_checksum_pos(text, zeros);
  CRUCIBLE_CHECK(pos != std::string::npos, "the manifest holds its checksum placeholder");
  text.replace(pos, 16, xxh64_hex(XXH64(text.data(), text.size(), 0)));
  return text;
}

// Renames a directory out of the step_* namespace (atomically), then deletes
// it, so a crash mid-delete never leaves a half-deleted step_* behind; a
// leftover *.tmp is removed by the next write.
Status remove_step_dir(const std::string& ckpt_dir, const std::string& name) {
  std::string doomed = ckpt_dir + "/" + name + ".delete.tmp";
  if (::rename((ckpt_dir + "/" + name).c_str(), doomed.c_str()) != 0)
    return Status::io("[ckpt] removing " + name + ": " + errno_str());
  std::error_code ec;
  fs::remove_all(doomed, ec);
  if (ec) return Status::io("[ckpt] removing " + name + ": " + ec.message());
  return Status::ok();
}

}  // namespace

namespace detail {

Status validate_snapshot(const Snapshot& snap, int keep) {
  if (keep < 1)
    return Status::invalid("[ckpt] keep must be at least 1, got " + std::to_string(keep));
  if (snap.state.step < 0)
    return Status::invalid("[ckpt] step must be >= 0, got " + std::to_string(snap.state.step));
  size_t moments = 0, end = 0;
  for (const optim::Range& r : snap.moment_ranges) {
    if (r.begin < end || r.end <= r.begin) return Status::invalid("[ckpt] snapshot moment ranges are not ascending");
    moments += r.end - r.begin, end = r.end;
  }
  if (snap.exp_avg.size() != moments || snap.exp_avg_sq.size() != moments)
    return Status::invalid("[ckpt] snapshot moments differ in size from their ranges");
  if (!snap.params.empty())
    for (const nn::ParamSpec& s : snap.specs)
      if (s.offset + s.numel > snap.params.size())
        return Status::invalid("[ckpt] snapshot parameter " + s.name + " lies outside its buffer");
  if (snap.writer >= snap.writers) return Status::invalid("[ckpt] snapshot writer outside its writers");
  return Status::ok();
}

namespace {

// A tensor's moments in the snapshot: the elements [lo, hi) of the tensor
// (in its own, possibly sharded, layout) that moment_ranges cover, stored
// contiguously from `data` (ranges are ascending, so a tensor's covered
// elements are adjacent in the concatenation). whole: all of the tensor.
struct MomentSpan {
  std::vector<std::pair<size_t, size_t>> flat;
  size_t offset = 0, count = 0;  // into exp_avg / exp_avg_sq
  bool whole = false;
};

// Where each of the snapshot's moment ranges starts in the concatenation.
std::vector<size_t> moment_starts(const Snapshot& snap) {
  std::vector<size_t> starts;
  size_t at = 0;
  for (const optim::Range& r : snap.moment_ranges) starts.push_back(at), at += r.end - r.begin;
  return starts;
}

// O(log R + the ranges it overlaps): the ranges are ascending and disjoint,
// so the first that ends after the tensor's start is found by bisection.
MomentSpan moment_span(const Snapshot& snap, const std::vector<size_t>& starts,
                       const nn::ParamSpec& s) {
  MomentSpan span;
  const auto& ranges = snap.moment_ranges;
  auto it = std::upper_bound(ranges.begin(), ranges.end(), s.offset,
                             [](size_t offset, const optim::Range& r) { return offset < r.end; });
  for (; it != ranges.end() && it->begin < s.offset + s.numel; ++it) {
    const optim::Range& r = *it;
    const size_t at = starts[size_t(it - ranges.begin())];  // where range r's moments start
    const size_t lo = std::max(r.begin, s.offset), hi = std::min(r.end, s.offset + s.numel);
    if (hi > lo) {
      if (span.flat.empty()) span.offset = at + (lo - r.begin);
      span.flat.push_back({lo - s.offset, hi - s.offset});
      span.count += hi - lo;
    }
  }
  span.whole = span.count == s.numel;
  return span;
}

// Appends key: value to an object without nlohmann::ordered_json's lookup of
// the key (a scan of the keys before it: quadratic over a checkpoint's
// tensors). The caller knows the key is new.
void append_member(nlohmann::ordered_json& object, std::string key, nlohmann::ordered_json value) {
  object.get_ref<nlohmann::ordered_json::object_t&>().Container::emplace_back(std::move(key),
                                                                              std::move(value));
}

nlohmann::ordered_json slice_json(const nn::ParamSpec& s) {
  nlohmann::ordered_json slice = {{"dim", s.shard.dim}};
  nlohmann::ordered_json pieces = nlohmann::ordered_json::array();
  for (const nn::Shard::Piece& p : s.shard.pieces) pieces.push_back({p.lo, p.hi});
  slice["pieces"] = pieces;
  return slice;
}

}  // namespace

// The weights and the moments of the snapshot into tmp_dir (file names:
// Snapshot), and what they hold of each whole tensor for the manifest's
// "shards" (docs/formats.md): {NAME: {"shape", "slices" (the weights'),
// "moment_slices" (a ZeRO shard's moments)}}.
//
// O(n log n) in the tensors: each tensor's entry is built in a vector (a
// name seen before, as a replica would be, shares the first's entry) and
// appended once.
Status write_tensor_files(const std::string& tmp_dir, const std::string& name, const Snapshot& snap,
                          std::vector<FileRecord>& records, nlohmann::ordered_json& tensors) {
  const int64_t step = snap.state.step;
  std::vector<nlohmann::ordered_json> entries;
  std::vector<std::string> names;
  std::vector<size_t> entry_of(snap.specs.size());
  {
    std::unordered_map<std::string_view, size_t> index;
    for (size_t i = 0; i < snap.specs.size(); ++i) {
      const nn::ParamSpec& s = snap.specs[i];
      auto [it, fresh] = index.emplace(s.name, entries.size());
      entry_of[i] = it->second;
      if (!fresh) continue;
      names.push_back(s.name);
      entries.push_back(
          {{"shape", std::vector<int64_t>(s.whole_shape.d.begin(),
                                          s.whole_shape.d.begin() + s.whole_shape.ndim)}});
    }
  }
  std::vector<bool> kept(entries.size(), true);
  if (!snap.params.empty()) {
    CRUCIBLE_RETURN_IF_ERROR(write_safetensors_file(tmp_dir, name, step, part_file_name("model", snap.part),
                                                    tensor_views(snap.specs, snap.params.data(), ""),
                                                    {{"format", "pt"}}, records));
    for (size_t i = 0; i < snap.specs.size(); ++i) {
      nlohmann::ordered_json slice = {{"part", snap.part}};
      slice.update(slice_json(snap.specs[i]));
      entries[entry_of[i]]["slices"].push_back(slice);
    }
  }
  const std::string moments_file = moments_file_name(snap.part, snap.moment_shard);
  const std::vector<size_t> starts = moment_starts(snap);
  std::vector<TensorView> m, v;
  for (size_t i = 0; i < snap.specs.size(); ++i) {
    const nn::ParamSpec& s = snap.specs[i];
    const MomentSpan span = moment_span(snap, starts, s);
    if (snap.moment_shard < 0 && !span.whole)
      return Status::invalid("[ckpt] snapshot moments cover part of parameter " + s.name + " outside a ZeRO shard");
    if (span.count == 0) {
      if (snap.params.empty())
        kept[entry_of[i]] = false;  // neither its weights nor its moments are here
      continue;
    }
    std::vector<int64_t> shape(s.shape.d.begin(), s.shape.d.begin() + s.shape.ndim);
    if (!span.whole) shape = {int64_t(span.count)};
    m.push_back({"exp_avg." + s.name, "F32", shape, snap.exp_avg.data() + span.offset});
    v.push_back({"exp_avg_sq." + s.name, "F32", shape, snap.exp_avg_sq.data() + span.offset});
    if (snap.moment_shard < 0) continue;  // the moments follow the weights' slices
    nlohmann::ordered_json slice = {{"file", moments_file}};
    slice.update(slice_json(s));
    if (!span.whole) slice["flat"] = span.flat;
    entries[entry_of[i]]["moment_slices"].push_back(slice);
  }
  tensors = nlohmann::ordered_json::object();
  for (size_t e = 0; e < entries.size(); ++e)
    if (kept[e]) append_member(tensors, std::move(names[e]), std::move(entries[e]));
  for (TensorView& t : v) m.push_back(std::move(t));
  return write_safetensors_file(tmp_dir, name, step, moments_file, m,
                                {{"format", "pt"}, {"adam_steps", std::to_string(snap.adam_steps)}}, records);
}

// The manifest, listing `records` (every file written before it), then the
// directory's fsync.
Status write_manifest(const std::string& tmp_dir, const std::string& name, const Snapshot& snap,
                      const std::vector<FileRecord>& records, const nlohmann::ordered_json* shards) {
  std::string text = manifest_text(snap, records, shards);
  std::vector<FileRecord> manifest_record;
  CRUCIBLE_RETURN_IF_ERROR(write_checkpoint_file(tmp_dir, name, snap.state.step, "manifest.json",
                                                 {text.data()}, {text.size()}, manifest_record));
  return fsync_dir(tmp_dir);
}

}  // namespace detail

namespace {

// The whole model's checkpoint files into tmp_dir, the manifest last.
Status write_step_files(const std::string& tmp_dir, const std::string& name, const Snapshot& snap) {
  std::vector<FileRecord> records;
  nlohmann::ordered_json tensors;
  CRUCIBLE_RETURN_IF_ERROR(write_tensor_files(tmp_dir, name, snap, records, tensors));
  return write_manifest(tmp_dir, name, snap, records);
}

// Moves tmp_dir to ckpt_dir/name, replacing a checkpoint of the same step.
Status install_step_dir(const std::string& ckpt_dir, const std::string& tmp_dir,
                        const std::string& name) {
  const std::string final_dir = ckpt_dir + "/" + name;
  const std::string replaced = final_dir + ".replaced.tmp";
  std::error_code ec;
  bool replacing = fs::exists(fs::symlink_status(final_dir, ec));
  if (replacing && ::rename(final_dir.c_str(), replaced.c_str()) != 0)
    return Status::io("[ckpt] moving aside the existing " + name + ": " + errno_str());
  if (::rename(tmp_dir.c_str(), final_dir.c_str()) != 0) {
    Status st = Status::io("[ckpt] renaming " + name + ".tmp to " + name + ": " + errno_str());
    if (replacing) ::rename(replaced.c_str(), final_dir.c_str());
    return st;
  }
  CRUCIBLE_RETURN_IF_ERROR(fsync_dir(ckpt_dir));
  if (replacing) fs::remove_all(replaced, ec);  // a leftover goes with the next write's sweep
  return Status::ok();
}

// Keeps the `keep` newest checkpoints up to `step`; removes all newer ones.
Status prune(const std::string& ckpt_dir, int64_t step, int keep) {
  auto listed = list_checkpoints(ckpt_dir);
  if (!listed) return listed.status();
  int kept = 0;
  for (const auto& [s, name] : *listed) {  // newest first
    if (s <= step && ++kept <= keep) continue;
    Status st = remove_step_dir(ckpt_dir, name);
    if (!st) return Status::io(st.message() + " (" + step_dir_name(step) + " itself was written)");
  }
  return fsync_dir(ckpt_dir);
}

}  // namespace

void take_snapshot(const CheckpointState& state, const nn::ParamRegistry& params,
                   const optim::AdamW& opt, Snapshot& into, bool weights) {
  into.state = state;
  into.specs = params.specs();
  if (weights) {
    params.download();  // a GPU's weights: through the host copy
    into.params.assign(params.host_values(), params.host_values() + params.numel());
  }
  else
    into.params.clear();
  // The optimizer's own ranges only: a ZeRO rank's shard, never gathered.
  into.moment_ranges = opt.shard();
  into.exp_avg.resize(opt.shard_numel());
  into.exp_avg_sq.resize(opt.shard_numel());
  opt.export_shard_moments(into.exp_avg.data(), into.exp_avg_sq.data());
  into.adam_steps = opt.steps_taken();
}

Snapshot take_snapshot(const CheckpointState& state, const nn::ParamRegistry& params,
                       const optim::AdamW& opt) {
  Snapshot snap;
  take_snapshot(state, params, opt, snap);
  return snap;
}

namespace detail {

// Creates ckpt_dir (durably) and an empty step_NNNNNNN.tmp in it, after
// clearing the leftovers of an interrupted write or delete.
Status make_step_tmp(const std::string& ckpt_dir, const std::string& name) {
  std::error_code ec;
  bool created = fs::create_directories(ckpt_dir, ec);
  if (ec) return Status::io("[ckpt] creating " + ckpt_dir + ": " + ec.message());
  if (created) {  // its entry in the parent must survive a crash too
    std::string d = ckpt_dir;
    while (d.size() > 1 && d.back() == '/') d.pop_back();
    std::string parent = fs::path(d).parent_path().string();
    CRUCIBLE_RETURN_IF_ERROR(fsync_dir(parent.empty() ? "." : parent));
  }
  // Leftovers of an interrupted write or delete (step_*.tmp, latest.tmp.PID)
  // go first.
  for (fs::directory_iterator it(ckpt_dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::string entry = it->path().filename().string();
    if ((entry.starts_with("step_") && entry.ends_with(".tmp")) ||
        entry.starts_with("latest.tmp.")) {
      std::error_code rm_ec;
      fs::remove_all(it->path(), rm_ec);
    }
  }
  if (ec) return Status::io("[ckpt] listing " + ckpt_dir + ": " + ec.message());
  const std::string tmp_dir = ckpt_dir + "/" + name + ".tmp";
  if (::mkdir(tmp_dir.c_str(), 0755) != 0)
    return Status::io("[ckpt] creating " + name + ".tmp in " + ckpt_dir + ": " + errno_str());
  return Status::ok();
}

// tmp_dir holds a complete checkpoint (its manifest written last): read it
// back, rename it into place, update latest, prune. On failure tmp_dir is
// removed and nothing else has changed.
Status publish_step_dir(const std::string& ckpt_dir, const std::string& tmp_dir, const std::string& name,
                        int64_t step, int keep, Status st) {
  std::error_code ec;
  if (st) st = apply_injected_corruption(step, CorruptAt::kBeforeVerify, tmp_dir, name + ".tmp");
  // Read back what reached the file system, so `latest` only ever names a
  // checkpoint whose bytes were seen to match its manifest.
  if (st) {
    drop_cached_pages(tmp_dir);
    st = verify_checkpoint(tmp_dir, step);
    if (!st) st = Status::io(st.message() + " (read back before publishing)");
  }
  if (st) st = install_step_dir(ckpt_dir, tmp_dir, name);
  if (!st) {
    fs::remove_all(tmp_dir, ec);
    return st;
  }
  // `latest` is a convenience for users and tools; readers scan step_* dirs.
  st = write_file_atomic(ckpt_dir + "/latest", name + "\n", OutputScope::kCheckpoint);
  if (!st)
    return Status::io("[ckpt] " + name + " written, but updating latest failed: " + st.message());
  CRUCIBLE_RETURN_IF_ERROR(apply_injected_corruption(step, CorruptAt::kAfterPublish, ckpt_dir + "/" + name, name));
  return prune(ckpt_dir, step, keep);
}

}  // namespace detail

std::string part_file_name(const std::string& kind, int part) {
  return part < 0 ? kind + ".safetensors" : kind + ".part-" + std::to_string(part) + ".safetensors";
}

std::string moments_file_name(int part, int moment_shard) {
  const std::string base = part < 0 ? "optimizer" : "optimizer.part-" + std::to_string(part);
  return moment_shard < 0 ? base + ".safetensors" : base + ".dp-" + std::to_string(moment_shard) + ".safetensors";
}

Status write_checkpoint(const std::string& ckpt_dir, const Snapshot& snap, int keep) {
  CRUCIBLE_RETURN_IF_ERROR(validate_snapshot(snap, keep));
  if (snap.writer >= 0)
    return snap.writer > 0 ? write_part(ckpt_dir, snap) : publish_sharded_checkpoint(ckpt_dir, snap, keep, nullptr);
  const std::string name = step_dir_name(snap.state.step);
  CRUCIBLE_RETURN_IF_ERROR(make_step_tmp(ckpt_dir, name));
  const std::string tmp_dir = ckpt_dir + "/" + name + ".tmp";
  return publish_step_dir(ckpt_dir, tmp_dir, name, snap.state.step, keep, write_step_files(tmp_dir, name, snap));
}

void inject_checkpoint_write_fault(int64_t step, std::string file) {
  std::lock_guard<std::mutex> lock(g_fault_mu);
  g_fault = InjectedFault{step, std::move(file)};
}

void inject_checkpoint_corruption(int64_t step, std::string file, CorruptAt at) {
  std::lock_guard<std::mutex> lock(g_fault_mu);
  g_corruptions.push_back(InjectedCorruption{step, std::move(file), at});
}

}  // namespace crucible::ckpt

// Checkpoints several ranks write (pipeline and tensor parallelism, ZeRO):
// each writer's files and receipt, and the publisher's wait for the receipts,
// merge of the writers' slices and manifest (ckpt/checkpoint.h). The files
// themselves are written as checkpoint.cc writes one process's.
#include <chrono>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "ckpt/checkpoint.h"
#include "ckpt/checkpoint_internal.h"
#include "core/check.h"
#include "core/clock.h"
#include "core/file_io.h"

namespace crucible::ckpt {
namespace fs = std::filesystem;
using namespace detail;

namespace {

std::string receipt_name(int writer) { return "writer-" + std::to_string(writer) + ".receipt"; }

std::vector<FileRecord> records_from_json(const nlohmann::ordered_json& files) {
  std::vector<FileRecord> records;
  for (const auto& f : files)
    records.push_back({f["name"].get<std::string>(), f["bytes"].get<uint64_t>(),
                       std::stoull(f["xxh64"].get<std::string>(), nullptr, 16)});
  return records;
}

}  // namespace

namespace detail {

// A writer other than the publisher: its tensor files in the publisher's
// step_NNNNNNN.tmp, then its receipt (the files' records and slices, or the
// error that stopped it).
Status write_part(const std::string& ckpt_dir, const Snapshot& snap) {
  const std::string name = step_dir_name(snap.state.step), tmp_dir = ckpt_dir + "/" + name + ".tmp";
  std::vector<FileRecord> records;
  nlohmann::ordered_json tensors;
  Status st = write_tensor_files(tmp_dir, name, snap, records, tensors);
  nlohmann::ordered_json receipt = {{"writer", snap.writer}};
  if (st) {
    receipt["files"] = nlohmann::ordered_json::array();
    for (const FileRecord& r : records)
      receipt["files"].push_back({{"name", r.name}, {"bytes", r.bytes}, {"xxh64", xxh64_hex(r.xxh64)}});
    // As [name, entry] pairs: an array parses in linear time, where an
    // ordered object's parse looks up every key among those before it.
    nlohmann::ordered_json pairs = nlohmann::ordered_json::array();
    for (auto& [tensor, entry] : tensors.items()) pairs.push_back({tensor, std::move(entry)});
    receipt["tensors"] = std::move(pairs);
  } else {
    receipt["error"] = st.message();
  }
  Status written = write_file_atomic(tmp_dir + "/" + receipt_name(snap.writer),
                                     receipt.dump() + "\n", OutputScope::kCheckpoint);
  return st ? written : st;
}

}  // namespace detail

namespace {

// Adds one writer's slices (a receipt's [name, entry] pairs) to the
// manifest's "shards" tensors (in writer order, so the manifest does not
// depend on who finished first). O(n) per writer: the tensors already there
// are found through an index, not nlohmann::ordered_json's scan of its keys.
Status merge_slices(nlohmann::ordered_json& into, const nlohmann::ordered_json& from, const std::string& label) {
  if (!from.is_array()) return Status::io("[ckpt] " + label + ": not a writer's receipt");
  using Members = nlohmann::ordered_json::object_t::Container;  // the map's vector, indexed
  auto& members = static_cast<Members&>(into.get_ref<nlohmann::ordered_json::object_t&>());
  std::unordered_map<std::string, size_t> index;
  for (size_t i = 0; i < members.size(); ++i) index.emplace(members[i].first, i);
  for (const auto& pair : from) {
    if (!pair.is_array() || pair.size() != 2 || !pair[0].is_string() || !pair[1].is_object())
      return Status::io("[ckpt] " + label + ": not a writer's receipt");
    const std::string& tensor = pair[0].get_ref<const std::string&>();
    const nlohmann::ordered_json& t = pair[1];
    auto [it, fresh] = index.emplace(tensor, members.size());
    if (fresh) members.emplace_back(tensor, nlohmann::ordered_json::object());
    nlohmann::ordered_json& e = members[it->second].second;
    if (!e.contains("shape")) e["shape"] = t["shape"];
    if (e["shape"] != t["shape"]) return Status::io("[ckpt] " + label + ": writers disagree on the shape of " + tensor);
    for (const char* key : {"slices", "moment_slices"})
      if (t.contains(key))
        for (const auto& sl : t[key]) e[key].push_back(sl);
  }
  return Status::ok();
}

// The publisher's wait for writers 1 .. writers - 1: their file records,
// their slices merged into `tensors`.
Result<std::vector<FileRecord>> wait_for_writers(const std::string& tmp_dir, const std::string& name,
                                                 const Snapshot& snap, const std::function<bool()>& cancelled,
                                                 double timeout_s, nlohmann::ordered_json& tensors) {
  std::vector<FileRecord> records;
  Stopwatch waited;
  for (int k = 1; k < snap.writers; ++k) {
    const std::string path = tmp_dir + "/" + receipt_name(k);
    std::error_code ec;
    while (!fs::exists(path, ec)) {
      if ((cancelled && cancelled()) || waited.elapsed_s() > timeout_s)
        return Status::io("[ckpt] " + name + ": rank " + std::to_string(k) + " of the " +
                          std::to_string(snap.writers) + " writing it never reported its files" +
                          (cancelled && cancelled() ? " (the job is ending)" : " within " + std::to_string(int(timeout_s)) + " s"));
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    auto text = read_file(path);
    if (!text) return text.status();
    const std::string label = name + ".tmp/" + receipt_name(k);
    nlohmann::ordered_json r = nlohmann::ordered_json::parse(*text, nullptr, false);
    if (r.is_discarded() || !r.is_object() || r.value("writer", -1) != k)
      return Status::io("[ckpt] " + label + ": not a writer's receipt");
    if (r.contains("error")) return Status::io(r["error"].get<std::string>() + " (rank " + std::to_string(k) + ")");
    for (const FileRecord& f : records_from_json(r["files"])) records.push_back(f);
    CRUCIBLE_RETURN_IF_ERROR(merge_slices(tensors, r["tensors"], label));
    fs::remove(path, ec);  // not part of the checkpoint
  }
  return records;
}

}  // namespace

Status begin_sharded_checkpoint(const std::string& ckpt_dir, int64_t step) {
  return make_step_tmp(ckpt_dir, step_dir_name(step));
}

Status publish_sharded_checkpoint(const std::string& ckpt_dir, const Snapshot& snap, int keep,
                                  const std::function<bool()>& cancelled, double timeout_s) {
  CRUCIBLE_RETURN_IF_ERROR(validate_snapshot(snap, keep));
  CRUCIBLE_CHECK(snap.writer == 0, "[ckpt] rank 0 publishes a checkpoint several ranks write");
  const std::string name = step_dir_name(snap.state.step), tmp_dir = ckpt_dir + "/" + name + ".tmp";
  // Its own files while the others write theirs, then their receipts.
  std::vector<FileRecord> records;
  nlohmann::ordered_json tensors;
  Status st = write_tensor_files(tmp_dir, name, snap, records, tensors);
  if (st) {
    auto others = wait_for_writers(tmp_dir, name, snap, cancelled, timeout_s, tensors);
    if (others) {
      records.insert(records.end(), others->begin(), others->end());
      int parts = 0;  // the model's files
      for (const FileRecord& r : records) parts += r.name.starts_with("model.");
      const nlohmann::ordered_json shards = {{"parts", parts}, {"tensors", tensors}};
      st = write_manifest(tmp_dir, name, snap, records, &shards);
    } else {
      st = others.status();
    }
  }
  return publish_step_dir(ckpt_dir, tmp_dir, name, snap.state.step, keep, st);
}

}  // namespace crucible::ckpt

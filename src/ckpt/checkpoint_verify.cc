// Reading checkpoints: verification (manifest checksum, every file's size and
// xxh64), choosing the newest valid one, and loading it into a model and
// optimizer; and the format helpers both sides share. Writing: checkpoint.cc.
#include <fcntl.h>
#include <unistd.h>
#define XXH_STATIC_LINKING_ONLY  // XXH64_state_t on the stack
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>

#include "ckpt/checkpoint.h"
#include "ckpt/checkpoint_internal.h"
#include "ckpt/model_io.h"
#include "ckpt/safetensors.h"
#include "core/check.h"
#include "core/file_io.h"

namespace crucible::ckpt {
namespace fs = std::filesystem;

namespace {

// The directory's own name ("step_0000020"): errors name files by it.
std::string dir_label(const std::string& step_dir) {
  std::string d = step_dir;
  while (d.size() > 1 && d.back() == '/') d.pop_back();
  return fs::path(d).filename().string();
}

std::atomic<uint64_t> g_hashed_bytes{0};

}  // namespace

Result<uint64_t> detail::hash_file(const std::string& path, const std::string& label) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::io("[ckpt] reading " + label + ": " + errno_str());
  XXH64_state_t state;
  XXH64_reset(&state, 0);
  std::vector<char> buf(1 << 20);
  for (;;) {
    ssize_t r = ::read(fd, buf.data(), buf.size());
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      std::string err = errno_str();
      ::close(fd);
      return Status::io("[ckpt] reading " + label + ": " + err);
    }
    if (r == 0) break;
    XXH64_update(&state, buf.data(), size_t(r));
    g_hashed_bytes.fetch_add(uint64_t(r), std::memory_order_relaxed);
  }
  ::close(fd);
  return uint64_t(XXH64_digest(&state));
}

namespace {

bool is_plain_file_name(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos;
}

// Which of a manifest's files this caller hashes (the sizes of all are
// checked either way): all, none (just verified), or rank's share of
// `ranks`: the files dealt out largest first, each to the rank with the
// fewest bytes so far (ties to the lowest rank), so every rank reads about
// total / ranks bytes. Every rank deals the same manifest the same way.
struct Hashing {
  bool any = true;
  int rank = 0, ranks = 1;
};

std::vector<bool> hashed_here(const nlohmann::json& files, const Hashing& how) {
  std::vector<bool> mine(files.size(), how.any && how.ranks <= 1);
  if (!how.any || how.ranks <= 1) return mine;
  std::vector<size_t> order(files.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  auto bytes = [&](size_t i) { return files[i]["bytes"].get<uint64_t>(); };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return bytes(a) > bytes(b); });
  std::vector<uint64_t> load(size_t(how.ranks), 0);
  for (size_t i : order) {
    const size_t r = size_t(std::min_element(load.begin(), load.end()) - load.begin());
    load[r] += bytes(i);
    mine[i] = int(r) == how.rank;
  }
  return mine;
}

// Verifies step_dir and returns its parsed manifest. The manifest must record
// expected_step, or without one the step in the directory's name (if any).
Result<nlohmann::json> verified_manifest(const std::string& step_dir,
                                         std::optional<int64_t> expected_step = {},
                                         const Hashing& hashing = {}) {
  const std::string label = dir_label(step_dir);
  std::error_code ec;
  if (!fs::is_directory(step_dir, ec))
    return Status::not_found("[ckpt] " + step_dir + ": no such checkpoint directory");
  const std::string mlabel = label + "/manifest.json";
  std::ifstream in(step_dir + "/manifest.json", std::ios::binary);
  if (!in) return Status::corrupt("[ckpt] " + mlabel + ": missing (an incomplete checkpoint)");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  nlohmann::json m = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (m.is_discarded() || !m.is_object())
    return Status::corrupt("[ckpt] " + mlabel + ": not a JSON object (damaged)");
  auto sum = m.find(kManifestChecksumKey);
  size_t pos = sum != m.end() && sum->is_string()
                   ? manifest_checksum_pos(text, sum->get<std::string>())
                   : std::string::npos;
  if (pos == std::string::npos)
    return Status::corrupt("[ckpt] " + mlabel + ": no " + kManifestChecksumKey + " member");
  std::string zeroed = text;
  zeroed.replace(pos, 16, std::string(16, '0'));
  if (xxh64_hex(XXH64(zeroed.data(), zeroed.size(), 0)) != sum->get<std::string>())
    return Status::corrupt("[ckpt] " + mlabel + ": checksum mismatch");

  // The checksum holds, so the content is as written; these catch manifests
  // from another writer or a directory renamed by hand.
  if (!m.contains("step") || !m["step"].is_number_integer() || !m.contains("files") ||
      !m["files"].is_array())
    return Status::corrupt("[ckpt] " + mlabel + ": lacks step or files");
  if (m["step"].is_number_unsigned() ? m["step"].get<uint64_t>() > uint64_t(INT64_MAX) : m["step"].get<int64_t>() < 0)
    return Status::corrupt("[ckpt] " + mlabel + ": step " + m["step"].dump() + " is out of range");
  // The members other layers read must be of their kind (their owners check
  // the content): a manifest whose "world" is a string is damaged, not usable.
  for (const char* key : {"world", "config", "loader", "rng", "data", "metrics", "sim", "init"})
    if (m.contains(key) && !m[key].is_object() && !(m[key].is_null() && std::string(key) != "world"))
      return Status::corrupt("[ckpt] " + mlabel + ": \"" + key + "\" is not an object");
  if (!m.contains("world") || !m["world"].contains("world_size") || !m["world"]["world_size"].is_number_integer() ||
      m["world"]["world_size"].get<int64_t>() < 1)
    return Status::corrupt("[ckpt] " + mlabel + ": \"world\" lacks a world_size >= 1");
  for (const auto& [key, value] : m["world"].items())
    if (!value.is_number_integer())
      return Status::corrupt("[ckpt] " + mlabel + ": world." + key + " is not an integer");
  if (!expected_step) expected_step = parse_step_dir_name(label);
  if (expected_step && *expected_step != m["step"].get<int64_t>())
    return Status::corrupt("[ckpt] " + mlabel + ": records step " +
                           std::to_string(m["step"].get<int64_t>()) + ", not " +
                           std::to_string(*expected_step));
  for (const nlohmann::json& f : m["files"])
    if (!f.is_object() || !f.contains("name") || !f["name"].is_string() || !f.contains("bytes") ||
        !f["bytes"].is_number_unsigned() || !f.contains("xxh64") || !f["xxh64"].is_string() ||
        !is_plain_file_name(f["name"].get<std::string>()))
      return Status::corrupt("[ckpt] " + mlabel + ": malformed files entry " + f.dump());
  const std::vector<bool> hash_this = hashed_here(m["files"], hashing);
  for (size_t i = 0; i < m["files"].size(); ++i) {
    const nlohmann::json& f = m["files"][i];
    const std::string name = f["name"].get<std::string>();
    const std::string flabel = label + "/" + name;
    const std::string path = step_dir + "/" + name;
    uint64_t size = fs::file_size(path, ec);
    if (ec) return Status::corrupt("[ckpt] " + flabel + ": missing (" + ec.message() + ")");
    uint64_t want = f["bytes"].get<uint64_t>();
    if (size != want)
      return Status::corrupt("[ckpt] " + flabel + ": " + std::to_string(size) +
                             " bytes, the manifest says " + std::to_string(want) +
                             (size < want ? " (truncated)" : ""));
    if (!hash_this[i]) continue;
    auto h = detail::hash_file(path, flabel);
    if (!h) return h.status();
    if (xxh64_hex(*h) != f["xxh64"].get<std::string>())
      return Status::corrupt("[ckpt] " + flabel + ": checksum mismatch");
  }
  return m;
}

bool lists_file(const nlohmann::json& manifest, const std::string& name) {
  for (const auto& f : manifest["files"])
    if (f["name"] == name) return true;
  return false;
}

// Reads and checks the AdamW moments against the model's parameters before
// anything is overwritten.
Result<SafetensorsFile> read_moments(const std::string& path, const std::string& label,
                                     const nn::ParamRegistry& params, int64_t& adam_steps, bool part) {
  auto file = read_safetensors(path);
  if (!file) return file.status();
  auto it = file->metadata.find("adam_steps");
  const std::string steps = it == file->metadata.end() ? "" : it->second;
  auto [end, err] = std::from_chars(steps.data(), steps.data() + steps.size(), adam_steps);
  if (steps.empty() || err != std::errc() || end != steps.data() + steps.size() || adam_steps < 0)
    return Status::corrupt("[ckpt] " + label + ": no valid adam_steps metadata");
  for (const nn::ParamSpec& s : params.specs()) {
    std::vector<int64_t> want(s.whole_shape.d.begin(), s.whole_shape.d.begin() + s.whole_shape.ndim);
    for (const char* prefix : {"exp_avg.", "exp_avg_sq."}) {
      const LoadedTensor* t = file->find(prefix + s.name);
      if (!t) return Status::corrupt("[ckpt] " + label + ": missing tensor " + prefix + s.name);
      if (t->dtype != "F32" || t->shape != want)
        return Status::corrupt("[ckpt] " + label + ": tensor " + prefix + s.name + " is " +
                               t->dtype + " with a shape other than the model's " + s.whole_shape.str());
    }
  }
  if (!part && file->tensors.size() != 2 * params.specs().size())
    return Status::corrupt("[ckpt] " + label + ": holds " + std::to_string(file->tensors.size()) +
                           " tensors, the model's optimizer has " +
                           std::to_string(2 * params.specs().size()));
  return file;
}

}  // namespace

std::string step_dir_name(int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "step_%07" PRId64, step);
  return buf;
}

std::optional<int64_t> parse_step_dir_name(const std::string& name) {
  if (name.size() < 12 || name.compare(0, 5, "step_") != 0 || name.size() > 5 + 18) return {};
  int64_t step = 0;
  for (size_t i = 5; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return {};
    step = step * 10 + (name[i] - '0');
  }
  // Only the canonical spelling: step_20 and step_0000020 must not both count.
  if (step_dir_name(step) != name) return {};
  return step;
}

Result<std::vector<std::pair<int64_t, std::string>>> list_checkpoints(const std::string& ckpt_dir) {
  std::vector<std::pair<int64_t, std::string>> out;
  std::error_code ec;
  if (!fs::exists(ckpt_dir, ec)) return out;
  for (fs::directory_iterator it(ckpt_dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (auto step = parse_step_dir_name(name)) out.emplace_back(*step, name);
  }
  if (ec) return Status::io("[ckpt] listing " + ckpt_dir + ": " + ec.message());
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  return out;
}

std::string xxh64_hex(uint64_t h) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016" PRIx64, h);
  return buf;
}

size_t manifest_checksum_pos(const std::string& text, const std::string& recorded) {
  if (recorded.size() != 16) return std::string::npos;
  // The checksum is the manifest's last member, so its text is the last match.
  const std::string field = std::string("\"") + kManifestChecksumKey + "\": \"" + recorded + "\"";
  size_t pos = text.rfind(field);
  return pos == std::string::npos ? pos : pos + field.size() - 17;
}

Status verify_checkpoint(const std::string& step_dir) {
  auto m = verified_manifest(step_dir);
  return m ? Status::ok() : m.status();
}

Status verify_checkpoint(const std::string& dir, int64_t expected_step) {
  auto m = verified_manifest(dir, expected_step);
  return m ? Status::ok() : m.status();
}

namespace {

CheckpointState state_from_manifest(const nlohmann::json& m) {
  CheckpointState state;
  state.step = m["step"].get<int64_t>();
  for (auto [key, field] : {std::pair{"config", &state.config}, std::pair{"loader", &state.loader},
                            std::pair{"rng", &state.rng}, std::pair{"world", &state.world},
                            std::pair{"data", &state.data}, std::pair{"metrics", &state.metrics},
                            std::pair{"sim", &state.sim}, std::pair{"init", &state.init}})
    *field = m.contains(key) ? m[key] : nlohmann::json();
  return state;
}

}  // namespace

Result<FoundCheckpoint> find_latest_valid(const std::string& ckpt_dir, const VerifyShare* share) {
  std::error_code ec;
  Status there = fs::is_directory(ckpt_dir, ec)
                     ? Status::ok()
                     : Status::not_found("[ckpt] no checkpoint in " + ckpt_dir + ": no such directory");
  std::vector<std::pair<int64_t, std::string>> listed;
  if (there.is_ok()) {
    auto l = list_checkpoints(ckpt_dir);
    there = l.status();
    if (l) listed = std::move(*l);
  }
  if (share) {  // one list for every rank (rank 0's): each candidate is then one agreement
    std::string names;
    for (const auto& c : listed) names += c.second + "\n";
    CRUCIBLE_RETURN_IF_ERROR(share->agree(there));
    CRUCIBLE_RETURN_IF_ERROR(share->broadcast(names));
    listed.clear();
    for (size_t at = 0, nl; (nl = names.find('\n', at)) != std::string::npos; at = nl + 1)
      if (auto step = parse_step_dir_name(names.substr(at, nl - at))) listed.emplace_back(*step, names.substr(at, nl - at));
  }
  CRUCIBLE_RETURN_IF_ERROR(there);
  if (listed.empty()) return Status::not_found("[ckpt] no checkpoint in " + ckpt_dir);
  const Hashing mine = share ? Hashing{true, share->rank, share->ranks} : Hashing{};
  FoundCheckpoint found;
  for (const auto& [step, name] : listed) {  // newest first
    const std::string dir = ckpt_dir + "/" + name;
    auto m = verified_manifest(dir, {}, mine);
    if (share) {
      Status all = share->agree(m.status());
      if (!all.is_ok()) m = all;
    }
    if (m) {
      found.dir = dir;
      found.step = step;
      found.state = state_from_manifest(*m);
      for (std::string& w : found.warnings) w += "; using an older checkpoint";
      return found;
    }
    found.warnings.push_back(m.status().message());
  }
  // None verifies: one line naming every problem; nothing was skipped over.
  std::string why;
  for (const std::string& w : found.warnings)
    why += (why.empty() ? " " : "; ") + w.substr(w.rfind("[ckpt] ", 0) == 0 ? 7 : 0);
  return Status::corrupt("[ckpt] no valid checkpoint in " + ckpt_dir + ":" + why);
}

namespace {

// A sharded checkpoint's reader: assembles a tensor, or a tensor-parallel
// shard of one, from the slices its files hold (manifest "shards"), reading
// only the files whose slices overlap what is asked for (each once).
class ShardedReader {
 public:
  ShardedReader(std::string dir, const nlohmann::json& shards) : dir_(std::move(dir)), shards_(shards) {}

  // Flat element ranges of a tensor in its own (possibly sharded) layout.
  using Flat = std::vector<std::pair<size_t, size_t>>;

  // local (want.numel) := want's part of the whole tensor want.name, from
  // the weights ("model": the slices) or the moments ("optimizer": the
  // moment_slices, else the slices), their tensors named prefix + name.
  // only: the elements of local wanted (empty: all); the others are zeros.
  Status assemble(const nn::ParamSpec& want, const std::string& kind, const std::string& prefix, float* local,
                  const Flat& only = {}) {
    const std::string label = dir_label(dir_);
    auto bad = [&](const std::string& why) {
      return Status::corrupt("[ckpt] " + label + ": tensor " + prefix + want.name + " " + why);
    };
    const nlohmann::json& tensors = shards_["tensors"];
    if (!tensors.contains(want.name)) return bad("is missing");
    const nlohmann::json& t = tensors[want.name];
    std::vector<int64_t> shape(want.whole_shape.d.begin(), want.whole_shape.d.begin() + want.whole_shape.ndim);
    if (!t.contains("shape") || t["shape"] != shape) return bad("has a shape other than the model's " + want.whole_shape.str());
    const std::vector<Run> needed = runs(want, only);
    size_t wanted = 0;
    for (const Run& r : needed) wanted += r.n;
    std::vector<float> whole(size_t(want.whole_shape.numel()));
    size_t covered = 0;
    const char* key = kind == "optimizer" && t.contains("moment_slices") ? "moment_slices" : "slices";
    if (!t.contains(key) || !t[key].is_array()) return bad("has no slices");
    for (const nlohmann::json& sl : t[key]) {
      if (!sl.is_object() || !sl.contains("pieces") || !sl["pieces"].is_array()) return bad("has a malformed slice");
      nn::ParamSpec piece;
      piece.whole_shape = want.whole_shape;
      piece.shard.dim = sl.value("dim", -1);
      for (const auto& p : sl["pieces"]) piece.shard.pieces.push_back({p[0].get<int64_t>(), p[1].get<int64_t>()});
      piece.shape = want.whole_shape;
      if (!piece.shard.whole()) {
        if (size_t(piece.shard.dim) >= shape.size()) return bad("has a slice along a dimension it lacks");
        int64_t n = 0;
        for (const auto& p : piece.shard.pieces) {
          if (p.lo < 0 || p.hi <= p.lo || p.hi > shape[size_t(piece.shard.dim)]) return bad("has a slice outside it");
          n += p.hi - p.lo;
        }
        piece.shape.d[size_t(piece.shard.dim)] = n;
      }
      piece.numel = size_t(piece.shape.numel());
      // A ZeRO shard's file holds the slice's elements in `flat` only.
      Flat flat;
      size_t stored = piece.numel;
      if (sl.contains("flat")) {
        if (!sl["flat"].is_array()) return bad("has a malformed slice");
        stored = 0;
        for (const auto& f : sl["flat"]) {
          const size_t lo = f[0].get<size_t>(), hi = f[1].get<size_t>();
          if (hi <= lo || hi > piece.numel || (!flat.empty() && lo < flat.back().second)) return bad("has a slice outside it");
          flat.push_back({lo, hi});
          stored += hi - lo;
        }
      }
      const std::vector<Run> held = runs(piece, flat);
      const size_t overlap = overlap_of(needed, held);
      if (overlap == 0) continue;  // this rank needs nothing of it: its file is not read for it
      covered += overlap;
      const std::string file_name = sl.contains("file") ? sl["file"].get<std::string>()
                                                         : part_file_name(kind, sl.value("part", -1));
      if (!is_plain_file_name(file_name)) return bad("names a file outside the checkpoint");
      auto file = open(file_name);
      if (!file) return file.status();
      const LoadedTensor* data = (*file)->find(prefix + want.name);
      if (!data || data->dtype != "F32" || size_t(data->numel()) != stored)
        return bad("is missing from, or of another size in, " + file_name);
      size_t at = 0;
      for (const Run& r : held) {
        std::memcpy(whole.data() + r.at, data->f32() + at, r.n * sizeof(float));
        at += r.n;
      }
      if (kind == "optimizer" && adam_steps_file_.empty()) adam_steps_file_ = file_name;
    }
    if (covered != wanted) return bad("is not covered by its slices");
    nn::copy_from_whole(want, whole.data(), local);
    return Status::ok();
  }

  // A file's metadata value (the optimizer files hold adam_steps).
  Result<std::string> metadata(const std::string& file, const std::string& key) {
    auto f = open(file);
    if (!f) return f.status();
    auto it = (*f)->metadata.find(key);
    if (it == (*f)->metadata.end()) return Status::corrupt("[ckpt] " + dir_label(dir_) + "/" + file + ": no " + key + " metadata");
    return it->second;
  }
  // The first optimizer file assemble() read.
  const std::string& adam_steps_file() const { return adam_steps_file_; }

 private:
  struct Run {
    size_t at, n;  // whole-tensor offset and length, ascending
  };
  // The whole-tensor runs of s's elements, or of those in `flat` (s's own
  // layout) only, in s's order.
  static std::vector<Run> runs(const nn::ParamSpec& s, const Flat& flat = {}) {
    std::vector<Run> out;
    nn::for_each_run(s, [&](size_t local, size_t whole, size_t n) {
      if (flat.empty()) return out.push_back({whole, n});
      for (const auto& [lo, hi] : flat) {
        const size_t a = std::max(lo, local), b = std::min(hi, local + n);
        if (b > a) out.push_back({whole + (a - local), b - a});
      }
    });
    return out;
  }
  // Elements two ascending run lists share (a two-pointer sweep).
  static size_t overlap_of(const std::vector<Run>& a, const std::vector<Run>& b) {
    size_t total = 0;
    for (size_t i = 0, j = 0; i < a.size() && j < b.size();) {
      const size_t lo = std::max(a[i].at, b[j].at), hi = std::min(a[i].at + a[i].n, b[j].at + b[j].n);
      if (hi > lo) total += hi - lo;
      (a[i].at + a[i].n < b[j].at + b[j].n) ? ++i : ++j;
    }
    return total;
  }
  Result<const SafetensorsFile*> open(const std::string& name) {
    auto it = files_.find(name);
    if (it == files_.end()) {
      auto f = read_safetensors(dir_ + "/" + name);
      if (!f) return f.status();
      it = files_.emplace(name, std::move(*f)).first;
    }
    return &it->second;
  }

  std::string dir_;
  const nlohmann::json& shards_;
  std::map<std::string, SafetensorsFile> files_;
  std::string adam_steps_file_;
};

Status load_sharded(const std::string& step_dir, const nlohmann::json& m, nn::ParamRegistry& params,
                    optim::AdamW* opt, bool part) {
  if (!part && m["shards"]["tensors"].size() != params.specs().size())
    return Status::corrupt("[ckpt] " + dir_label(step_dir) + ": holds " + std::to_string(m["shards"]["tensors"].size()) +
                           " tensors, the model has " + std::to_string(params.specs().size()));
  ShardedReader reader(step_dir, m["shards"]);
  for (const nn::ParamSpec& s : params.specs())
    CRUCIBLE_RETURN_IF_ERROR(reader.assemble(s, "model", "", params.host_values() + s.offset));
  for (const nn::ParamSpec& s : params.specs())
    CRUCIBLE_RETURN_IF_ERROR(check_finite(dir_label(step_dir), s.name, params.host_values() + s.offset, s.numel));
  params.upload();  // to a GPU's memory; bf16 models: the working copy of the loaded weights
  if (!opt) return Status::ok();
  // The moments of the optimizer's own ranges only (a ZeRO rank's shard),
  // staged in the full layout for import_moments.
  std::vector<float> m_full(params.numel(), 0.0f), v_full(params.numel(), 0.0f);
  // The shard's ranges are ascending and disjoint: each tensor's overlap is
  // found by bisection (O(log R) a tensor, not a scan of every range).
  const std::vector<optim::Range>& shard = opt->shard();
  CRUCIBLE_CHECK(std::adjacent_find(shard.begin(), shard.end(),
                                    [](const optim::Range& a, const optim::Range& b) {
                                      return b.begin < a.end;
                                    }) == shard.end(),
                 "[ckpt] an optimizer's shard is ascending, disjoint ranges");
  for (const nn::ParamSpec& s : params.specs()) {
    ShardedReader::Flat only;
    auto r = std::upper_bound(shard.begin(), shard.end(), s.offset,
                              [](size_t offset, const optim::Range& x) { return offset < x.end; });
    for (; r != shard.end() && r->begin < s.offset + s.numel; ++r) {
      const size_t lo = std::max(r->begin, s.offset), hi = std::min(r->end, s.offset + s.numel);
      if (hi > lo) only.push_back({lo - s.offset, hi - s.offset});
    }
    if (only.empty()) continue;  // none of its moments are this rank's
    if (only.size() == 1 && only[0] == std::pair<size_t, size_t>{0, s.numel}) only.clear();  // all of them
    CRUCIBLE_RETURN_IF_ERROR(reader.assemble(s, "optimizer", "exp_avg.", m_full.data() + s.offset, only));
    CRUCIBLE_RETURN_IF_ERROR(reader.assemble(s, "optimizer", "exp_avg_sq.", v_full.data() + s.offset, only));
  }
  if (reader.adam_steps_file().empty()) return Status::corrupt("[ckpt] " + dir_label(step_dir) + ": no moments for this rank");
  auto steps = reader.metadata(reader.adam_steps_file(), "adam_steps");
  if (!steps) return steps.status();
  int64_t adam_steps = -1;
  auto [end, err] = std::from_chars(steps->data(), steps->data() + steps->size(), adam_steps);
  if (err != std::errc() || end != steps->data() + steps->size() || adam_steps < 0)
    return Status::corrupt("[ckpt] " + dir_label(step_dir) + ": no valid adam_steps metadata");
  opt->import_moments(m_full.data(), v_full.data());
  opt->set_steps_taken(adam_steps);
  return Status::ok();
}

}  // namespace

Result<CheckpointState> load_checkpoint(const std::string& step_dir, nn::ParamRegistry& params,
                                        optim::AdamW* opt, bool part, bool verified) {
  auto manifest = verified_manifest(step_dir, {}, Hashing{!verified});
  if (!manifest) return manifest.status();
  const nlohmann::json& m = *manifest;
  const std::string label = dir_label(step_dir);
  if (m.contains("shards")) {
    if (!m["shards"].is_object() || !m["shards"].contains("tensors") || !m["shards"]["tensors"].is_object())
      return Status::corrupt("[ckpt] " + label + "/manifest.json: malformed \"shards\"");
    CRUCIBLE_RETURN_IF_ERROR(load_sharded(step_dir, m, params, opt, part));
    return state_from_manifest(m);
  }
  for (const char* name : {"model.safetensors", "optimizer.safetensors"})
    if ((opt || name == std::string("model.safetensors")) && !lists_file(m, name))
      return Status::corrupt("[ckpt] " + label + "/manifest.json: does not list " + name);

  SafetensorsFile moments;
  int64_t adam_steps = 0;
  if (opt) {
    auto file = read_moments(step_dir + "/optimizer.safetensors", label + "/optimizer.safetensors",
                             params, adam_steps, part);
    if (!file) return file.status();
    moments = std::move(file.value());
  }
  CRUCIBLE_RETURN_IF_ERROR(load_params(params, step_dir + "/model.safetensors", part));
  if (opt) {
    // Staged in the full layout, then each optimizer takes its shard: a
    // checkpoint written at any world size loads at any other.
    std::vector<float> m_full(params.numel(), 0.0f), v_full(params.numel(), 0.0f);
    for (const nn::ParamSpec& s : params.specs()) {
      const LoadedTensor& m1 = moments.tensors.at("exp_avg." + s.name);
      const LoadedTensor& m2 = moments.tensors.at("exp_avg_sq." + s.name);
      nn::copy_from_whole(s, reinterpret_cast<const float*>(m1.bytes.data()), m_full.data() + s.offset);
      nn::copy_from_whole(s, reinterpret_cast<const float*>(m2.bytes.data()), v_full.data() + s.offset);
    }
    opt->import_moments(m_full.data(), v_full.data());
    opt->set_steps_taken(adam_steps);
  }

  return state_from_manifest(m);
}

namespace detail {
uint64_t hashed_bytes() { return g_hashed_bytes.load(std::memory_order_relaxed); }
}  // namespace detail

}  // namespace crucible::ckpt

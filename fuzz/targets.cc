#include "fuzz/targets.h"

#include <unistd.h>
#include <xxhash.h>

#include <cstdlib>
#include <filesystem>
#include <string_view>

#include "ckpt/checkpoint.h"
#include "ckpt/safetensors.h"
#include "core/check.h"
#include "core/checked_file.h"
#include "core/file_io.h"
#include "data/corpus.h"
#include "data/jsonl_line.h"
#include "data/loader.h"
#include "data/shard.h"
#include "plan/cluster.h"
#include "profile/probe.h"
#include "profile/probe_schema.h"
#include "profile/report.h"
#include "profile/report_sections.h"
#include "profile/run_schema.h"
#include "profile/trace_file.h"
#include "runtime/config.h"
#include "runtime/resume_check.h"

namespace crucible::fuzz {

namespace {

namespace fs = std::filesystem;

// A private scratch directory for readers that take a path (tmpfs when there).
const std::string& scratch() {
  static const std::string dir = [] {
    std::string base = fs::is_directory("/dev/shm") ? "/dev/shm" : fs::temp_directory_path().string();
    std::string d = base + "/crucible_fuzz." + std::to_string(::getpid());
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

std::string put(const std::string& name, const uint8_t* data, size_t size) {
  const std::string path = scratch() + "/" + name;
  FILE* f = std::fopen(path.c_str(), "wb");
  CRUCIBLE_CHECK(f != nullptr, "[fuzz] scratch file");
  if (size) CRUCIBLE_CHECK(std::fwrite(data, 1, size, f) == size, "[fuzz] scratch write");
  std::fclose(f);
  return path;
}

}  // namespace

int config(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> overrides;
  if (size_t at = text.find("\n--set\n"); at != std::string::npos) {
    std::string rest = text.substr(at + 7);
    text.resize(at);
    for (size_t p = 0; p <= rest.size();) {
      size_t nl = rest.find('\n', p);
      if (nl == std::string::npos) nl = rest.size();
      if (nl > p) overrides.push_back(rest.substr(p, nl - p));
      p = nl + 1;
    }
  }
  auto cfg = runtime::parse_config(text, "fuzz.toml", overrides);
  if (!cfg) return 0;
  // What parses is written and read back to itself (the resume contract).
  const std::string written = runtime::to_toml(*cfg);
  auto back = runtime::parse_config(written, "resolved");
  CRUCIBLE_CHECK(back.is_ok(), "[fuzz] a resolved config parses back");
  CRUCIBLE_CHECK(runtime::to_toml(*back) == written, "[fuzz] the resolved config is a fixed point");
  return 0;
}

int safetensors(const uint8_t* data, size_t size) {
  auto f = ckpt::read_safetensors(put("t.safetensors", data, size));
  if (f)
    for (const auto& [name, t] : f->tensors)
      CRUCIBLE_CHECK(uint64_t(t.numel()) * ckpt::dtype_bytes(t.dtype) == t.bytes.size(),
                     "[fuzz] a tensor read holds its shape's bytes");
  return 0;
}

int manifest(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  // Make the self-checksum valid when the member is there, so the checks
  // behind it are what the input exercises.
  const std::string key = std::string("\"") + ckpt::kManifestChecksumKey + "\": \"";
  if (size_t at = text.rfind(key); at != std::string::npos && at + key.size() + 16 <= text.size()) {
    const std::string recorded = text.substr(at + key.size(), 16);
    const size_t pos = ckpt::manifest_checksum_pos(text, recorded);
    if (pos != std::string::npos) {
      text.replace(pos, 16, std::string(16, '0'));
      text.replace(pos, 16, ckpt::xxh64_hex(XXH64(text.data(), text.size(), 0)));
    }
  }
  const std::string ckpt_dir = scratch() + "/ckpt";
  fs::create_directories(ckpt_dir + "/step_0000001");
  const std::string path = ckpt_dir + "/step_0000001/manifest.json";
  put("ckpt/step_0000001/manifest.json", reinterpret_cast<const uint8_t*>(text.data()), text.size());
  auto found = ckpt::find_latest_valid(ckpt_dir);
  if (!found) return 0;
  // Every consumer of the members reads them without throwing.
  (void)data::loader_state_from_json(found->state.loader);
  if (!found->state.data.is_null()) (void)runtime::DataPin::from_json(found->state.data, path);
  runtime::Config cfg;
  (void)runtime::check_resume_config(found->state.config, cfg, "step_0000001");
  return 0;
}

int shard(const uint8_t* data, size_t size) {
  auto s = data::TokenShard::open(put("t.tok", data, size), /*verify=*/true);
  if (s && s->size() > 0) {
    CRUCIBLE_CHECK(uint64_t((*s)[s->size() - 1]) < s->info().vocab_size, "[fuzz] ids below vocab_size");
  }
  return 0;
}

int checked_file(const uint8_t* data, size_t size) {
  const std::string path = put("t.checked", data, size);
  (void)read_checked(path);
  auto r = CheckedReader::open(path);
  if (r) (void)r->verify_all();
  return 0;
}

int jsonl(const uint8_t* data, size_t size) {
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  data::JsonlLine line;  // one per input, reused line to line as the scanner does per segment
  for (size_t p = 0; p < all.size();) {
    size_t nl = all.find('\n', p);
    if (nl == std::string_view::npos) nl = all.size();
    (void)line.parse(all.substr(p, nl - p), all.size() - p);
    p = nl + 1;
  }
  (void)data::read_corpus({put("t.jsonl", data, size)}, data::CorpusFormat::kJsonl);
  return 0;
}

int fortunes(const uint8_t* data, size_t size) {
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  size_t n = 0;
  data::for_each_fortune(all, [&](size_t, std::string_view f) {
    size_t repaired = 0;
    (void)data::sanitize_utf8(f, &repaired);
    ++n;
  });
  (void)data::read_corpus({put("t.fortunes", data, size)}, data::CorpusFormat::kFortunes);
  return 0;
}

// The JSON of an input, or discarded.
nlohmann::json parse_json(const uint8_t* data, size_t size) {
  return nlohmann::json::parse(reinterpret_cast<const char*>(data),
                               reinterpret_cast<const char*>(data) + size, nullptr,
                               /*allow_exceptions=*/false);
}

// A run directory in the scratch space holding `name` (the input) and a
// few metrics rows, for the report's readers.
std::string scratch_run(const std::string& name, const uint8_t* data, size_t size) {
  const std::string run = scratch() + "/run";
  fs::remove_all(run);
  fs::create_directories(run);
  const std::string rows =
      "{\"step\":1,\"loss\":5.0,\"lr\":0.001,\"step_ms\":12.0,\"forward_ms\":4.0,\"backward_ms\":6."
      "0}\n"
      "{\"step\":3,\"loss\":4.5,\"lr\":0.001,\"step_ms\":11.0,\"forward_ms\":4.0,\"backward_ms\":5."
      "5}\n";
  put("run/metrics.jsonl", reinterpret_cast<const uint8_t*>(rows.data()), rows.size());
  put("run/" + name, data, size);
  return run;
}

int probe(const uint8_t* data, size_t size) {
  const nlohmann::json doc = parse_json(data, size);
  if (doc.is_discarded()) return 0;
  const Status checked = profile::check_probe_document(doc, "probe.json");
  (void)profile::probe_gemm_ceiling({put("probe.json", data, size)}, 1, "f32");
  (void)profile::compare_probes(doc, doc, "a", "b");
  (void)profile::render_report(scratch_run("probe.json", data, size));
  auto c = plan::cluster_from_probe(doc, "probe.json");
  if (c) {
    CRUCIBLE_CHECK(checked.is_ok(),
                   "[fuzz] a cluster comes only from a probe document that passes its check");
    CRUCIBLE_CHECK(plan::check_cluster(*c).is_ok(),
                   "[fuzz] a cluster made from a probe reads back");
  }
  return 0;
}

int plan_json(const uint8_t* data, size_t size) {
  const nlohmann::json doc = parse_json(data, size);
  if (!doc.is_discarded()) (void)profile::check_plan_document(doc, "[fuzz]", "plan.json");
  (void)profile::render_report(scratch_run("plan.json", data, size));
  return 0;
}

int trace(const uint8_t* data, size_t size) {
  const nlohmann::json doc = parse_json(data, size);
  if (!doc.is_discarded()) (void)profile::validate_trace(doc);
  (void)profile::pipeline_section(scratch_run("trace.json", data, size));
  return 0;
}

int cluster(const uint8_t* data, size_t size) {
  auto c = plan::parse_cluster(std::string(reinterpret_cast<const char*>(data), size), "fuzz.toml");
  if (!c) return 0;
  const std::string once = plan::cluster_toml(*c, "");
  auto back = plan::parse_cluster(once, "written");
  CRUCIBLE_CHECK(back.is_ok(),
                 "[fuzz] a cluster file that parses is written so that it reads back");
  const std::string twice = plan::cluster_toml(*back, "");
  auto again = plan::parse_cluster(twice, "rewritten");
  CRUCIBLE_CHECK(again.is_ok() && plan::cluster_toml(*again, "") == twice,
                 "[fuzz] the cluster file is a fixed point");
  return 0;
}

const std::vector<NamedTarget>& all_targets() {
  static const std::vector<NamedTarget> t = {{"config", config},
                                             {"safetensors", safetensors},
                                             {"manifest", manifest},
                                             {"shard", shard},
                                             {"checked_file", checked_file},
                                             {"jsonl", jsonl},
                                             {"fortunes", fortunes},
                                             {"probe", probe},
                                             {"plan_json", plan_json},
                                             {"trace", trace},
                                             {"cluster", cluster}};
  return t;
}

}  // namespace crucible::fuzz

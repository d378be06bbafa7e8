// `crucible bench curate`: curation throughput on a generated web-like corpus
// (docs/performance.md, "Curation"): MinHash signatures alone (MB/s per core,
// one thread and all threads) and the whole `crucible curate` pipeline as a
// child process (MB/s per core, peak RSS from wait4).
#include <omp.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>

#include "cli/commands.h"
#include "core/clock.h"
#include "core/file_io.h"
#include "core/process.h"
#include "core/threads.h"
#include "data/corpus.h"
#include "data/minhash.h"

namespace crucible::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct CurateBench {
  double mb = 200;
  std::string dir = "bench-curate";
  int threads = 0;
  bool keep = false;
};

// Web-like documents: a Zipf vocabulary (stop words most frequent), lognormal
// lengths, paragraphs; 8% exact copies, 8% near copies (3% of words changed),
// 4% junk (too short, symbol soup, repeated lines) so every stage has work.
class Generator {
 public:
  explicit Generator(uint64_t seed) : rng_(seed) {
    static const char* stop[] = {"the", "of", "and", "to", "a", "in", "that", "is", "with", "have", "be", "for"};
    for (const char* s : stop) vocab_.push_back(s);
    std::uniform_int_distribution<int> len(2, 11), ch(0, 25);
    while (vocab_.size() < 50000) {
      std::string w;
      for (int n = len(rng_); n > 0; --n) w += char('a' + ch(rng_));
      vocab_.push_back(w);
    }
    double total = 0;
    for (size_t i = 0; i < vocab_.size(); ++i) total += 1.0 / double(i + 1);
    double acc = 0;
    for (size_t i = 0; i < vocab_.size(); ++i) cdf_.push_back(acc += 1.0 / double(i + 1) / total);
  }
  std::vector<std::string> words(size_t n) {
    std::uniform_real_distribution<double> u(0, 1);
    std::vector<std::string> out;
    for (size_t i = 0; i < n; ++i) {
      size_t k = size_t(std::lower_bound(cdf_.begin(), cdf_.end(), u(rng_)) - cdf_.begin());
      out.push_back(vocab_[std::min(k, vocab_.size() - 1)]);
    }
    return out;
  }
  static std::string prose(const std::vector<std::string>& w) {
    std::string t;
    for (size_t i = 0; i < w.size(); ++i) {
      if (i > 0) t += (i % 90 == 0) ? ".\n\n" : (i % 15 == 0 ? ". " : " ");
      t += w[i];
    }
    return t + ".";
  }
  std::string next() {
    std::uniform_int_distribution<int> kind(0, 99);
    int k = kind(rng_);
    if (k < 8 && !recent_.empty()) return prose(recent_[rng_() % recent_.size()]);
    if (k < 16 && !recent_.empty()) {
      auto w = recent_[rng_() % recent_.size()];
      for (size_t i = 0; i < w.size() / 66 + 1; ++i) w[rng_() % w.size()] = vocab_[rng_() % vocab_.size()];
      return prose(w);
    }
    if (k < 18) return "Click here.";
    if (k < 19) return std::string(200, '#') + " $$$ ### !!!";
    if (k < 20) {
      std::string t;
      for (int i = 0; i < 40; ++i) t += "Buy now and save big today\n";
      return t;
    }
    std::lognormal_distribution<double> len(5.6, 0.7);  // median ~270 words
    auto w = words(size_t(std::clamp(len(rng_), 60.0, 5000.0)));
    if (recent_.size() < 512) recent_.push_back(w);
    else recent_[rng_() % recent_.size()] = w;
    return prose(w);
  }

 private:
  std::mt19937_64 rng_;
  std::vector<std::string> vocab_;
  std::vector<double> cdf_;
  std::vector<std::vector<std::string>> recent_;
};

uint64_t generate(const std::string& dir, double mb) {
  fs::create_directories(dir);
  Generator gen(20261201);
  uint64_t total = 0, target = uint64_t(mb * 1e6);
  for (int file = 0; total < target; ++file) {
    char name[32];
    std::snprintf(name, sizeof name, "/part-%03d.jsonl", file);
    AtomicFile out;
    Status s = out.open(dir + name);
    uint64_t in_file = 0;
    for (int i = 0; s.is_ok() && in_file < 64000000 && total < target; ++i) {
      std::string line = json{{"text", gen.next()}, {"id", file * 1000000 + i}, {"url", "https://example.org/" + std::to_string(i)}}.dump() + "\n";
      s = out.write(line.data(), line.size());
      in_file += line.size(), total += line.size();
    }
    if (s.is_ok()) s = out.commit();
    if (!s.is_ok()) throw ExitError(1, s.message());
  }
  return total;
}

double sig_mb_per_s(const std::vector<std::string>& docs, uint64_t bytes, int threads) {
  data::MinHasher h(data::MinHashParams{});
  Stopwatch w;
#pragma omp parallel num_threads(threads)
  {
    std::vector<uint64_t> sig(size_t(h.num_hashes())), keys(size_t(h.params().bands));
#pragma omp for schedule(dynamic, 64)
    for (size_t i = 0; i < docs.size(); ++i) {
      h.signature(docs[i], sig.data());
      h.band_keys(sig.data(), keys.data());
    }
  }
  return double(bytes) / 1e6 / w.elapsed_s();
}

void run(const CurateBench& b) {
  if (Status s = check_output_dir(b.dir, "[bench] curate --dir"); !s)
    throw ExitError(2, s.message());
  const int threads = b.threads > 0 ? b.threads : hardware_threads();
  const std::string corpus = b.dir + "/corpus", out = b.dir + "/out";
  std::error_code ec;
  uint64_t bytes = 0;
  if (fs::exists(corpus, ec)) {
    for (const auto& e : fs::directory_iterator(corpus)) bytes += e.file_size();
    std::fprintf(stderr, "[bench] curate: reusing %s (%.0f MB)\n", corpus.c_str(), double(bytes) / 1e6);
  } else {
    std::fprintf(stderr, "[bench] curate: generating %.0f MB of web-like JSONL in %s\n", b.mb, corpus.c_str());
    bytes = generate(corpus, b.mb);
  }
  fs::remove_all(out, ec);
  // Whole pipeline: a child process, so its peak RSS is its own.
  std::vector<std::string> argv = {self_executable(), "curate", corpus, "-o", out, "--threads", std::to_string(threads)};
  std::vector<char*> cargv;
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  Stopwatch wall;
  pid_t pid = ::fork();
  if (pid == 0) {
    ::execv(cargv[0], cargv.data());
    ::_exit(127);
  }
  int status = 0;
  struct rusage ru{};
  while (::wait4(pid, &status, 0, &ru) < 0 && errno == EINTR) {
  }
  double pipeline_s = wall.elapsed_s();
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) throw ExitError(1, "[bench] curate: the curate run failed");
  std::ifstream rin(out + "/report.json");
  json report = json::parse(rin);
  // Signatures alone, over the documents as curate sees them (the "text" fields).
  auto docs = data::read_corpus({corpus}, data::CorpusFormat::kJsonl);
  if (!docs) throw ExitError(1, docs.status().message());
  uint64_t text_bytes = 0;
  for (const auto& d : *docs) text_bytes += d.size();
  double sig1 = sig_mb_per_s(*docs, text_bytes, 1);
  double sigN = sig_mb_per_s(*docs, text_bytes, threads);
  json result = {{"input_bytes", bytes},
                 {"text_bytes", text_bytes},
                 {"documents", docs->size()},
                 {"threads", threads},
                 {"signatures_mb_s_per_core_1_thread", sig1},
                 {"signatures_mb_s_per_core_all_threads", sigN / threads},
                 {"pipeline_s", pipeline_s},
                 {"pipeline_mb_s_per_core", double(bytes) / 1e6 / pipeline_s / threads},
                 {"pipeline_peak_rss_mb", double(ru.ru_maxrss) / 1024.0},
                 {"pass_seconds", report["run"]["seconds"]},
                 {"kept_docs", report["output"]["docs"]}};
  std::printf("curation benchmark: %.0f MB input (%.0f MB text, %zu documents), %d thread(s)\n", double(bytes) / 1e6,
              double(text_bytes) / 1e6, docs->size(), threads);
  std::printf("  MinHash signatures (112 hashes, 14x8 bands): %.1f MB/s/core on 1 thread, %.1f MB/s/core on %d\n", sig1,
              sigN / threads, threads);
  std::printf("  whole pipeline: %.1f s, %.1f MB/s/core, peak RSS %.0f MB (passes: %s)\n", pipeline_s,
              double(bytes) / 1e6 / pipeline_s / threads, double(ru.ru_maxrss) / 1024.0,
              report["run"]["seconds"].dump().c_str());
  Status s = write_file_atomic(b.dir + "/bench.json", result.dump(1) + "\n");
  if (!s.is_ok()) throw ExitError(1, s.message());
  if (!b.keep) fs::remove_all(out, ec);
}

}  // namespace

void add_bench_curate_command(CLI::App& bench) {
  auto b = std::make_shared<CurateBench>();
  auto* cmd = bench.add_subcommand(
      "curate", "Curation throughput on a generated corpus: MinHash signatures and the whole pipeline, "
                "MB/s per core and peak memory");
  cmd->add_option("--mb", b->mb, "Corpus size to generate (MB)")->capture_default_str()->check(positive());
  cmd->add_option("--dir", b->dir, "Working directory (the corpus is kept and reused)")->capture_default_str();
  cmd->add_option("--threads", b->threads, "Threads (default: all cores)")->check(positive());
  cmd->add_flag("--keep", b->keep, "Keep the curated output");
  cmd->callback([b] { run(*b); });
}

}  // namespace crucible::cli

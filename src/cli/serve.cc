// `crucible serve RUN`: the run's newest checkpoint behind an OpenAI-compatible
// HTTP API with continuous batching (serve/server.h, docs/serve.md). SIGTERM,
// SIGINT or SIGUSR1 drains: accepted requests finish, new ones get 503, then
// exit 0; a second signal kills.
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <thread>

#include "cli/commands.h"
#include "kernels/gemm.h"
#include "runtime/inference_model.h"
#include "runtime/stop_signals.h"
#include "serve/server.h"

namespace crucible::cli {

namespace {

struct ServeOptions {
  std::string run_dir, precision = "auto";
  serve::ServerOptions server;
};

void run_serve(ServeOptions o) {
  runtime::StopSignals signals;
  auto fail = [](const Status& s) { throw ExitError(exit_code(s), s.message()); };
  // Inference in bf16 wherever the CPU multiplies bf16 natively: half the
  // weight traffic of a decode step, f32 accumulation.
  if (o.precision != "auto" && o.precision != "fp32" && o.precision != "bf16")
    fail(Status::invalid("[serve] --precision '" + o.precision + "' is not one of auto, fp32, bf16"));
  if (o.precision == "auto") o.precision = kernels::gemm_bf16_native() ? "bf16" : "fp32";
  auto opened = runtime::open_inference_model(o.run_dir, o.precision, "[serve]");
  if (!opened) fail(opened.status());
  for (const auto& w : opened->warnings) std::fprintf(stderr, "%s\n", w.c_str());
  if (o.server.model_name.empty())
    o.server.model_name = std::filesystem::path(o.run_dir).lexically_normal().filename().string();
  if (o.server.model_name.empty())  // "runs/x/" normalises to "runs/x/" with an empty filename
    o.server.model_name = std::filesystem::path(o.run_dir).lexically_normal().parent_path().filename().string();

  ::signal(SIGPIPE, SIG_IGN);  // a client gone mid-write is an error return, not a death

  auto server = serve::Server::start(*opened->model, *opened->tokenizer, o.server);
  if (!server) fail(server.status());
  const auto& e = o.server.engine;
  std::fprintf(stderr,
               "[serve] %s (step %lld, %s): model '%s', context %d, up to %d running + %d queued, "
               "KV cache %.1f MiB in blocks of %d positions\n",
               opened->checkpoint.c_str(), (long long)opened->step, opened->precision.c_str(),
               o.server.model_name.c_str(), opened->config.model.seq_len, e.max_batch, e.max_queue,
               double((*server)->kv_bytes()) / (1 << 20), e.block_tokens);
  std::fprintf(stdout, "[serve] listening on http://%s:%d\n", o.server.bind.c_str(), (*server)->port());
  std::fflush(stdout);
  // The training run's stop signals (runtime/stop_signals.h): the first
  // SIGTERM, SIGINT or SIGUSR1 drains, a second one kills. A handler, not a
  // blocked mask: OpenMP's threads exist already and would take the signal.
  std::atomic<bool> stopped{false};
  std::thread watcher([&] {
    while (!stopped) {
      if (const int sig = signals.pending()) {
        std::fprintf(stderr, "[serve] %s: draining (new requests get 503; a second signal kills)\n",
                     strsignal(sig));
        (*server)->drain();
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  (*server)->run();  // the engine, on this thread (the model's), until drained
  stopped = true;
  watcher.join();
  std::fprintf(stderr, "[serve] drained: every accepted request answered\n");
}

}  // namespace

void add_serve_command(CLI::App& app) {
  auto o = std::make_shared<ServeOptions>();
  auto* cmd = app.add_subcommand(
      "serve", "Serve a run's newest checkpoint over an OpenAI-compatible HTTP API (continuous batching)");
  cmd->add_option("run", o->run_dir, "Run directory (runs/NAME)")->required();
  cmd->add_option("--bind", o->server.bind, "IPv4 address to listen on (0.0.0.0: every interface)")
      ->capture_default_str();
  cmd->add_option("--port", o->server.port, "TCP port (0: any free port, printed)")
      ->capture_default_str()
      ->check(integer_in(0, 65535));
  cmd->add_option("--model-name", o->server.model_name, "The model id clients pass (default: RUN's name)");
  cmd->add_option("--precision", o->precision,
                  "auto | fp32 | bf16 (auto: bf16 where the CPU has native bf16 GEMMs)")
      ->capture_default_str();
  cmd->add_option("--max-batch", o->server.engine.max_batch, "Requests decoded together")
      ->capture_default_str()
      ->check(integer_in(1, 1024));
  cmd->add_option("--max-queue", o->server.engine.max_queue, "Requests waiting beyond them (then 429)")
      ->capture_default_str()
      ->check(integer_in(0, 1 << 16));
  cmd->add_option("--step-tokens", o->server.engine.step_tokens,
                  "Token rows per engine step (decode rows, then prompt chunks)")
      ->capture_default_str()
      ->check(integer_in(1, 1 << 16));
  cmd->add_option("--block-tokens", o->server.engine.block_tokens, "Positions per KV-cache block")
      ->capture_default_str()
      ->check(integer_in(1, 4096));
  cmd->add_option("--kv-blocks", o->server.engine.kv_blocks,
                  "KV-cache blocks (default: max-batch full-context requests)")
      ->check(integer_in(1, 1 << 24));
  cmd->add_option("--deadline", o->server.deadline_s, "Seconds a request may take from its arrival")
      ->capture_default_str()
      ->check(positive());
  cmd->callback([o] { run_serve(*o); });
}

}  // namespace crucible::cli

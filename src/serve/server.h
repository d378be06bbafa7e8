// Server: `crucible serve`'s HTTP/1.1 front (cpp-httplib, Debian's
// libcpp-httplib-dev) over one Engine. Routes:
//   POST /v1/completions  OpenAI-compatible, streamed as server-sent events
//                         when asked (serve/api.h)
//   GET  /v1/models       the one model served
//   GET  /health          200 {"status":"ok"}; 503 while draining
//   GET  /metrics         Prometheus text (serve/metrics.h)
// Each connection has a thread from a pool sized for every request the
// engine can hold (running + queued) and then some, so a full server still
// answers 429 at once instead of leaving connections unaccepted. A request
// holds its HTTP thread until it ends; the thread in run() does all the
// computing. A client that goes away is noticed at the next token written
// (or the next 100 ms) and its request cancelled, freeing its slot and
// blocks. drain(): new requests get 503, those accepted run to their end,
// then the listener closes. Binds 127.0.0.1 unless told otherwise.
#pragma once
#include <memory>
#include <string>

#include "core/status.h"
#include "data/text_tokenizer.h"
#include "nn/gpt.h"
#include "serve/engine.h"

namespace crucible::serve {

struct ServerOptions {
  std::string bind = "127.0.0.1";
  int port = 8000;          // 0: any free port (port() says which)
  std::string model_name;   // the id clients pass as "model"
  double deadline_s = 600;  // a request's deadline from its arrival
  EngineOptions engine;
};

class Server {
 public:
  // Listens, starts the engine and the HTTP threads. Invalid, naming the
  // address and the OS's reason, when it cannot listen.
  static Result<std::unique_ptr<Server>> start(const nn::GPT& model,
                                               const data::TextTokenizer& tokenizer,
                                               const ServerOptions& options);
  ~Server();
  int port() const;
  size_t kv_bytes() const;
  // Runs the engine on the calling thread (the one that called start(): see
  // serve/engine.h) until drain() has finished; then the listener is closed.
  void run();
  // Graceful stop (SIGTERM): refuse new requests with 503, finish every
  // accepted one, then stop listening. Safe from any thread but an HTTP one.
  void drain();

 private:
  struct Impl;
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace crucible::serve

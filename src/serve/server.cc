#include "serve/server.h"

#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <utility>

#include "core/listen_check.h"
#include "core/rng.h"
#include "serve/api.h"
#include "serve/metrics.h"
#include "serve/text_stream.h"

namespace crucible::serve {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kPoll = std::chrono::milliseconds(100);  // how often a waiting handler looks at its client

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void reply_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  if (e.status == 429 || e.status == 503) res.set_header("Retry-After", "1");
  res.set_content(error_body(e), "application/json");
}

// Debian's cpp-httplib 0.11 is compiled with a listen backlog of 5: a burst
// of clients connecting at once (32 streams starting together) overflowed
// it, and each dropped SYN cost its client a 1 s retransmission before its
// request was even seen. Linux lets listen() be called again on a listening
// socket to change the backlog; the library keeps its socket private, so it
// is found as this process's listening socket on `port`.
void widen_backlog(int port) {
  for (int fd = 0; fd < 4096; ++fd) {
    int listening = 0;
    socklen_t len = sizeof listening;
    if (::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0 || !listening) continue;
    sockaddr_in a{};
    socklen_t alen = sizeof a;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &alen) == 0 && a.sin_family == AF_INET &&
        ntohs(a.sin_port) == port) {
      ::listen(fd, SOMAXCONN);
      return;
    }
  }
}

}  // namespace

struct Server::Impl {
  ServerOptions opt;
  ApiContext ctx;
  ServeMetrics metrics;
  std::unique_ptr<Engine> engine;
  httplib::Server http;
  std::thread listener;
  int port = 0;
  int64_t created = unix_now();
  std::atomic<bool> draining{false};
  std::atomic<uint64_t> next_id{1};
  // Completion handlers that have not finished writing (drain waits for 0).
  std::mutex mu;
  std::condition_variable cv;
  int active = 0;

  explicit Impl(const ServerOptions& o) : opt(o), metrics(o.model_name) {}

  // Held by a completion handler and its content provider until the response is written.
  struct Active {
    Impl* impl;
    explicit Active(Impl* i) : impl(i) {
      std::lock_guard<std::mutex> lock(impl->mu);
      ++impl->active;
    }
    ~Active() {
      std::lock_guard<std::mutex> lock(impl->mu);
      if (--impl->active == 0) impl->cv.notify_all();
    }
  };

  void completion(const httplib::Request& req, httplib::Response& res);
};

namespace {

// One accepted request's answer, written by the content provider on the
// request's HTTP thread as the engine draws tokens.
struct Reply {
  std::shared_ptr<Stream> stream;
  CompletionRequest request;
  TextStream text;
  std::string id, model;
  int64_t created = 0;
  std::vector<int32_t> fresh;  // tokens not yet given to `text`
  Stream::Snapshot snap;       // as of the last wait

  Reply(std::shared_ptr<Stream> s, CompletionRequest r, const data::TextTokenizer& tok)
      : stream(std::move(s)), request(std::move(r)), text(tok, request.stop, !request.ignore_eos) {}

  // Writes the whole answer; false when the client went away (the request
  // is cancelled).
  bool write(httplib::DataSink& sink) {
    std::string all;      // the whole text (not streaming)
    size_t ids_sent = 0;  // token ids already in stream chunks
    Finish finish = Finish::none;
    for (;;) {
      std::string delta = text.add(fresh);
      fresh.clear();
      if (request.stream) {
        const bool new_ids = request.return_token_ids && text.ids().size() > ids_sent;
        if (!delta.empty() || new_ids) {
          std::vector<int32_t> ids(text.ids().begin() + long(ids_sent), text.ids().end());
          ids_sent = text.ids().size();
          const std::string ev = chunk_event(id, created, model, delta, nullptr,
                                             request.return_token_ids ? &ids : nullptr);
          if (!sink.write(ev.data(), ev.size())) return gone();
        }
      } else {
        all += delta;
      }
      if (text.stopped()) {
        stream->cancel();  // a stop sequence: nothing after it is wanted
        finish = Finish::stop;
        break;
      }
      if (snap.finish != Finish::none) {
        finish = snap.finish;
        break;
      }
      if (!sink.is_writable()) return gone();
      snap = stream->wait(snap.n_tokens, fresh, Clock::now() + kPoll);
    }
    const std::string tail = text.finish();
    const char* reason = finish_name(finish);
    const Usage usage{int(request.prompt.size()), int(text.ids().size())};
    std::string out;
    if (request.stream) {
      std::vector<int32_t> ids(text.ids().begin() + long(std::min(ids_sent, text.ids().size())),
                               text.ids().end());
      out = chunk_event(id, created, model, tail, reason, request.return_token_ids ? &ids : nullptr);
      if (request.include_usage) out += usage_event(id, created, model, usage);
      out += kDoneEvent;
    } else {
      out = completion_body(id, created, model, all + tail, reason, usage,
                            request.return_token_ids ? &text.ids() : nullptr);
    }
    if (!sink.write(out.data(), out.size())) return gone();
    sink.done();
    return true;
  }
  bool gone() {
    stream->cancel();
    return false;
  }
};

}  // namespace

void Server::Impl::completion(const httplib::Request& req, httplib::Response& res) {
  auto active = std::make_shared<Active>(this);
  if (draining) {
    metrics.rejected("draining");
    return reply_error(res, {503, "the server is shutting down", "", "server_error"});
  }
  ParsedRequest parsed = parse_completion(req.body, ctx);
  if (parsed.error) {
    metrics.rejected("bad_request");
    return reply_error(res, *parsed.error);
  }
  CompletionRequest& r = parsed.request;
  const uint64_t n = next_id++;
  auto stream = std::make_shared<Stream>();
  stream->prompt = r.prompt;
  stream->max_tokens = r.max_tokens;
  stream->sampling = r.sampling;
  stream->ignore_eos = r.ignore_eos;
  stream->seed = r.seed ? *r.seed : splitmix64(uint64_t(Clock::now().time_since_epoch().count()) ^ n);
  stream->arrival = Clock::now();
  stream->deadline = stream->arrival + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(opt.deadline_s));
  switch (engine->submit(stream)) {
    case Admit::queue_full:
      metrics.rejected("queue_full");
      return reply_error(res, {429, "the server is at capacity (" + std::to_string(engine->options().max_batch) +
                                        " running, " + std::to_string(engine->options().max_queue) +
                                        " waiting): retry later", "", "rate_limit_error"});
    case Admit::draining:
      metrics.rejected("draining");
      return reply_error(res, {503, "the server is shutting down", "", "server_error"});
    case Admit::queued: break;
  }
  metrics.prompt_tokens(int(r.prompt.size()));
  // Answer only once the first token exists: a request that ends before it
  // (its deadline passed in the queue, a shutdown) gets an error status
  // rather than a 200 with nothing in it.
  auto reply = std::make_shared<Reply>(stream, std::move(r), *ctx.tokenizer);
  do reply->snap = stream->wait(0, reply->fresh, Clock::now() + kPoll);
  while (reply->snap.n_tokens == 0 && reply->snap.finish == Finish::none);
  if (reply->snap.n_tokens == 0) {
    if (reply->snap.finish == Finish::deadline)
      return reply_error(res, {503, "the request waited " + std::to_string(opt.deadline_s) +
                                        " s (its deadline) without being started: retry later", "",
                               "timeout_error"});
    return reply_error(res, {503, "the server is shutting down", "", "server_error"});
  }
  reply->id = "cmpl-" + std::to_string(created) + "-" + std::to_string(n);
  reply->model = opt.model_name;
  reply->created = unix_now();
  res.set_chunked_content_provider(
      reply->request.stream ? "text/event-stream" : "application/json",
      [reply, active](size_t, httplib::DataSink& sink) { return reply->write(sink); },
      [reply](bool ok) {
        if (!ok) reply->stream->cancel();
      });
}

Result<std::unique_ptr<Server>> Server::start(const nn::GPT& model, const data::TextTokenizer& tokenizer,
                                              const ServerOptions& options) {
  if (options.port != 0)
    if (Status s = check_listen(options.bind, options.port, "[serve]"); !s) return s;
  const EngineOptions& e = options.engine;
  const int seq_len = model.config().seq_len;
  const int need = (seq_len + e.block_tokens - 1) / e.block_tokens;
  if (e.kv_blocks > 0 && e.kv_blocks < need)
    return Status::invalid("[serve] --kv-blocks " + std::to_string(e.kv_blocks) +
                           " cannot hold one request of the model's context (" + std::to_string(seq_len) +
                           " positions = " + std::to_string(need) + " blocks of " +
                           std::to_string(e.block_tokens) + ")");
  auto impl = std::make_unique<Impl>(options);
  Impl& m = *impl;
  m.ctx = ApiContext{&tokenizer, options.model_name, model.config().seq_len};
  EngineOptions eo = options.engine;
  eo.eos = tokenizer.eos_id();
  m.engine = std::make_unique<Engine>(model, eo, &m.metrics);

  // Threads for every request the engine can hold, running or queued, and
  // as many again for connections that are answered 429 or are idle.
  const size_t threads = size_t(2 * (eo.max_batch + eo.max_queue) + 8);
  m.http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  m.http.set_payload_max_length(size_t(8) << 20);
  m.http.Post("/v1/completions",
              [&m](const httplib::Request& req, httplib::Response& res) { m.completion(req, res); });
  m.http.Get("/v1/models", [&m](const httplib::Request&, httplib::Response& res) {
    res.set_content(models_body(m.opt.model_name, m.created, m.ctx.context), "application/json");
  });
  m.http.Get("/health", [&m](const httplib::Request&, httplib::Response& res) {
    res.status = m.draining ? 503 : 200;
    res.set_content(m.draining ? R"({"status":"draining"})" : R"({"status":"ok"})", "application/json");
  });
  m.http.Get("/metrics", [&m](const httplib::Request&, httplib::Response& res) {
    res.set_content(m.metrics.render(), "text/plain; version=0.0.4");
  });
  m.http.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    const std::string what = res.status == 404 ? "no route " + req.method + " " + req.path
                                               : "HTTP status " + std::to_string(res.status);
    res.set_content(error_body({res.status, what, "", "invalid_request_error"}), "application/json");
  });
  if (options.port == 0) {
    m.port = m.http.bind_to_any_port(options.bind);
    if (m.port <= 0) return Status::invalid("[serve] cannot listen on " + options.bind + ":0");
  } else {
    if (!m.http.bind_to_port(options.bind, options.port))
      return Status::invalid("[serve] cannot listen on " + options.bind + ":" + std::to_string(options.port));
    m.port = options.port;
  }
  widen_backlog(m.port);
  m.listener = std::thread([&m] { m.http.listen_after_bind(); });
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Server::~Server() {
  impl_->http.stop();
  impl_->engine->stop();
  if (impl_->listener.joinable()) impl_->listener.join();
}

int Server::port() const { return impl_->port; }
size_t Server::kv_bytes() const { return impl_->engine->kv_bytes(); }

void Server::run() {
  impl_->engine->run();
  if (impl_->listener.joinable()) impl_->listener.join();
}

void Server::drain() {
  Impl& m = *impl_;
  m.draining = true;
  m.engine->drain();
  {
    std::unique_lock<std::mutex> lock(m.mu);
    m.cv.wait(lock, [&] { return m.active == 0; });
  }
  m.http.stop();
  m.engine->stop();
}

}  // namespace crucible::serve

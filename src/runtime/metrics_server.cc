#include "runtime/metrics_server.h"

#include <prometheus/exposer.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

#include <exception>

#include "core/listen_check.h"

namespace crucible::runtime {

struct MetricsServer::Impl {
  std::unique_ptr<prometheus::Exposer> exposer;
  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();
  prometheus::Labels labels;
  int port = 0;
  prometheus::Gauge* step = nullptr;
  prometheus::Gauge* loss = nullptr;
  prometheus::Gauge* val_loss = nullptr;
  prometheus::Gauge* lr = nullptr;
  prometheus::Gauge* tokens = nullptr;
  prometheus::Gauge* mfu = nullptr;
  prometheus::Gauge* stall = nullptr;
  prometheus::Gauge* comm_bytes = nullptr;
  prometheus::Gauge *total = nullptr, *data = nullptr, *fwd = nullptr, *bwd = nullptr,
                    *comm = nullptr, *opt = nullptr;
  prometheus::Gauge *in_use = nullptr, *peak = nullptr, *cached = nullptr;

  prometheus::Gauge* gauge(const std::string& name, const std::string& help,
                           prometheus::Labels extra = {}) {
    auto& family = prometheus::BuildGauge().Name(name).Help(help).Register(*registry);
    prometheus::Labels l = labels;
    l.insert(extra.begin(), extra.end());
    return &family.Add(l);
  }
};

Result<std::unique_ptr<MetricsServer>> MetricsServer::start(const std::string& bind, int port,
                                                            const std::string& run_name, int rank) {
  auto impl = std::make_unique<Impl>();
  const std::string addr = bind + ":" + std::to_string(port);
  // CivetServer reports a busy port as "null context when constructing CivetServer".
  if (Status s = check_listen(bind, port, "[metrics]"); !s) return s;
  try {
    impl->exposer = std::make_unique<prometheus::Exposer>(addr, 2);
  } catch (const std::exception& e) {
    return Status::invalid("[metrics] cannot listen on " + addr + ": " + e.what());
  }
  auto ports = impl->exposer->GetListeningPorts();
  impl->port = ports.empty() ? port : ports[0];
  impl->labels = {{"run", run_name}, {"rank", std::to_string(rank)}};
  Impl& i = *impl;
  i.step = i.gauge("crucible_step", "Optimizer steps completed");
  i.loss = i.gauge("crucible_loss", "Training loss of the last step (nats/token)");
  i.val_loss = i.gauge("crucible_val_loss", "Last validation loss (nats/token)");
  i.lr = i.gauge("crucible_learning_rate", "Learning rate of the last step");
  i.tokens = i.gauge("crucible_tokens_per_second", "Throughput of the last step");
  i.mfu = i.gauge("crucible_mfu", "Model FLOPs utilisation of the last step (PaLM definition)");
  i.stall = i.gauge("crucible_checkpoint_stall_seconds", "What the last checkpoint cost the loop");
  i.comm_bytes = i.gauge("crucible_comm_bytes_per_step", "Bytes this rank moved in the last step");
  const char* phase_help = "Wall time of the last step and its phases";
  i.total = i.gauge("crucible_step_seconds", phase_help, {{"phase", "total"}});
  i.data = i.gauge("crucible_step_seconds", phase_help, {{"phase", "data_wait"}});
  i.fwd = i.gauge("crucible_step_seconds", phase_help, {{"phase", "forward"}});
  i.bwd = i.gauge("crucible_step_seconds", phase_help, {{"phase", "backward"}});
  i.comm = i.gauge("crucible_step_seconds", phase_help, {{"phase", "comm"}});
  i.opt = i.gauge("crucible_step_seconds", phase_help, {{"phase", "optimizer"}});
  const char* mem_help = "Allocator bytes";
  i.in_use = i.gauge("crucible_memory_bytes", mem_help, {{"kind", "in_use"}});
  i.peak = i.gauge("crucible_memory_bytes", mem_help, {{"kind", "peak"}});
  i.cached = i.gauge("crucible_memory_bytes", mem_help, {{"kind", "cached"}});
  i.exposer->RegisterCollectable(i.registry);
  return std::unique_ptr<MetricsServer>(new MetricsServer(std::move(impl)));
}

MetricsServer::MetricsServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
MetricsServer::~MetricsServer() = default;
int MetricsServer::port() const { return impl_->port; }

void MetricsServer::update(const StepMetrics& m) {
  Impl& i = *impl_;
  i.step->Set(double(m.step));
  i.loss->Set(m.loss);
  if (m.val_loss >= 0) i.val_loss->Set(m.val_loss);
  i.lr->Set(m.lr);
  i.tokens->Set(m.tokens_per_s);
  i.mfu->Set(m.mfu);
  if (m.ckpt_stall_ms > 0) i.stall->Set(m.ckpt_stall_ms * 1e-3);
  i.comm_bytes->Set(m.comm_bytes);
  i.total->Set(m.step_ms * 1e-3);
  i.data->Set(m.data_wait_ms * 1e-3);
  i.fwd->Set(m.forward_ms * 1e-3);
  i.bwd->Set(m.backward_ms * 1e-3);
  i.comm->Set(m.comm_ms * 1e-3);
  i.opt->Set(m.optimizer_ms * 1e-3);
  i.in_use->Set(double(m.mem_in_use));
  i.peak->Set(double(m.mem_peak));
  i.cached->Set(double(m.mem_cached));
}

}  // namespace crucible::runtime

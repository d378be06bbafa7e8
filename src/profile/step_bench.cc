#include "profile/step_bench.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fmt/format.h>

#include "core/allocator.h"
#include "core/clock.h"
#include "core/kernel_stats.h"
#include "core/rng.h"
#include "core/stats.h"
#include "core/threads.h"
#include "kernels/gemm.h"
#include "kernels/kernels.h"
#include "nn/workloads.h"
#include "optim/adamw.h"

namespace crucible::profile {
Result<StepBenchResult> run_step_bench(const StepBenchOptions& opt) {
  auto wl = nn::find_workload(opt.workload);
  if (!wl) {
    std::string names;
    for (auto& n : nn::workload_names()) names += (names.empty() ? "" : ", ") + n;
    return Status::invalid("[bench] unknown workload '" + opt.workload + "' (known: " + names + ")");
  }
  if (opt.steps < 1) return Status::invalid("[bench] --steps must be >= 1");
  if (opt.precision != "fp32" && opt.precision != "bf16")
    return Status::invalid("[bench] --precision '" + opt.precision + "' is not one of fp32, bf16");
  if (opt.moments != "f32" && opt.moments != "bf16")
    return Status::invalid("[bench] --moments '" + opt.moments + "' is not one of f32, bf16");
  if (opt.recompute != "none" && opt.recompute != "selective" && opt.recompute != "full")
    return Status::invalid("[bench] --recompute '" + opt.recompute + "' is not one of none, selective, full");
  if (!opt.kernels.empty() && !kernels::select_isa(opt.kernels)) {
    std::string names;
    for (const kernels::KernelTable* t : kernels::supported_tables())
      names += std::string(names.empty() ? "" : ", ") + t->isa;
    return Status::invalid("[bench] --kernels '" + opt.kernels +
                           "' is not a kernel table this CPU runs (it runs: " + names + ")");
  }
  set_num_threads(opt.threads);
  StepBenchResult r;
  r.workload = wl->name;
  r.isa = kernels::active().isa;
  r.threads = num_threads();
  r.steps = opt.steps;
  r.batch = wl->batch;
  r.seq_len = wl->model.seq_len;
  r.peak = measure_cpu_peak(r.threads);
  r.precision = opt.precision;
  r.recompute = opt.recompute;
  r.fused_head = opt.fused_head;
  const bool bf = opt.precision == "bf16";
  r.peak_gflops = precision_peak_gflops(r.peak, bf, kernels::gemm_bf16_native());

  nn::GPTPart part = nn::GPTPart::whole(wl->model);
  part.precision = dtype_named(opt.precision);
  part.recompute = nn::recompute_policy(opt.recompute);
  part.head_chunk = opt.fused_head ? nn::fused_head_rows(wl->model, part) : 0;
  nn::GPT gpt(wl->model, part);
  gpt.init_weights(opt.seed);
  optim::AdamWConfig acfg;
  acfg.moments = dtype_named(opt.moments);
  optim::AdamW adam(gpt.params(), acfg);
  Arena arena("bench.activations");
  const int B = wl->batch, T = wl->model.seq_len, V = wl->model.vocab_size;
  std::vector<int32_t> tokens(size_t(B) * T), targets(size_t(B) * T);
  Rng rng(opt.seed, 0xbe7c);
  for (auto& t : tokens) t = int32_t(rng.next_u32() % uint32_t(V));
  for (auto& t : targets) t = int32_t(rng.next_u32() % uint32_t(V));

  std::vector<double> total, fwd, bwd, upd;
  AllocatorStats before{};
  bool tty = opt.progress && isatty(STDERR_FILENO);
  for (int s = 0; s < opt.warmup + opt.steps; ++s) {
    if (s == opt.warmup) {
      reset_kernel_stats();
      before = Allocator::global().stats();
    }
    int64_t t0 = now_ns();
    arena.reset();
    float loss = gpt.forward(arena, tokens.data(), targets.data(), B, T, 1.0f);
    int64_t t1 = now_ns();
    gpt.backward(arena);
    int64_t t2 = now_ns();
    adam.step(3e-4f);
    gpt.params().zero_grad();
    int64_t t3 = now_ns();
    if (s == 0) r.loss_first = loss;
    r.loss_last = loss;
    if (s >= opt.warmup) {
      total.push_back((t3 - t0) * 1e-6);
      fwd.push_back((t1 - t0) * 1e-6);
      bwd.push_back((t2 - t1) * 1e-6);
      upd.push_back((t3 - t2) * 1e-6);
    }
    if (tty)
      std::fprintf(stderr, "\r[bench] %s step %d/%d  %.1f ms  loss %.4f   ", r.workload.c_str(),
                   s + 1, opt.warmup + opt.steps, (t3 - t0) * 1e-6, loss);
  }
  if (tty) std::fprintf(stderr, "\r%80s\r", "");
  AllocatorStats after = Allocator::global().stats();
  r.steady_state_allocs = after.allocs - before.allocs;
  r.peak_bytes = after.peak;
  r.activation_bytes = arena.high_water();

  r.ms_per_step = median(total);
  r.ms_min = *std::min_element(total.begin(), total.end());
  r.ms_max = *std::max_element(total.begin(), total.end());
  r.forward_ms = median(fwd);
  r.backward_ms = median(bwd);
  r.optimizer_ms = median(upd);
  double tokens_per_step = double(B) * T;
  r.tokens_per_s = tokens_per_step / (r.ms_per_step * 1e-3);
  r.gflop_per_step = wl->model.flops_per_token(T) * tokens_per_step * 1e-9;
  r.gflops = r.gflop_per_step / (r.ms_per_step * 1e-3);
  r.mfu = honest_mfu(r.gflops, r.peak_gflops, r.peak.plausible);
  // Against the loops' measured rates (the FMA loop, AMX's in bf16 where it
  // sets the ceiling): what the silicon showed in this run.
  const double measured_ceiling =
      bf ? std::max(r.peak.measured_gflops * (kernels::gemm_bf16_native() ? 2 : 1), r.peak.amx_gflops)
         : r.peak.measured_gflops;
  r.mfu_measured_peak = measured_ceiling > 0 ? honest_mfu(r.gflops, measured_ceiling, true) : 0;
  double accounted = 0;
  for (int c = 0; c < int(KernelClass::count); ++c) {
    const KernelClassStats& k = kernel_stats()[c];
    if (k.calls == 0) continue;
    KernelClassTime kt;
    kt.name = kernel_class_name(KernelClass(c));
    kt.ms_per_step = k.ns * 1e-6 / opt.steps;
    kt.fraction = kt.ms_per_step / r.ms_per_step;
    kt.gflops = k.flops > 0 ? k.flops / (k.ns * 1e-9) * 1e-9 : 0;
    accounted += kt.ms_per_step;
    r.kernels.push_back(kt);
  }
  KernelClassTime rest{"unaccounted", r.ms_per_step - accounted, 0, 0};
  rest.fraction = rest.ms_per_step / r.ms_per_step;
  r.kernels.push_back(rest);
  return r;
}

nlohmann::json to_json(const StepBenchResult& r) {
  nlohmann::json k = nlohmann::json::object();
  for (auto& c : r.kernels)
    k[c.name] = {{"ms_per_step", c.ms_per_step}, {"fraction", c.fraction}, {"gflops", c.gflops}};
  return {{"workload", r.workload},
          {"isa", r.isa},
          {"precision", r.precision},
          {"recompute", r.recompute},
          {"fused_head", r.fused_head},
          {"activation_bytes", r.activation_bytes},
          {"peak_gflops", r.peak_gflops},
          {"threads", r.threads},
          {"steps", r.steps},
          {"batch", r.batch},
          {"seq_len", r.seq_len},
          {"ms_per_step", r.ms_per_step},
          {"ms_min", r.ms_min},
          {"ms_max", r.ms_max},
          {"forward_ms", r.forward_ms},
          {"backward_ms", r.backward_ms},
          {"optimizer_ms", r.optimizer_ms},
          {"tokens_per_s", r.tokens_per_s},
          {"gflop_per_step", r.gflop_per_step},
          {"gflops", r.gflops},
          {"mfu", r.mfu},
          {"mfu_vs_measured_fma", r.mfu_measured_peak},
          {"peak",
           {{"isa", r.peak.isa},
            {"clock_ghz", r.peak.clock_ghz},
            {"clock_source", r.peak.clock_source},
            {"plausible", r.peak.plausible},
            {"notes", r.peak.notes},
            {"amx_gflops", r.peak.amx_gflops},
            {"lanes", r.peak.lanes},
            {"fma_units", r.peak.fma_units},
            {"derived_gflops", r.peak.derived_gflops},
            {"measured_fma_gflops", r.peak.measured_gflops}}},
          {"loss_first", r.loss_first},
          {"loss_last", r.loss_last},
          {"allocator_peak_bytes", r.peak_bytes},
          {"steady_state_allocs", r.steady_state_allocs},
          {"kernels", k}};
}

std::string to_table(const StepBenchResult& r) {
  std::string s;
  s += fmt::format("workload {}  (batch {} x seq {}, {} threads, kernels {}, {}, recompute {}{})\n",
                   r.workload, r.batch, r.seq_len, r.threads, r.isa, r.precision, r.recompute,
                   r.fused_head ? ", fused head" : "");
  s += fmt::format("peak     {:.0f} GFLOP/s fp32 = {} threads x {} FMA x {} lanes x 2 x {:.2f} GHz"
                   " (FMA loop measured {:.0f}{})\n",
                   r.peak.derived_gflops, r.threads, r.peak.fma_units, r.peak.lanes,
                   r.peak.clock_ghz, r.peak.measured_gflops,
                   r.peak.amx_gflops > 0 ? fmt::format(", AMX loop {:.0f}", r.peak.amx_gflops) : "");
  for (const std::string& n : r.peak.notes) s += "         note: " + n + "\n";
  s += fmt::format("step     {:.1f} ms median (min {:.1f}, max {:.1f}) over {} steps\n",
                   r.ms_per_step, r.ms_min, r.ms_max, r.steps);
  s += fmt::format("         forward {:.1f} ms, backward {:.1f} ms, optimizer {:.1f} ms\n",
                   r.forward_ms, r.backward_ms, r.optimizer_ms);
  s += fmt::format("speed    {:.0f} tokens/s, {:.1f} GFLOP/step, {:.1f} GFLOP/s, MFU {} of {:.0f}"
                   " ({} of the measured loops' ceiling)\n",
                   r.tokens_per_s, r.gflop_per_step, r.gflops, format_mfu(r.mfu), r.peak_gflops,
                   format_mfu(r.mfu_measured_peak));
  s += fmt::format("memory   allocator peak {:.1f} MiB, activations {:.1f} MiB, {} allocations in measured steps\n",
                   r.peak_bytes / 1048576.0, r.activation_bytes / 1048576.0, r.steady_state_allocs);
  s += "kernels  class            ms/step   share   GFLOP/s\n";
  for (auto& k : r.kernels)
    s += fmt::format("         {:<15} {:8.2f}  {:5.1f}%  {}\n", k.name, k.ms_per_step,
                     100 * k.fraction, k.gflops > 0 ? fmt::format("{:.0f}", k.gflops) : "");
  return s;
}

}  // namespace crucible::profile

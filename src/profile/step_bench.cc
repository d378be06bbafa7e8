#include "profile/step_bench.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fmt/format.h>

#include "core/allocator.h"
#include "core/check.h"
#include "core/clock.h"
#include "core/kernel_stats.h"
#include "core/rng.h"
#include "core/stats.h"
#include "core/threads.h"
#include "kernels/cuda/cuda.h"
#include "kernels/device_scope.h"
#include "kernels/gemm.h"
#include "kernels/kernels.h"
#include "kernels/step_graph.h"
#include "kernels/step_parts.h"
#include "nn/workloads.h"
#include "optim/adamw.h"

namespace crucible::profile {

namespace {

// A GPU's step as the trainer runs it (runtime/train_step.cc): the batch in
// pinned memory, the loss added on the device, one wait at the read-back.
// `steps` steps launched kernel by kernel, then `steps` replayed from a CUDA
// graph captured at the first of them (kernels/step_graph.h). Fills r's
// launched_ms, graph_ms and graph_refusal, and its forward, backward and
// optimizer times from the parts on the GPU (kernels/step_parts.h: CUDA
// events, no wait between the parts) of the steps the trainer's default
// would time: the replayed ones where the graph times its parts (a split
// graph), else the launched ones (parts_from); returns those steps' times.
Result<std::vector<double>> time_whole_steps(nn::GPT& gpt, optim::AdamW& adam, Arena& arena,
                                             const std::vector<int32_t>& tokens, const std::vector<int32_t>& targets,
                                             int B, int T, int steps, StepBenchResult& r) {
  Allocator* pinned = Allocator::pinned();
  if (!pinned) return Status::internal("[bench] a GPU without pinned memory");
  const size_t N = size_t(B) * size_t(T);
  auto* batch = static_cast<int32_t*>(pinned->allocate(2 * N * sizeof(int32_t), "bench.batch"));
  std::copy(tokens.begin(), tokens.end(), batch);
  std::copy(targets.begin(), targets.end(), batch + N);
  kernels::StepScalars* scalars = nullptr;
  auto body = [&]() -> Status {
    arena.reset();
    nn::Activations act;
    gpt.bind(act, arena, 0, B, T);
    {
      kernels::PartSpan part(kernels::StepPart::kForward);
      gpt.forward(act, batch, batch + N, 1.0f);
      gpt.add_loss(act, &scalars->loss_sum);
    }
    {
      kernels::PartSpan part(kernels::StepPart::kBackward);
      gpt.backward(act, nullptr);
    }
    {
      kernels::PartSpan part(kernels::StepPart::kOptimizer);
      adam.update();
    }
    gpt.params().zero_grad();
    return Status::ok();
  };
  std::vector<double> launched, replayed, parts[2][kernels::kStepParts];  // [launched, replayed]
  kernels::discard_part_times();
  kernels::StepGraph graph;
  for (int s = 0; s < 2 * steps + 1; ++s) {
    const int64_t t0 = now_ns();
    scalars = adam.begin_step(3e-4f);
    Status ran = s < steps ? body() : graph.captured() ? graph.replay() : graph.capture(body);
    if (!ran) {
      pinned->release(batch);
      return ran;
    }
    r.loss_last = float(adam.end_step().loss_sum);
    const double ms = (now_ns() - t0) * 1e-6;
    auto took = kernels::take_part_times();  // none in an unsplit graph's steps
    if (!took) {
      pinned->release(batch);
      return took.status();
    }
    const bool counted_replay = s > steps && graph.captured();  // the capture's step is not one
    if (s < steps || counted_replay)
      for (int p = 0; p < kernels::kStepParts; ++p) parts[counted_replay][p].push_back(took->seconds[p] * 1e3);
    if (s < steps) launched.push_back(ms);
    else if (counted_replay) replayed.push_back(ms);
    if (s == steps && !graph.captured()) {
      r.graph_refusal = graph.refusal();
      break;
    }
  }
  pinned->release(batch);
  r.launched_ms = median(launched);
  const bool split = graph.split() && !replayed.empty();
  r.parts_from = split ? "replayed" : "launched";
  if (graph.captured() && !graph.split()) r.graph_unsplit = graph.unsplit();
  r.forward_ms = median(parts[split][int(kernels::StepPart::kForward)]);
  r.backward_ms = median(parts[split][int(kernels::StepPart::kBackward)]);
  r.optimizer_ms = median(parts[split][int(kernels::StepPart::kOptimizer)]);
  r.graph_ms = replayed.empty() ? 0 : median(replayed);
  return replayed.empty() ? launched : replayed;
}

}  // namespace

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
  auto device = Device::parse(opt.device);
  if (!device) return Status::invalid("[bench] --device: " + device.status().message());
  const bool gpu = device->is_cuda();
  if (gpu && !opt.kernels.empty())
    return Status::invalid("[bench] --kernels picks a CPU kernel table; leave it out with --device " + device->str());
  if (opt.batch < 0) return Status::invalid("[bench] --batch must be >= 1");
  if (gpu) {
    auto strip = [](const std::string& m) { return m.rfind("[cuda] ", 0) == 0 ? m.substr(7) : m; };
    if (Status st = kernels::cuda::use_device(device->index); !st)
      return Status::invalid("[bench] --device " + device->str() + ": " + strip(st.message()));
  }
  set_num_threads(opt.threads);
  StepBenchResult r;
  r.workload = wl->name;
  r.device = device->str();
  r.threads = num_threads();
  r.steps = opt.steps;
  r.batch = opt.batch > 0 ? opt.batch : wl->batch;
  r.seq_len = wl->model.seq_len;
  r.precision = opt.precision;
  r.recompute = opt.recompute;
  r.fused_head = opt.fused_head;
  const bool bf = opt.precision == "bf16";
  if (gpu) {
    // The GPU's own ceilings, measured here before the model takes its memory.
    auto ceiling = measure_gpu_ceiling(*device);
    if (!ceiling) return ceiling.status();
    r.gpu = *ceiling;
    r.isa = "cuda (" + r.gpu.name + ")";
    r.peak_gflops = 1e3 * (bf ? r.gpu.bf16_gemm_tflops : r.gpu.f32_gemm_tflops);
  } else {
    r.isa = kernels::active().isa;
    r.peak = measure_cpu_peak(r.threads);
    r.peak_gflops = precision_peak_gflops(r.peak, bf, kernels::gemm_bf16_native());
  }

  nn::GPTPart part = nn::GPTPart::whole(wl->model);
  part.precision = dtype_named(opt.precision);
  part.recompute = nn::recompute_policy(opt.recompute);
  part.head_chunk = opt.fused_head ? nn::fused_head_rows(wl->model, part) : 0;
  part.device = *device;
  nn::GPT gpt(wl->model, part);
  gpt.init_weights(opt.seed);
  optim::AdamWConfig acfg;
  acfg.moments = dtype_named(opt.moments);
  optim::AdamW adam(gpt.params(), acfg);
  Allocator& pool = Allocator::of(*device);
  Arena arena("bench.activations", pool);
  const int B = r.batch, T = wl->model.seq_len, V = wl->model.vocab_size;
  std::vector<int32_t> tokens(size_t(B) * T), targets(size_t(B) * T);
  Rng rng(opt.seed, 0xbe7c);
  for (auto& t : tokens) t = int32_t(rng.next_u32() % uint32_t(V));
  for (auto& t : targets) t = int32_t(rng.next_u32() % uint32_t(V));

  // Everything below runs on the device (kernels/device_scope.h). On a GPU,
  // each phase ends by waiting for the stream so the host clock times the
  // kernels, not their launches; the measured steps run without kernel
  // timing (its events cost host time a launch-bound step would show), and
  // `kProfiledSteps` more steps with it give the per-class breakdown.
  kernels::DeviceScope on_device(*device);
  auto wait = [&] {
    if (gpu) CRUCIBLE_CHECK(kernels::cuda::synchronize(nullptr).is_ok(), "[bench] a GPU step failed");
  };
  constexpr int kProfiledSteps = 3;
  const int profiled = gpu ? kProfiledSteps : 0;
  std::vector<double> total, fwd, bwd, upd, covered_ms;
  AllocatorStats before{}, before_dev{};
  bool tty = opt.progress && isatty(STDERR_FILENO);
  for (int s = 0; s < opt.warmup + opt.steps + profiled; ++s) {
    const bool measured = s >= opt.warmup && s < opt.warmup + opt.steps;
    if (s == opt.warmup) {
      reset_kernel_stats();
      before = Allocator::global().stats();
      before_dev = pool.stats();
    }
    if (gpu && s == opt.warmup + opt.steps) {
      reset_kernel_stats();
      Status on = kernels::cuda::set_kernel_timing(true);
      if (!on) return on;
    }
    int64_t t0 = now_ns();
    arena.reset();
    float loss = gpt.forward(arena, tokens.data(), targets.data(), B, T, 1.0f);
    wait();
    int64_t t1 = now_ns();
    gpt.backward(arena);
    wait();
    int64_t t2 = now_ns();
    adam.step(3e-4f);
    gpt.params().zero_grad();
    wait();
    int64_t t3 = now_ns();
    if (gpu && kernels::cuda::kernel_timing()) {
      auto times = kernels::cuda::collect_kernel_times(nullptr);
      if (!times) return times.status();
    }
    if (s == 0) r.loss_first = loss;
    r.loss_last = loss;
    // The steps kernel_stats() covers: the measured ones on the CPU, the
    // profiled ones on a GPU.
    if (gpu ? s >= opt.warmup + opt.steps : measured) covered_ms.push_back((t3 - t0) * 1e-6);
    if (measured) {
      total.push_back((t3 - t0) * 1e-6);
      fwd.push_back((t1 - t0) * 1e-6);
      bwd.push_back((t2 - t1) * 1e-6);
      upd.push_back((t3 - t2) * 1e-6);
    }
    if (measured && s == opt.warmup + opt.steps - 1) {
      const AllocatorStats host = Allocator::global().stats(), dev = pool.stats();
      r.steady_state_allocs = host.allocs - before.allocs + (gpu ? dev.allocs - before_dev.allocs : 0);
    }
    if (tty)
      std::fprintf(stderr, "\r[bench] %s step %d/%d  %.1f ms  loss %.4f   ", r.workload.c_str(),
                   s + 1, opt.warmup + opt.steps + profiled, (t3 - t0) * 1e-6, loss);
  }
  if (gpu) (void)kernels::cuda::set_kernel_timing(false);
  if (tty) std::fprintf(stderr, "\r%80s\r", "");
  r.peak_bytes = pool.stats().peak;
  r.activation_bytes = arena.high_water();

  r.phased_ms = median(total);
  std::vector<double> headline = total;
  if (gpu) {
    const KernelStatsTable timed = kernel_stats();  // the profiled steps' (below); a replay counts no time
    auto whole = time_whole_steps(gpt, adam, arena, tokens, targets, B, T, opt.steps, r);
    if (!whole) return whole.status();
    headline = *whole;
    kernel_stats() = timed;
  }
  r.ms_per_step = median(headline);
  r.ms_min = *std::min_element(headline.begin(), headline.end());
  r.ms_max = *std::max_element(headline.begin(), headline.end());
  if (!gpu) {  // a GPU's: its replayed or launched steps' parts (time_whole_steps)
    r.forward_ms = median(fwd);
    r.backward_ms = median(bwd);
    r.optimizer_ms = median(upd);
  }
  double tokens_per_step = double(B) * T;
  r.tokens_per_s = tokens_per_step / (r.ms_per_step * 1e-3);
  r.gflop_per_step = wl->model.flops_per_token(T) * tokens_per_step * 1e-9;
  r.gflops = r.gflop_per_step / (r.ms_per_step * 1e-3);
  r.mfu = honest_mfu(r.gflops, r.peak_gflops, gpu || r.peak.plausible);
  // Against the loops' measured rates (the FMA loop, AMX's in bf16 where it
  // sets the ceiling): what the silicon showed in this run. On a GPU the
  // ceiling is already a measurement (the GEMM's rate).
  const double measured_ceiling =
      gpu  ? r.peak_gflops
      : bf ? std::max(r.peak.measured_gflops * (kernels::gemm_bf16_native() ? 2 : 1), r.peak.amx_gflops)
           : r.peak.measured_gflops;
  r.mfu_measured_peak = measured_ceiling > 0 ? honest_mfu(r.gflops, measured_ceiling, true) : 0;
  // The classes' times are means over the steps kernel_stats() holds, and so
  // is the step they are shares of: its median (the headline) would leave a
  // negative remainder where a few slow steps lift the means.
  double accounted = 0;
  const int covered = int(covered_ms.size());
  double covered_mean = 0;
  for (double ms : covered_ms) covered_mean += ms / covered;
  for (int c = 0; c < int(KernelClass::count); ++c) {
    const KernelClassStats& k = kernel_stats()[c];
    if (k.calls == 0) continue;
    KernelClassTime kt;
    kt.name = kernel_class_name(KernelClass(c));
    kt.ms_per_step = k.ns * 1e-6 / covered;
    kt.fraction = kt.ms_per_step / covered_mean;
    kt.gflops = k.flops > 0 && k.ns > 0 ? k.flops / (k.ns * 1e-9) * 1e-9 : 0;
    kt.gbs = k.bytes > 0 && k.ns > 0 ? k.bytes / (k.ns * 1e-9) * 1e-9 : 0;
    if (gpu)
      kt.of_ceiling = KernelClass(c) == KernelClass::gemm ? kt.gflops / r.peak_gflops
                                                          : (r.gpu.copy_gbs > 0 ? kt.gbs / r.gpu.copy_gbs : 0);
    accounted += kt.ms_per_step;
    r.kernels.push_back(kt);
  }
  KernelClassTime rest{"unaccounted", covered_mean - accounted, 0, 0};
  rest.fraction = rest.ms_per_step / covered_mean;
  r.kernels.push_back(rest);
  return r;
}

nlohmann::json to_json(const StepBenchResult& r) {
  nlohmann::json k = nlohmann::json::object();
  for (auto& c : r.kernels)
    k[c.name] = {{"ms_per_step", c.ms_per_step}, {"fraction", c.fraction}, {"gflops", c.gflops},
                 {"gbs", c.gbs}, {"of_ceiling", c.of_ceiling}};
  nlohmann::json j = {{"workload", r.workload},
          {"device", r.device},
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
          {"phased_ms", r.phased_ms},
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
  if (r.device != "cpu") {
    j["gpu"] = to_json(r.gpu);
    j["launched_ms"] = r.launched_ms;
    j["graph_ms"] = r.graph_ms;
    if (!r.graph_refusal.empty()) j["graph_refusal"] = r.graph_refusal;
    if (!r.graph_unsplit.empty()) j["graph_unsplit"] = r.graph_unsplit;
    j["parts_from"] = r.parts_from;
  }
  return j;
}

std::string to_table(const StepBenchResult& r) {
  std::string s;
  s += fmt::format("workload {}  (batch {} x seq {}, {} threads, kernels {}, {}, recompute {}{})\n",
                   r.workload, r.batch, r.seq_len, r.threads, r.isa, r.precision, r.recompute,
                   r.fused_head ? ", fused head" : "");
  if (r.device != "cpu")
    s += fmt::format("ceiling  {} ({}), measured now: GEMM {:.0f} TFLOP/s bf16 ({}^3), {:.1f} f32 ({}^3); copy {:.0f} GB/s\n",
                     r.device, r.gpu.name, r.gpu.bf16_gemm_tflops, r.gpu.gemm_n, r.gpu.f32_gemm_tflops,
                     r.gpu.gemm_n / 2, r.gpu.copy_gbs);
  else
    s += fmt::format("peak     {:.0f} GFLOP/s fp32 = {} threads x {} FMA x {} lanes x 2 x {:.2f} GHz"
                     " (FMA loop measured {:.0f}{})\n",
                     r.peak.derived_gflops, r.threads, r.peak.fma_units, r.peak.lanes,
                     r.peak.clock_ghz, r.peak.measured_gflops,
                     r.peak.amx_gflops > 0 ? fmt::format(", AMX loop {:.0f}", r.peak.amx_gflops) : "");
  for (const std::string& n : r.peak.notes) s += "         note: " + n + "\n";
  s += fmt::format("step     {:.1f} ms median (min {:.1f}, max {:.1f}) over {} steps\n",
                   r.ms_per_step, r.ms_min, r.ms_max, r.steps);
  if (r.device != "cpu") {
    s += r.graph_ms > 0 ? fmt::format("         replayed from a CUDA graph; launched kernel by kernel {:.2f} ms\n",
                                      r.launched_ms)
                        : fmt::format("         launched kernel by kernel (no CUDA graph: {})\n", r.graph_refusal);
    s += fmt::format("         {}: forward {:.1f} ms, backward {:.1f} ms, optimizer {:.1f} ms of GPU time "
                     "(CUDA events); waiting after each phase {:.1f} ms\n",
                     r.parts_from, r.forward_ms, r.backward_ms, r.optimizer_ms, r.phased_ms);
    if (!r.graph_unsplit.empty())
      s += fmt::format("         (the graph does not time its parts: {})\n", r.graph_unsplit);
  } else {
    s += fmt::format("         forward {:.1f} ms, backward {:.1f} ms, optimizer {:.1f} ms\n", r.forward_ms,
                     r.backward_ms, r.optimizer_ms);
  }
  s += fmt::format("speed    {:.0f} tokens/s, {:.1f} GFLOP/step, {:.1f} GFLOP/s, MFU {} of {:.0f}"
                   " ({} of the measured loops' ceiling)\n",
                   r.tokens_per_s, r.gflop_per_step, r.gflops, format_mfu(r.mfu), r.peak_gflops,
                   format_mfu(r.mfu_measured_peak));
  s += fmt::format("memory   allocator peak {:.1f} MiB, activations {:.1f} MiB, {} allocations in measured steps\n",
                   r.peak_bytes / 1048576.0, r.activation_bytes / 1048576.0, r.steady_state_allocs);
  const bool gpu = r.device != "cpu";
  s += gpu ? "kernels  class            ms/step   share   GFLOP/s     GB/s  of its ceiling\n"
           : "kernels  class            ms/step   share   GFLOP/s\n";
  for (auto& k : r.kernels) {
    s += fmt::format("         {:<15} {:8.2f}  {:5.1f}%  {:>7}", k.name, k.ms_per_step, 100 * k.fraction,
                     k.gflops > 0 ? fmt::format("{:.0f}", k.gflops) : "");
    if (gpu && k.name != "unaccounted")
      s += fmt::format("  {:>7.0f}  {:5.1f}%", k.gbs, 100 * k.of_ceiling);
    s += "\n";
  }
  if (gpu)
    s += "         (device time from CUDA events over 3 more steps; unaccounted: the GPU idle between kernels)\n";
  return s;
}

}  // namespace crucible::profile

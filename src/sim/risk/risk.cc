#include "sim/risk/risk.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/file_io.h"
#include "core/format.h"
#include "core/trace.h"
#include "sim/risk/estimators.h"
#include "sim/risk/risk_output.h"
#include "sim/risk/scenario_engine.h"

namespace crucible::sim {

namespace {
using namespace risk;

// Accumulators of the importance-sampled tail, summed batch by batch in
// scenario order (their values depend on nothing else).
enum Acc { kIsSum = 0, kIsSumSq, kIsHits, kAccCount };

class RiskWorkload final : public Workload {
 public:
  RiskWorkload(const RiskConfig& c, comm::Comm& comm, ScenarioEngine engine)
      : cfg_(c), comm_(comm), engine_(std::move(engine)), acc_(kAccCount, 0.0) {
    total_ = (c.scenarios + c.batch - 1) / c.batch;
    loss_.reserve(size_t(c.scenarios));
  }

  const char* name() const override { return "risk"; }
  int64_t total_steps() const override { return total_; }
  int64_t steps_done() const override { return done_; }

  Status begin(const std::string&) override { return Status::ok(); }  // writes only at finish()

  Status step() override {
    if (done_ >= total_) return Status::internal("[sim] risk: step() past the last step");
    const int64_t s0 = done_ * cfg_.batch, nb = std::min<int64_t>(cfg_.batch, cfg_.scenarios - s0);
    const int P = comm_.size(), q = comm_.rank();
    const int64_t share = (nb + P - 1) / P;  // scenarios per rank (the last ranks may hold fewer)
    const int64_t lo = std::min(nb, q * share), hi = std::min(nb, lo + share);
    // mine: (2, share) -- row 0 losses, row 1 IS terms, zero-padded; all: (P, 2, share).
    std::vector<double>& mine = mine_;
    std::vector<double>& all = all_;
    mine.assign(size_t(2 * share), 0.0);
    all.resize(size_t(2 * share) * P);
    {
      trace::Scope scope("scenarios", "sim");
      const bool tail = engine_.has_tail();
      double* out = mine.data();
#pragma omp parallel for schedule(static)
      for (int64_t i = lo; i < hi; ++i) {
        out[i - lo] = engine_.crude_loss(uint64_t(s0 + i));
        out[share + i - lo] = tail ? engine_.importance_term(uint64_t(s0 + i)) : 0.0;
      }
    }
    {
      trace::Scope scope("gather", "sim");
      CRUCIBLE_RETURN_IF_ERROR(
          comm_.allgather_bytes(mine.data(), mine.size() * sizeof(double), all.data()));
    }
    trace::Scope scope("estimate", "sim");
    for (int64_t i = 0; i < nb; ++i) {  // scenario order
      const double* piece = all.data() + size_t(2 * share) * (i / share);
      const int64_t at = i % share;
      loss_.push_back(piece[at]);
      const double y = piece[share + at];
      acc_[kIsSum] += y;
      acc_[kIsSumSq] += y * y;
      acc_[kIsHits] += y > 0;
    }
    ++done_;
    refresh();
    return Status::ok();
  }

  nlohmann::json metrics() const override {
    nlohmann::json m = nlohmann::json::object();
    m["scenarios_done"] = int64_t(loss_.size());
    for (const TailEstimate& e : est_) {
      const std::string t = level_tag(e.level);
      m["var_" + t] = e.var;
      m["var_" + t + "_se"] = e.var_se;
      m["es_" + t] = e.es;
      m["es_" + t + "_se"] = e.es_se;
    }
    if (engine_.has_tail()) {
      m["tail_p"] = tail_.p;
      m["tail_p_se"] = tail_.se;
      m["tail_vrf"] = tail_.vrf;
    }
    return m;
  }

  std::string progress() const override {
    if (est_.empty()) return "";
    const TailEstimate& e = est_.front();
    char buf[160];
    int n = std::snprintf(buf, sizeof buf, "VaR%s %s ±%.1f%% ES %s", level_tag(e.level).c_str(),
                          format_si(e.var).c_str(),
                          e.var != 0 ? 100 * e.var_se / std::fabs(e.var) : 0.0,
                          format_si(e.es).c_str());
    if (engine_.has_tail() && n > 0 && n < int(sizeof buf))
      std::snprintf(buf + n, sizeof buf - n, " | P(L>%gσ) %.2e ±%.1f%%", cfg_.tail_sigmas, tail_.p,
                    tail_.p > 0 ? 100 * tail_.se / tail_.p : 0.0);
    return buf;
  }

  Result<State> save() override {
    State s;
    if (comm_.rank() != 0) return s;
    s.scalars["scenarios_done"] = int64_t(loss_.size());
    s.arrays.push_back(pack_f64("loss", loss_));
    s.arrays.push_back(pack_f64("tail_accumulators", acc_));
    return s;
  }

  Status load(const State& state, int64_t step) override {
    if (step < 0 || step > total_)
      return Status::corrupt("[sim] risk checkpoint at step " + std::to_string(step) +
                             " is outside 0.." + std::to_string(total_));
    const size_t n = size_t(std::min<int64_t>(step * cfg_.batch, cfg_.scenarios));
    std::vector<double> loss, acc;
    CRUCIBLE_RETURN_IF_ERROR(unpack_f64(state, "loss", n, &loss));
    CRUCIBLE_RETURN_IF_ERROR(unpack_f64(state, "tail_accumulators", kAccCount, &acc));
    loss_ = std::move(loss);
    loss_.reserve(size_t(cfg_.scenarios));
    acc_ = std::move(acc);
    done_ = step;
    refresh();
    return Status::ok();
  }

  Result<nlohmann::json> finish(const std::string& run_dir) override {
    refresh();
    const nlohmann::json summary =
        risk_summary(cfg_, engine_, est_, tail_, int64_t(acc_[kIsHits]), loss_);
    if (comm_.rank() == 0)
      CRUCIBLE_RETURN_IF_ERROR(write_risk_files(run_dir, engine_, est_, loss_));
    return summary;
  }

 private:
  // The running estimates from the losses and accumulators so far.
  // Rank 0's alone: only its metrics and summary are used.
  void refresh() {
    if (comm_.rank() != 0) return;
    est_ = estimate_tail(loss_.data(), int64_t(loss_.size()), cfg_.var_levels, &scratch_);
    tail_ = importance_estimate(acc_[kIsSum], acc_[kIsSumSq], int64_t(loss_.size()));
  }

  RiskConfig cfg_;
  comm::Comm& comm_;
  ScenarioEngine engine_;
  int64_t total_ = 0, done_ = 0;
  std::vector<double> loss_;        // (scenarios done) in scenario order
  std::vector<double> acc_;         // (kAccCount)
  std::vector<double> scratch_;     // estimate_tail's workspace
  std::vector<double> mine_, all_;  // step()'s gather buffers, kept between steps
  std::vector<TailEstimate> est_;
  TailProbability tail_;
};
}  // namespace

Result<std::unique_ptr<Workload>> make_risk_workload(const RiskConfig& c, comm::Comm& comm,
                                                     uint64_t seed) {
  CRUCIBLE_RETURN_IF_ERROR(validate_risk(c));
  const double h = horizon_years(c);
  Result<Portfolio> book =
      Status::invalid("[config] risk.instruments: no rows and no risk.portfolio file");
  if (!c.portfolio.empty()) {
    Result<std::string> text = read_file(c.portfolio);
    if (!text.is_ok())
      return Status::invalid("[config] risk.portfolio: cannot read '" + c.portfolio +
                             "': " + text.status().message());
    book = Portfolio::parse(*text, c.portfolio, true, c.names, h);
  } else if (!c.instruments.empty()) {
    std::string rows;
    for (const std::string& r : c.instruments) rows += r + "\n";
    book = Portfolio::parse(rows, "risk.instruments", false, c.names, h);
  }
  if (!book.is_ok()) return book.status();
  Result<FactorModel> model = FactorModel::make(c, seed);
  if (!model.is_ok()) return model.status();
  ScenarioEngine engine(std::move(*model), std::move(*book));
  engine.design(c.tail_sigmas);
  return std::unique_ptr<Workload>(new RiskWorkload(c, comm, std::move(engine)));
}

}  // namespace crucible::sim

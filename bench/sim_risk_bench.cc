// sim_risk_bench: the figures of docs/sim/risk.md, each beside its peer
// measured in the same run.
//  1. Full revaluation, scenarios per second per core (one thread): crucible's
//     closed-form repricing against QuantLib repricing the same instruments at
//     the same scenario market states (quotes set per scenario; analytic
//     engines, Turnbull-Wakeman for the Asians), and against QuantLib with its
//     Monte Carlo engine for the arithmetic Asians (nested simulation).
//     The two portfolio values are compared scenario by scenario.
//  2. Importance sampling for the 5-sigma tail of the default book: the
//     variance-reduction factor and the equal-accuracy cost ratio
//     VRF * t_crude / t_IS against crude Monte Carlo.
//  3. The whole workload (crude + IS scenarios, all OpenMP threads).
// Usage: sim_risk_bench [scenarios (default 200000)] [copula of part 3: gaussian | student]
#include <omp.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>
// QuantLib's headers one by one (<ql/quantlib.hpp> pulls Boost uBLAS, not C++20-clean).
#include <ql/exercise.hpp>
#include <ql/instruments/asianoption.hpp>
#include <ql/instruments/bonds/zerocouponbond.hpp>
#include <ql/instruments/vanillaoption.hpp>
#include <ql/pricingengines/asian/mc_discr_arith_av_price.hpp>
#include <ql/pricingengines/asian/turnbullwakemanasianengine.hpp>
#include <ql/pricingengines/bond/discountingbondengine.hpp>
#include <ql/pricingengines/vanilla/analyticeuropeanengine.hpp>
#include <ql/processes/blackscholesprocess.hpp>
#include <ql/quotes/simplequote.hpp>
#include <ql/termstructures/volatility/equityfx/blackconstantvol.hpp>
#include <ql/termstructures/yield/flatforward.hpp>
#include <ql/time/calendars/nullcalendar.hpp>
#include <ql/time/daycounters/actual365fixed.hpp>

#include "comm/comm.h"
#include "sim/risk/estimators.h"
#include "sim/risk/risk.h"
#include "sim/risk/scenario_engine.h"

namespace ql = QuantLib;
using namespace crucible;
using namespace crucible::sim::risk;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The default market with a book whose dates are whole days (so QuantLib's
// Actual/365 dates and crucible's year fractions agree): horizon 14 days,
// Asian fixings every 30 days.
RiskConfig whole_day_book() {
  RiskConfig c;
  c.horizon_days = 14.0 * 252 / 365;
  c.instruments = {"equity,SPX,20000",
                   "equity,SX5E,15000",
                   "equity,NKY,10000",
                   "european_call,SPX,-20000,110," + std::to_string(91 / 365.0),
                   "european_put,SPX,20000,90," + std::to_string(182 / 365.0),
                   "european_put,SX5E,-10000,85,1",
                   "european_call,NKY,5000,100,2",
                   "asian_call,NKY,8000,100," + std::to_string(360 / 365.0) + ",12",
                   "asian_put,SX5E,6000,100," + std::to_string(180 / 365.0) + ",6",
                   "asian_call,SPX,-4000,105," + std::to_string(720 / 365.0) + ",24",
                   "zero_bond,,2000000,,2",
                   "zero_bond,,3000000,,10"};
  return c;
}

// The book in QuantLib, valued at the horizon date with quotes to set.
struct QlBook {
  ql::Date today{4, ql::December, 2026}, horizon;
  ql::DayCounter dc = ql::Actual365Fixed();
  std::vector<ql::ext::shared_ptr<ql::SimpleQuote>> spot;
  ql::ext::shared_ptr<ql::SimpleQuote> rate = ql::ext::make_shared<ql::SimpleQuote>(0.0);
  std::vector<ql::ext::shared_ptr<ql::BlackScholesProcess>> process;
  std::vector<std::pair<double, ql::ext::shared_ptr<ql::Instrument>>>
      items;                       // (quantity, instrument)
  std::vector<double> equity_qty;  // (n) plain equity holdings

  QlBook(const RiskConfig& c, const Portfolio& book, int horizon_days, bool mc_asians) {
    horizon = today + horizon_days;
    ql::Settings::instance().evaluationDate() = horizon;
    ql::Handle<ql::YieldTermStructure> curve(ql::ext::make_shared<ql::FlatForward>(
        horizon, ql::Handle<ql::Quote>(rate), dc, ql::Continuous));
    equity_qty.assign(c.names.size(), 0.0);
    for (size_t i = 0; i < c.names.size(); ++i) {
      spot.push_back(ql::ext::make_shared<ql::SimpleQuote>(c.spots[i]));
      ql::Handle<ql::BlackVolTermStructure> vol(
          ql::ext::make_shared<ql::BlackConstantVol>(horizon, ql::NullCalendar(), c.vols[i], dc));
      process.push_back(ql::ext::make_shared<ql::BlackScholesProcess>(
          ql::Handle<ql::Quote>(spot[i]), curve, vol));
    }
    for (const Instrument& in : book.instruments()) {
      const ql::Date maturity = today + int(std::lround(in.maturity * 365));
      ql::ext::shared_ptr<ql::Instrument> inst;
      switch (in.kind) {
        case Kind::kEquity:
          equity_qty[in.factor] += in.quantity;
          continue;
        case Kind::kEuropeanCall:
        case Kind::kEuropeanPut: {
          auto o = ql::ext::make_shared<ql::VanillaOption>(
              ql::ext::make_shared<ql::PlainVanillaPayoff>(
                  in.kind == Kind::kEuropeanCall ? ql::Option::Call : ql::Option::Put, in.strike),
              ql::ext::make_shared<ql::EuropeanExercise>(maturity));
          o->setPricingEngine(ql::ext::make_shared<ql::AnalyticEuropeanEngine>(process[in.factor]));
          inst = o;
          break;
        }
        case Kind::kAsianCall:
        case Kind::kAsianPut: {
          std::vector<ql::Date> fixings;
          const int step = int(std::lround(in.maturity * 365)) / in.fixings;
          for (int k = 1; k <= in.fixings; ++k) fixings.push_back(today + step * k);
          auto o = ql::ext::make_shared<ql::DiscreteAveragingAsianOption>(
              ql::Average::Arithmetic, 0.0, 0, fixings,
              ql::ext::make_shared<ql::PlainVanillaPayoff>(
                  in.kind == Kind::kAsianCall ? ql::Option::Call : ql::Option::Put, in.strike),
              ql::ext::make_shared<ql::EuropeanExercise>(fixings.back()));
          if (mc_asians)
            o->setPricingEngine(
                ql::MakeMCDiscreteArithmeticAPEngine<ql::PseudoRandom>(process[in.factor])
                    .withSamples(2000)
                    .withControlVariate(true)
                    .withSeed(42));
          else
            o->setPricingEngine(
                ql::ext::make_shared<ql::TurnbullWakemanAsianEngine>(process[in.factor]));
          inst = o;
          break;
        }
        case Kind::kZeroBond: {
          auto b = ql::ext::make_shared<ql::ZeroCouponBond>(0, ql::NullCalendar(), 1.0, maturity,
                                                            ql::Unadjusted, 100.0, today);
          b->setPricingEngine(ql::ext::make_shared<ql::DiscountingBondEngine>(curve));
          inst = b;
          break;
        }
      }
      items.emplace_back(in.quantity, inst);
    }
  }

  double value(const double* S, double r) {
    double v = 0;
    for (size_t i = 0; i < spot.size(); ++i) {
      spot[i]->setValue(S[i]);
      v += equity_qty[i] * S[i];
    }
    rate->setValue(r);
    for (auto& [q, inst] : items) v += q * inst->NPV();
    return v;
  }
};

}  // namespace

int main(int argc, char** argv) {
  const int64_t n = argc > 1 ? std::atoll(argv[1]) : 200000;
  const int threads = omp_get_max_threads();
  std::printf(
      "sim_risk_bench: %lld scenarios, %d OpenMP threads (shared 2-core VM: figures are noisy)\n",
      (long long)n, threads);

  // ---- 1. full revaluation, one core ----
  const RiskConfig c = whole_day_book();
  std::string rows;
  for (const std::string& r : c.instruments) rows += r + "\n";
  Result<Portfolio> book = Portfolio::parse(rows, "bench", false, c.names, horizon_years(c));
  Result<FactorModel> model = FactorModel::make(c, 1);
  if (!book.is_ok() || !model.is_ok()) {
    std::fprintf(stderr, "%s%s\n", book.status().message().c_str(),
                 model.status().message().c_str());
    return 2;
  }
  ScenarioEngine engine(*model, *book);
  const int m = model->normals_per_scenario(), nf = model->equities();
  std::vector<double> z(m), S(nf);
  double sink = 0;
  auto t0 = std::chrono::steady_clock::now();
  for (int64_t s = 0; s < n; ++s) sink += engine.crude_loss(uint64_t(s));
  const double t_ours = seconds_since(t0) / double(n);

  QlBook qlb(c, *book, 14, false);
  const int64_t n_ql = std::max<int64_t>(1, n / 10);
  std::vector<double> ours(n_ql), theirs(n_ql);
  for (int64_t s = 0; s < n_ql; ++s)
    ours[s] = engine.value_today() - engine.crude_loss(uint64_t(s));
  double r0 = 0;
  t0 = std::chrono::steady_clock::now();
  for (int64_t s = 0; s < n_ql; ++s) {  // the same draws and market states, repriced by QuantLib
    model->draw(uint64_t(s), kCrudeStream, z.data());
    model->state(z.data(), S.data(), &r0);
    theirs[s] = qlb.value(S.data(), r0);
  }
  const double t_ql_net = seconds_since(t0) / double(n_ql);
  double max_diff = 0;
  for (int64_t s = 0; s < n_ql; ++s) max_diff = std::max(max_diff, std::fabs(theirs[s] - ours[s]));
  QlBook qlmc(c, *book, 14, true);
  const int64_t n_mc = 20;
  t0 = std::chrono::steady_clock::now();
  for (int64_t s = 0; s < n_mc; ++s) {
    model->draw(uint64_t(s), kCrudeStream, z.data());
    model->state(z.data(), S.data(), &r0);
    sink += qlmc.value(S.data(), r0);
  }
  const double t_mc = seconds_since(t0) / double(n_mc);
  std::printf("\n1. full revaluation of %zu instruments (%d Asian), scenarios/s on one core:\n",
              book->instruments().size(),
              book->count(Kind::kAsianCall) + book->count(Kind::kAsianPut));
  std::printf("   crucible                          %12.0f\n", 1 / t_ours);
  std::printf(
      "   QuantLib analytic engines (TW)    %12.0f   crucible/QuantLib = %.1fx   (%lld "
      "scenarios)\n",
      1 / t_ql_net, t_ql_net / t_ours, (long long)n_ql);
  std::printf(
      "   QuantLib MC engine for the Asians %12.1f   crucible/QuantLib = %.0fx   (%lld scenarios, "
      "2000 paths each)\n",
      1 / t_mc, t_mc / t_ours, (long long)n_mc);
  std::printf(
      "   largest |value difference| crucible vs QuantLib analytic: %.3g (book value %.6g)\n",
      max_diff, engine.value_today());

  // ---- 2. importance sampling at 5 sigma, default book, one core ----
  std::printf(
      "\n2. importance sampling, P(loss > 5 delta-normal sigma), default book, one core:\n");
  for (const char* copula : {"gaussian", "student"}) {
    RiskConfig d;
    d.copula = copula;
    std::string drows;
    for (const std::string& r : d.instruments) drows += r + "\n";
    ScenarioEngine e(*FactorModel::make(d, 1),
                     *Portfolio::parse(drows, "default", false, d.names, horizon_years(d)));
    t0 = std::chrono::steady_clock::now();
    e.design(5);
    const double t_design = seconds_since(t0);
    t0 = std::chrono::steady_clock::now();
    int64_t crude_hits = 0;
    for (int64_t s = 0; s < n; ++s) crude_hits += e.crude_loss(uint64_t(s)) > e.threshold();
    const double t_c = seconds_since(t0) / double(n);
    double sum = 0, sum_sq = 0;
    t0 = std::chrono::steady_clock::now();
    for (int64_t s = 0; s < n; ++s) {
      const double y = e.importance_term(uint64_t(s));
      sum += y;
      sum_sq += y * y;
    }
    const double t_is = seconds_since(t0) / double(n);
    const TailProbability tp = importance_estimate(sum, sum_sq, n);
    const double eq_cost = tp.vrf * t_c / t_is;
    std::printf("   %-8s p = %.4g ± %.2g (IS, %lld samples; crude hits %lld), design %.3f s\n",
                copula, tp.p, tp.se, (long long)n, (long long)crude_hits, t_design);
    std::printf(
        "            VRF per sample %.3g, t_crude/t_IS = %.2f, equal-accuracy cost ratio %.3g\n",
        tp.vrf, t_c / t_is, eq_cost);
    if (tp.p > 0)
      std::printf(
          "            10%% relative error: crude needs %.3g scenarios (%.3g core-s), IS %.3g "
          "(%.3g core-s)\n",
          (1 - tp.p) / (tp.p * 0.01), (1 - tp.p) / (tp.p * 0.01) * t_c,
          (tp.se * tp.se * n) / (tp.p * tp.p * 0.01),
          (tp.se * tp.se * n) / (tp.p * tp.p * 0.01) * t_is);
  }

  // ---- 3. the workload, all threads ----
  RiskConfig w = RiskConfig();
  if (argc > 2) w.copula = argv[2];
  w.scenarios = n;
  w.batch = std::min<int64_t>(n, 50000);
  auto single = comm::make_single_comm();
  t0 = std::chrono::steady_clock::now();
  Result<std::unique_ptr<sim::Workload>> wl = sim::make_risk_workload(w, *single, 1);
  if (!wl.is_ok()) {
    std::fprintf(stderr, "%s\n", wl.status().message().c_str());
    return 2;
  }
  while ((*wl)->steps_done() < (*wl)->total_steps())
    if (!(*wl)->step().is_ok()) return 1;
  const double t_all = seconds_since(t0);
  std::printf(
      "\n3. workload (default book, %s copula, crude + IS per scenario, %d threads): %.0f "
      "scenarios/s, %.0f per thread\n",
      w.copula.c_str(), threads, n / t_all, n / t_all / threads);
  std::printf("   %s\n", (*wl)->progress().c_str());
  return sink == 42 ? 1 : 0;
}

// The risk workload end to end: a linear Gaussian portfolio's VaR, ES and
// 5-sigma tail probability against their closed forms; bit-identical results
// after save/load mid-run and at any thread count; the Student-t copula's
// joint tail; the estimators on a known sample.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "risk_test_util.h"
#include "sim/risk/estimators.h"
#include "sim/risk/factor_model.h"
#include "sim/risk/pricing.h"
#include "support/files.h"

namespace crucible::sim::risk {
namespace {

using testing::make;
using testing::mixed_book;
using testing::run_to_end;

// Simple returns, equities only, a fixed rate: the loss is exactly Gaussian,
//   L = -sum_i q_i S0_i (mu_i h + sigma_i sqrt(h) x_i),  x ~ N(0, C),
// so VaR_a = m + z_a s and ES_a = m + s phi(z_a) / (1 - a).
TEST(RiskVar, LinearGaussianPortfolioMatchesClosedForm) {
  RiskConfig c;
  c.scenarios = 200000;
  c.batch = 50000;
  c.returns = "simple";
  c.copula = "gaussian";
  c.rate_vol = 0;
  c.spots = {100, 50, 200};
  c.vols = {0.2, 0.3, 0.15};
  c.drifts = {0.05, 0.02, 0.08};
  c.correlation = {1, 0.6, 0.4, 0.6, 1, 0.5, 0.4, 0.5, 1};
  c.var_levels = {0.99, 0.999};
  c.instruments = {"equity,SPX,1000", "equity,SX5E,-600", "equity,NKY,250"};
  const double q[3] = {1000, -600, 250};
  const double h = horizon_years(c);
  double m = 0, b[3];
  for (int i = 0; i < 3; ++i) {
    m -= q[i] * c.spots[i] * c.drifts[i] * h;
    b[i] = q[i] * c.spots[i] * c.vols[i] * std::sqrt(h);
  }
  double var = 0;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) var += b[i] * c.correlation[i * 3 + j] * b[j];
  const double s = std::sqrt(var);

  auto single = comm::make_single_comm();
  std::unique_ptr<Workload> w = make(c, *single);
  ASSERT_TRUE(w);
  testutil::TempDir dir(testutil::current_test_name());
  const nlohmann::json r = run_to_end(*w, dir.path());
  for (double a : c.var_levels) {
    const std::string t = level_tag(a);
    const double z = norm_inv(a), phi = std::exp(-0.5 * z * z) / std::sqrt(2 * M_PI);
    const double var_cf = m + z * s, es_cf = m + s * phi / (1 - a);
    EXPECT_LT(std::fabs(r["var_" + t].get<double>() - var_cf),
              3 * r["var_" + t + "_se"].get<double>())
        << t;
    EXPECT_LT(std::fabs(r["es_" + t].get<double>() - es_cf), 3 * r["es_" + t + "_se"].get<double>())
        << t;
    EXPECT_LT(r["var_" + t + "_se"].get<double>(), 0.02 * var_cf) << t;  // the check has teeth
    EXPECT_NEAR(r["delta_normal_var_" + t].get<double>(), var_cf, 1e-6 * var_cf) << t;
  }
  // The 5-sigma tail: P(L > 5 s) = Phi(-(5 s - m) / s), ~3e-7; crude Monte
  // Carlo at 2e5 scenarios expects 0.06 hits, importance sampling estimates it.
  const double p_cf = norm_cdf(-(5 * s - m) / s);
  EXPECT_NEAR(r["tail_threshold"].get<double>(), 5 * s, 1e-6 * s);
  EXPECT_LT(std::fabs(r["tail_p_is"].get<double>() - p_cf), 3 * r["tail_p_is_se"].get<double>());
  EXPECT_LT(r["tail_p_is_se"].get<double>(), 0.01 * p_cf);
  EXPECT_GT(r["tail_vrf"].get<double>(), 1e4);
  EXPECT_NEAR(r["tail_shift_norm"].get<double>(), (5 * s - m) / s, 1e-6);
  // The workload's files.
  const std::string csv = testutil::read_file(dir / "risk_var.csv");
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 3) << csv;
  EXPECT_NE(testutil::read_file(dir / "risk_loss_histogram.csv").find("loss_lo,loss_hi,count"),
            std::string::npos);
}

// Save at step k, load into a fresh workload, finish: the same bits as one
// uninterrupted run. Student copula and every instrument kind.
TEST(RiskVar, ResumeAfterSaveIsBitIdentical) {
  RiskConfig c = mixed_book(24000, 5000);  // 5 steps, the last one short
  c.copula = "student";
  auto single = comm::make_single_comm();
  testutil::TempDir dir(testutil::current_test_name());
  std::unique_ptr<Workload> whole = make(c, *single);
  ASSERT_TRUE(whole);
  EXPECT_EQ(whole->total_steps(), 5);
  const nlohmann::json expect = run_to_end(*whole, dir.path());
  const nlohmann::json expect_metrics = whole->metrics();

  std::unique_ptr<Workload> first = make(c, *single);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(first->step().is_ok());
  Result<State> saved = first->save();
  ASSERT_TRUE(saved.is_ok());
  first.reset();  // killed
  std::unique_ptr<Workload> resumed = make(c, *single);
  ASSERT_TRUE(resumed->load(*saved, 3).is_ok());
  EXPECT_EQ(resumed->steps_done(), 3);
  const nlohmann::json got = run_to_end(*resumed, dir.path());
  EXPECT_EQ(got.dump(), expect.dump());
  EXPECT_EQ(resumed->metrics().dump(), expect_metrics.dump());
  EXPECT_GT(got["tail_is_hits"].get<int64_t>(), 1000);

  // A state that does not fit the step it claims is corrupt, named.
  std::unique_ptr<Workload> wrong = make(c, *single);
  Status s = wrong->load(*saved, 4);
  EXPECT_EQ(s.code(), Code::kCorrupt);
  EXPECT_NE(s.message().find("'loss'"), std::string::npos) << s.message();
}

TEST(RiskVar, ThreadCountDoesNotChangeTheBits) {
  RiskConfig c = mixed_book(12000, 4000);
  auto single = comm::make_single_comm();
  testutil::TempDir dir(testutil::current_test_name());
  const int before = omp_get_max_threads();
  std::string dumps[2];
  for (int threads : {1, 3}) {
    omp_set_num_threads(threads);
    std::unique_ptr<Workload> w = make(c, *single);
    dumps[threads == 3] = run_to_end(*w, dir.path()).dump();
  }
  omp_set_num_threads(before);
  EXPECT_EQ(dumps[0], dumps[1]);
  // A different seed gives different numbers (the comparison above can fail).
  std::unique_ptr<Workload> other = make(c, *single, 99);
  EXPECT_NE(run_to_end(*other, dir.path()).dump(), dumps[0]);
}

// The factor shock x_i recovered from a log-return scenario with mu = sigma^2/2.
std::vector<double> shocks(const FactorModel& m, uint64_t s) {
  std::vector<double> z(m.normals_per_scenario()), S(m.equities()), x(m.equities());
  double r = 0;
  m.draw(s, kCrudeStream, z.data());
  m.state(z.data(), S.data(), &r);
  const double sqh = std::sqrt(m.horizon());
  for (int i = 0; i < m.equities(); ++i) x[i] = std::log(S[i] / m.spots()[i]) / (m.vols()[i] * sqh);
  return x;
}

TEST(RiskVar, StudentCopulaKeepsNormalMarginsAndFattensTheJointTail) {
  RiskConfig c;
  c.names = {"A", "B"};
  c.spots = {100, 100};
  c.vols = {0.2, 0.2};
  c.drifts = {0.02, 0.02};  // = sigma^2 / 2: ln(S/S0) = sigma sqrt(h) x
  c.correlation = {1, 0.5, 0.5, 1};
  const double q = norm_inv(0.01);
  double joint[2];
  for (int student = 0; student < 2; ++student) {
    c.copula = student ? "student" : "gaussian";
    Result<FactorModel> m = FactorModel::make(c, 5);
    ASSERT_TRUE(m.is_ok());
    const int n = 100000;
    double sum = 0, sum_sq = 0;
    int both = 0;
    for (int s = 0; s < n; ++s) {
      const std::vector<double> x = shocks(*m, uint64_t(s));
      sum += x[0];
      sum_sq += x[0] * x[0];
      both += x[0] < q && x[1] < q;
    }
    EXPECT_NEAR(sum / n, 0.0, 0.015) << c.copula;
    EXPECT_NEAR(sum_sq / n, 1.0, 0.02) << c.copula;
    joint[student] = double(both) / n;
  }
  // P(both below their 1% quantile): ~0.0015 gaussian (rho 0.5), ~0.0033 t(4).
  EXPECT_GT(joint[1], 1.6 * joint[0]) << joint[0] << " " << joint[1];
}

TEST(RiskVar, EstimatorsOnAKnownSampleIgnoreOrder) {
  std::vector<double> loss(1000);
  for (int i = 0; i < 1000; ++i) loss[i] = i + 1;  // 1..1000
  std::vector<double> scratch;
  const std::vector<TailEstimate> sorted = estimate_tail(loss.data(), 1000, {0.99, 0.5}, &scratch);
  ASSERT_EQ(sorted.size(), 2u);
  EXPECT_EQ(sorted[0].var, 990);
  EXPECT_EQ(sorted[0].es, 995);  // mean of 990..1000
  EXPECT_EQ(sorted[1].var, 500);
  EXPECT_LT(sorted[0].var_lo, 990);
  EXPECT_GT(sorted[0].var_hi, 990);
  std::shuffle(loss.begin(), loss.end(), std::mt19937(3));
  const std::vector<TailEstimate> shuffled =
      estimate_tail(loss.data(), 1000, {0.99, 0.5}, &scratch);
  EXPECT_EQ(shuffled[0].var_lo, sorted[0].var_lo);
  EXPECT_EQ(shuffled[0].es, sorted[0].es);
  EXPECT_EQ(shuffled[0].es_se, sorted[0].es_se);
  EXPECT_EQ(level_tag(0.999), "99_9");
  EXPECT_EQ(level_tag(0.99), "99");
}

}  // namespace
}  // namespace crucible::sim::risk

namespace crucible::sim::risk {
namespace {

// Importance sampling against crude Monte Carlo on a tail crude can see
// (3 delta-normal sigmas, p ~ 1e-4 .. 1e-3), Gaussian and t copula, with
// options on both sides of the book: the two estimates agree within their
// joint error and IS has the smaller one.
TEST(RiskVar, ImportanceSamplingAgreesWithCrudeWhereCrudeSees) {
  for (const char* copula : {"gaussian", "student"}) {
    RiskConfig c = mixed_book(200000, 100000);
    c.copula = copula;
    c.tail_sigmas = 3;
    auto single = comm::make_single_comm();
    std::unique_ptr<Workload> w = make(c, *single);
    testutil::TempDir dir(testutil::current_test_name());
    const nlohmann::json r = run_to_end(*w, dir.path());
    const double p_crude = r["tail_p_crude"].get<double>(), p_is = r["tail_p_is"].get<double>();
    const double se_crude = std::sqrt(p_crude * (1 - p_crude) / 200000),
                 se_is = r["tail_p_is_se"].get<double>();
    EXPECT_GT(r["tail_crude_hits"].get<int64_t>(), 30) << copula;
    EXPECT_LT(std::fabs(p_is - p_crude), 3 * std::hypot(se_crude, se_is))
        << copula << " crude " << p_crude << " is " << p_is;
    EXPECT_GT(r["tail_vrf"].get<double>(), 50) << copula;
  }
}

}  // namespace
}  // namespace crucible::sim::risk

namespace crucible::sim::risk {
namespace {

// One equity under the t copula: its margin is exactly normal, so a linear
// position has the Gaussian closed forms -- VaR, ES, and the 5-sigma tail
// that importance sampling must find through the mixing variable W.
TEST(RiskVar, StudentCopulaSingleFactorMatchesGaussianClosedForm) {
  RiskConfig c;
  c.scenarios = 200000;
  c.batch = 100000;
  c.copula = "student";
  c.dof = 4;
  c.returns = "simple";
  c.names = {"X"};
  c.spots = {100};
  c.vols = {0.3};
  c.drifts = {0.04};
  c.rate_vol = 0;
  c.correlation = {1};
  c.instruments = {"equity,X,1000"};
  const double h = horizon_years(c), m = -1000 * 100 * 0.04 * h, s = 1000 * 100 * 0.3 * std::sqrt(h);
  auto single = comm::make_single_comm();
  testutil::TempDir dir(testutil::current_test_name());
  const nlohmann::json r = run_to_end(*make(c, *single), dir.path());
  for (double a : c.var_levels) {
    const std::string t = level_tag(a);
    const double z = norm_inv(a), phi = std::exp(-0.5 * z * z) / std::sqrt(2 * M_PI);
    EXPECT_LT(std::fabs(r["var_" + t].get<double>() - (m + z * s)), 3 * r["var_" + t + "_se"].get<double>()) << t;
    EXPECT_LT(std::fabs(r["es_" + t].get<double>() - (m + s * phi / (1 - a))), 3 * r["es_" + t + "_se"].get<double>())
        << t;
  }
  const double p_cf = norm_cdf(-(5 * s - m) / s);
  EXPECT_LT(std::fabs(r["tail_p_is"].get<double>() - p_cf), 3 * r["tail_p_is_se"].get<double>())
      << r["tail_p_is"] << " vs " << p_cf;
  EXPECT_LT(r["tail_p_is_se"].get<double>(), 0.05 * p_cf);
  EXPECT_GT(r["tail_vrf"].get<double>(), 1e3);
}

}  // namespace
}  // namespace crucible::sim::risk

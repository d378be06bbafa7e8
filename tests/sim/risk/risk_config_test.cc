// The risk workload's input checks: validate_risk and the factory refuse each
// bad value with one line naming the key, file:line or row; the default
// config (configs/sim/risk.toml) and the example portfolio file are valid.
#include "sim/risk/risk_config.h"

#include <gtest/gtest.h>
#include <toml++/toml.h>

#include <functional>

#include "risk_test_util.h"
#include "support/files.h"

namespace crucible::sim::risk {
namespace {

// The factory's verdict on c: "" when accepted, else the message (one line).
std::string refusal(const RiskConfig& c) {
  auto single = comm::make_single_comm();
  Result<std::unique_ptr<Workload>> w = make_risk_workload(c, *single, 1);
  if (w.is_ok()) return "";
  EXPECT_EQ(w.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(w.status().message().find('\n'), std::string::npos) << w.status().message();
  return w.status().message();
}

struct Bad {
  const char* what;
  std::function<void(RiskConfig&)> edit;
  const char* expect;  // substring of the one-line message
};

TEST(RiskConfig, RefusesEachBadInputNamingIt) {
  const Bad cases[] = {
      {"scenarios", [](RiskConfig& c) { c.scenarios = 0; },
       "[config] risk.scenarios: must be >= 1"},
      {"batch", [](RiskConfig& c) { c.batch = c.scenarios + 1; }, "[config] risk.batch:"},
      {"horizon", [](RiskConfig& c) { c.horizon_days = -1; },
       "[config] risk.horizon_days: must be > 0"},
      {"level",
       [](RiskConfig& c) {
         c.var_levels = {0.99, 1.0};
       },
       "[config] risk.var_levels:"},
      {"copula", [](RiskConfig& c) { c.copula = "clayton"; }, "[config] risk.copula: must be"},
      {"dof", [](RiskConfig& c) { c.dof = 0; }, "[config] risk.dof:"},
      {"returns", [](RiskConfig& c) { c.returns = "arith"; }, "[config] risk.returns:"},
      {"negative vol", [](RiskConfig& c) { c.vols[1] = -0.2; },
       "[config] risk.market.vols: SX5E must be >= 0, got -0.2"},
      {"spot", [](RiskConfig& c) { c.spots[0] = 0; },
       "[config] risk.market.spots: SPX must be > 0"},
      {"spot count", [](RiskConfig& c) { c.spots.pop_back(); },
       "risk.market.spots: has 2 values for 3 names"},
      {"rate vol", [](RiskConfig& c) { c.rate_vol = -0.01; }, "[config] risk.market.rate_vol:"},
      {"corr size", [](RiskConfig& c) { c.correlation.resize(10); },
       "risk.market.correlation: has 10 values"},
      {"corr asym", [](RiskConfig& c) { c.correlation[1] = 0.3; }, "differs from its mirror"},
      {"corr diag", [](RiskConfig& c) { c.correlation[0] = 0.9; }, "on the diagonal and must be 1"},
      {"singular", [](RiskConfig& c) { c.correlation = {1, 1, 0.5, 1, 1, 0.5, 0.5, 0.5, 1}; },
       "[config] risk.market.correlation is singular: smallest Cholesky pivot 0 at factor 1 "
       "('SX5E')"},
      {"not positive definite",
       [](RiskConfig& c) { c.correlation = {1, 0.9, -0.9, 0.9, 1, 0.9, -0.9, 0.9, 1}; },
       "[config] risk.market.correlation is not positive definite: smallest Cholesky pivot -15.2 "
       "at factor 2 ('NKY')"},
      {"unknown kind",
       [](RiskConfig& c) {
         c.instruments = {"equity,SPX,10", "swaption,SPX,1,100,1,"};
       },
       "[sim] risk.instruments row 2: unknown instrument kind 'swaption' (known: equity, "
       "european_call"},
      {"missing strike", [](RiskConfig& c) { c.instruments = {"european_call,SPX,10,,1"}; },
       "[sim] risk.instruments row 1: missing field 'strike'"},
      {"missing quantity", [](RiskConfig& c) { c.instruments = {"equity,SPX"}; },
       "[sim] risk.instruments row 1: missing field 'quantity'"},
      {"missing underlying", [](RiskConfig& c) { c.instruments = {"european_put,,1,100,1"}; },
       "missing field 'underlying' for european_put"},
      {"unknown underlying", [](RiskConfig& c) { c.instruments = {"equity,DAX,1"}; },
       "underlying 'DAX' is not in risk.market.names"},
      {"negative maturity", [](RiskConfig& c) { c.instruments = {"zero_bond,,100,,-2"}; },
       "[sim] risk.instruments row 1: maturity must be > 0 years, got -2"},
      {"maturity in horizon",
       [](RiskConfig& c) { c.instruments = {"european_call,SPX,1,100,0.01"}; },
       "ends within the risk horizon"},
      {"fixings", [](RiskConfig& c) { c.instruments = {"asian_call,SPX,1,100,1,2.5"}; },
       "fixings must be a whole number"},
      {"fixing in horizon", [](RiskConfig& c) { c.instruments = {"asian_call,SPX,1,100,1,100"}; },
       "first fixing at 0.01 years falls within the risk horizon"},
      {"not a number", [](RiskConfig& c) { c.instruments = {"equity,SPX,ten"}; },
       "field 'quantity' is not a number: 'ten'"},
      {"empty", [](RiskConfig& c) { c.instruments.clear(); }, "[config] risk.instruments: no rows"},
      {"file", [](RiskConfig& c) { c.portfolio = "/nonexistent/book.csv"; },
       "[config] risk.portfolio: cannot read '/nonexistent/book.csv'"},
  };
  for (const Bad& b : cases) {
    RiskConfig c = testing::mixed_book(1000, 100);
    b.edit(c);
    const std::string msg = refusal(c);
    EXPECT_NE(msg.find(b.expect), std::string::npos) << b.what << ": got \"" << msg << "\"";
  }
  EXPECT_EQ(refusal(testing::mixed_book(1000, 100)), "");
}

TEST(RiskConfig, PortfolioFileErrorsNameFileAndLine) {
  testutil::TempDir dir(testutil::current_test_name());
  const std::string path = dir / "book.csv";
  RiskConfig c = testing::mixed_book(1000, 100);
  c.portfolio = path;
  testutil::write_file(
      path, "# my book\nkind,underlying,quantity,strike,maturity\nequity,SPX,1\n\ncap,SPX,1,1,1\n");
  EXPECT_NE(refusal(c).find("[sim] " + path + ":5: unknown instrument kind 'cap'"),
            std::string::npos)
      << refusal(c);
  testutil::write_file(path, "kind,underlying,qty\nequity,SPX,1\n");
  EXPECT_NE(refusal(c).find(path + ":1: unknown column 'qty'"), std::string::npos) << refusal(c);
  // Columns in any order; the file wins over risk.instruments.
  testutil::write_file(path,
                       "maturity,kind,strike,quantity,underlying\n1,european_call,100,5,NKY\n");
  EXPECT_EQ(refusal(c), "");
}

// The default config and the example book: the keys through risk_fields
// (what runtime's TOML parser does), then the factory.
TEST(RiskConfig, DefaultConfigAndExamplePortfolioAreValid) {
  RiskConfig c;
  toml::table t = toml::parse_file(CRUCIBLE_SOURCE_DIR "/configs/sim/risk.toml");
  for (const config::Field& f : risk_fields(c)) {
    toml::node_view<toml::node> v = t.at_path(f.key);
    if (!v) continue;
    std::visit(
        [&](auto* p) {
          using T = std::remove_pointer_t<decltype(p)>;
          if constexpr (std::is_same_v<T, config::StringList>) {
            p->clear();
            for (auto& e : *v.as_array()) p->push_back(*e.value<std::string>());
          } else if constexpr (std::is_same_v<T, config::DoubleList>) {
            p->clear();
            for (auto& e : *v.as_array()) p->push_back(*e.value<double>());
          } else {
            ASSERT_TRUE(v.value<T>().has_value()) << f.key;
            *p = *v.value<T>();
          }
        },
        f.target);
  }
  for (auto& [section, table] : *t.as_table())
    if (section.str() == "risk")
      for (auto& [key, node] : *table.as_table())
        if (!node.is_table()) {
          bool known = false;
          for (const config::Field& f : risk_fields(c))
            known |= std::string(f.key) == "risk." + std::string(key.str());
          EXPECT_TRUE(known) << "risk." << key.str();
        }
  EXPECT_EQ(refusal(c), "");
  EXPECT_GE(c.instruments.size(), 6u);
  // RiskConfig's defaults are the file's values, key by key.
  RiskConfig defaults;
  const std::vector<config::Field> mine = risk_fields(c), theirs = risk_fields(defaults);
  for (size_t i = 0; i < mine.size(); ++i)
    std::visit(
        [&](auto* p) { EXPECT_EQ(*p, *std::get<decltype(p)>(theirs[i].target)) << mine[i].key; },
        mine[i].target);
  c.portfolio = CRUCIBLE_SOURCE_DIR "/configs/sim/risk_portfolio.csv";
  EXPECT_EQ(refusal(c), "");
  // The example file is the default book: the same numbers as its rows.
  c.scenarios = c.batch = 2000;
  auto single = comm::make_single_comm();
  testutil::TempDir dir(testutil::current_test_name());
  const std::string from_file = testing::run_to_end(*testing::make(c, *single), dir.path()).dump();
  c.portfolio.clear();
  EXPECT_EQ(testing::run_to_end(*testing::make(c, *single), dir.path()).dump(), from_file);
}

}  // namespace
}  // namespace crucible::sim::risk

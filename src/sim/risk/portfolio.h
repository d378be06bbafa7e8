// The risk portfolio: instruments parsed from CSV (a file, or the rows of
// risk.instruments), validated against the market's factor names and the
// risk horizon, and valued at one market state.
//
// CSV columns: kind, underlying, quantity, strike, maturity, fixings.
//   kind        equity | european_call | european_put | asian_call | asian_put | zero_bond
//   underlying  an equity factor name of risk.market.names (empty for zero_bond)
//   quantity    units held (negative: short); a zero_bond unit pays 1 at maturity
//   strike      options: strike price, > 0
//   maturity    options and bonds: years from today, beyond the risk horizon
//   fixings     asian: number of equally spaced averaging dates t_k = maturity k/n,
//               k = 1..n; the first must fall after the horizon
// A file starts with a header line naming the columns (any order; fields a
// kind does not use may be empty); risk.instruments rows have no header and
// take the columns in the order above. '#' starts a comment; blank lines are
// skipped. Errors name the source and line or row: "[sim] book.csv:7: unknown
// instrument kind 'swaption' (known: equity, ...)".
//
// Thread-safety: a Portfolio is immutable after parsing; value() is const
// and may run on many threads.
#pragma once
#include <string>
#include <vector>

#include "core/status.h"

namespace crucible::sim::risk {

enum class Kind { kEquity, kEuropeanCall, kEuropeanPut, kAsianCall, kAsianPut, kZeroBond };
const char* kind_name(Kind k);

struct Instrument {
  Kind kind = Kind::kEquity;
  int factor = -1;  // index into the equity names; -1 for a zero_bond
  double quantity = 0;
  double strike = 0;
  double maturity = 0;  // years from today
  int fixings = 0;      // asian only
};

class Portfolio {
 public:
  // text: the CSV; source: "book.csv" or "risk.instruments" (for messages);
  // header: the first non-comment line names the columns (files) or not
  // (risk.instruments rows); horizon: years, every maturity / first fixing
  // must exceed it.
  static Result<Portfolio> parse(const std::string& text, const std::string& source, bool header,
                                 const std::vector<std::string>& names, double horizon);

  // Portfolio value at elapsed time t (years from today: 0 now, the horizon
  // at a scenario), equity spots S[0..n), rate r, pricing vols vol[0..n).
  double value(const double* S, double r, const double* vol, double t) const;

  const std::vector<Instrument>& instruments() const { return items_; }
  // Instruments of each kind, for the summary.
  int count(Kind k) const;

 private:
  std::vector<Instrument> items_;
};

}  // namespace crucible::sim::risk

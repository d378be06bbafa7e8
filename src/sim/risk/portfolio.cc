#include "sim/risk/portfolio.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "sim/risk/pricing.h"

namespace crucible::sim::risk {

namespace {
constexpr int kMaxFixings = 1000;
const char* const kColumns[6] = {"kind", "underlying", "quantity", "strike", "maturity", "fixings"};

struct KindName {
  const char* name;
  Kind kind;
};
constexpr KindName kKinds[] = {{"equity", Kind::kEquity},
                               {"european_call", Kind::kEuropeanCall},
                               {"european_put", Kind::kEuropeanPut},
                               {"asian_call", Kind::kAsianCall},
                               {"asian_put", Kind::kAsianPut},
                               {"zero_bond", Kind::kZeroBond}};

std::string trim(const std::string& s) {
  size_t a = s.find_first_not_of(" \t\r"), b = s.find_last_not_of(" \t\r");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

std::vector<std::string> split_csv(const std::string& line) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    size_t comma = line.find(',', start);
    out.push_back(
        trim(line.substr(start, comma == std::string::npos ? std::string::npos : comma - start)));
    if (comma == std::string::npos) return out;
    start = comma + 1;
  }
}

std::string num(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", x);
  return buf;
}

// A number field: present, parses whole, finite.
Status number(const std::vector<std::string>& row, int col, const std::string& where, double* out) {
  const std::string& s = row[col];
  if (s.empty()) return Status::invalid(where + "missing field '" + kColumns[col] + "'");
  char* end = nullptr;
  *out = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || *end != '\0' || !std::isfinite(*out))
    return Status::invalid(where + "field '" + kColumns[col] + "' is not a number: '" + s + "'");
  return Status::ok();
}

Result<Instrument> parse_row(const std::vector<std::string>& row, const std::string& where,
                             const std::vector<std::string>& names, double horizon) {
  Instrument in;
  const std::string& kind = row[0];
  if (kind.empty()) return Status::invalid(where + "missing field 'kind'");
  bool known = false;
  for (const KindName& k : kKinds)
    if (kind == k.name) in.kind = k.kind, known = true;
  if (!known) {
    std::string list;
    for (const KindName& k : kKinds) list += std::string(list.empty() ? "" : ", ") + k.name;
    return Status::invalid(where + "unknown instrument kind '" + kind + "' (known: " + list + ")");
  }
  CRUCIBLE_RETURN_IF_ERROR(number(row, 2, where, &in.quantity));
  if (in.kind != Kind::kZeroBond) {
    if (row[1].empty()) return Status::invalid(where + "missing field 'underlying' for " + kind);
    for (size_t i = 0; i < names.size(); ++i)
      if (names[i] == row[1]) in.factor = int(i);
    if (in.factor < 0)
      return Status::invalid(where + "underlying '" + row[1] + "' is not in risk.market.names");
  }
  if (in.kind == Kind::kEquity) return in;
  const bool option = in.kind != Kind::kZeroBond;
  if (option) {
    CRUCIBLE_RETURN_IF_ERROR(number(row, 3, where, &in.strike));
    if (!(in.strike > 0))
      return Status::invalid(where + "strike must be > 0, got " + num(in.strike));
  }
  CRUCIBLE_RETURN_IF_ERROR(number(row, 4, where, &in.maturity));
  if (!(in.maturity > 0))
    return Status::invalid(where + "maturity must be > 0 years, got " + num(in.maturity));
  if (!(in.maturity > horizon))
    return Status::invalid(where + "maturity " + num(in.maturity) +
                           " years ends within the risk horizon (" + num(horizon) + " years)");
  if (in.kind == Kind::kAsianCall || in.kind == Kind::kAsianPut) {
    double n = 0;
    CRUCIBLE_RETURN_IF_ERROR(number(row, 5, where, &n));
    if (n < 1 || n > kMaxFixings || n != std::floor(n))
      return Status::invalid(where + "fixings must be a whole number in [1, " +
                             std::to_string(kMaxFixings) + "], got " + row[5]);
    in.fixings = int(n);
    if (!(in.maturity / in.fixings > horizon))
      return Status::invalid(where + "first fixing at " + num(in.maturity / in.fixings) +
                             " years falls within the risk horizon (" + num(horizon) +
                             " years); fixings before the horizon are not supported");
  }
  return in;
}
}  // namespace

const char* kind_name(Kind k) {
  for (const KindName& n : kKinds)
    if (n.kind == k) return n.name;
  return "?";
}

Result<Portfolio> Portfolio::parse(const std::string& text, const std::string& source, bool header,
                                   const std::vector<std::string>& names, double horizon) {
  Portfolio p;
  int order[6] = {0, 1, 2, 3, 4, 5};  // order[column] = index in the row
  int width = 6;
  bool need_header = header;
  size_t pos = 0;
  for (int lineno = 1; pos <= text.size(); ++lineno) {
    size_t nl = text.find('\n', pos);
    std::string line = text.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
    pos = nl == std::string::npos ? text.size() + 1 : nl + 1;
    if (size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    if (trim(line).empty()) continue;
    const std::string where =
        "[sim] " + source + (header ? ":" : " row ") + std::to_string(lineno) + ": ";
    std::vector<std::string> cells = split_csv(line);
    if (need_header) {
      need_header = false;
      width = int(cells.size());
      for (int c = 0; c < 6; ++c) order[c] = -1;
      for (int i = 0; i < width; ++i) {
        int c = 0;
        while (c < 6 && cells[i] != kColumns[c]) ++c;
        if (c == 6)
          return Status::invalid(
              where + "unknown column '" + cells[i] +
              "' (columns: kind, underlying, quantity, strike, maturity, fixings)");
        if (order[c] >= 0)
          return Status::invalid(where + "column '" + cells[i] + "' appears twice");
        order[c] = i;
      }
      for (int c : {0, 2})
        if (order[c] < 0)
          return Status::invalid(where + "the header lacks the column '" + kColumns[c] + "'");
      continue;
    }
    if (int(cells.size()) > width)
      return Status::invalid(where + std::to_string(cells.size()) + " fields, more than the " +
                             std::to_string(width) + " columns");
    std::vector<std::string> row(6);
    for (int c = 0; c < 6; ++c)
      if (order[c] >= 0 && order[c] < int(cells.size())) row[c] = cells[order[c]];
    Result<Instrument> in = parse_row(row, where, names, horizon);
    if (!in.is_ok()) return in.status();
    p.items_.push_back(*in);
  }
  if (p.items_.empty())
    return Status::invalid("[sim] " + source + ": the portfolio holds no instruments");
  return p;
}

double Portfolio::value(const double* S, double r, const double* vol, double t) const {
  double v = 0;
  double tau[kMaxFixings];
  for (const Instrument& in : items_) {
    double price = 0;
    switch (in.kind) {
      case Kind::kEquity:
        price = S[in.factor];
        break;
      case Kind::kEuropeanCall:
      case Kind::kEuropeanPut:
        price = black_scholes(in.kind == Kind::kEuropeanCall, S[in.factor], in.strike, r,
                              vol[in.factor], in.maturity - t);
        break;
      case Kind::kAsianCall:
      case Kind::kAsianPut:
        for (int k = 0; k < in.fixings; ++k) tau[k] = in.maturity * (k + 1) / in.fixings - t;
        price = asian_turnbull_wakeman(in.kind == Kind::kAsianCall, S[in.factor], in.strike, r,
                                       vol[in.factor], tau, in.fixings);
        break;
      case Kind::kZeroBond:
        price = zero_bond(r, in.maturity - t);
        break;
    }
    v += in.quantity * price;
  }
  return v;
}

int Portfolio::count(Kind k) const {
  int n = 0;
  for (const Instrument& in : items_) n += in.kind == k;
  return n;
}

}  // namespace crucible::sim::risk

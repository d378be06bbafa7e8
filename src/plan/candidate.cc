#include "plan/candidate.h"

#include <algorithm>
#include <cstdlib>
#include <sstream>
#include <vector>

namespace crucible::plan {

namespace {

Status bad(const std::string& key, const std::string& why) {
  return Status::invalid("[plan] layout " + key + ": " + why);
}

// The named fields' values: one list each, for --layout and for check().
using Choices = std::vector<const char*>;
const Choices kRecomputes = {"none", "selective", "full"};
const Choices kSchedules = {"1f1b", "interleaved", "zb-h1"};
const Choices kPrecisions = {"fp32", "bf16"};
const Choices kDtypes = {"f32", "bf16"};
const Choices kSplits = {"even", "cost"};

bool one_of(const std::string& v, const Choices& choices) {
  return std::any_of(choices.begin(), choices.end(), [&](const char* c) { return v == c; });
}

std::string choices(const Choices& cs) {
  std::string s;
  for (const char* c : cs) s += std::string(s.empty() ? "" : ", ") + c;
  return s;
}

// "'v' is not one of a, b, c" when v is not among cs.
Status named(const std::string& key, const std::string& v, const Choices& cs) {
  return one_of(v, cs) ? Status::ok() : bad(key, "'" + v + "' is not one of " + choices(cs));
}

Result<int> positive_int(const std::string& key, const std::string& v, int min) {
  char* end = nullptr;
  const long x = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || x < min || x > (1 << 24))
    return bad(key, "'" + v + "' is not an integer in [" + std::to_string(min) + ", " + std::to_string(1 << 24) + "]");
  return int(x);
}

}  // namespace

std::string Candidate::describe() const {
  std::ostringstream s;
  s << "dp=" << dp << ",tp=" << tp << ",pp=" << pp << ",v=" << v << ",mb=" << mb << ",m=" << m << ",zero=" << zero
    << ",recompute=" << recompute << ",sp=" << (sp ? "true" : "false") << ",schedule=" << schedule
    << ",precision=" << precision;
  if (moments != "f32") s << ",moments=" << moments;
  if (grad_dtype != "f32") s << ",grad_dtype=" << grad_dtype;
  if (split != "even") s << ",split=" << split;
  if (fused_head) s << ",fused_head=true";
  return s.str();
}

bool ParsedLayout::has(const std::string& key) const {
  return std::find(given.begin(), given.end(), key) != given.end();
}

Result<ParsedLayout> parse_layout(const std::string& text, const Candidate& defaults) {
  ParsedLayout out{defaults, {}};
  Candidate& c = out.c;
  std::vector<std::string>& seen = out.given;
  // Every field between commas counts: "tp=2,,pp=1" or a trailing comma is
  // a typo to point at, not a field to skip.
  std::vector<std::string> items;
  for (size_t at = 0;;) {
    const size_t comma = text.find(',', at);
    items.push_back(text.substr(at, comma == std::string::npos ? std::string::npos : comma - at));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  for (std::string item : items) {
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    if (item.empty())
      return Status::invalid("[plan] layout '" + text +
                             "': an empty field (two commas, or one at an end)");
    const size_t eq = item.find('=');
    if (eq == std::string::npos) return bad("'" + item + "'", "expected key=value");
    std::string k = item.substr(0, eq), v = item.substr(eq + 1);
    k.erase(k.find_last_not_of(" \t") + 1);
    v.erase(0, v.find_first_not_of(" \t"));
    if (std::find(seen.begin(), seen.end(), k) != seen.end()) return bad(k, "given twice");
    seen.push_back(k);
    auto set_int = [&](int& field, int min) -> Status {
      auto x = positive_int(k, v, min);
      if (!x) return x.status();
      field = *x;
      return Status::ok();
    };
    auto set_name = [&](std::string& field, const Choices& cs) -> Status {
      CRUCIBLE_RETURN_IF_ERROR(named(k, v, cs));
      field = v;
      return Status::ok();
    };
    Status s;
    if (k == "dp")
      s = set_int(c.dp, 1);
    else if (k == "tp") s = set_int(c.tp, 1);
    else if (k == "pp") s = set_int(c.pp, 1);
    else if (k == "v") s = set_int(c.v, 1);
    else if (k == "mb") s = set_int(c.mb, 1);
    else if (k == "m")
      s = set_int(c.m, 1);
    else if (k == "zero") {
      s = set_int(c.zero, 0);
      if (s && c.zero > 2) s = bad(k, "'" + v + "' is not 0, 1 or 2");
    } else if (k == "sp" || k == "fused_head") {
      if (v != "true" && v != "false") s = bad(k, "'" + v + "' is not true or false");
      (k == "sp" ? c.sp : c.fused_head) = v == "true";
    } else if (k == "recompute") s = set_name(c.recompute, kRecomputes);
    else if (k == "schedule") s = set_name(c.schedule, kSchedules);
    else if (k == "precision") s = set_name(c.precision, kPrecisions);
    else if (k == "moments") s = set_name(c.moments, kDtypes);
    else if (k == "grad_dtype") s = set_name(c.grad_dtype, kDtypes);
    else if (k == "split") s = set_name(c.split, kSplits);
    else
      s = bad("'" + k + "'", "unknown key (known: dp, tp, pp, v, mb, m, zero, recompute, sp, schedule, precision, "
                              "moments, grad_dtype, split, fused_head)");
    if (!s) return s;
  }
  // Sequence parallelism splits a tensor-parallel group's tokens: with one
  // rank there is nothing to split, and training would quietly run without it.
  if (out.has("sp") && c.sp && out.has("tp") && c.tp == 1)
    return bad("sp",
               "true needs tp > 1 (sequence parallelism splits the tensor-parallel group's "
               "tokens), and tp = 1");
  return out;
}

Result<parallel::Layout> check(const nn::GPTConfig& model, const Candidate& c) {
  if (c.dp < 1 || c.mb < 1 || c.m < 1) return bad("dp, mb, m", "each must be >= 1");
  if (c.zero < 0 || c.zero > 2) return bad("zero", std::to_string(c.zero) + " is not 0, 1 or 2");
  CRUCIBLE_RETURN_IF_ERROR(named("precision", c.precision, kPrecisions));
  CRUCIBLE_RETURN_IF_ERROR(named("recompute", c.recompute, kRecomputes));
  CRUCIBLE_RETURN_IF_ERROR(named("moments", c.moments, kDtypes));
  CRUCIBLE_RETURN_IF_ERROR(named("grad_dtype", c.grad_dtype, kDtypes));
  if (c.world() > kMaxDevices)
    return bad("dp x tp x pp", std::to_string(c.world()) + " devices is more than " + std::to_string(kMaxDevices));
  if (c.m > kMaxMicroBatches)
    return bad("m", std::to_string(c.m) + " micro-batches per step is more than " + std::to_string(kMaxMicroBatches));
  if (c.pp > 1 && int64_t(c.pp) * c.v * c.m > kMaxScheduleSteps)
    return bad("pp x v x m", std::to_string(int64_t(c.pp) * c.v * c.m) + " schedule steps per rank is more than " +
                                 std::to_string(kMaxScheduleSteps) + " (the planner builds the schedule)");
  const parallel::LayoutSpec spec{c.tp, c.pp, c.v, c.schedule, c.sp, c.split};
  auto layout = parallel::Layout::make(spec, int(c.world()), model, c.m);
  if (!layout) return layout.status();
  const int64_t tokens = int64_t(c.mb) * model.seq_len;
  if (layout->sequence_parallel() && tokens % c.tp != 0)
    return Status::invalid("[layout] dist.sequence_parallel: a micro-batch's " + std::to_string(tokens) +
                           " tokens (train.batch_size x model.seq_len) do not split over tp = " +
                           std::to_string(c.tp) + " ranks");
  return layout;
}

nn::GPTPart part_of(const nn::GPTConfig& model, const parallel::Layout& layout, const parallel::Coords& at,
                    const Candidate& c) {
  nn::GPTPart part = parallel::stage_part(layout, at, model);
  part.precision = dtype_named(c.precision);
  part.recompute = nn::recompute_policy(c.recompute);
  part.head_chunk = c.fused_head ? nn::fused_head_rows(model, part) : 0;
  return part;
}

}  // namespace crucible::plan

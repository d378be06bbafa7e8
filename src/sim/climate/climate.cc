// The climate Workload: time stepping, diagnostics, snapshots, checkpoint
// state and the summary around SweSolver (see climate.h).
#include "sim/climate/climate.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/trace.h"
#include "sim/climate/cfl.h"
#include "sim/climate/diagnostics.h"
#include "sim/climate/grid.h"
#include "sim/climate/netcdf_out.h"
#include "sim/climate/summary_maps.h"
#include "sim/climate/swe_solver.h"

namespace crucible::sim {

namespace {

using namespace climate;

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

// The grid-scale damping rate r = 1 / (8 tau): the checkerboard decays as
// exp(-t / tau); on smooth fields it acts as nu Lap with nu = (a dlat)^2 r.
double damping_rate(const ClimateConfig& c) {
  return c.damping_time_h > 0 ? 1.0 / (8 * c.damping_time_h * 3600.0) : 0.0;
}
double viscosity(const ClimateConfig& c) {
  const double dx = kRadius * kPi / c.nlat;
  return dx * dx * damping_rate(c);
}

double rel(double x, double x0) { return x0 != 0 ? (x - x0) / x0 : 0.0; }

// diag array layout (State "diag", F64): initial mass/energy/enstrophy,
// latest mass/energy/enstrophy/l1/l2/linf and its step, then the largest
// |drift| of mass, energy and enstrophy seen at diagnostic steps.
constexpr size_t kDiagLen = 13;

class ClimateWorkload final : public Workload {
 public:
  ClimateWorkload(const ClimateConfig& c, comm::Comm& comm, double dt, int64_t steps, CflLimit cfl)
      : cfg_(c),
        comm_(comm),
        grid_(c.nlat),
        wcase_(c.test_case, c.alpha_deg * kPi / 180),
        dt_(dt),
        total_(steps),
        cfl_(cfl) {
    solver_ =
        std::make_unique<SweSolver>(grid_, wcase_, c.polar_filter_lat_deg, damping_rate(c), comm);
    solver_->set_initial();
    if (wcase_.has_exact_solution()) {
      const Band b = solver_->band();
      h_exact_.resize(size_t(b.rows()) * grid_.nlon);
      for (int jl = 0; jl < b.rows(); ++jl)
        for (int i = 0; i < grid_.nlon; ++i)
          h_exact_[size_t(jl) * grid_.nlon + i] =
              wcase_.initial(grid_.lon[i], grid_.lat[b.j0 + jl]).h;
    }
    // Snapshot steps: the nearest step to every multiple of output_every_h, and the last.
    const double every_steps = c.output_every_h * 3600.0 / dt_;
    for (int64_t m = 0;; ++m) {
      const int64_t s = std::llround(m * every_steps);
      if (s > total_) break;
      if (snap_steps_.empty() || s > snap_steps_.back()) snap_steps_.push_back(s);
    }
    if (snap_steps_.back() != total_) snap_steps_.push_back(total_);
  }

  const char* name() const override { return "climate"; }
  int64_t total_steps() const override { return total_; }
  int64_t steps_done() const override { return step_; }

  Status begin(const std::string&) override {
    if (started_) return Status::ok();  // resumed: load() restored everything
    auto d = diagnose(*solver_, exact(), comm_);
    if (!d) return d.status();
    d0_ = last_ = *d;
    last_step_ = 0;
    CRUCIBLE_RETURN_IF_ERROR(take_snapshot_if_due());
    started_ = true;
    return Status::ok();
  }

  Status step() override {
    if (step_ >= total_) return Status::internal("[sim] climate: step() past the last step");
    {
      trace::Scope scope("rk4_step", "sim");
      CRUCIBLE_RETURN_IF_ERROR(solver_->step(dt_));
    }
    ++step_;
    if (step_ % cfg_.diag_every == 0 || step_ == total_) {
      auto d = diagnose(*solver_, exact(), comm_);
      if (!d) return d.status();
      last_ = *d;
      last_step_ = step_;
      if (!std::isfinite(last_.mass) || !std::isfinite(last_.energy))
        return Status::internal("[sim] climate: the solution blew up by step " +
                                std::to_string(step_) +
                                " (mass or energy not finite); lower climate.dt_s");
      max_drift_[0] = std::max(max_drift_[0], std::abs(rel(last_.mass, d0_.mass)));
      max_drift_[1] = std::max(max_drift_[1], std::abs(rel(last_.energy, d0_.energy)));
      max_drift_[2] = std::max(max_drift_[2], std::abs(rel(last_.enstrophy, d0_.enstrophy)));
    }
    return take_snapshot_if_due();
  }

  nlohmann::json metrics() const override {
    nlohmann::json m = {{"sim_time_h", step_ * dt_ / 3600.0},
                        {"diag_step", last_step_},
                        {"mass_drift", rel(last_.mass, d0_.mass)},
                        {"energy_drift", rel(last_.energy, d0_.energy)},
                        {"enstrophy_drift", rel(last_.enstrophy, d0_.enstrophy)}};
    if (last_.has_errors) {
      m["h_l1"] = last_.l1;
      m["h_l2"] = last_.l2;
      m["h_linf"] = last_.linf;
    }
    return m;
  }

  std::string progress() const override {
    std::string s = "day " + fmt("%.2f", step_ * dt_ / 86400.0) + "/" + fmt("%g", cfg_.days) +
                    "  dM " + fmt("%.1e", rel(last_.mass, d0_.mass)) + "  dE " +
                    fmt("%.1e", rel(last_.energy, d0_.energy));
    if (last_.has_errors) s += "  l2 " + fmt("%.2e", last_.l2);
    return s;
  }

  Result<State> save() override {
    auto whole = solver_->gather();
    if (!whole) return whole.status();
    State st;
    if (comm_.rank() != 0) return st;
    const size_t plane = size_t(grid_.nlat) * grid_.nlon;
    const std::vector<int64_t> shape = {grid_.nlat, grid_.nlon};
    const char* names[3] = {"h", "u", "v"};
    for (int q = 0; q < 3; ++q)
      st.arrays.push_back(pack_f64(
          names[q],
          std::vector<double>(whole->begin() + q * plane, whole->begin() + (q + 1) * plane),
          shape));
    st.arrays.push_back(pack_f64("diag", diag_array()));
    st.arrays.push_back(
        pack_f64("snapshots", snapshots_, {int64_t(snaps_taken()), 3, grid_.nlat, grid_.nlon}));
    st.scalars = {{"step", step_},
                  {"snapshots", snaps_taken()},
                  {"nlat", grid_.nlat},
                  {"case", cfg_.test_case},
                  {"dt_s", dt_}};
    return st;
  }

  Status load(const State& st, int64_t step) override {
    if (step < 0 || step > total_)
      return Status::corrupt("[sim] climate: checkpoint step " + std::to_string(step) +
                             " is outside 0.." + std::to_string(total_));
    // The state's own record of its grid, case and step: a checkpoint of
    // another configuration is refused, not continued with the wrong dt.
    const nlohmann::json& sc = st.scalars;
    if (!sc.contains("nlat") || !sc.contains("case") || !sc.contains("dt_s") ||
        sc["nlat"] != grid_.nlat || sc["case"] != cfg_.test_case || !sc["dt_s"].is_number() ||
        std::abs(double(sc["dt_s"]) - dt_) > 1e-9 * dt_)
      return Status::corrupt("[sim] climate: the checkpoint is of another run (nlat " +
                             sc.value("nlat", nlohmann::json()).dump() + ", case " +
                             sc.value("case", nlohmann::json()).dump() + ", dt_s " +
                             sc.value("dt_s", nlohmann::json()).dump() + "; this run: nlat " +
                             std::to_string(grid_.nlat) + ", case " +
                             std::to_string(cfg_.test_case) + ", dt_s " + fmt("%.17g", dt_) + ")");
    const size_t plane = size_t(grid_.nlat) * grid_.nlon;
    std::vector<double> h, u, v, diag, snaps;
    CRUCIBLE_RETURN_IF_ERROR(unpack_f64(st, "h", plane, &h));
    CRUCIBLE_RETURN_IF_ERROR(unpack_f64(st, "u", plane, &u));
    CRUCIBLE_RETURN_IF_ERROR(unpack_f64(st, "v", plane, &v));
    CRUCIBLE_RETURN_IF_ERROR(unpack_f64(st, "diag", kDiagLen, &diag));
    step_ = step;
    CRUCIBLE_RETURN_IF_ERROR(unpack_f64(st, "snapshots", snaps_taken() * 3 * plane, &snaps));
    solver_->set_fields(h, u, v);
    snapshots_ = comm_.rank() == 0 ? std::move(snaps) : std::vector<double>();
    d0_ = Diagnostics{diag[0], diag[1], diag[2], false, 0, 0, 0};
    last_ = Diagnostics{diag[3], diag[4], diag[5], wcase_.has_exact_solution(),
                        diag[6], diag[7], diag[8]};
    last_step_ = int64_t(diag[9]);
    std::copy(diag.begin() + 10, diag.end(), max_drift_);
    started_ = true;
    return Status::ok();
  }

  Result<nlohmann::json> finish(const std::string& run_dir) override {
    if (comm_.rank() != 0) return nlohmann::json::object();
    const std::string path = run_dir + "/climate.nc";
    std::vector<double> hs;
    if (cfg_.test_case == 5) hs = surface_grid();
    NetcdfContent nc;
    nc.grid = &grid_;
    nc.test_case = cfg_.test_case;
    nc.alpha_deg = cfg_.alpha_deg;
    nc.dt_s = dt_;
    nc.title = std::string("Shallow-water equations on the sphere: ") + wcase_.title();
    for (size_t k = 0; k < snaps_taken(); ++k) nc.time_h.push_back(snap_steps_[k] * dt_ / 3600.0);
    nc.snapshots = &snapshots_;
    nc.hs = hs.empty() ? nullptr : &hs;
    {
      trace::Scope scope("write_netcdf", "sim");
      CRUCIBLE_RETURN_IF_ERROR(write_climate_netcdf(path, nc));
    }
    nlohmann::json s = {{"case", cfg_.test_case},
                        {"case_name", wcase_.title()},
                        {"nlat", grid_.nlat},
                        {"nlon", grid_.nlon},
                        {"resolution_deg", 180.0 / grid_.nlat},
                        {"days", cfg_.days},
                        {"dt_s", dt_},
                        {"steps", total_},
                        {"ranks", comm_.size()},
                        {"cfl_dt_max_s", cfl_.dt_max_s},
                        {"courant_fraction", dt_ / cfl_.dt_max_s},
                        {"fastest_wave_ms", cfl_.fastest_wave_ms},
                        {"min_effective_dx_km", cfl_.min_dx_m / 1000},
                        {"polar_filter_lat_deg", cfg_.polar_filter_lat_deg},
                        {"damping_time_h", cfg_.damping_time_h},
                        {"viscosity_m2_s", viscosity(cfg_)},
                        {"polar_filtered_rows", solver_->filter().filtered_rows()},
                        {"mass_drift", rel(last_.mass, d0_.mass)},
                        {"energy_drift", rel(last_.energy, d0_.energy)},
                        {"enstrophy_drift", rel(last_.enstrophy, d0_.enstrophy)},
                        {"mass_drift_max_abs", max_drift_[0]},
                        {"energy_drift_max_abs", max_drift_[1]},
                        {"enstrophy_drift_max_abs", max_drift_[2]},
                        {"output", "climate.nc"},
                        {"snapshots", snaps_taken()}};
    if (cfg_.test_case == 2) {
      s["alpha_deg"] = cfg_.alpha_deg;
      s["h_l1"] = last_.l1;
      s["h_l2"] = last_.l2;
      s["h_linf"] = last_.linf;
    }
    std::vector<MapSource> maps;
    for (size_t k : map_snapshot_indices(snaps_taken()))
      maps.push_back({snap_steps_[k] * dt_ / 3600.0, k});
    s["maps"] = height_maps(grid_, snapshots_, maps, hs.empty() ? nullptr : &hs);
    return s;
  }

 private:
  const std::vector<double>* exact() const { return h_exact_.empty() ? nullptr : &h_exact_; }
  size_t snaps_taken() const {
    return size_t(std::upper_bound(snap_steps_.begin(), snap_steps_.end(), step_) -
                  snap_steps_.begin());
  }
  // Collective: appends the whole fields to snapshots_ (rank 0) when this step is an output step.
  Status take_snapshot_if_due() {
    if (!std::binary_search(snap_steps_.begin(), snap_steps_.end(), step_)) return Status::ok();
    trace::Scope scope("snapshot", "sim");
    auto whole = solver_->gather();
    if (!whole) return whole.status();
    snapshots_.insert(snapshots_.end(), whole->begin(), whole->end());
    return Status::ok();
  }
  std::vector<double> diag_array() const {
    return {d0_.mass,        d0_.energy,    d0_.enstrophy, last_.mass, last_.energy,
            last_.enstrophy, last_.l1,      last_.l2,      last_.linf, double(last_step_),
            max_drift_[0],   max_drift_[1], max_drift_[2]};
  }
  std::vector<double> surface_grid() const {
    std::vector<double> hs(size_t(grid_.nlat) * grid_.nlon);
    for (int j = 0; j < grid_.nlat; ++j)
      for (int i = 0; i < grid_.nlon; ++i)
        hs[size_t(j) * grid_.nlon + i] = wcase_.surface(grid_.lon[i], grid_.lat[j]);
    return hs;
  }

  ClimateConfig cfg_;
  comm::Comm& comm_;
  Grid grid_;
  Williamson wcase_;
  std::unique_ptr<SweSolver> solver_;
  double dt_;
  int64_t total_, step_ = 0;
  CflLimit cfl_;
  std::vector<double> h_exact_;      // the band's exact h (case 2), rows x nlon
  std::vector<int64_t> snap_steps_;  // ascending, from 0 to total_
  std::vector<double> snapshots_;    // rank 0: (taken, 3, nlat, nlon)
  Diagnostics d0_, last_;
  int64_t last_step_ = -1;
  double max_drift_[3] = {0, 0, 0};
  bool started_ = false;
};

}  // namespace

Result<std::unique_ptr<Workload>> make_climate_workload(const ClimateConfig& c, comm::Comm& comm,
                                                        uint64_t) {
  CRUCIBLE_RETURN_IF_ERROR(validate_climate(c));
  if (c.nlat < comm.size())
    return Status::invalid("[config] climate.nlat: " + std::to_string(c.nlat) +
                           " rows are fewer than the " + std::to_string(comm.size()) +
                           " ranks (each rank needs a row)");
  const Grid grid(c.nlat);
  const Williamson w(c.test_case, c.alpha_deg * kPi / 180);
  const PolarFilter filter(grid, c.polar_filter_lat_deg);
  const CflLimit cfl = cfl_limit(grid, w, filter, damping_rate(c));
  if (c.dt_s > cfl.dt_max_s)
    return Status::invalid(
        "[config] climate.dt_s: " + fmt("%g", c.dt_s) + " s exceeds the CFL limit " +
        fmt("%.0f", cfl.dt_max_s) +
        " s (RK4: 2.83 / max(|u| kx + |v| ky + sqrt(gh) |k| + |f| + 8 r_damping); " +
        "fastest wave " + fmt("%.0f", cfl.fastest_wave_ms) + " m/s, smallest effective dx " +
        fmt("%.0f", cfl.min_dx_m / 1000) + " km with the polar filter from " +
        fmt("%g", c.polar_filter_lat_deg) + " deg)");
  const double total_s = c.days * 86400.0;
  const double dt_req = c.dt_s > 0 ? c.dt_s : 0.8 * cfl.dt_max_s;
  int64_t steps = std::max<int64_t>(1, int64_t(std::ceil(total_s / dt_req - 1e-9)));
  // When the output interval divides the run, make the step count a
  // multiple of the number of outputs, so snapshots fall on their times.
  const double outputs = total_s / (c.output_every_h * 3600.0);
  if (std::abs(outputs - std::round(outputs)) < 1e-9 && std::round(outputs) >= 1) {
    const int64_t m = int64_t(std::round(outputs));
    steps = (steps + m - 1) / m * m;
  }
  const double dt = total_s / double(steps);
  // The snapshots live in memory (and in checkpoints) until finish().
  const double snaps = std::floor(total_s / (c.output_every_h * 3600.0)) + 2;
  const double snap_bytes = snaps * 3 * double(grid.nlat) * grid.nlon * sizeof(double);
  if (snap_bytes > 4.0 * (1ull << 30))
    return Status::invalid("[config] climate.output_every_h: " + fmt("%g", snaps) +
                           " snapshots of the " + std::to_string(grid.nlat) + "x" +
                           std::to_string(grid.nlon) + " grid need " +
                           fmt("%.1f", snap_bytes / (1ull << 30)) + " GiB (at most 4); raise it");
  return std::unique_ptr<Workload>(new ClimateWorkload(c, comm, dt, steps, cfl));
}

}  // namespace crucible::sim

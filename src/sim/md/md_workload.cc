// MdWorkload: the Workload of `crucible sim md` (md.h). Holds the Domain of
// this rank, the global sums of the last step and the NVE samples (every
// rank holds the same samples: they come from global sums). The checkpoint
// holds, per atom in id order, the position, velocity, force and the
// position at the last neighbour-list build: load() rebuilds the lists from
// the latter, so the local order, the lists and hence every later bit are
// those of the uninterrupted run.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "core/file_io.h"
#include "core/trace.h"
#include "sim/md/domain.h"
#include "sim/md/exact_sum.h"
#include "sim/md/initial_state.h"
#include "sim/md/lj_force.h"
#include "sim/md/md.h"
#include "sim/md/md_stats.h"
#include "sim/md/xyz_start.h"
#include "sim/md/xyz_trajectory.h"

namespace crucible::sim {

namespace {

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

class MdWorkload final : public Workload {
 public:
  // start: the positions of md.start_file (empty: the FCC lattice).
  MdWorkload(const MdConfig& c, comm::Comm& comm, uint64_t seed, md::StartConfig start)
      : c_(c),
        comm_(comm),
        seed_(seed),
        N_(start.pos.empty() ? md_atom_count(c) : int64_t(start.pos.size() / 3)),
        L_(start.pos.empty() ? md_box_length(c) : start.box),
        V_(L_ * L_ * L_),
        rho_(start.pos.empty() ? c.density : double(N_) / V_),
        start_(std::move(start)),
        dom_(comm, L_, c.cutoff, c.skin, c.reproducible) {}

  const char* name() const override { return "md"; }
  int64_t total_steps() const override { return c_.steps; }
  int64_t steps_done() const override { return step_; }

  Status begin(const std::string& run_dir) override {
    run_dir_ = run_dir;
    if (!loaded_) {
      init_atoms();
      CRUCIBLE_RETURN_IF_ERROR(dom_.rebuild());
      CRUCIBLE_RETURN_IF_ERROR(compute_forces(true));
      CRUCIBLE_RETURN_IF_ERROR(kinetic());
      CRUCIBLE_RETURN_IF_ERROR(sample());
    }
    if (c_.dump_every > 0) {
      Status s;
      if (comm_.rank() == 0) s = traj_.open(run_dir + "/md_traj.xyz", loaded_ ? traj_bytes_ : 0);
      CRUCIBLE_RETURN_IF_ERROR(agree(s));
      if (!loaded_) CRUCIBLE_RETURN_IF_ERROR(dump());
    }
    return Status::ok();
  }

  Status step() override {
    ++step_;
    const double dt = c_.dt, h = 0.5 * c_.dt;
    {
      trace::Scope scope("integrate", "sim");
      for (int i = 0; i < dom_.nlocal; ++i) {
        dom_.vx[i] += h * dom_.fx[i], dom_.vy[i] += h * dom_.fy[i], dom_.vz[i] += h * dom_.fz[i];
        dom_.x[i] += dt * dom_.vx[i], dom_.y[i] += dt * dom_.vy[i], dom_.z[i] += dt * dom_.vz[i];
      }
    }
    bool rebuild;
    if (c_.neighbor_every > 0) {
      rebuild = (step_ - last_rebuild_) % c_.neighbor_every == 0;
    } else {
      double m2 = dom_.max_displacement2();
      if (comm_.size() > 1) CRUCIBLE_RETURN_IF_ERROR(comm_.allreduce(&m2, 1, comm::ReduceOp::kMax));
      rebuild = !(m2 <= 0.25 * c_.skin * c_.skin);  // NaN rebuilds, and the rebuild reports it
    }
    if (rebuild) {
      CRUCIBLE_RETURN_IF_ERROR(dom_.rebuild());
      last_rebuild_ = step_;
      ++rebuilds_;
    } else {
      CRUCIBLE_RETURN_IF_ERROR(dom_.forward_positions());
    }
    thermo_now_ = step_ % c_.thermo_every == 0 || step_ == c_.steps;
    CRUCIBLE_RETURN_IF_ERROR(compute_forces(thermo_now_));
    {
      trace::Scope scope("integrate", "sim");
      for (int i = 0; i < dom_.nlocal; ++i)
        dom_.vx[i] += h * dom_.fx[i], dom_.vy[i] += h * dom_.fy[i], dom_.vz[i] += h * dom_.fz[i];
    }
    // The kinetic energy is a global sum (a rank-to-rank wait): taken only
    // where it is used, under the thermostat and on sample steps.
    ke_now_ = step_ <= c_.equil_steps || thermo_now_;
    if (ke_now_) CRUCIBLE_RETURN_IF_ERROR(kinetic());
    if (step_ <= c_.equil_steps) CRUCIBLE_RETURN_IF_ERROR(berendsen());
    if (!std::isfinite(ke_))
      return Status::invalid("[sim] md: the kinetic energy became non-finite at step " +
                             std::to_string(step_) + ": the time step md.dt = " + fmt("%g", c_.dt) +
                             " is too large (or atoms overlap)");
    if (thermo_now_) CRUCIBLE_RETURN_IF_ERROR(sample());
    if (c_.dump_every > 0 && step_ % c_.dump_every == 0) CRUCIBLE_RETURN_IF_ERROR(dump());
    return Status::ok();
  }

  nlohmann::json metrics() const override {
    nlohmann::json m = nlohmann::json::object();
    if (ke_now_ || step_ == 0) m["temperature"] = temperature();
    if (thermo_now_ || step_ == 0) {
      m["pe_per_atom"] = u_atom_;
      m["etotal_per_atom"] = e_atom_;
      m["pressure"] = pressure_;
      if (has_e0_) m["energy_drift_per_atom"] = e_atom_ - e0_;
    }
    return m;
  }

  std::string progress() const override {
    return "T " + fmt("%.3f", temperature()) + " P " + fmt("%.3f", pressure_) + " E/N " +
           fmt("%.5f", e_atom_) + (step_ <= c_.equil_steps ? " (thermostat)" : " (NVE)");
  }

  Result<State> save() override {
    std::vector<double> all;
    CRUCIBLE_RETURN_IF_ERROR(dom_.gather(N_, true, &all));
    Status synced;
    if (comm_.rank() == 0 && traj_.is_open()) synced = traj_.sync();
    CRUCIBLE_RETURN_IF_ERROR(agree(synced));
    State s;
    if (comm_.rank() != 0) return s;
    std::vector<double> pos(3 * N_), vel(3 * N_), force(3 * N_), ref(3 * N_);
    for (int64_t a = 0; a < N_; ++a)
      for (int d = 0; d < 3; ++d) {
        pos[3 * a + d] = all[md::Domain::kAtomWidth * a + 1 + d],
                    vel[3 * a + d] = all[md::Domain::kAtomWidth * a + 4 + d];
        force[3 * a + d] = all[md::Domain::kAtomWidth * a + 7 + d],
                      ref[3 * a + d] = all[md::Domain::kAtomWidth * a + 10 + d];
      }
    s.arrays.push_back(pack_f64("pos", pos, {N_, 3}));
    s.arrays.push_back(pack_f64("vel", vel, {N_, 3}));
    s.arrays.push_back(pack_f64("force", force, {N_, 3}));
    s.arrays.push_back(pack_f64("pos_at_rebuild", ref, {N_, 3}));
    s.arrays.push_back(pack_f64("samples", samples_,
                                {int64_t(samples_.size() / md::kSampleWidth), md::kSampleWidth}));
    s.scalars = {{"step", step_},
                 {"last_rebuild", last_rebuild_},
                 {"rebuilds", rebuilds_},
                 {"ke", ke_},
                 {"pe", pe_},
                 {"virial", virial_},
                 {"u_atom", u_atom_},
                 {"e_atom", e_atom_},
                 {"pressure", pressure_},
                 {"e_last", e_last_},
                 {"last_sample", last_sample_},
                 {"has_e0", has_e0_},
                 {"e0", e0_},
                 {"traj_bytes", traj_.bytes()},
                 {"atoms", N_}};
    return s;
  }

  Status load(const State& s, int64_t step) override {
    std::vector<double> pos, vel, force, ref;
    const size_t n3 = size_t(3 * N_);
    CRUCIBLE_RETURN_IF_ERROR(unpack_f64(s, "pos", n3, &pos));
    CRUCIBLE_RETURN_IF_ERROR(unpack_f64(s, "vel", n3, &vel));
    CRUCIBLE_RETURN_IF_ERROR(unpack_f64(s, "force", n3, &force));
    CRUCIBLE_RETURN_IF_ERROR(unpack_f64(s, "pos_at_rebuild", n3, &ref));
    CRUCIBLE_RETURN_IF_ERROR(unpack_f64(s, "samples", SIZE_MAX, &samples_));
    try {
      if (s.scalars.at("step").get<int64_t>() != step || s.scalars.at("atoms").get<int64_t>() != N_)
        return Status::corrupt("[sim] md: checkpoint step or atom count does not match this run");
      last_rebuild_ = s.scalars.at("last_rebuild"), rebuilds_ = s.scalars.at("rebuilds");
      ke_ = s.scalars.at("ke"), pe_ = s.scalars.at("pe"), virial_ = s.scalars.at("virial");
      u_atom_ = s.scalars.at("u_atom"), e_atom_ = s.scalars.at("e_atom"),
      pressure_ = s.scalars.at("pressure");
      e_last_ = s.scalars.at("e_last"), last_sample_ = s.scalars.at("last_sample");
      has_e0_ = s.scalars.at("has_e0"), e0_ = s.scalars.at("e0");
      traj_bytes_ = s.scalars.at("traj_bytes");
    } catch (const std::exception& e) {
      return Status::corrupt(std::string("[sim] md: checkpoint scalars: ") + e.what());
    }
    if (samples_.size() % md::kSampleWidth != 0)
      return Status::corrupt("[sim] md: checkpoint array 'samples' is ragged");
    step_ = step;
    // This rank's atoms at their positions of the last list build; the
    // rebuild then gives the uninterrupted run's order, ghosts and lists.
    std::vector<int64_t> ids;
    std::vector<double> px, py, pz, vx, vy, vz;
    for (int64_t a = 0; a < N_; ++a) {
      if (dom_.owner_of(ref[3 * a]) != comm_.rank()) continue;
      ids.push_back(a);
      px.push_back(ref[3 * a]), py.push_back(ref[3 * a + 1]), pz.push_back(ref[3 * a + 2]);
      vx.push_back(vel[3 * a]), vy.push_back(vel[3 * a + 1]), vz.push_back(vel[3 * a + 2]);
    }
    dom_.set_owned(std::move(ids), std::move(px), std::move(py), std::move(pz), std::move(vx),
                   std::move(vy), std::move(vz));
    CRUCIBLE_RETURN_IF_ERROR(dom_.rebuild());
    for (int i = 0; i < dom_.nlocal; ++i) {
      const int64_t a = dom_.id[i];
      dom_.x[i] = pos[3 * a], dom_.y[i] = pos[3 * a + 1], dom_.z[i] = pos[3 * a + 2];
      dom_.fx[i] = force[3 * a], dom_.fy[i] = force[3 * a + 1], dom_.fz[i] = force[3 * a + 2];
    }
    CRUCIBLE_RETURN_IF_ERROR(dom_.forward_positions());
    thermo_now_ = ke_now_ = false;
    loaded_ = true;
    return Status::ok();
  }

  Result<nlohmann::json> finish(const std::string& run_dir) override {
    std::vector<double> all;
    CRUCIBLE_RETURN_IF_ERROR(dom_.gather(N_, false, &all));
    Status written;
    if (comm_.rank() == 0) {
      written = write_file_atomic(run_dir + "/md_final.xyz",
                                  md::xyz_frame(all, L_, step_, step_ * c_.dt));
      if (written.is_ok() && traj_.is_open()) written = traj_.sync();
    }
    CRUCIBLE_RETURN_IF_ERROR(agree(written));
    return summary();
  }

 private:
  double temperature() const { return 2.0 * ke_ / (3.0 * N_ - 3.0); }

  // Rank 0's file Status, seen by every rank (so none waits in a collective
  // that rank 0 left).
  Status agree(const Status& rank0) {
    int64_t code = int64_t(rank0.code());
    CRUCIBLE_RETURN_IF_ERROR(comm_.broadcast(&code, sizeof code, 0));
    if (comm_.rank() == 0 || code == 0) return rank0;
    return Status::io("[sim] md: rank 0 could not write the workload's output (see its message)");
  }

  // This rank's share of the start (md/initial_state.h): the same atoms on
  // any rank count.
  void init_atoms() {
    const md::InitialAtoms all =
        md::initial_atoms(c_.cells, L_, N_, start_.pos, seed_, c_.temperature);
    std::vector<int64_t> ids;
    std::vector<double> px, py, pz, vx, vy, vz;
    for (int64_t id = 0; id < N_; ++id) {
      const double* p = all.pos.data() + 3 * id;
      const double* v = all.vel.data() + 3 * id;
      if (dom_.owner_of(p[0]) != comm_.rank()) continue;
      ids.push_back(id);
      px.push_back(p[0]), py.push_back(p[1]), pz.push_back(p[2]);
      vx.push_back(v[0]), vy.push_back(v[1]), vz.push_back(v[2]);
    }
    dom_.set_owned(std::move(ids), std::move(px), std::move(py), std::move(pz), std::move(vx),
                   std::move(vy), std::move(vz));
    start_ = {};
  }

  // Forces; with energy, pe_ and virial_ := the global sums (tail excluded).
  Status compute_forces(bool energy) {
    if (c_.reproducible) {
      md::ExactSum pe, w;
      md::lj_full_sorted(dom_, c_.cutoff, energy, &pe, &w);
      if (!energy) return Status::ok();
      CRUCIBLE_RETURN_IF_ERROR(pe.allreduce(comm_));
      CRUCIBLE_RETURN_IF_ERROR(w.allreduce(comm_));
      pe_ = pe.value(), virial_ = w.value();
      return Status::ok();
    }
    const md::LjSums s = md::lj_half(dom_, c_.cutoff, energy);
    CRUCIBLE_RETURN_IF_ERROR(dom_.reverse_forces());
    if (!energy) return Status::ok();
    double sums[2] = {s.pe, s.virial};
    if (comm_.size() > 1) CRUCIBLE_RETURN_IF_ERROR(comm_.allreduce(sums, 2));
    pe_ = sums[0], virial_ = sums[1];
    return Status::ok();
  }

  Status kinetic() {
    if (c_.reproducible) {
      md::ExactSum ke;
      for (int i = 0; i < dom_.nlocal; ++i)
        ke.add(0.5 * (dom_.vx[i] * dom_.vx[i] + dom_.vy[i] * dom_.vy[i] + dom_.vz[i] * dom_.vz[i]));
      CRUCIBLE_RETURN_IF_ERROR(ke.allreduce(comm_));
      ke_ = ke.value();
      return Status::ok();
    }
    double ke = 0;
    for (int i = 0; i < dom_.nlocal; ++i)
      ke += 0.5 * (dom_.vx[i] * dom_.vx[i] + dom_.vy[i] * dom_.vy[i] + dom_.vz[i] * dom_.vz[i]);
    if (comm_.size() > 1) CRUCIBLE_RETURN_IF_ERROR(comm_.allreduce(&ke, 1));
    ke_ = ke;
    return Status::ok();
  }

  // Berendsen weak coupling (J. Chem. Phys. 81, 3684 (1984)): velocities
  // scaled by lambda = sqrt(1 + dt/tau (T0/T - 1)), clamped to [0.8, 1.25].
  Status berendsen() {
    const double T = temperature();
    if (!(T > 0)) return Status::ok();
    const double l2 = 1.0 + c_.dt / c_.thermostat_tau * (c_.temperature / T - 1.0);
    const double lambda = std::clamp(std::sqrt(std::max(l2, 0.0)), 0.8, 1.25);
    for (int i = 0; i < dom_.nlocal; ++i)
      dom_.vx[i] *= lambda, dom_.vy[i] *= lambda, dom_.vz[i] *= lambda;
    return kinetic();
  }

  // The thermodynamic sample of this step (pe_ and virial_ are current).
  Status sample() {
    const double rho = rho_;
    u_atom_ = pe_ / double(N_) + md::lj_tail_energy(rho, c_.cutoff);
    e_atom_ = ke_ / double(N_) + u_atom_;
    pressure_ = (2.0 * ke_ + virial_) / (3.0 * V_) + md::lj_tail_pressure(rho, c_.cutoff);
    const std::string at = " at step " + std::to_string(step_);
    if (!std::isfinite(e_atom_) || !std::isfinite(pressure_))
      return Status::invalid("[sim] md: the energy became non-finite" + at +
                             ": the time step md.dt = " + fmt("%g", c_.dt) +
                             " is too large (or atoms overlap)");
    // A blow-up: the energy per atom changed faster than the limit (per step,
    // averaged since the last sample; a thermostat moves it by ~1e-3 per step).
    const double rate =
        last_sample_ >= 0 ? std::fabs(e_atom_ - e_last_) / double(step_ - last_sample_) : 0.0;
    if (rate > c_.max_energy_jump)
      return Status::invalid("[sim] md: the total energy changed by " +
                             fmt("%.3g", e_atom_ - e_last_) + " epsilon per atom between steps " +
                             std::to_string(last_sample_) + " and " + std::to_string(step_) +
                             " (limit md.max_energy_jump = " + fmt("%g", c_.max_energy_jump) +
                             " per step): the time step md.dt = " + fmt("%g", c_.dt) +
                             " is too large (or atoms overlap)");
    e_last_ = e_atom_, last_sample_ = step_;
    if (step_ > c_.equil_steps) {
      if (!has_e0_) has_e0_ = true, e0_ = e_atom_;
      samples_.insert(samples_.end(), {double(step_), temperature(), pressure_, u_atom_, e_atom_});
    }
    return Status::ok();
  }

  Status dump() {
    std::vector<double> pos;
    CRUCIBLE_RETURN_IF_ERROR(dom_.gather(N_, false, &pos));
    Status s;
    if (comm_.rank() == 0) s = traj_.append(pos, L_, step_, step_ * c_.dt);
    return agree(s);
  }

  nlohmann::json summary() const {
    nlohmann::json j = md::nve_summary(samples_, rho_);
    j["atoms"] = N_, j["box_length"] = L_, j["density"] = rho_;
    j["mode"] = c_.reproducible ? "reproducible" : "fast";
    j["ranks"] = comm_.size(), j["neighbor_rebuilds"] = rebuilds_;
    return j;
  }

  MdConfig c_;
  comm::Comm& comm_;
  uint64_t seed_;
  int64_t N_;
  double L_, V_, rho_;
  md::StartConfig start_;  // released once the atoms are placed
  md::Domain dom_;
  std::string run_dir_;
  int64_t step_ = 0, last_rebuild_ = 0, rebuilds_ = 0;
  bool loaded_ = false, thermo_now_ = false, ke_now_ = false;
  double ke_ = 0, pe_ = 0, virial_ = 0;            // global sums (pe_ without the tail)
  double u_atom_ = 0, e_atom_ = 0, pressure_ = 0;  // of the last sample, tail included
  double e_last_ = 0;                              // E/N of the last sample (blow-up check)
  int64_t last_sample_ = -1;
  bool has_e0_ = false;
  double e0_ = 0;                // E/N of the first NVE sample (drift reference)
  std::vector<double> samples_;  // NVE samples, md::kSampleWidth values each
  md::XyzTrajectory traj_;
  uint64_t traj_bytes_ = 0;
};

}  // namespace

Result<std::unique_ptr<Workload>> make_md_workload(const MdConfig& c, comm::Comm& comm,
                                                   uint64_t seed) {
  CRUCIBLE_RETURN_IF_ERROR(validate_md(c));
  md::StartConfig start;
  double L = md_box_length(c);
  const double rg = c.cutoff + c.skin;
  if (!c.start_file.empty()) {
    auto s = md::read_xyz_start(c.start_file);
    if (!s) return s.status();
    start = std::move(*s);
    L = start.box;
    if (L < 2 * rg)
      return Status::invalid("[config] md.start_file " + c.start_file + ": box length " +
                             fmt("%.4g", L) + " sigma is smaller than two cut-offs plus skin (" +
                             fmt("%g", 2 * rg) + ")");
  }
  if (L / comm.size() < rg)
    return Status::invalid(
        "[config] md: " + std::to_string(comm.size()) + " ranks cut the box (" + fmt("%.4g", L) +
        " sigma) into slabs thinner than md.cutoff + md.skin (" + fmt("%g", rg) +
        "): use at most " + std::to_string(int(L / rg)) + " ranks or raise md.cells");
  return std::unique_ptr<Workload>(new MdWorkload(c, comm, seed, std::move(start)));
}

}  // namespace crucible::sim

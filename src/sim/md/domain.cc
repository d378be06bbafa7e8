#include "sim/md/domain.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>

#include "core/trace.h"

namespace crucible::sim::md {

namespace {

// Into [0, L) for a point at most one box length outside it. The second test
// catches -tiny + L rounding to L.
inline double wrap(double v, double L) {
  if (v < 0) v += L;
  if (v >= L) v -= L;
  return v;
}

template <typename T>
void put(std::vector<uint8_t>& b, const T& v) {
  const size_t n = b.size();
  b.resize(n + sizeof(T));
  std::memcpy(b.data() + n, &v, sizeof(T));
}
template <typename T>
T get(const uint8_t*& p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  p += sizeof(T);
  return v;
}

// exchange() uses tag and tag + 1.
enum Tag {
  kTagGhosts = 7100,
  kTagMigrateR = 7110,
  kTagMigrateL = 7120,
  kTagPos = 7130,
  kTagForce = 7140
};

}  // namespace

Domain::Domain(comm::Comm& comm, double box, double cutoff, double skin, bool full_sorted)
    : comm_(comm),
      L_(box),
      rc_(cutoff),
      rg_(cutoff + skin),
      full_sorted_(full_sorted),
      P_(comm.size()),
      rank_(comm.rank()) {
  const double w = L_ / P_;
  lo_ = rank_ * w;
  hi_ = rank_ == P_ - 1 ? L_ : (rank_ + 1) * w;
  const double lo3[3] = {lo_ - rg_, -rg_, -rg_},
               ext3[3] = {hi_ - lo_ + 2 * rg_, L_ + 2 * rg_, L_ + 2 * rg_};
  // Bins of at least rg/2: the stencil of bins that can hold a neighbour
  // within rg spans +-2 bins, about 1.7x less volume to scan than 27 bins of rg.
  for (int d = 0; d < 3; ++d) {
    nb_[d] = std::max(1, int(ext3[d] / (0.5 * rg_)));
    borg_[d] = lo3[d];
    bsize_[d] = ext3[d] / nb_[d];
  }
  int reach[3];
  for (int d = 0; d < 3; ++d) reach[d] = std::min(nb_[d] - 1, int(std::ceil(rg_ / bsize_[d])));
  for (int oz = -reach[2]; oz <= reach[2]; ++oz)
    for (int oy = -reach[1]; oy <= reach[1]; ++oy)
      for (int ox = -reach[0]; ox <= reach[0]; ++ox) {
        const int o[3] = {ox, oy, oz};
        double gap2 = 0;  // squared distance between the closest points of the two bins
        for (int d = 0; d < 3; ++d) {
          const double g = std::max(0, std::abs(o[d]) - 1) * bsize_[d];
          gap2 += g * g;
        }
        if (gap2 < rg_ * rg_) stencil_.push_back({ox, oy, oz});
      }
}

int Domain::owner_of(double xw) const {
  const int r = int(xw / (L_ / P_));
  return std::clamp(r, 0, P_ - 1);
}

void Domain::set_owned(std::vector<int64_t> ids, std::vector<double> px, std::vector<double> py,
                       std::vector<double> pz, std::vector<double> pvx, std::vector<double> pvy,
                       std::vector<double> pvz) {
  nlocal = int(ids.size());
  nghost = 0;
  id = std::move(ids);
  x = std::move(px), y = std::move(py), z = std::move(pz);
  vx = std::move(pvx), vy = std::move(pvy), vz = std::move(pvz);
  fx.assign(nlocal, 0.0), fy.assign(nlocal, 0.0), fz.assign(nlocal, 0.0);
  xr = x, yr = y, zr = z;
}

int Domain::bin_of(double px, double py, double pz) const {
  const int bx = std::clamp(int((px - borg_[0]) / bsize_[0]), 0, nb_[0] - 1);
  const int by = std::clamp(int((py - borg_[1]) / bsize_[1]), 0, nb_[1] - 1);
  const int bz = std::clamp(int((pz - borg_[2]) / bsize_[2]), 0, nb_[2] - 1);
  return (bz * nb_[1] + by) * nb_[0] + bx;
}

void Domain::resize_ghosts(int n) {
  nghost = n;
  const size_t all = size_t(nlocal) + n;
  id.resize(all), x.resize(all), y.resize(all), z.resize(all);
  fx.resize(all), fy.resize(all), fz.resize(all);
}

double Domain::max_displacement2() const {
  double m = 0;
  for (int i = 0; i < nlocal; ++i) {
    const double dx = x[i] - xr[i], dy = y[i] - yr[i], dz = z[i] - zr[i];
    m = std::max(m, dx * dx + dy * dy + dz * dz);
  }
  return m;
}

Status Domain::exchange(const Swap& s, const std::vector<uint8_t>& out, std::vector<uint8_t>* in,
                        int tag) {
  // Message sizes first: a receive must name the exact size that was sent.
  int64_t n_out = int64_t(out.size()), n_in = 0;
  CRUCIBLE_RETURN_IF_ERROR(
      comm_.sendrecv(&n_out, sizeof n_out, s.send_to, &n_in, sizeof n_in, s.recv_from, tag));
  in->resize(size_t(n_in));
  return comm_.sendrecv(out.data(), out.size(), s.send_to, in->data(), in->size(), s.recv_from,
                        tag + 1);
}

Status Domain::rebuild() {
  trace::Scope scope("neighbor", "sim");
  nghost = 0;
  resize_ghosts(0);
  for (int i = 0; i < nlocal; ++i) {
    x[i] = wrap(x[i], L_), y[i] = wrap(y[i], L_), z[i] = wrap(z[i], L_);
    if (!(x[i] >= 0 && x[i] < L_ && y[i] >= 0 && y[i] < L_ && z[i] >= 0 && z[i] < L_))
      return Status::invalid(
          "[sim] md: atom " + std::to_string(id[i]) +
          " left the box between neighbour-list builds (non-finite or far position): "
          "the time step md.dt is too large or atoms overlap");
  }
  CRUCIBLE_RETURN_IF_ERROR(migrate());
  sort_owned();
  xr = x, yr = y, zr = z;
  xr.resize(nlocal), yr.resize(nlocal), zr.resize(nlocal);
  CRUCIBLE_RETURN_IF_ERROR(borders());
  build_lists();
  ++rebuilds_;
  return Status::ok();
}

Status Domain::migrate() {
  if (P_ == 1) return Status::ok();
  // Atoms that left the slab go to the nearer neighbour (periodically).
  std::vector<uint8_t> to_right, to_left;
  int keep = 0;
  for (int i = 0; i < nlocal; ++i) {
    const int o = owner_of(x[i]);
    if (o == rank_) {
      id[keep] = id[i], x[keep] = x[i], y[keep] = y[i], z[keep] = z[i];
      vx[keep] = vx[i], vy[keep] = vy[i], vz[keep] = vz[i];
      ++keep;
      continue;
    }
    std::vector<uint8_t>& b = ((o - rank_ + P_) % P_ <= P_ / 2) ? to_right : to_left;
    put(b, id[i]), put(b, x[i]), put(b, y[i]), put(b, z[i]), put(b, vx[i]), put(b, vy[i]),
        put(b, vz[i]);
  }
  nlocal = keep;
  Swap right, left;
  right.send_to = (rank_ + 1) % P_, right.recv_from = (rank_ - 1 + P_) % P_;
  left.send_to = right.recv_from, left.recv_from = right.send_to;
  std::vector<uint8_t> from_left, from_right;
  CRUCIBLE_RETURN_IF_ERROR(exchange(right, to_right, &from_left, kTagMigrateR));
  CRUCIBLE_RETURN_IF_ERROR(exchange(left, to_left, &from_right, kTagMigrateL));
  id.resize(nlocal), x.resize(nlocal), y.resize(nlocal), z.resize(nlocal);
  vx.resize(nlocal), vy.resize(nlocal), vz.resize(nlocal);
  constexpr size_t kAtomBytes = sizeof(int64_t) + 6 * sizeof(double);
  for (const std::vector<uint8_t>* b : {&from_left, &from_right}) {
    for (const uint8_t* p = b->data(); p + kAtomBytes <= b->data() + b->size();) {
      id.push_back(get<int64_t>(p));
      x.push_back(get<double>(p)), y.push_back(get<double>(p)), z.push_back(get<double>(p));
      vx.push_back(get<double>(p)), vy.push_back(get<double>(p)), vz.push_back(get<double>(p));
      if (owner_of(x.back()) != rank_)
        return Status::invalid(
            "[sim] md: atom " + std::to_string(id.back()) +
            " crossed more than one slab between neighbour-list builds: the time step "
            "md.dt is too large (or use fewer ranks)");
    }
  }
  nlocal = int(id.size());
  fx.assign(nlocal, 0.0), fy.assign(nlocal, 0.0), fz.assign(nlocal, 0.0);
  return Status::ok();
}

void Domain::sort_owned() {
  // (cell, id): neighbours sit close in memory, and the order is a function
  // of the positions alone (a resumed run rebuilds the same order).
  std::vector<int64_t> key(nlocal);
  for (int i = 0; i < nlocal; ++i) key[i] = bin_of(x[i], y[i], z[i]);
  std::vector<int> perm(nlocal);
  std::iota(perm.begin(), perm.end(), 0);
  std::sort(perm.begin(), perm.end(),
            [&](int a, int b) { return key[a] != key[b] ? key[a] < key[b] : id[a] < id[b]; });
  auto apply = [&](auto& v) {
    auto old = v;
    for (int i = 0; i < nlocal; ++i) v[i] = old[perm[i]];
  };
  apply(id), apply(x), apply(y), apply(z), apply(vx), apply(vy), apply(vz);
}

Status Domain::borders() {
  swaps_.clear();
  for (int dim = 0; dim < 3; ++dim) {
    const int n_before = nlocal + nghost;  // this dimension's ghosts are not sent again in it
    const bool across = dim == 0 && P_ > 1;
    const double lo = dim == 0 ? lo_ : 0.0, hi = dim == 0 ? hi_ : L_;
    const bool first = dim != 0 || rank_ == 0, last = dim != 0 || rank_ == P_ - 1;
    for (int dir = 0; dir < 2; ++dir) {  // 0: towards lower coordinates, 1: towards higher
      Swap s;
      s.dim = dim;
      s.local = !across;
      s.send_to = dir == 0 ? (rank_ - 1 + P_) % P_ : (rank_ + 1) % P_;
      s.recv_from = dir == 0 ? (rank_ + 1) % P_ : (rank_ - 1 + P_) % P_;
      if (s.local) s.send_to = s.recv_from = rank_;
      s.shift = dir == 0 ? (first ? L_ : 0.0) : (last ? -L_ : 0.0);
      const double* c = dim == 0 ? x.data() : dim == 1 ? y.data() : z.data();
      for (int i = 0; i < n_before; ++i)
        if (dir == 0 ? c[i] < lo + rg_ : c[i] >= hi - rg_) s.send.push_back(i);
      s.recv_first = nlocal + nghost;
      if (s.local) {
        const int n = int(s.send.size());
        resize_ghosts(nghost + n);
        for (int k = 0; k < n; ++k) {
          const int g = s.recv_first + k, src = s.send[k];
          id[g] = id[src], x[g] = x[src], y[g] = y[src], z[g] = z[src];
          (dim == 0 ? x : dim == 1 ? y : z)[g] += s.shift;
        }
        s.recv_count = n;
      } else {
        out_.clear();
        for (int i : s.send)
          put(out_, id[i]), put(out_, x[i] + s.shift), put(out_, y[i]), put(out_, z[i]);
        CRUCIBLE_RETURN_IF_ERROR(exchange(s, out_, &in_, kTagGhosts));
        constexpr size_t kGhostBytes = sizeof(int64_t) + 3 * sizeof(double);
        const int n = int(in_.size() / kGhostBytes);
        resize_ghosts(nghost + n);
        const uint8_t* p = in_.data();
        for (int k = 0; k < n; ++k) {
          const int g = s.recv_first + k;
          id[g] = get<int64_t>(p), x[g] = get<double>(p), y[g] = get<double>(p),
          z[g] = get<double>(p);
        }
        s.recv_count = n;
      }
      swaps_.push_back(std::move(s));
    }
  }
  return Status::ok();
}

void Domain::build_lists() {
  const int nall = nlocal + nghost, nbins = nb_[0] * nb_[1] * nb_[2];
  std::vector<int> bin(nall);
  bin_head_.assign(nbins + 1, 0);
  for (int i = 0; i < nall; ++i) ++bin_head_[(bin[i] = bin_of(x[i], y[i], z[i])) + 1];
  for (int b = 0; b < nbins; ++b) bin_head_[b + 1] += bin_head_[b];
  bin_atoms_.resize(nall);
  {
    std::vector<int> fill(bin_head_.begin(), bin_head_.end() - 1);
    for (int i = 0; i < nall; ++i) bin_atoms_[fill[bin[i]]++] = i;
  }
  // Coordinates in bin order: the candidate scan reads them contiguously.
  bin_x_.resize(nall), bin_y_.resize(nall), bin_z_.resize(nall);
  for (int k = 0; k < nall; ++k) {
    const int j = bin_atoms_[k];
    bin_x_[k] = x[j], bin_y_[k] = y[j], bin_z_[k] = z[j];
  }
  const double rg2 = rg_ * rg_;
  nbr_start.assign(nlocal + 1, 0);
  nbr.resize(std::max<size_t>(nbr.size(), size_t(nlocal) * (full_sorted_ ? 80 : 40)));
  // Raw pointers: the scan must not reload vector members after each store.
  const double *bxs = bin_x_.data(), *bys = bin_y_.data(), *bzs = bin_z_.data();
  const double *px = x.data(), *py = y.data(), *pz = z.data();
  const int *head = bin_head_.data(), *atoms = bin_atoms_.data();
  size_t count = 0;
  int* out = nbr.data();
  for (int i = 0; i < nlocal; ++i) {
    const double xi = px[i], yi = py[i], zi = pz[i];
    const int b = bin[i], bx = b % nb_[0], by = (b / nb_[0]) % nb_[1], bz = b / (nb_[0] * nb_[1]);
    const size_t begin = count;
    for (const auto& o : stencil_) {
      const int kx = bx + o[0], ky = by + o[1], kz = bz + o[2];
      if (kx < 0 || ky < 0 || kz < 0 || kx >= nb_[0] || ky >= nb_[1] || kz >= nb_[2]) continue;
      const int nbin = (kz * nb_[1] + ky) * nb_[0] + kx;
      const int k0 = head[nbin], k1 = head[nbin + 1];
      if (count + size_t(k1 - k0) > nbr.size()) {
        nbr.resize(2 * nbr.size() + size_t(k1 - k0));
        out = nbr.data();
      }
      // Branch-free: about a quarter of the candidates are kept, a branch on
      // that would be mispredicted often. The candidate is always written and
      // the count advances by whether it stays.
      for (int k = k0; k < k1; ++k) {
        const double dx = xi - bxs[k], dy = yi - bys[k], dz = zi - bzs[k];
        const int j = atoms[k];
        bool keep = (dx * dx + dy * dy + dz * dz < rg2) & (j != i);
        if (!full_sorted_) {
          // Half list: an owned pair once (j > i); a ghost only when it lies
          // above i in (z, y, x) -- the other image of the pair is below.
          const bool above =
              (bzs[k] > zi) | ((bzs[k] == zi) & ((bys[k] > yi) | ((bys[k] == yi) & (bxs[k] > xi))));
          keep &= j < nlocal ? j > i : above;
        }
        out[count] = j;
        count += keep;
      }
    }
    if (full_sorted_)
      std::sort(out + begin, out + count, [&](int a, int c) { return id[a] < id[c]; });
    nbr_start[i + 1] = int(count);
  }
}

Status Domain::gather(int64_t natoms, bool with_all, std::vector<double>* out) {
  trace::Scope scope("gather", "sim");
  const int w = with_all ? kAtomWidth : 4;  // id first
  int64_t mine = nlocal, most = 0;
  std::vector<int64_t> counts(P_);
  CRUCIBLE_RETURN_IF_ERROR(comm_.allgather_bytes(&mine, sizeof mine, counts.data()));
  for (int64_t c : counts) most = std::max(most, c);
  // Padded to the largest count: allgather_bytes takes equal pieces.
  std::vector<double> send(size_t(most) * w, 0.0), recv(send.size() * P_);
  for (int i = 0; i < nlocal; ++i) {
    double* r = send.data() + size_t(i) * w;
    r[0] = double(id[i]);
    if (!with_all) {
      r[1] = x[i] - L_ * std::floor(x[i] / L_), r[2] = y[i] - L_ * std::floor(y[i] / L_);
      r[3] = z[i] - L_ * std::floor(z[i] / L_);
      continue;
    }
    const double vals[12] = {x[i],  y[i],  z[i],  vx[i], vy[i], vz[i],
                             fx[i], fy[i], fz[i], xr[i], yr[i], zr[i]};
    std::copy(vals, vals + 12, r + 1);
  }
  CRUCIBLE_RETURN_IF_ERROR(
      comm_.allgather_bytes(send.data(), send.size() * sizeof(double), recv.data()));
  const int ow = with_all ? kAtomWidth : 3;
  out->assign(size_t(natoms) * ow, 0.0);
  for (int r = 0; r < P_; ++r)
    for (int64_t k = 0; k < counts[r]; ++k) {
      const double* rec = recv.data() + (size_t(r) * most + k) * w;
      const int64_t a = int64_t(rec[0]);
      if (a < 0 || a >= natoms)
        return Status::internal("[sim] md: gathered an atom id out of range");
      if (with_all)
        std::copy(rec, rec + kAtomWidth, out->data() + a * kAtomWidth);
      else
        std::copy(rec + 1, rec + 4, out->data() + a * 3);
    }
  return Status::ok();
}

Status Domain::forward_positions() {
  trace::Scope scope("comm_positions", "sim");
  for (const Swap& s : swaps_) {
    double* c = s.dim == 0 ? x.data() : s.dim == 1 ? y.data() : z.data();
    if (s.local) {
      for (size_t k = 0; k < s.send.size(); ++k) {
        const int g = s.recv_first + int(k), src = s.send[k];
        x[g] = x[src], y[g] = y[src], z[g] = z[src];
        c[g] += s.shift;
      }
      continue;
    }
    std::vector<double> out(3 * s.send.size()), in(3 * size_t(s.recv_count));
    for (size_t k = 0; k < s.send.size(); ++k) {
      const int i = s.send[k];
      out[3 * k] = x[i] + s.shift, out[3 * k + 1] = y[i], out[3 * k + 2] = z[i];
    }
    CRUCIBLE_RETURN_IF_ERROR(comm_.sendrecv(out.data(), out.size() * sizeof(double), s.send_to,
                                            in.data(), in.size() * sizeof(double), s.recv_from,
                                            kTagPos));
    for (int k = 0; k < s.recv_count; ++k) {
      const int g = s.recv_first + k;
      x[g] = in[3 * k], y[g] = in[3 * k + 1], z[g] = in[3 * k + 2];
    }
  }
  return Status::ok();
}

Status Domain::reverse_forces() {
  trace::Scope scope("comm_forces", "sim");
  for (auto it = swaps_.rbegin(); it != swaps_.rend(); ++it) {
    const Swap& s = *it;
    if (s.local) {
      for (size_t k = 0; k < s.send.size(); ++k) {
        const int g = s.recv_first + int(k), dst = s.send[k];
        fx[dst] += fx[g], fy[dst] += fy[g], fz[dst] += fz[g];
      }
      continue;
    }
    std::vector<double> out(3 * size_t(s.recv_count)), in(3 * s.send.size());
    for (int k = 0; k < s.recv_count; ++k) {
      const int g = s.recv_first + k;
      out[3 * k] = fx[g], out[3 * k + 1] = fy[g], out[3 * k + 2] = fz[g];
    }
    CRUCIBLE_RETURN_IF_ERROR(comm_.sendrecv(out.data(), out.size() * sizeof(double), s.recv_from,
                                            in.data(), in.size() * sizeof(double), s.send_to,
                                            kTagForce));
    for (size_t k = 0; k < s.send.size(); ++k) {
      const int dst = s.send[k];
      fx[dst] += in[3 * k], fy[dst] += in[3 * k + 1], fz[dst] += in[3 * k + 2];
    }
  }
  return Status::ok();
}

}  // namespace crucible::sim::md

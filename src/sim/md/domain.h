// md::Domain: the atoms one rank owns, their ghost images and the Verlet
// neighbour lists of the Lennard-Jones workload.
//
// Decomposition: the periodic cubic box [0, L)^3 is cut into P slabs along x
// (P = comm.size(), each at least r_c + skin wide). A rank owns the atoms
// whose wrapped x lies in its slab. Ghosts are copies of atoms, shifted by a
// box length where they cross the periodic boundary, within rg = r_c + skin
// of the slab: built by six swaps (x left/right through Comm::sendrecv, then
// y and z inside the rank, which also copies earlier ghosts so corners are
// covered) -- the scheme of LAMMPS (Plimpton, J. Comp. Phys. 117, 1 (1995)).
// The force loop therefore never applies a minimum image.
//
// Between rebuilds the ghosts keep their identity and only their positions
// are refreshed (forward_positions); in the fast mode forces on ghosts are
// sent back to their owners (reverse_forces). A rebuild wraps positions into
// the box, migrates atoms whose slab changed, sorts the owned atoms by
// (cell, id) -- so the local order depends only on the positions -- builds
// the ghosts and the lists. Lists hold, per owned atom, indices into the
// local+ghost arrays:
//  - half (fast mode): each pair once over all ranks (owned j > i; a ghost
//    only when it lies "above" i in (z, y, x)), Newton's third law applied;
//  - full, sorted by global id (reproducible mode): every neighbour, so an
//    atom's force is summed in the same order on any number of ranks.
//
// Arrays are structure-of-arrays, length nlocal + nghost (velocities and
// x_ref only nlocal). Not thread-safe; collective calls are marked.
#pragma once
#include <array>
#include <cstdint>
#include <vector>

#include "comm/comm.h"
#include "core/status.h"

namespace crucible::sim::md {

struct Swap {
  int dim = 0;  // 0 x, 1 y, 2 z
  int send_to = 0, recv_from = 0;
  bool local = true;                   // copy inside the rank (no Comm call)
  double shift = 0;                    // added to coordinate `dim` of what is sent
  std::vector<int> send;               // indices of the atoms sent
  int recv_first = 0, recv_count = 0;  // where their copies land
};

class Domain {
 public:
  Domain(comm::Comm& comm, double box, double cutoff, double skin, bool full_sorted);

  // ---- owned atoms (first nlocal entries) and ghosts after them ----
  std::vector<int64_t> id;
  std::vector<double> x, y, z;     // positions, nlocal + nghost
  std::vector<double> vx, vy, vz;  // velocities, nlocal
  std::vector<double> fx, fy, fz;  // forces, nlocal + nghost
  std::vector<double> xr, yr, zr;  // positions at the last rebuild, nlocal
  int nlocal = 0, nghost = 0;

  // ---- Verlet lists (CSR over owned atoms) ----
  std::vector<int> nbr_start;  // nlocal + 1
  std::vector<int> nbr;        // neighbour indices into the local+ghost arrays
  bool full_sorted() const { return full_sorted_; }

  double box() const { return L_; }
  double slab_lo() const { return lo_; }
  double slab_hi() const { return hi_; }
  int owner_of(double xw) const;  // the rank whose slab holds wrapped x

  // Replaces the owned atoms (positions wrapped, all on their owner).
  void set_owned(std::vector<int64_t> ids, std::vector<double> px, std::vector<double> py,
                 std::vector<double> pz, std::vector<double> pvx, std::vector<double> pvy,
                 std::vector<double> pvz);
  // Collective: wrap, migrate, sort, ghosts, lists; x_ref := positions.
  Status rebuild();
  // Collective: ghost positions := their owners' positions (+ shift).
  Status forward_positions();
  // Collective (fast mode): adds ghost forces into their owners' forces.
  Status reverse_forces();
  // Largest squared displacement of an owned atom since the last rebuild (local).
  double max_displacement2() const;
  int64_t rebuilds() const { return rebuilds_; }

  // Collective: every rank's owned atoms in id order (ids 0..natoms-1), on
  // every rank: kAtomWidth values each (id, x, v, f, x_ref) when with_all,
  // else the 3 coordinates wrapped into the box.
  static constexpr int kAtomWidth = 13;
  Status gather(int64_t natoms, bool with_all, std::vector<double>* out);

 private:
  Status migrate();
  void sort_owned();
  Status borders();
  void build_lists();
  Status exchange(const Swap& s, const std::vector<uint8_t>& out, std::vector<uint8_t>* in,
                  int tag);
  int bin_of(double px, double py, double pz) const;
  void resize_ghosts(int n);

  comm::Comm& comm_;
  double L_, rc_, rg_;
  bool full_sorted_;
  int P_, rank_;
  double lo_, hi_;
  int nb_[3];                                // bins per dimension over the slab plus ghost margins
  double borg_[3];                           // bin grid origin
  double bsize_[3];                          // bin edge (>= rg / 2)
  std::vector<std::array<int, 3>> stencil_;  // bin offsets that can hold a neighbour within rg
  std::vector<Swap> swaps_;
  std::vector<int> bin_head_, bin_atoms_;      // counting-sort bins (CSR)
  std::vector<double> bin_x_, bin_y_, bin_z_;  // coordinates of bin_atoms_, in that order
  std::vector<uint8_t> out_, in_;              // message buffers, reused
  int64_t rebuilds_ = 0;
};

}  // namespace crucible::sim::md

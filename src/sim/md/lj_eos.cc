#include "sim/md/lj_eos.h"

#include <cmath>

namespace crucible::sim::md {

namespace {

// x1..x32 of Johnson, Zollweg & Gubbins (1993), Table 10 (x[0] unused).
constexpr double kX[33] = {0.0,
                           0.8623085097507421,
                           2.976218765822098,
                           -8.402230115796038,
                           0.1054136629203555,
                           -0.8564583828174598,
                           1.582759470107601,
                           0.7639421948305453,
                           1.753173414312048,
                           2.798291772190376e3,
                           -4.8394220260857657e-2,
                           0.9963265197721935,
                           -3.698000291272493e1,
                           2.084012299434647e1,
                           8.305402124717285e1,
                           -9.574799715203068e2,
                           -1.477746229234994e2,
                           6.398607852471505e1,
                           1.603993673294834e1,
                           6.805916615864377e1,
                           -2.791293578795945e3,
                           -6.245128304568454,
                           -8.116836104958410e3,
                           1.488735559561229e1,
                           -1.059346754655084e4,
                           -1.131607632802822e2,
                           -8.867771540418822e3,
                           -3.986982844450543e1,
                           -4.689270299917261e3,
                           2.593535277438717e2,
                           -2.694523589434903e3,
                           -7.218487631550215e2,
                           1.721802063863269e2};
constexpr double kGamma = 3.0;

// A coefficient is a sum of x_k T^p (Tables 5 and 6). Its energy partner
// (Tables 7 and 8: c_i, d_i) is d(coef/T)/d(1/T) = sum of x_k (1 - p) T^p.
struct Term {
  int k;
  double p;
};
struct Coef {
  int n;
  Term t[5];
};
constexpr Coef kA[8] = {
    {5, {{1, 1}, {2, 0.5}, {3, 0}, {4, -1}, {5, -2}}},
    {4, {{6, 1}, {7, 0}, {8, -1}, {9, -2}}},
    {3, {{10, 1}, {11, 0}, {12, -1}}},
    {1, {{13, 0}}},
    {2, {{14, -1}, {15, -2}}},
    {1, {{16, -1}}},
    {2, {{17, -1}, {18, -2}}},
    {1, {{19, -2}}},
};
constexpr Coef kB[6] = {
    {2, {{20, -2}, {21, -3}}}, {2, {{22, -2}, {23, -4}}}, {2, {{24, -2}, {25, -3}}},
    {2, {{26, -2}, {27, -4}}}, {2, {{28, -2}, {29, -3}}}, {3, {{30, -2}, {31, -3}, {32, -4}}},
};

double value(const Coef& c, double T) {
  double s = 0;
  for (int i = 0; i < c.n; ++i) s += kX[c.t[i].k] * std::pow(T, c.t[i].p);
  return s;
}
double energy_partner(const Coef& c, double T) {
  double s = 0;
  for (int i = 0; i < c.n; ++i) s += kX[c.t[i].k] * (1.0 - c.t[i].p) * std::pow(T, c.t[i].p);
  return s;
}

}  // namespace

LjEosPoint jzg_eos(double rho, double T) {
  const double F = std::exp(-kGamma * rho * rho);
  // G_1 = (1 - F) / (2 gamma); G_i = -(F rho^(2(i-1)) - 2 (i-1) G_(i-1)) / (2 gamma)  (Table 9).
  double G[6];
  G[0] = (1.0 - F) / (2.0 * kGamma);
  for (int i = 2; i <= 6; ++i)
    G[i - 1] = -(F * std::pow(rho, 2 * (i - 1)) - 2.0 * (i - 1) * G[i - 2]) / (2.0 * kGamma);
  LjEosPoint out;
  double p_res = 0;
  for (int i = 1; i <= 8; ++i) {
    const double a = value(kA[i - 1], T), rho_i = std::pow(rho, i);
    out.helmholtz += a * rho_i / i;
    out.energy += energy_partner(kA[i - 1], T) * rho_i / i;
    p_res += a * rho_i * rho;
  }
  for (int i = 1; i <= 6; ++i) {
    const double b = value(kB[i - 1], T);
    out.helmholtz += b * G[i - 1];
    out.energy += energy_partner(kB[i - 1], T) * G[i - 1];
    p_res += F * b * std::pow(rho, 2 * i + 1);
  }
  out.pressure = rho * T + p_res;
  return out;
}

}  // namespace crucible::sim::md

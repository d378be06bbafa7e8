#include "sim/climate/williamson.h"

#include <algorithm>
#include <cmath>

#include "sim/climate/grid.h"

namespace crucible::sim::climate {

namespace {

// Case 2 (Williamson eqs. 90-95): u0 = 2 pi a / 12 days, g h0 = 2.94e4 m^2/s^2.
PointState case2(double lam, double phi, double alpha) {
  const double u0 = 2 * kPi * kRadius / (12.0 * 86400.0);
  const double gh0 = 2.94e4;
  const double ca = std::cos(alpha), sa = std::sin(alpha);
  const double cl = std::cos(lam), sl = std::sin(lam), cp = std::cos(phi), sp = std::sin(phi);
  const double s = -cl * cp * sa + sp * ca;  // sine of the latitude in the rotated frame
  PointState p;
  p.u = u0 * (cp * ca + cl * sp * sa);
  p.v = -u0 * sl * sa;
  p.h = (gh0 - (kRadius * kOmega * u0 + u0 * u0 / 2) * s * s) / kGravity;
  return p;
}

// Case 5 (eqs. 96-99 with alpha = 0): h0 = 5960 m, u0 = 20 m/s, a conical
// mountain of 2000 m and radius pi/9 centred at (3 pi/2, pi/6).
double mountain(double lam, double phi) {
  const double R = kPi / 9, lc = 3 * kPi / 2, pc = kPi / 6;
  const double dl = lam - lc, dp = phi - pc;
  const double r = std::min(R, std::sqrt(dl * dl + dp * dp));
  return 2000.0 * (1 - r / R);
}
PointState case5(double lam, double phi) {
  const double u0 = 20.0, h0 = 5960.0;
  const double sp = std::sin(phi);
  PointState p;
  p.u = u0 * std::cos(phi);
  p.v = 0;
  p.h = h0 - (kRadius * kOmega * u0 + u0 * u0 / 2) * sp * sp / kGravity - mountain(lam, phi);
  return p;
}

// Case 6 (eqs. 139-145): omega = K = 7.848e-6 1/s, R = 4, h0 = 8000 m.
PointState case6(double lam, double phi) {
  const double w = 7.848e-6, K = 7.848e-6, h0 = 8000.0;
  const int R = 4;
  const double a = kRadius, cp = std::cos(phi), sp = std::sin(phi);
  const double cR = std::pow(cp, R), cR1 = std::pow(cp, R - 1), c2 = cp * cp;
  PointState p;
  p.u = a * w * cp + a * K * cR1 * (R * sp * sp - c2) * std::cos(R * lam);
  p.v = -a * K * R * cR1 * sp * std::sin(R * lam);
  const double A =
      w / 2 * (2 * kOmega + w) * c2 +
      0.25 * K * K * cR * cR * ((R + 1) * c2 + (2.0 * R * R - R - 2) - 2.0 * R * R / c2);
  const double B = 2 * (kOmega + w) * K / ((R + 1) * (R + 2)) * cR *
                   ((R * R + 2.0 * R + 2) - (R + 1.0) * (R + 1.0) * c2);
  const double C = 0.25 * K * K * cR * cR * ((R + 1) * c2 - (R + 2.0));
  p.h = h0 + a * a * (A + B * std::cos(R * lam) + C * std::cos(2 * R * lam)) / kGravity;
  return p;
}

}  // namespace

PointState Williamson::initial(double lam, double phi) const {
  switch (case_) {
    case 2:
      return case2(lam, phi, alpha_);
    case 5:
      return case5(lam, phi);
    default:
      return case6(lam, phi);
  }
}

double Williamson::surface(double lam, double phi) const {
  return case_ == 5 ? mountain(lam, phi) : 0.0;
}

double Williamson::coriolis(double lam, double phi) const {
  if (case_ == 2)
    return 2 * kOmega *
           (-std::cos(lam) * std::cos(phi) * std::sin(alpha_) + std::sin(phi) * std::cos(alpha_));
  return 2 * kOmega * std::sin(phi);
}

const char* Williamson::title() const {
  switch (case_) {
    case 2:
      return "Williamson et al. (1992) case 2: global steady state nonlinear zonal geostrophic "
             "flow";
    case 5:
      return "Williamson et al. (1992) case 5: zonal flow over an isolated mountain";
    default:
      return "Williamson et al. (1992) case 6: Rossby-Haurwitz wave (R = 4)";
  }
}

}  // namespace crucible::sim::climate

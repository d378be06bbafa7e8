// climate.nc: the model's snapshots as a CF-1.8 NetCDF file (classic 64-bit
// offset format, which every reader opens: xarray, ncview, Panoply, ncdump).
//
//   dimensions  time (snapshots), lat (nlat), lon (nlon)
//   lat(lat), lon(lon)       degrees_north / degrees_east, standard_name, axis
//   time(time)               hours since the initial state (CF: "hours since
//                            2000-01-01 00:00:00", a nominal origin)
//   h(time, lat, lon)        fluid depth, m (float)
//   u, v(time, lat, lon)     eastward_wind / northward_wind, m s-1 (float)
//   hs(lat, lon)             surface_altitude, m (case 5 only)
//   global: Conventions = "CF-1.8", title, institution, source, references,
//           history, williamson_case, alpha_deg, dt_s
//
// The file is built in memory (nc_create_mem) and written with
// write_file_atomic: a reader sees the old file or the whole new one. Every
// nc_ call is checked; an error is Status::io naming the file and NetCDF's
// message. Thread-compatible.
#pragma once
#include <string>
#include <vector>

#include "core/status.h"
#include "sim/climate/grid.h"

namespace crucible::sim::climate {

struct NetcdfContent {
  const Grid* grid = nullptr;
  int test_case = 6;
  double alpha_deg = 0, dt_s = 0;
  std::string title;
  std::vector<double> time_h;                      // (nt)
  const std::vector<double>* snapshots = nullptr;  // (nt, 3 [h u v], nlat, nlon)
  const std::vector<double>* hs = nullptr;         // (nlat, nlon) or null
};

Status write_climate_netcdf(const std::string& path, const NetcdfContent& c);

}  // namespace crucible::sim::climate

#include "sim/climate/netcdf_out.h"

#include <netcdf.h>
#include <netcdf_mem.h>

#include <cstdlib>
#include <cstring>

#include "core/file_io.h"

namespace crucible::sim::climate {

namespace {

// Closes (and frees) an in-memory dataset left open by an error.
struct NcHandle {
  int id = -1;
  ~NcHandle() {
    if (id < 0) return;
    NC_memio mem{};
    if (nc_close_memio(id, &mem) == NC_NOERR) std::free(mem.memory);
  }
};

class Checker {
 public:
  explicit Checker(const std::string& path) : path_(path) {}
  Status operator()(int rc, const char* call) const {
    if (rc == NC_NOERR) return Status::ok();
    return Status::io("[sim] climate: writing " + path_ + ": " + call + ": " + nc_strerror(rc));
  }

 private:
  std::string path_;
};

}  // namespace

Status write_climate_netcdf(const std::string& path, const NetcdfContent& c) {
  const Grid& g = *c.grid;
  const Checker nc(path);
  const size_t nt = c.time_h.size(), plane = size_t(g.nlat) * g.nlon;
  if (!c.snapshots || c.snapshots->size() != nt * 3 * plane)
    return Status::internal("[sim] climate: snapshot buffer does not match " + std::to_string(nt) +
                            " times");
  NcHandle f;
  const size_t guess = nt * 3 * plane * sizeof(float) + 2 * plane * sizeof(float) + 65536;
  CRUCIBLE_RETURN_IF_ERROR(
      nc(nc_create_mem(path.c_str(), NC_64BIT_OFFSET, guess, &f.id), "nc_create_mem"));
  int d_time, d_lat, d_lon;
  CRUCIBLE_RETURN_IF_ERROR(nc(nc_def_dim(f.id, "time", nt, &d_time), "nc_def_dim(time)"));
  CRUCIBLE_RETURN_IF_ERROR(nc(nc_def_dim(f.id, "lat", g.nlat, &d_lat), "nc_def_dim(lat)"));
  CRUCIBLE_RETURN_IF_ERROR(nc(nc_def_dim(f.id, "lon", g.nlon, &d_lon), "nc_def_dim(lon)"));
  auto text = [&](int var, const char* name, const std::string& value) {
    return nc(nc_put_att_text(f.id, var, name, value.size(), value.c_str()), name);
  };
  int v_time, v_lat, v_lon;
  CRUCIBLE_RETURN_IF_ERROR(
      nc(nc_def_var(f.id, "time", NC_DOUBLE, 1, &d_time, &v_time), "nc_def_var(time)"));
  CRUCIBLE_RETURN_IF_ERROR(
      nc(nc_def_var(f.id, "lat", NC_DOUBLE, 1, &d_lat, &v_lat), "nc_def_var(lat)"));
  CRUCIBLE_RETURN_IF_ERROR(
      nc(nc_def_var(f.id, "lon", NC_DOUBLE, 1, &d_lon, &v_lon), "nc_def_var(lon)"));
  const struct {
    int var;
    const char *standard_name, *long_name, *units, *axis;
  } coords[] = {
      {v_time, "time", "time since the initial state", "hours since 2000-01-01 00:00:00", "T"},
      {v_lat, "latitude", "latitude of the cell centre", "degrees_north", "Y"},
      {v_lon, "longitude", "longitude of the cell centre", "degrees_east", "X"},
  };
  for (const auto& a : coords) {
    CRUCIBLE_RETURN_IF_ERROR(text(a.var, "standard_name", a.standard_name));
    CRUCIBLE_RETURN_IF_ERROR(text(a.var, "long_name", a.long_name));
    CRUCIBLE_RETURN_IF_ERROR(text(a.var, "units", a.units));
    CRUCIBLE_RETURN_IF_ERROR(text(a.var, "axis", a.axis));
  }
  CRUCIBLE_RETURN_IF_ERROR(text(v_time, "calendar", "standard"));
  const int dims3[3] = {d_time, d_lat, d_lon};
  const struct {
    const char *name, *standard_name, *long_name, *units;
  } fields[3] = {
      {"h", nullptr, "fluid depth (free surface height minus surface height)", "m"},
      {"u", "eastward_wind", "eastward velocity", "m s-1"},
      {"v", "northward_wind", "northward velocity", "m s-1"},
  };
  int v_field[3];
  for (int q = 0; q < 3; ++q) {
    CRUCIBLE_RETURN_IF_ERROR(
        nc(nc_def_var(f.id, fields[q].name, NC_FLOAT, 3, dims3, &v_field[q]), "nc_def_var"));
    if (fields[q].standard_name)
      CRUCIBLE_RETURN_IF_ERROR(text(v_field[q], "standard_name", fields[q].standard_name));
    CRUCIBLE_RETURN_IF_ERROR(text(v_field[q], "long_name", fields[q].long_name));
    CRUCIBLE_RETURN_IF_ERROR(text(v_field[q], "units", fields[q].units));
  }
  int v_hs = -1;
  if (c.hs) {
    const int dims2[2] = {d_lat, d_lon};
    CRUCIBLE_RETURN_IF_ERROR(
        nc(nc_def_var(f.id, "hs", NC_FLOAT, 2, dims2, &v_hs), "nc_def_var(hs)"));
    CRUCIBLE_RETURN_IF_ERROR(text(v_hs, "standard_name", "surface_altitude"));
    CRUCIBLE_RETURN_IF_ERROR(text(v_hs, "long_name", "height of the mountain under the fluid"));
    CRUCIBLE_RETURN_IF_ERROR(text(v_hs, "units", "m"));
  }
  CRUCIBLE_RETURN_IF_ERROR(text(NC_GLOBAL, "Conventions", "CF-1.8"));
  CRUCIBLE_RETURN_IF_ERROR(text(NC_GLOBAL, "title", c.title));
  CRUCIBLE_RETURN_IF_ERROR(text(NC_GLOBAL, "institution", "crucible"));
  CRUCIBLE_RETURN_IF_ERROR(
      text(NC_GLOBAL, "source",
           "crucible sim climate: shallow-water equations on a latitude-longitude A grid, "
           "finite-volume mass, centred differences, RK4, zonal polar filter"));
  CRUCIBLE_RETURN_IF_ERROR(
      text(NC_GLOBAL, "references",
           "Williamson, D. L., Drake, J. B., Hack, J. J., Jakob, R., Swarztrauber, P. N. "
           "(1992). J. Comput. Phys. 102, 211-224"));
  CRUCIBLE_RETURN_IF_ERROR(text(NC_GLOBAL, "history", "created by crucible sim climate"));
  const int wcase = c.test_case;
  CRUCIBLE_RETURN_IF_ERROR(
      nc(nc_put_att_int(f.id, NC_GLOBAL, "williamson_case", NC_INT, 1, &wcase), "williamson_case"));
  CRUCIBLE_RETURN_IF_ERROR(
      nc(nc_put_att_double(f.id, NC_GLOBAL, "alpha_deg", NC_DOUBLE, 1, &c.alpha_deg), "alpha_deg"));
  CRUCIBLE_RETURN_IF_ERROR(
      nc(nc_put_att_double(f.id, NC_GLOBAL, "dt_s", NC_DOUBLE, 1, &c.dt_s), "dt_s"));
  CRUCIBLE_RETURN_IF_ERROR(nc(nc_enddef(f.id), "nc_enddef"));

  std::vector<double> lat(g.nlat), lon(g.nlon);
  for (int j = 0; j < g.nlat; ++j) lat[j] = g.lat_deg(j);
  for (int i = 0; i < g.nlon; ++i) lon[i] = g.lon_deg(i);
  CRUCIBLE_RETURN_IF_ERROR(nc(nc_put_var_double(f.id, v_lat, lat.data()), "nc_put_var(lat)"));
  CRUCIBLE_RETURN_IF_ERROR(nc(nc_put_var_double(f.id, v_lon, lon.data()), "nc_put_var(lon)"));
  if (nt)
    CRUCIBLE_RETURN_IF_ERROR(
        nc(nc_put_var_double(f.id, v_time, c.time_h.data()), "nc_put_var(time)"));
  std::vector<float> buf(plane);
  for (size_t t = 0; t < nt; ++t)
    for (int q = 0; q < 3; ++q) {
      const double* src = c.snapshots->data() + (t * 3 + q) * plane;
      for (size_t k = 0; k < plane; ++k) buf[k] = float(src[k]);
      const size_t start[3] = {t, 0, 0}, count[3] = {1, size_t(g.nlat), size_t(g.nlon)};
      CRUCIBLE_RETURN_IF_ERROR(
          nc(nc_put_vara_float(f.id, v_field[q], start, count, buf.data()), "nc_put_vara"));
    }
  if (c.hs) {
    for (size_t k = 0; k < plane; ++k) buf[k] = float((*c.hs)[k]);
    CRUCIBLE_RETURN_IF_ERROR(nc(nc_put_var_float(f.id, v_hs, buf.data()), "nc_put_var(hs)"));
  }
  NC_memio mem{};
  const int id = f.id;
  f.id = -1;
  CRUCIBLE_RETURN_IF_ERROR(nc(nc_close_memio(id, &mem), "nc_close_memio"));
  Status st = write_file_atomic(path, {mem.memory}, {mem.size});
  std::free(mem.memory);
  return st;
}

}  // namespace crucible::sim::climate

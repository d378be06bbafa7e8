#include "sim/workload.h"

#include <cstring>

namespace crucible::sim {

namespace {

template <typename T>
StateArray pack(std::string name, const char* dtype, const std::vector<T>& v, std::vector<int64_t> shape) {
  StateArray a{std::move(name), dtype, std::move(shape), {}};
  if (a.shape.empty()) a.shape = {int64_t(v.size())};
  a.bytes.resize(v.size() * sizeof(T));
  if (!v.empty()) std::memcpy(a.bytes.data(), v.data(), a.bytes.size());
  return a;
}

template <typename T>
Status unpack(const State& s, const std::string& name, const char* dtype, size_t expect, std::vector<T>* out) {
  const StateArray* a = s.find(name);
  if (!a) return Status::corrupt("[sim] checkpoint array '" + name + "' is missing");
  if (a->dtype != dtype || a->bytes.size() % sizeof(T) != 0)
    return Status::corrupt("[sim] checkpoint array '" + name + "': expected " + dtype + ", found " + a->dtype);
  const size_t n = a->bytes.size() / sizeof(T);
  if (expect != SIZE_MAX && n != expect)
    return Status::corrupt("[sim] checkpoint array '" + name + "': expected " + std::to_string(expect) + " " +
                           dtype + " values, found " + std::to_string(n));
  out->resize(n);
  if (n) std::memcpy(out->data(), a->bytes.data(), a->bytes.size());
  return Status::ok();
}

}  // namespace

StateArray pack_f64(std::string name, const std::vector<double>& v, std::vector<int64_t> shape) {
  return pack(std::move(name), "F64", v, std::move(shape));
}
StateArray pack_u64(std::string name, const std::vector<uint64_t>& v, std::vector<int64_t> shape) {
  return pack(std::move(name), "U64", v, std::move(shape));
}
Status unpack_f64(const State& s, const std::string& name, size_t expect_numel, std::vector<double>* out) {
  return unpack(s, name, "F64", expect_numel, out);
}
Status unpack_u64(const State& s, const std::string& name, size_t expect_numel, std::vector<uint64_t>* out) {
  return unpack(s, name, "U64", expect_numel, out);
}

}  // namespace crucible::sim

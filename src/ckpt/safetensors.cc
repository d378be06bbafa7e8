#include "ckpt/safetensors.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string_view>

namespace crucible::ckpt {
size_t dtype_bytes(const std::string& dt) {
  if (dt == "F32" || dt == "I32") return 4;
  if (dt == "BF16" || dt == "F16" || dt == "I16") return 2;
  if (dt == "F64" || dt == "I64" || dt == "U64") return 8;
  if (dt == "U8" || dt == "I8" || dt == "BOOL") return 1;
  return 0;
}

int64_t LoadedTensor::numel() const {
  int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

const LoadedTensor* SafetensorsFile::find(const std::string& name) const {
  auto it = tensors.find(name);
  return it == tensors.end() ? nullptr : &it->second;
}

Result<SafetensorsHeader> safetensors_header(const std::vector<TensorView>& tensors,
                                             const std::map<std::string, std::string>& metadata) {
  // Written member by member: nlohmann::ordered_json's operator[] finds a key
  // by scanning the ones before it, which made a header of n tensors O(n^2)
  // (20,000 tensors: minutes). The bytes are what that wrote.
  SafetensorsHeader out;
  std::string& h = out.json;
  h = "{";
  if (!metadata.empty()) h += "\"__metadata__\":" + nlohmann::ordered_json(metadata).dump();
  std::set<std::string_view> names;
  size_t offset = 0;
  out.sizes.reserve(tensors.size());
  for (const auto& t : tensors) {
    size_t eb = dtype_bytes(t.dtype);
    if (eb == 0) return Status::invalid("[safetensors] unknown dtype " + t.dtype + " for " + t.name);
    if (t.name == "__metadata__" || !names.insert(t.name).second)
      return Status::invalid("[safetensors] tensor " + t.name +
                             " is given twice (or takes the metadata's name)");
    size_t n = eb;
    for (auto d : t.shape) n *= size_t(d);
    const nlohmann::ordered_json entry = {
        {"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + n}}};
    if (h.size() > 1) h += ',';
    h += nlohmann::ordered_json(t.name).dump() + ':' + entry.dump();
    out.sizes.push_back(n);
    offset += n;
  }
  h += '}';
  h.append((8 - h.size() % 8) % 8, ' ');
  out.length = h.size();
  return out;
}

void SafetensorsHeader::file_parts(const std::vector<TensorView>& tensors, std::vector<const void*>* parts,
                                   std::vector<size_t>* part_sizes) const {
  *parts = {&length, json.data()};
  *part_sizes = {8, json.size()};
  for (size_t i = 0; i < tensors.size(); ++i) {
    parts->push_back(tensors[i].data);
    part_sizes->push_back(sizes[i]);
  }
}

Status write_safetensors(const std::string& path, const std::vector<TensorView>& tensors,
                         const std::map<std::string, std::string>& metadata) {
  auto header = safetensors_header(tensors, metadata);
  if (!header) return header.status();
  std::vector<const void*> parts;
  std::vector<size_t> sizes;
  header->file_parts(tensors, &parts, &sizes);
  return write_file_atomic(path, parts, sizes);
}

namespace {

// A SAX pass that notes the first key a top-level object repeats.
struct TopLevelKeys : nlohmann::json_sax<nlohmann::json> {
  int depth = 0;
  std::set<std::string> names;
  std::string duplicate;
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return ++depth, true; }
  bool end_object() override { return --depth, true; }
  bool start_array(std::size_t) override { return ++depth, true; }
  bool end_array() override { return --depth, true; }
  bool key(string_t& k) override {
    if (depth == 1 && !names.insert(k).second && duplicate.empty()) duplicate = k;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;
  }
};

}  // namespace

Result<SafetensorsFile> read_safetensors(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::not_found("[safetensors] cannot open " + path);
  in.seekg(0, std::ios::end);
  uint64_t file_size = uint64_t(in.tellg());
  in.seekg(0);
  uint64_t hlen = 0;
  if (file_size < 8 || !in.read(reinterpret_cast<char*>(&hlen), 8))
    return Status::corrupt("[safetensors] " + path + ": file too short for a header");
  if (hlen > file_size - 8 || hlen > (uint64_t(100) << 20))
    return Status::corrupt("[safetensors] " + path + ": header length " + std::to_string(hlen) +
                           " exceeds the file");
  std::string h(hlen, '\0');
  in.read(h.data(), std::streamsize(hlen));
  const std::string where = "[safetensors] " + path + ": ";
  // The format (huggingface/safetensors): a JSON object, padded with spaces;
  // tensors' byte ranges tile the data section exactly, in any order.
  if (h.empty() || h[0] != '{')
    return Status::corrupt(where + "header does not start with '{' (header length " + std::to_string(hlen) + ")");
  nlohmann::json header = nlohmann::json::parse(h, nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded() || !header.is_object())
    return Status::corrupt(where + "header is not a JSON object");
  // nlohmann keeps the last of duplicate keys silently: the top level's keys
  // are counted in a pass of their own (a parse callback would do, but
  // nlohmann's callback parser rescans the enclosing object at the end of
  // every member: quadratic in the tensors).
  TopLevelKeys keys;
  nlohmann::json::sax_parse(h, &keys);
  if (!keys.duplicate.empty())
    return Status::corrupt(where + "tensor " + keys.duplicate + " is listed twice");
  const uint64_t data_size = file_size - 8 - hlen;
  SafetensorsFile out;
  std::vector<std::pair<std::pair<uint64_t, uint64_t>, std::string>> ranges;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    if (name == "__metadata__") {
      if (!it->is_object()) return Status::corrupt(where + "__metadata__ is not an object");
      for (auto m = it->begin(); m != it->end(); ++m) {
        if (!m->is_string()) return Status::corrupt(where + "__metadata__." + m.key() + " is not a string");
        out.metadata[m.key()] = m->get<std::string>();
      }
      continue;
    }
    const nlohmann::json& e = *it;
    if (!e.is_object() || !e.contains("dtype") || !e["dtype"].is_string() || !e.contains("shape") ||
        !e["shape"].is_array() || !e.contains("data_offsets") || !e["data_offsets"].is_array())
      return Status::corrupt(where + "tensor " + name + " lacks dtype, shape or data_offsets");
    LoadedTensor t;
    t.dtype = e["dtype"].get<std::string>();
    const size_t eb = dtype_bytes(t.dtype);
    if (eb == 0) return Status::corrupt(where + "tensor " + name + " has unknown dtype " + t.dtype);
    uint64_t bytes = eb;
    for (const auto& d : e["shape"]) {
      if (!d.is_number_unsigned() && !(d.is_number_integer() && d.get<int64_t>() >= 0))
        return Status::corrupt(where + "tensor " + name + " has shape entry " + d.dump() +
                               ", not a non-negative integer");
      const uint64_t v = d.get<uint64_t>();
      if (v != 0 && bytes > (uint64_t(1) << 62) / v)
        return Status::corrupt(where + "tensor " + name + " has a shape too large for any file");
      bytes *= v;
      t.shape.push_back(int64_t(v));
    }
    const nlohmann::json& off = e["data_offsets"];
    if (off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      return Status::corrupt(where + "tensor " + name + " has data_offsets " + off.dump() +
                             ", not two non-negative integers");
    const uint64_t begin = off[0].get<uint64_t>(), end = off[1].get<uint64_t>();
    if (begin > end || end > data_size || end - begin != bytes)
      return Status::corrupt(where + "tensor " + name + " has data offsets [" + std::to_string(begin) + ", " +
                             std::to_string(end) + ") inconsistent with its shape (" + std::to_string(bytes) +
                             " bytes) or the data section (" + std::to_string(data_size) + " bytes)");
    ranges.push_back({{begin, end}, name});
    t.bytes.resize(size_t(bytes));
    in.seekg(std::streamoff(8 + hlen + begin));
    if (bytes > 0 && !in.read(reinterpret_cast<char*>(t.bytes.data()), std::streamsize(bytes)))
      return Status::corrupt(where + "short read in tensor " + name);
    out.tensors.emplace(name, std::move(t));
  }
  // The ranges tile [0, data_size): no overlap, no gap, nothing after the last.
  std::sort(ranges.begin(), ranges.end());
  uint64_t at = 0;
  for (const auto& [range, name] : ranges) {
    if (range.first < at) return Status::corrupt(where + "tensor " + name + " overlaps the tensor before it");
    if (range.first > at)
      return Status::corrupt(where + std::to_string(range.first - at) + " unlisted bytes before tensor " + name);
    at = range.second;
  }
  if (at != data_size)
    return Status::corrupt(where + std::to_string(data_size - at) +
                           " bytes after the last tensor (a header length off, or trailing data)");
  return out;
}

}  // namespace crucible::ckpt

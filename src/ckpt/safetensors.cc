#include "ckpt/safetensors.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

namespace crucible::ckpt {
size_t dtype_bytes(const std::string& dt) {
  if (dt == "F32" || dt == "I32") return 4;
  if (dt == "BF16" || dt == "F16" || dt == "I16") return 2;
  if (dt == "F64" || dt == "I64") return 8;
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


Status write_safetensors(const std::string& path, const std::vector<TensorView>& tensors,
                         const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  size_t offset = 0;
  std::vector<const void*> parts;
  std::vector<size_t> sizes;
  for (const auto& t : tensors) {
    size_t eb = dtype_bytes(t.dtype);
    if (eb == 0) return Status::invalid("[safetensors] unknown dtype " + t.dtype + " for " + t.name);
    size_t n = 1;
    for (auto d : t.shape) n *= size_t(d);
    header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + n * eb}}};
    parts.push_back(t.data);
    sizes.push_back(n * eb);
    offset += n * eb;
  }
  std::string h = header.dump();
  h.append((8 - h.size() % 8) % 8, ' ');
  uint64_t hlen = h.size();  // little-endian on every platform crucible runs on
  parts.insert(parts.begin(), {&hlen, h.data()});
  sizes.insert(sizes.begin(), {8, h.size()});
  return write_file_atomic(path, parts, sizes);
}

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
  nlohmann::json header = nlohmann::json::parse(h, nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded() || !header.is_object())
    return Status::corrupt("[safetensors] " + path + ": header is not a JSON object");
  uint64_t data_size = file_size - 8 - hlen;
  SafetensorsFile out;
  try {
    for (auto it = header.begin(); it != header.end(); ++it) {
      if (it.key() == "__metadata__") {
        for (auto m = it->begin(); m != it->end(); ++m) out.metadata[m.key()] = m->get<std::string>();
        continue;
      }
      LoadedTensor t;
      t.dtype = it->at("dtype").get<std::string>();
      t.shape = it->at("shape").get<std::vector<int64_t>>();
      auto off = it->at("data_offsets").get<std::vector<uint64_t>>();
      size_t eb = dtype_bytes(t.dtype);
      if (eb == 0)
        return Status::corrupt("[safetensors] " + path + ": tensor " + it.key() +
                               " has unknown dtype " + t.dtype);
      if (off.size() != 2 || off[0] > off[1] || off[1] > data_size ||
          off[1] - off[0] != uint64_t(t.numel()) * eb)
        return Status::corrupt("[safetensors] " + path + ": tensor " + it.key() +
                               " has data offsets inconsistent with its shape or the file size");
      t.bytes.resize(off[1] - off[0]);
      in.seekg(std::streamoff(8 + hlen + off[0]));
      if (!in.read(reinterpret_cast<char*>(t.bytes.data()), std::streamsize(t.bytes.size())))
        return Status::corrupt("[safetensors] " + path + ": short read in tensor " + it.key());
      out.tensors.emplace(it.key(), std::move(t));
    }
  } catch (const nlohmann::json::exception& e) {
    return Status::corrupt("[safetensors] " + path + ": malformed header: " + e.what());
  }
  return out;
}

}  // namespace crucible::ckpt

// safetensors (Hugging Face's tensor file format), read and written by crucible
// so that weights exchange with PyTorch / HF tooling. Layout: u64 LE header
// length N, N bytes of JSON {name: {dtype, shape, data_offsets:[b,e]}, ...,
// "__metadata__": {str: str}} padded with spaces to 8 bytes, then the data.
// See docs/formats.md. Writes are atomic: a temporary file in the same
// directory is written, fsync'ed and renamed over the target, then the
// directory is fsync'ed. Reads validate every offset and size against the file.
// Both are O(n log n) in the tensors (a file of 20,000 takes well under a
// second: tests/ckpt/safetensors_test.cc).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/file_io.h"
#include "core/status.h"

namespace crucible::ckpt {

struct TensorView {  // for writing: borrowed data
  std::string name;
  std::string dtype;  // "F32", "BF16", "I32", "I64", "U8"
  std::vector<int64_t> shape;
  const void* data = nullptr;
};

struct LoadedTensor {
  std::string dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
  const float* f32() const { return reinterpret_cast<const float*>(bytes.data()); }
  int64_t numel() const;
};

struct SafetensorsFile {
  std::map<std::string, LoadedTensor> tensors;
  std::map<std::string, std::string> metadata;
  const LoadedTensor* find(const std::string& name) const;
};

size_t dtype_bytes(const std::string& dtype);  // 0 for an unknown dtype

// The file's layout for `tensors`, their data back to back in their order:
// the u64 length, the header (JSON padded with spaces to 8 bytes) and each
// tensor's byte count. Invalid on an unknown dtype or a name given twice (or
// "__metadata__"). O(n log n) in the tensors: each entry is written once, its
// name checked in a set.
struct SafetensorsHeader {
  uint64_t length = 0;  // json.size(), little-endian on every platform crucible runs on
  std::string json;
  std::vector<size_t> sizes;
  // The whole file as parts for one gathered write (pointing into this
  // header and the tensors' data, which must outlive the write).
  void file_parts(const std::vector<TensorView>& tensors, std::vector<const void*>* parts,
                  std::vector<size_t>* part_sizes) const;
};
Result<SafetensorsHeader> safetensors_header(const std::vector<TensorView>& tensors,
                                             const std::map<std::string, std::string>& metadata);

Status write_safetensors(const std::string& path, const std::vector<TensorView>& tensors,
                         const std::map<std::string, std::string>& metadata = {});
Result<SafetensorsFile> read_safetensors(const std::string& path);

using crucible::write_file_atomic;  // core/file_io.h

}  // namespace crucible::ckpt

// The safetensors file format (huggingface/safetensors): 8 bytes of little-endian header
// length N, N bytes of JSON header (padded with spaces to a multiple of 8), then the tensors'
// bytes back to back. The header maps each tensor name to {"dtype", "shape", "data_offsets":
// [begin, end]} (offsets into the data part) and may hold "__metadata__", a string-to-string map.
// Plain C++ (no LibTorch): the engine's checkpoints (checkpoint_io.hpp) and tests use it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <vector>

namespace muster::engine::checkpoint {

// One tensor to write: its bytes, dtype ("F32", "BF16", "F16", "I64", ...) and shape.
struct tensor_bytes {
  std::string name;
  std::string dtype;
  std::vector<std::int64_t> shape;
  std::span<const std::byte> data;
};

// Writes `tensors` (names unique) to `file`, in the order given, flushed and fsynced. Throws
// errc::io naming the file when it cannot be written (a full disk included).
void write_safetensors(const std::filesystem::path& file, const std::vector<tensor_bytes>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// What a file's header says about one tensor.
struct tensor_entry {
  std::string dtype;
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0, end = 0;  // in the data part
};

// An open file: its header, and the bytes of any tensor read on demand.
class safetensors_file {
 public:
  // Reads and checks the header. Throws errc::io for an unreadable file, errc::invalid_input
  // naming the file for a malformed header (bad length, JSON, offsets past the end, a byte
  // count that does not match dtype and shape).
  explicit safetensors_file(const std::filesystem::path& file);

  const std::map<std::string, tensor_entry>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // The bytes of tensor `name` into `out` (exactly its size). Throws errc::invalid_input when the
  // file has no such tensor or `out` has another size.
  void read(const std::string& name, std::span<std::byte> out) const;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  std::uint64_t data_start_ = 0;
  std::map<std::string, tensor_entry> tensors_;
  std::map<std::string, std::string> metadata_;
};

// Bytes of one element of `dtype`; throws errc::invalid_input for a dtype safetensors lacks.
std::size_t dtype_size(const std::string& dtype);

}  // namespace muster::engine::checkpoint

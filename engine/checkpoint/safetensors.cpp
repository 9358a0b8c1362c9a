// The safetensors format: see safetensors.hpp.
#include "engine/checkpoint/safetensors.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "common/error.hpp"

namespace muster::engine::checkpoint {
namespace {

using nlohmann::json;

void write_all(int fd, const void* data, std::size_t size, const std::filesystem::path& file) {
  const auto* p = static_cast<const char*>(data);
  while (size > 0) {
    const auto n = ::write(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      ::close(fd);
      MUSTER_THROW(errc::io, "cannot write checkpoint file {}: {}", file.string(),
                   std::strerror(err));
    }
    p += n;
    size -= static_cast<std::size_t>(n);
  }
}

std::uint64_t numel(const std::vector<std::int64_t>& shape) {
  std::uint64_t n = 1;
  for (auto d : shape) n *= static_cast<std::uint64_t>(d);
  return n;
}

}  // namespace

std::size_t dtype_size(const std::string& dtype) {
  static const std::map<std::string, std::size_t> sizes{
      {"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8}, {"I32", 4},
      {"I16", 2}, {"I8", 1},  {"U8", 1},  {"BOOL", 1}, {"U16", 2}, {"U32", 4}, {"U64", 8}};
  auto it = sizes.find(dtype);
  MUSTER_CHECK(it != sizes.end(), errc::invalid_input, "safetensors dtype \"{}\" is not known",
               dtype);
  return it->second;
}

void write_safetensors(const std::filesystem::path& file, const std::vector<tensor_bytes>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::uint64_t at = 0;
  for (const auto& t : tensors) {
    MUSTER_CHECK(t.data.size() == numel(t.shape) * dtype_size(t.dtype), errc::internal,
                 "tensor {}: {} bytes for shape of {} elements of {}", t.name, t.data.size(),
                 numel(t.shape), t.dtype);
    header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {at, at + t.data.size()}}};
    at += t.data.size();
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  const std::uint64_t length = text.size();
  unsigned char prefix[8];
  for (int i = 0; i < 8; ++i) prefix[i] = static_cast<unsigned char>(length >> (8 * i));
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  MUSTER_CHECK(fd >= 0, errc::io, "cannot create checkpoint file {}: {}", file.string(),
               std::strerror(errno));
  write_all(fd, prefix, 8, file);
  write_all(fd, text.data(), text.size(), file);
  for (const auto& t : tensors) write_all(fd, t.data.data(), t.data.size(), file);
  if (::fsync(fd) != 0 || ::close(fd) != 0)
    MUSTER_THROW(errc::io, "cannot write checkpoint file {}: {}", file.string(),
                 std::strerror(errno));
}

safetensors_file::safetensors_file(const std::filesystem::path& file) : path_(file) {
  std::ifstream in(file, std::ios::binary);
  MUSTER_CHECK(in, errc::io, "cannot open {}", file.string());
  unsigned char prefix[8];
  in.read(reinterpret_cast<char*>(prefix), 8);
  std::error_code ec;
  const auto size = std::filesystem::file_size(file, ec);
  std::uint64_t length = 0;
  for (int i = 0; i < 8; ++i) length |= std::uint64_t(prefix[i]) << (8 * i);
  MUSTER_CHECK(in && !ec && length <= size - 8, errc::invalid_input,
               "{} is not a safetensors file: its header length {} is past the end", file.string(),
               length);
  std::string text(length, '\0');
  in.read(text.data(), static_cast<std::streamsize>(length));
  data_start_ = 8 + length;
  const std::uint64_t data_size = size - data_start_;
  json header;
  try {
    header = json::parse(text);
    MUSTER_CHECK(header.is_object(), errc::invalid_input, "{}: the safetensors header is not a "
                 "JSON object", file.string());
    for (auto& [name, value] : header.items()) {
      if (name == "__metadata__") {
        metadata_ = value.get<std::map<std::string, std::string>>();
        continue;
      }
      tensor_entry e;
      e.dtype = value.at("dtype").get<std::string>();
      e.shape = value.at("shape").get<std::vector<std::int64_t>>();
      e.begin = value.at("data_offsets").at(0).get<std::uint64_t>();
      e.end = value.at("data_offsets").at(1).get<std::uint64_t>();
      MUSTER_CHECK(e.begin <= e.end && e.end <= data_size &&
                       e.end - e.begin == numel(e.shape) * dtype_size(e.dtype),
                   errc::invalid_input,
                   "{}: tensor {} has offsets [{}, {}) that do not fit its {} {} elements or the "
                   "file's {} data bytes",
                   file.string(), name, e.begin, e.end, numel(e.shape), e.dtype, data_size);
      tensors_.emplace(name, std::move(e));
    }
  } catch (const json::exception& e) {
    MUSTER_THROW(errc::invalid_input, "{}: malformed safetensors header: {}", file.string(),
                 e.what());
  }
}

void safetensors_file::read(const std::string& name, std::span<std::byte> out) const {
  auto it = tensors_.find(name);
  MUSTER_CHECK(it != tensors_.end(), errc::invalid_input, "{} has no tensor {}", path_.string(),
               name);
  const auto& e = it->second;
  MUSTER_CHECK(out.size() == e.end - e.begin, errc::invalid_input,
               "{}: tensor {} holds {} bytes ({} {}), not the {} expected", path_.string(), name,
               e.end - e.begin, e.dtype, fmt::join(e.shape, "x"), out.size());
  const int fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  MUSTER_CHECK(fd >= 0, errc::io, "cannot open {}: {}", path_.string(), std::strerror(errno));
  std::size_t done = 0;
  while (done < out.size()) {
    const auto n = ::pread(fd, out.data() + done, out.size() - done,
                           static_cast<off_t>(data_start_ + e.begin + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ::close(fd);
      MUSTER_THROW(errc::io, "cannot read tensor {} from {}", name, path_.string());
    }
    done += static_cast<std::size_t>(n);
  }
  ::close(fd);
}

}  // namespace muster::engine::checkpoint

// Megatron's MMapIndexedDataset: see document_source.hpp.
//
// <prefix>.idx, little-endian:
//   "MMIDIDX\0\0" (9 bytes), u64 version = 1, u8 dtype code, u64 sequence count S,
//   u64 document count D, i32 sizes[S] (tokens per sequence), i64 pointers[S] (byte offset of
//   each sequence in .bin), i64 document_indices[D] (sequence boundaries of the documents).
// <prefix>.bin: the sequences' tokens back to back in that dtype.
// dtype codes: 1 uint8, 2 int8, 3 int16, 4 int32, 5 int64, 8 uint16 (6 and 7 are floats:
// refused, tokens are integers).
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "common/error.hpp"
#include "engine/data/document_source.hpp"

namespace muster::engine::data {
namespace {

namespace fs = std::filesystem;

constexpr char kMagic[] = "MMIDIDX\0\0";
constexpr std::size_t kMagicSize = 9;

// A read-only memory map of a whole file.
class mapped_file {
 public:
  explicit mapped_file(const fs::path& path) : path_(path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    MUSTER_CHECK(fd >= 0, errc::invalid_input, "data.paths: cannot open {}: {}", path.string(),
                 std::strerror(errno));
    struct stat st {};
    ::fstat(fd, &st);
    size_ = static_cast<std::size_t>(st.st_size);
    if (size_ > 0) data_ = ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd, 0);
    ::close(fd);
    MUSTER_CHECK(data_ != MAP_FAILED, errc::io, "cannot map {}: {}", path.string(),
                 std::strerror(errno));
  }
  ~mapped_file() {
    if (data_ && data_ != MAP_FAILED) ::munmap(data_, size_);
  }
  mapped_file(const mapped_file&) = delete;
  mapped_file& operator=(const mapped_file&) = delete;
  const unsigned char* bytes() const { return static_cast<const unsigned char*>(data_); }
  std::size_t size() const { return size_; }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
  void* data_ = nullptr;
  std::size_t size_ = 0;
};

std::size_t element_size(int code) {
  switch (code) {
    case 1: case 2: return 1;
    case 3: case 8: return 2;
    case 4: return 4;
    case 5: return 8;
    default: return 0;
  }
}

class indexed_dataset final : public document_source {
 public:
  explicit indexed_dataset(const fs::path& prefix)
      : index_(fs::path(prefix.string() + ".idx")), bin_(fs::path(prefix.string() + ".bin")) {
    const auto idx = index_.path().string();
    std::size_t at = 0;
    auto take = [&](void* out, std::size_t n) {
      MUSTER_CHECK(at + n <= index_.size(), errc::invalid_input,
                   "{}: ends after {} bytes, inside its header or tables (a truncated copy?)",
                   idx, index_.size());
      std::memcpy(out, index_.bytes() + at, n);
      at += n;
    };
    char magic[kMagicSize];
    take(magic, kMagicSize);
    MUSTER_CHECK(std::memcmp(magic, kMagic, kMagicSize) == 0, errc::invalid_input,
                 "{}: not a Megatron MMapIndexedDataset index (no MMIDIDX header)", idx);
    std::uint64_t version = 0, sequences = 0, documents = 0;
    std::uint8_t code = 0;
    take(&version, 8);
    MUSTER_CHECK(version == 1, errc::invalid_input, "{}: index version {}, only 1 is known", idx,
                 version);
    take(&code, 1);
    elem_ = element_size(code);
    MUSTER_CHECK(elem_ > 0, errc::invalid_input,
                 "{}: token type code {} is not an integer type (1-5 or 8)", idx, int(code));
    code_ = code;
    take(&sequences, 8);
    take(&documents, 8);
    sizes_.resize(sequences);
    pointers_.resize(sequences);
    take(sizes_.data(), sequences * 4);
    take(pointers_.data(), sequences * 8);
    for (std::size_t s = 0; s < sequences; ++s)
      MUSTER_CHECK(sizes_[s] >= 0 && pointers_[s] >= 0 &&
                       static_cast<std::uint64_t>(pointers_[s]) + std::uint64_t(sizes_[s]) * elem_ <=
                           bin_.size(),
                   errc::invalid_input,
                   "{}: sequence {} ({} tokens at byte {}) runs past the end of {} ({} bytes)",
                   idx, s, sizes_[s], pointers_[s], bin_.path().string(), bin_.size());
    what_ = fmt::format("{} sequences of {}", sequences, prefix.string());
  }

  std::int64_t num_documents() const override { return static_cast<std::int64_t>(sizes_.size()); }
  std::int64_t document_length(std::int64_t doc) const override {
    return sizes_.at(static_cast<std::size_t>(doc));
  }
  void read(std::int64_t doc, std::int64_t offset, std::int64_t count,
            std::vector<std::int64_t>& out) const override {
    MUSTER_CHECK(offset >= 0 && count >= 0 && offset + count <= document_length(doc),
                 errc::internal, "read of tokens {}+{} past the end of sequence {}", offset,
                 count, doc);
    const unsigned char* p =
        bin_.bytes() + pointers_[static_cast<std::size_t>(doc)] + std::size_t(offset) * elem_;
    for (std::int64_t i = 0; i < count; ++i, p += elem_) out.push_back(token_at(p));
  }
  // Megatron stores ids in the smallest type that holds the vocabulary (uint16 below 65500,
  // else int32): that type says nothing of the vocabulary's size. A byte type alone bounds it.
  std::int64_t vocab_size() const override { return code_ == 1 ? 256 : 0; }
  std::string describe() const override { return what_; }

 private:
  std::int64_t token_at(const unsigned char* p) const {
    switch (code_) {
      case 1: return *p;
      case 2: return static_cast<std::int8_t>(*p);
      case 3: { std::int16_t v; std::memcpy(&v, p, 2); return v; }
      case 8: { std::uint16_t v; std::memcpy(&v, p, 2); return v; }
      case 4: { std::int32_t v; std::memcpy(&v, p, 4); return v; }
      default: { std::int64_t v; std::memcpy(&v, p, 8); return v; }
    }
  }

  mapped_file index_, bin_;
  int code_ = 0;
  std::size_t elem_ = 0;
  std::vector<std::int32_t> sizes_;
  std::vector<std::int64_t> pointers_;
  std::string what_;
};

// Several sources read as one, documents in order.
class concatenated final : public document_source {
 public:
  explicit concatenated(std::vector<std::unique_ptr<document_source>> parts)
      : parts_(std::move(parts)) {
    for (const auto& p : parts_) {
      starts_.push_back(total_);
      total_ += p->num_documents();
    }
  }
  std::int64_t num_documents() const override { return total_; }
  std::int64_t document_length(std::int64_t doc) const override {
    auto [part, local] = locate(doc);
    return part->document_length(local);
  }
  void read(std::int64_t doc, std::int64_t offset, std::int64_t count,
            std::vector<std::int64_t>& out) const override {
    auto [part, local] = locate(doc);
    part->read(local, offset, count, out);
  }
  std::int64_t vocab_size() const override {  // 0 where a part's is not known
    std::int64_t v = 0;
    for (const auto& p : parts_) {
      if (p->vocab_size() == 0) return 0;
      v = std::max(v, p->vocab_size());
    }
    return v;
  }
  std::string describe() const override {
    std::string s;
    for (const auto& p : parts_) s += (s.empty() ? "" : " + ") + p->describe();
    return s;
  }

 private:
  std::pair<const document_source*, std::int64_t> locate(std::int64_t doc) const {
    std::size_t i = static_cast<std::size_t>(
        std::upper_bound(starts_.begin(), starts_.end(), doc) - starts_.begin() - 1);
    return {parts_.at(i).get(), doc - starts_[i]};
  }
  std::vector<std::unique_ptr<document_source>> parts_;
  std::vector<std::int64_t> starts_;
  std::int64_t total_ = 0;
};

}  // namespace

std::unique_ptr<document_source> open_indexed_dataset(const fs::path& prefix) {
  return std::make_unique<indexed_dataset>(prefix);
}

std::unique_ptr<document_source> open_documents(const std::string& format,
                                                const std::vector<fs::path>& paths) {
  if (format == "text") return open_text_files(paths);
  MUSTER_CHECK(format == "indexed", errc::invalid_input,
               "data.format: '{}' is not text or indexed", format);
  MUSTER_CHECK(!paths.empty(), errc::invalid_input,
               "data.paths: empty; name the prefixes of Megatron .bin/.idx pairs");
  std::vector<std::unique_ptr<document_source>> parts;
  for (const auto& p : paths) parts.push_back(open_indexed_dataset(p));
  if (parts.size() == 1) return std::move(parts.front());
  return std::make_unique<concatenated>(std::move(parts));
}

}  // namespace muster::engine::data

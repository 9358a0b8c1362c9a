// Plain text files through a byte-level tokenizer: see document_source.hpp.
#include <algorithm>
#include <fstream>

#include <fmt/format.h>

#include "common/error.hpp"
#include "engine/data/document_source.hpp"

namespace muster::engine::data {
namespace {

namespace fs = std::filesystem;

std::string join(const std::vector<fs::path>& paths) {
  std::string s;
  for (const auto& p : paths) s += (s.empty() ? "" : ", ") + p.string();
  return s;
}

class text_files final : public document_source {
 public:
  text_files(std::vector<fs::path> files, std::vector<std::int64_t> sizes, std::string what)
      : files_(std::move(files)), sizes_(std::move(sizes)), what_(std::move(what)) {}
  std::int64_t num_documents() const override { return static_cast<std::int64_t>(files_.size()); }
  std::int64_t document_length(std::int64_t doc) const override {
    return sizes_.at(static_cast<std::size_t>(doc));
  }
  void read(std::int64_t doc, std::int64_t offset, std::int64_t count,
            std::vector<std::int64_t>& out) const override {
    const auto& file = files_.at(static_cast<std::size_t>(doc));
    MUSTER_CHECK(offset >= 0 && count >= 0 && offset + count <= document_length(doc),
                 errc::internal, "read of bytes {}+{} past the end of {}", offset, count,
                 file.string());
    std::ifstream in(file, std::ios::binary);
    std::string bytes(static_cast<std::size_t>(count), '\0');
    in.seekg(offset);
    in.read(bytes.data(), count);
    MUSTER_CHECK(in.gcount() == count, errc::io,
                 "{}: {} bytes at offset {} could not be read (the file changed during the run?)",
                 file.string(), count, offset);
    for (unsigned char b : bytes) out.push_back(b);
  }
  std::int64_t vocab_size() const override { return 256; }
  std::string describe() const override { return what_; }

 private:
  std::vector<fs::path> files_;
  std::vector<std::int64_t> sizes_;
  std::string what_;
};

}  // namespace

std::unique_ptr<document_source> open_text_files(const std::vector<fs::path>& paths) {
  std::vector<fs::path> files;
  for (const auto& path : paths) {
    std::error_code ec;
    MUSTER_CHECK(fs::exists(path, ec), errc::invalid_input,
                 "data.paths: {} does not exist; name text files or folders of them", path.string());
    if (fs::is_directory(path)) {
      std::vector<fs::path> found;
      for (const auto& e : fs::recursive_directory_iterator(path))
        if (e.is_regular_file()) found.push_back(e.path());
      std::sort(found.begin(), found.end());
      files.insert(files.end(), found.begin(), found.end());
    } else {
      files.push_back(path);
    }
  }
  std::vector<fs::path> kept;
  std::vector<std::int64_t> sizes;
  for (const auto& f : files) {
    std::error_code ec;
    auto size = fs::file_size(f, ec);
    if (ec || size == 0) continue;
    kept.push_back(f);
    sizes.push_back(static_cast<std::int64_t>(size));
  }
  MUSTER_CHECK(!kept.empty(), errc::invalid_input,
               "data.paths: no non-empty file in {}; name text files or folders of them",
               join(paths));
  auto what = fmt::format("{} text file(s) in {}", kept.size(), join(paths));
  return std::make_unique<text_files>(std::move(kept), std::move(sizes), std::move(what));
}

}  // namespace muster::engine::data

// temp_dir: a fresh directory under $TMPDIR (or /tmp) for one test, removed with everything in it
// when the object goes out of scope.
#pragma once

#include <filesystem>
#include <string>

namespace muster::test {

class temp_dir {
 public:
  explicit temp_dir(const std::string& tag = "muster-test");
  ~temp_dir();
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

// Writes text to a file, creating or truncating it; throws on failure.
void write_file(const std::filesystem::path& file, const std::string& text);
// Reads a whole file; throws on failure.
std::string read_file(const std::filesystem::path& file);

}  // namespace muster::test

// executable_path: the search of a PATH value the launcher (workers) and musterd (squeue) share,
// on real files in a temporary directory.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>

#include "common/executable_path.hpp"
#include "tests/support/temp_dir.hpp"

namespace fs = std::filesystem;
using muster::executable_path;

namespace {

fs::path make_file(const fs::path& file, mode_t mode) {
  std::ofstream(file) << "#!/bin/sh\n";
  ::chmod(file.c_str(), mode);
  return file;
}

}  // namespace

TEST_CASE("executable_path finds a name in the PATH's directories in order", "[executable_path]") {
  muster::test::temp_dir dir;
  fs::create_directories(dir.path() / "a");
  fs::create_directories(dir.path() / "b");
  make_file(dir.path() / "a" / "tool", 0644);  // not executable: passed over
  make_file(dir.path() / "b" / "tool", 0755);
  const auto path = (dir.path() / "a").string() + ":" + (dir.path() / "b").string();
  CHECK(executable_path("tool", path) == dir.path() / "b" / "tool");
  make_file(dir.path() / "a" / "tool", 0755);
  CHECK(executable_path("tool", path) == dir.path() / "a" / "tool");
  CHECK_FALSE(executable_path("no-such-tool", path));
}

TEST_CASE("executable_path passes over a directory of the command's name", "[executable_path]") {
  muster::test::temp_dir dir;
  fs::create_directories(dir.path() / "a" / "tool");
  fs::create_directories(dir.path() / "b");
  make_file(dir.path() / "b" / "tool", 0755);
  const auto path = (dir.path() / "a").string() + ":" + (dir.path() / "b").string();
  CHECK(executable_path("tool", path) == dir.path() / "b" / "tool");
  errno = 0;
  CHECK_FALSE(executable_path((dir.path() / "a" / "tool").string(), ""));
  CHECK(errno == EISDIR);
}

TEST_CASE(
    "executable_path takes a name with a slash as it is, and an empty PATH entry as the "
    "current directory",
    "[executable_path]") {
  muster::test::temp_dir dir;
  const auto tool = make_file(dir.path() / "tool", 0755);
  CHECK(executable_path(tool.string(), "/nowhere") == tool);
  errno = 0;
  CHECK_FALSE(executable_path((dir.path() / "missing").string(), ""));
  CHECK(errno == ENOENT);

  const auto before = fs::current_path();
  fs::current_path(dir.path());
  CHECK(executable_path("tool", "/nowhere:") == fs::path(".") / "tool");
  CHECK_FALSE(executable_path("tool", "/nowhere"));
  fs::current_path(before);
}

TEST_CASE("executable_path searches the default when the PATH value is empty",
          "[executable_path]") {
  CHECK(executable_path("sh", "").has_value());
  CHECK_FALSE(executable_path("sh", "", "/nowhere"));
  CHECK_FALSE(executable_path("", "/bin"));
}

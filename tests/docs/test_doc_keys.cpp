// Every config key the docs name (`launch.nproc`, `train.steps=20`, `daemon.mode`) is a key of the
// job file or of musterd.toml, so a renamed key cannot leave a page that sends users to a key
// the loader refuses.
#include <catch2/catch.hpp>

#include <filesystem>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "common/job_config.hpp"
#include "daemon/daemon_config.hpp"
#include "tests/support/temp_dir.hpp"

namespace fs = std::filesystem;

namespace {

struct known_keys {
  std::set<std::string> keys, sections;
};

known_keys job_and_daemon_keys() {
  known_keys k;
  auto add = [&](std::string_view key) {
    k.keys.emplace(key);
    k.sections.emplace(key.substr(0, key.rfind('.')));
  };
  for (const auto& f : muster::job_config_schema()) add(f.key);
  for (const auto& f : muster::daemon::daemon_config_schema()) add(f.key);
  return k;
}

// "section.key" in `token` (with a trailing "=value" or punctuation), when section is a config
// section and key is not a file name's extension (job.toml, slurm.conf).
std::string key_in(std::string token, const known_keys& known) {
  if (const auto eq = token.find('='); eq != std::string::npos) token.resize(eq);
  while (!token.empty() && std::string_view(".,;:!?*").find(token.back()) != std::string::npos)
    token.pop_back();
  const auto dot = token.find('.');
  if (dot == std::string::npos || dot == 0 || dot + 1 == token.size()) return "";
  for (char c : token)
    if (!(std::islower(static_cast<unsigned char>(c)) ||
          std::isdigit(static_cast<unsigned char>(c)) || c == '_' || c == '.'))
      return "";
  if (token.find('.', dot + 1) != std::string::npos) return "";  // a.b.c: a host, a version
  if (!known.sections.contains(token.substr(0, dot))) return "";
  static const std::set<std::string> kExtensions = {
      "toml",   "json", "md",   "log", "txt", "sh",  "py",   "db",          "service", "conf",
      "sbatch", "out",  "so",   "hpp", "cpp", "c",   "h",    "gz",          "yaml",    "yml",
      "bin",    "idx",  "sock", "d",   "pt",  "err", "html", "safetensors", "csv",     "target"};
  if (kExtensions.contains(token.substr(dot + 1))) return "";
  return token;
}

std::vector<fs::path> pages() {
  const fs::path source(MUSTER_SOURCE_DIR);
  std::vector<fs::path> out = {source / "README.md"};
  for (const auto* dir : {"docs", "docs/man"})
    for (const auto& entry : fs::directory_iterator(source / dir))
      if (entry.is_regular_file()) out.push_back(entry.path());
  return out;
}

}  // namespace

TEST_CASE("every config key the docs and man pages name exists", "[docs]") {
  const auto known = job_and_daemon_keys();
  REQUIRE(known.keys.contains("launch.nproc"));
  REQUIRE(known.keys.contains("daemon.socket"));
  int named = 0;
  for (const auto& page : pages()) {
    std::istringstream text(muster::test::read_file(page));
    std::string line;
    for (int number = 1; std::getline(text, line); ++number) {
      for (char& c : line)
        if (std::string_view("`'\"()[]{},<>|").find(c) != std::string_view::npos) c = ' ';
      std::istringstream words(line);
      std::string word;
      while (words >> word) {
        const auto key = key_in(word, known);
        if (key.empty()) continue;
        ++named;
        INFO(page.filename().string() << ":" << number << ": " << key);
        CHECK(known.keys.contains(key));
      }
    }
  }
  CHECK(named > 100);  // the pages do name keys: the scan finds them
}

TEST_CASE("the docs key scan takes keys and leaves file names and prose", "[docs]") {
  const auto known = job_and_daemon_keys();
  CHECK(key_in("train.steps=20", known) == "train.steps");
  CHECK(key_in("launch.nproc.", known) == "launch.nproc");
  CHECK(key_in("daemon.mode", known) == "daemon.mode");
  CHECK(key_in("job.toml", known).empty());
  CHECK(key_in("slurm.conf", known).empty());
  CHECK(key_in("e.g.", known).empty());
  CHECK(key_in("Launch.nproc", known).empty());
  CHECK(key_in("launch.", known).empty());
}

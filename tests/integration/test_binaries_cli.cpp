// Every installed binary answers --help with its usage and --version with the version and the
// git commit it was built from, and exits 0 for both.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "muster/version.hpp"
#include "tests/support/subprocess.hpp"

namespace {

std::string bin(const std::string& name) {
  return std::string(MUSTER_BIN_DIR) + "/" + name;
}

std::vector<std::string> binaries() {
  std::vector<std::string> names = {"muster", "musterd", "muster-sbatch"};
#ifdef MUSTER_WITH_TRAIN
  names.push_back("muster-train");
#endif
  return names;
}

}  // namespace

TEST_CASE("every binary prints its version and git commit with --version", "[cli]") {
  for (const auto& name : binaries()) {
    const auto r = muster::test::run_process({bin(name), "--version"});
    INFO(name << ": " << r.out << r.err);
    CHECK(r.exit_code == 0);
    CHECK(r.out ==
          name + " " + muster::kVersion + " (git " + std::string(muster::kGitCommit) + ")\n");
  }
}

TEST_CASE("every binary prints its usage with --help and -h", "[cli]") {
  for (const auto& name : binaries())
    for (const std::string flag : {"--help", "-h"}) {
      const auto r = muster::test::run_process({bin(name), flag});
      INFO(name << " " << flag << ": " << r.out << r.err);
      CHECK(r.exit_code == 0);
      CHECK_THAT(r.out, Catch::Contains(name));
      CHECK_THAT(r.out, Catch::Contains("--version"));
    }
  // muster lists its verbs, musterd its options
  const auto muster = muster::test::run_process({bin("muster"), "--help"}).out;
  for (const auto* verb : {"run", "launch", "plan", "config", "status", "diagnose", "report",
                           "node", "hostnames", "hostlist"})
    CHECK_THAT(muster, Catch::Contains(std::string("  ") + verb + " "));
  const auto musterd = muster::test::run_process({bin("musterd"), "--help"}).out;
  for (const auto* option : {"--config", "--check-config", "--socket", "--state-dir"})
    CHECK_THAT(musterd, Catch::Contains(option));
}

TEST_CASE("muster run without a job file or a program says it runs the default job", "[cli]") {
  // a bad override stops it right after the note (no training)
  const auto r = muster::test::run_process({bin("muster"), "run", "launch.nproc=-1"});
  INFO(r.out << r.err);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("muster run: no job file and no program after --: "
                                    "muster-train on the default job"));
  CHECK_THAT(r.err, Catch::Contains("launch.nproc"));
  // with a program after --, the defaults are the point: no note
  const auto with_program =
      muster::test::run_process({bin("muster"), "run", "launch.nproc=-1", "--", "/bin/true"});
  CHECK_THAT(with_program.err, !Catch::Contains("no job file"));
}

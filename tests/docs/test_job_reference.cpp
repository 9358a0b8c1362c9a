// docs/job-file.md ends with `muster config --reference`: every job key with its type, default
// and doc, from the schema the loader reads. It must be exactly what the code prints now.
#include <catch2/catch.hpp>

#include <filesystem>
#include <sstream>
#include <string>

#include "common/job_config.hpp"
#include "tests/support/temp_dir.hpp"

namespace {

constexpr const char* kMarker = "<!-- muster config --reference -->\n";

// The first line where a and b differ, for the failure message.
std::string first_difference(const std::string& a, const std::string& b) {
  std::istringstream in_a(a), in_b(b);
  std::string line_a, line_b;
  for (int n = 1;; ++n) {
    const bool more_a = static_cast<bool>(std::getline(in_a, line_a));
    const bool more_b = static_cast<bool>(std::getline(in_b, line_b));
    if (!more_a && !more_b) return "";
    if (!more_a || !more_b || line_a != line_b)
      return "line " + std::to_string(n) +
             " of the reference:\n  docs: " + (more_a ? line_a : "(ends)") +
             "\n  code: " + (more_b ? line_b : "(ends)");
  }
}

}  // namespace

TEST_CASE("docs/job-file.md holds the reference the code prints, every key with its default",
          "[docs]") {
  const auto page =
      muster::test::read_file(std::filesystem::path(MUSTER_SOURCE_DIR) / "docs/job-file.md");
  const auto at = page.find(kMarker);
  REQUIRE(at != std::string::npos);
  const auto documented = page.substr(at + std::string(kMarker).size());
  const auto printed = muster::job_config_reference();
  INFO("regenerate the tables under the marker with: muster config --reference\n"
       << first_difference(documented, printed));
  CHECK(documented == printed);
  // every key of the schema has its row
  for (const auto& field : muster::job_config_schema())
    CHECK_THAT(printed, Catch::Contains("| `" + std::string(field.key) + "` |"));
}

TEST_CASE("the reference escapes what would break a Markdown table", "[docs]") {
  const auto printed = muster::job_config_reference();
  // parallel.allocation's doc has a '|' in its example; the runs_dir doc has <runs_dir>
  CHECK_THAT(printed, Catch::Contains(R"(attn:d1p4t2c2\|ffn:d1p4t1e4)"));
  CHECK_THAT(printed, Catch::Contains(R"(\<runs_dir>)"));
  std::istringstream lines(printed);
  std::string line;
  while (std::getline(lines, line)) {
    if (!line.starts_with("| `")) continue;
    int cells = 0;  // unescaped '|' separators: 5 for 4 columns
    for (std::size_t i = 0; i < line.size(); ++i)
      if (line[i] == '|' && (i == 0 || line[i - 1] != '\\')) ++cells;
    INFO(line);
    CHECK(cells == 5);
  }
}

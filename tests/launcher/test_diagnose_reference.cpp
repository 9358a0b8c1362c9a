// docs/diagnose.md against the diagnoser: every category of categories.hpp has one section
// (`### <id>`) and one table row under "## Categories", nothing else has a section there, and
// each section's example (a ```log block), fed to a diagnoser, makes a finding of that category
// and the output the page shows in its ```text block (summary, evidence and fixes, line by line).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "launcher/diagnose/categories.hpp"
#include "launcher/diagnose/diagnosis.hpp"
#include "tests/support/temp_dir.hpp"

using namespace muster::launcher::diagnose;

namespace {

struct section {
  std::string id;                   // the heading's text
  std::vector<std::string> log;     // the ```log block: the example's lines
  std::vector<std::string> output;  // the ```text block: what muster diagnose printed
  int world_size = 0;               // from "--world-size N" in the command shown; 0: none
};

struct category_part {
  std::vector<std::string> rows;  // the table's rows ("| `id` | meaning |")
  std::vector<section> sections;
};

// The "## Categories" part of the page, read line by line: it ends at the next "## " heading.
category_part read_page() {
  const auto text = muster::test::read_file(std::string(MUSTER_SOURCE_DIR) + "/docs/diagnose.md");
  category_part part;
  bool in_part = false;
  bool in_block = false;
  std::vector<std::string>* block = nullptr;  // the block being read, when it is kept
  std::size_t at = 0;
  while (at < text.size()) {
    const auto nl = std::min(text.find('\n', at), text.size());
    const std::string line = text.substr(at, nl - at);
    at = nl + 1;
    if (in_block) {
      if (line == "```")
        in_block = false;
      else if (block)
        block->push_back(line);
      continue;
    }
    if (line.starts_with("```")) {  // a fence anywhere: what it holds is no heading
      in_block = true;
      block = nullptr;
      if (in_part && !part.sections.empty()) {
        if (line == "```log") block = &part.sections.back().log;
        if (line == "```text") block = &part.sections.back().output;
      }
      continue;
    }
    if (line.starts_with("## ")) {
      in_part = line == "## Categories";
      continue;
    }
    if (!in_part) continue;
    if (line.starts_with("### ")) {
      part.sections.push_back({line.substr(4), {}, {}, 0});
    } else if (line.starts_with("| `")) {
      part.rows.push_back(line);
    } else if (const auto ws = line.find("--world-size "); ws != std::string::npos) {
      if (!part.sections.empty())
        part.sections.back().world_size = std::atoi(line.c_str() + ws + 13);
    }
  }
  return part;
}

diagnosis diagnose_example(const section& s) {
  diagnoser d(s.world_size);
  std::int64_t n = 0;
  for (const auto& line : s.log) d.add_line("job.log", ++n, line);
  return d.finish();
}

// The lines muster diagnose prints for `d` (as print_text in launcher/cli/diagnose_verbs.cpp),
// less those that count lines.
std::vector<std::string> printed(const diagnosis& d) {
  std::vector<std::string> out;
  auto evidence = [&](const std::string& indent, const evidence_line& e) {
    out.push_back(indent + e.file + ":" + std::to_string(e.line) + ": " + e.text);
  };
  for (const auto& e : d.suspicious) evidence("  ", e);
  for (const auto& f : d.findings) {
    out.push_back(std::string(f.root ? "ROOT " : "then ") + " [" + f.category + "] " + f.summary);
    for (const auto& e : f.evidence) evidence("    ", e);
    for (std::size_t i = 0; i < f.fixes.size(); ++i)
      out.push_back("  fix " + std::to_string(i + 1) + ": " + f.fixes[i]);
  }
  return out;
}

}  // namespace

TEST_CASE("the diagnose page has one section and one row for each category, and no others",
          "[diagnose][docs]") {
  const auto part = read_page();
  std::set<std::string_view> ids;
  for (const auto& c : categories()) {
    INFO(c.id);
    CHECK(ids.insert(c.id).second);  // listed once
    int found = 0;
    for (const auto& s : part.sections) found += s.id == c.id;
    CHECK(found == 1);
    const auto row = "| `" + std::string(c.id) + "` | " + std::string(c.meaning) + " |";
    CHECK(std::count(part.rows.begin(), part.rows.end(), row) == 1);
  }
  for (const auto& s : part.sections) {
    INFO("### " << s.id);
    CHECK(find_category(s.id));
  }
  CHECK(part.rows.size() == categories().size());
  CHECK(ids.size() >= 17);
}

TEST_CASE("each example of the diagnose page makes its category and the output shown",
          "[diagnose][docs]") {
  const auto part = read_page();
  REQUIRE(!part.sections.empty());
  for (const auto& s : part.sections) {
    INFO("### " << s.id);
    const auto* c = find_category(s.id);
    CHECK(c);
    // every category is made by a log line today (the store's and the error files' signals
    // are also made by one), so every section has an example
    CHECK(!s.log.empty());
    CHECK(s.log.size() <= 6);
    if (!c || s.log.empty()) continue;
    const auto d = diagnose_example(s);
    switch (c->role) {
      case category_role::cause:
        REQUIRE(d.failed());
        CHECK(d.findings.front().category == s.id);
        break;
      case category_role::knock_on: {
        const auto it = std::find_if(d.findings.begin(), d.findings.end(),
                                     [&](const finding& f) { return f.category == s.id; });
        REQUIRE(it != d.findings.end());
        CHECK_FALSE(it->root);
        break;
      }
      case category_role::nothing:
        CHECK_FALSE(d.failed());
        CHECK(!d.suspicious.empty());
        break;
    }
    // the output shown is what the diagnoser says now, line by line, and no finding more
    for (const auto& line : printed(d)) {
      INFO("printed: " << line);
      CHECK(std::count(s.output.begin(), s.output.end(), line) == 1);
    }
    const auto headings = std::count_if(s.output.begin(), s.output.end(), [](const auto& line) {
      return line.starts_with("ROOT  [") || line.starts_with("then  [");
    });
    CHECK(headings == static_cast<std::ptrdiff_t>(d.findings.size()));
  }
}

TEST_CASE("a finding of a category the list does not hold is refused", "[diagnose]") {
  diagnoser d;
  d.add_signal({"no_such_category", 1, {}}, {"job.log", 1, "x", std::nullopt});
  CHECK_THROWS_AS(d.finish(), std::logic_error);
  CHECK_THROWS_WITH(d.finish(),
                    Catch::Contains("'no_such_category'") && Catch::Contains("categories.hpp"));
  // `unknown` names the lack of a finding, never a finding
  diagnoser none;
  none.add_signal({"unknown", 1, {}}, {"job.log", 1, "x", std::nullopt});
  CHECK_THROWS_AS(none.finish(), std::logic_error);
  // a listed one is taken
  diagnoser listed;
  listed.add_signal({"slurm_time_limit", std::nullopt, {}}, {"job.log", 1, "x", std::nullopt});
  CHECK(listed.finish().findings.front().category == "slurm_time_limit");
}

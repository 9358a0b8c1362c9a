// docs/run-store.md documents every table and column of the run store and of the node store,
// with the type the schema declares, and nothing that is not there: the files are made by the
// real writers, and their tables are read back from SQLite itself.
#include <catch2/catch.hpp>

#include <filesystem>
#include <map>
#include <sstream>
#include <string>

#include "common/run_store.hpp"
#include "common/sqlite_db.hpp"
#include "daemon/node_store.hpp"
#include "tests/support/temp_dir.hpp"

namespace fs = std::filesystem;
using muster::store::open_mode;
using muster::store::sqlite_db;

namespace {

// table -> column -> declared type
using tables = std::map<std::string, std::map<std::string, std::string>>;

tables tables_of(const fs::path& file) {
  sqlite_db db(file, open_mode::read_only);
  tables out;
  auto list = db.prepare(
      "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%'");
  std::vector<std::string> names;
  list.for_each_row("list tables", [&] { names.push_back(list.column_text(0)); });
  for (const auto& name : names) {
    auto columns = db.prepare("SELECT name, type FROM pragma_table_info('" + name + "')");
    columns.for_each_row("list columns",
                         [&] { out[name][columns.column_text(0)] = columns.column_text(1); });
  }
  return out;
}

// The tables of one "## <heading>" part of the page: "### `table`" headings, then rows
// "| `column` | TYPE | meaning |".
tables documented(const std::string& page, const std::string& heading) {
  std::istringstream lines(page);
  std::string line, table;
  bool inside = false;
  tables out;
  while (std::getline(lines, line)) {
    if (line.starts_with("## ")) inside = line == "## " + heading;
    if (!inside) continue;
    if (line.starts_with("### `") && line.ends_with("`")) {
      table = line.substr(5, line.size() - 6);
      out[table];
    } else if (!table.empty() && line.starts_with("| `")) {
      const auto name_end = line.find("` |", 3);
      const auto type_end = line.find(" |", name_end + 3);
      if (name_end == std::string::npos || type_end == std::string::npos) continue;
      out[table][line.substr(3, name_end - 3)] = line.substr(name_end + 4, type_end - name_end - 4);
    }
  }
  return out;
}

void check_same(const tables& in_file, const tables& in_docs, const std::string& store) {
  for (const auto& [table, columns] : in_file) {
    INFO(store << " table " << table);
    REQUIRE(in_docs.contains(table));
    for (const auto& [column, type] : columns) {
      INFO("column " << column);
      REQUIRE(in_docs.at(table).contains(column));
      CHECK(in_docs.at(table).at(column) == type);
    }
    CHECK(in_docs.at(table).size() == columns.size());  // nothing documented that is not there
  }
  for (const auto& [table, columns] : in_docs) {
    INFO(store << ": docs/run-store.md documents table " << table);
    CHECK(in_file.contains(table));
  }
}

}  // namespace

TEST_CASE("docs/run-store.md documents every table and column of both stores, with its type",
          "[docs]") {
  const auto page = muster::test::read_file(fs::path(MUSTER_SOURCE_DIR) / "docs/run-store.md");
  muster::test::temp_dir dir("store-reference");
  { muster::store::node_writer run_store(dir / "node-a.db"); }
  { muster::daemon::node_store node_store(dir / "state/musterd.db", 90); }

  const auto run_tables = tables_of(dir / "node-a.db");
  REQUIRE(run_tables.contains("steps"));
  check_same(run_tables, documented(page, "The run store"), "run store");

  const auto node_tables = tables_of(dir / "state/musterd.db");
  REQUIRE(node_tables.contains("decisions"));
  check_same(node_tables, documented(page, "The node store"), "node store");
}

TEST_CASE("docs/run-store.md names every state and severity the run store writes", "[docs]") {
  const auto page = muster::test::read_file(fs::path(MUSTER_SOURCE_DIR) / "docs/run-store.md");
  using namespace muster::store;
  for (auto s : {run_state::created, run_state::running, run_state::succeeded, run_state::failed,
                 run_state::cancelled})
    CHECK_THAT(page, Catch::Contains("`" + std::string(to_string(s)) + "`"));
  for (auto s : {rank_state::pending, rank_state::running, rank_state::succeeded,
                 rank_state::failed, rank_state::killed})
    CHECK_THAT(page, Catch::Contains("`" + std::string(to_string(s)) + "`"));
  for (auto s : {severity::debug, severity::info, severity::warn, severity::error})
    CHECK_THAT(page, Catch::Contains("`" + std::string(to_string(s)) + "`"));
}

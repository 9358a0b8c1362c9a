// A worker's error file (common/worker_error.hpp): ours, torchelastic's, and anything else.
#include <catch2/catch.hpp>

#include <fstream>

#include "common/worker_error.hpp"
#include "tests/support/temp_dir.hpp"

using namespace muster;

TEST_CASE("an error file round-trips phase, kind, step and time", "[worker_error]") {
  worker_error e{"[rank 1/2 group world] all_reduce seq=7 \"timed out\"\nsecond line", "backward",
                 "collective_timeout", 11, 1795000000123};
  auto back = parse_worker_error(format_worker_error(e));
  CHECK(back.message == e.message);
  CHECK(back.phase == "backward");
  CHECK(back.kind == "collective_timeout");
  CHECK(back.step == 11);
  CHECK(back.time_ms == 1795000000123);
}

TEST_CASE("torchelastic's own error files and plain text are read too", "[worker_error]") {
  auto elastic = parse_worker_error(
      R"({"message": {"message": "RuntimeError: CUDA out of memory", "extraInfo": {"py_callstack": "...", "timestamp": "1700000000"}}})");
  CHECK(elastic.message == "RuntimeError: CUDA out of memory");
  CHECK(elastic.phase.empty());
  CHECK_FALSE(elastic.step);
  CHECK(parse_worker_error(R"({"message": "flat"})").message == "flat");
  CHECK(parse_worker_error("Segmentation fault").message == "Segmentation fault");
}

TEST_CASE("a missing error file is no error", "[worker_error]") {
  muster::test::temp_dir tmp;
  CHECK_FALSE(read_worker_error(tmp.path() / "none.json"));
  std::ofstream(tmp.path() / "e.json") << format_worker_error({"boom", "data", "exception", 0, 5});
  auto e = read_worker_error(tmp.path() / "e.json");
  REQUIRE(e);
  CHECK(e->phase == "data");
}

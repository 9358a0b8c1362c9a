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

TEST_CASE("an error file's time says whether an earlier attempt wrote it, to its precision",
          "[worker_error]") {
  // torchelastic's timestamp is a whole second: written within the second an attempt started
  // is not before it
  auto e = muster::parse_worker_error(
      R"({"message": {"message": "x", "extraInfo": {"timestamp": "1800000000"}}})");
  CHECK(e.time_ms == 1'800'000'000'000);
  CHECK(e.time_in_seconds);
  CHECK_FALSE(e.before(1'800'000'000'700));
  CHECK(e.before(1'800'000'001'000));
  // ours to the millisecond
  muster::worker_error ours{"y", "forward", "exception", 3, 1'800'000'000'500};
  CHECK(ours.before(1'800'000'000'501));
  CHECK_FALSE(ours.before(1'800'000'000'500));
  CHECK_FALSE(muster::worker_error{}.before(1));  // a time not known
}

// Tests of muster::error and the check macros (common/error.hpp).
#include <catch2/catch.hpp>

#include "common/error.hpp"
#include "tests/support/expect_error.hpp"

TEST_CASE("MUSTER_CHECK throws a formatted error with its category and place", "[error]") {
  int ranks = 3;
  auto e = muster::test::expect_error(
      [&] { MUSTER_CHECK(ranks % 2 == 0, muster::errc::config, "{} ranks do not pair", ranks); });
  CHECK(e.category() == muster::errc::config);
  CHECK(std::string(e.what()) == "3 ranks do not pair");
  CHECK_THAT(e.where(), Catch::Matches("tests/common/test_error\\.cpp:[0-9]+"));
  CHECK(muster::to_string(e.category()) == "config");
}

TEST_CASE("MUSTER_CHECK does nothing when the condition holds", "[error]") {
  CHECK_NOTHROW([] { MUSTER_CHECK(1 + 1 == 2, muster::errc::internal, "math"); }());
}

TEST_CASE("MUSTER_ASSERT names the broken invariant as an internal error", "[error]") {
  std::string msg = muster::test::expect_error(muster::errc::internal, [] { MUSTER_ASSERT(2 < 1); });
  CHECK(msg == "internal error: 2 < 1 is false");
}

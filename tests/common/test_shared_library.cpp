// Opening a library at run time (common/shared_library): the first soname that loads wins, a
// missing symbol is null or an error naming it, and no loadable soname is an error naming every
// one tried and where to put the library's folder.
#include <catch2/catch.hpp>

#include <cmath>
#include <stdexcept>
#include <string>

#include "common/shared_library.hpp"

TEST_CASE("shared_library opens the first soname that loads and finds its symbols",
          "[shared_library]") {
  const muster::shared_library lib("the math library", {"libmuster-none.so.9", "libm.so.6"});
  CHECK(lib.soname() == "libm.so.6");
  double (*cosine)(double) = nullptr;
  lib.load(cosine, "cos");
  REQUIRE(cosine != nullptr);
  CHECK(cosine(0.0) == 1.0);
  CHECK(lib.find("muster_no_such_symbol") == nullptr);
  REQUIRE_THROWS_WITH(lib.require("muster_no_such_symbol"),
                      "the math library (libm.so.6) has no muster_no_such_symbol: it is older "
                      "than this build expects");
}

TEST_CASE("shared_library names every soname tried when none loads", "[shared_library]") {
  try {
    muster::shared_library lib("NCCL", {"libmuster-none.so.1", "libmuster-none.so.2"});
    FAIL("a library that is not there loaded");
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    CHECK(what.rfind("NCCL could not be loaded (tried libmuster-none.so.1, libmuster-none.so.2): ",
                     0) == 0);
    CHECK(what.find("LD_LIBRARY_PATH") != std::string::npos);
  }
}

// expect_error: run a piece of a test that must throw muster::error, and hand back the error so
// the test can check its category and message. Header-only: it uses Catch2's FAIL.
#pragma once

#include <catch2/catch.hpp>

#include <stdexcept>

#include "common/error.hpp"

namespace muster::test {

// The muster::error that f() throws; fails the test when f returns normally.
template <class F>
muster::error expect_error(F&& f) {
  try {
    f();
  } catch (const muster::error& e) {
    return e;
  }
  FAIL("expected a muster::error, but none was thrown");
  throw std::logic_error("unreachable");
}

// The message of the muster::error that f() throws, checking its category.
template <class F>
std::string expect_error(muster::errc category, F&& f) {
  muster::error e = expect_error(std::forward<F>(f));
  CHECK(muster::to_string(e.category()) == muster::to_string(category));
  return e.what();
}

}  // namespace muster::test

// The heartbeat progress line between a worker and its launcher (common/heartbeat_line.hpp).
#include <catch2/catch.hpp>

#include "common/heartbeat_line.hpp"

using namespace muster;

TEST_CASE("a heartbeat line says step, steps, loss and tokens/s in any order") {
  auto p = parse_heartbeat("loss=2.5 step=120 tokens_per_s=51234.5 steps=1000 lr=3e-4\n");
  CHECK(p.step == 120);
  CHECK(p.steps == 1000);
  CHECK(p.loss == Approx(2.5));
  CHECK(p.tokens_per_s == Approx(51234.5));
  auto round_trip = parse_heartbeat(format_heartbeat(p));
  CHECK(round_trip.step == 120);
  CHECK(round_trip.steps == 1000);
  CHECK(round_trip.loss == Approx(2.5));
  CHECK(round_trip.tokens_per_s == Approx(51234.5));
}

TEST_CASE("a heartbeat without its newline, or with bad numbers, says nothing wrong") {
  CHECK_FALSE(parse_heartbeat("step=12").step);  // a write caught half done: maybe of step=123
  CHECK_FALSE(parse_heartbeat("").step);
  CHECK_FALSE(parse_heartbeat("step=-3 steps=-1\n").step);  // counts are not negative
  auto p = parse_heartbeat("step=12x steps= loss=nan? tokens_per_s=4e3 garbage\n");
  CHECK_FALSE(p.step);
  CHECK_FALSE(p.steps);
  CHECK_FALSE(p.loss);
  CHECK(p.tokens_per_s == Approx(4000));
}


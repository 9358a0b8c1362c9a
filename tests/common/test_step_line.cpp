// The per-step line between a worker and its launcher (common/step_line.hpp).
#include <catch2/catch.hpp>

#include <cmath>

#include "common/step_line.hpp"

using namespace muster;

TEST_CASE("a step line round-trips every field but the rank", "[step_line]") {
  store::step_record s{7, 12, 3.40213, 512, 0.031, 183500800, 1795000000123};
  auto back = parse_step_line(format_step_line(s));
  REQUIRE(back);
  CHECK(back->rank == 0);
  CHECK(back->step == 12);
  CHECK(back->loss == Approx(3.40213));
  CHECK(back->tokens == 512);
  CHECK(back->step_time_s == Approx(0.031));
  CHECK(back->mem_bytes == 183500800);
  CHECK(back->time_ms == 1795000000123);
}

TEST_CASE("the engine's metrics round-trip, and are left out when not reported", "[step_line]") {
  store::step_record s{0, 3, 2.5, 64, 0.5, 1000, 7};
  s.aux_loss = 0.0125;
  s.z_loss = 0;
  s.grad_norm = 1.5;
  s.lr = 3e-4;
  s.tokens_per_s = 128;
  s.mfu = 0.25;
  s.peak_mem_bytes = 4096;
  s.comm_wait_s = 0.125;
  s.mem_device = "cuda";
  auto back = parse_step_line(format_step_line(s));
  REQUIRE(back);
  CHECK(*back == s);
  const auto bare = format_step_line({0, 3, 2.5, 64, 0.5, 1000, 7});
  CHECK(bare.find("mfu") == std::string::npos);
  CHECK(bare.find("peak_mem_bytes") == std::string::npos);
  CHECK(bare.find("comm_wait_s") == std::string::npos);
  CHECK(bare.find("mem_device") == std::string::npos);
  auto plain = parse_step_line(bare);
  REQUIRE(plain);
  CHECK(std::isnan(plain->mfu));
  CHECK(plain->peak_mem_bytes == 0);
}

TEST_CASE("a line still being written, or without a step, is not a record", "[step_line]") {
  CHECK_FALSE(parse_step_line("step=3 loss=1.5"));  // no newline yet
  CHECK_FALSE(parse_step_line("loss=1.5 tokens=4\n"));
  CHECK_FALSE(parse_step_line("step=-1\n"));
  CHECK_FALSE(parse_step_line("step=x\n"));
  auto nan = parse_step_line("step=4 loss=nan extra=1\n");  // a diverged run is kept
  REQUIRE(nan);
  CHECK(std::isnan(nan->loss));
}

// Tests of AReaL allocation strings (launcher/plan/allocation.hpp).
#include <catch2/catch.hpp>

#include "launcher/plan/allocation.hpp"
#include "tests/support/expect_error.hpp"

using muster::launcher::plan::allocation;
using muster::launcher::plan::parse_allocation;

namespace {

std::string parse_error(const std::string& text) {
  INFO("allocation " << text);
  return muster::test::expect_error(muster::errc::config, [&] { parse_allocation(text); });
}

}  // namespace

TEST_CASE("a bare allocation gives the sizes it names and leaves the rest unset", "[allocation]") {
  allocation a = parse_allocation("d4t2p2");
  CHECK(a.backend.empty());
  CHECK_FALSE(a.folded);
  CHECK(a.d == 4);
  CHECK(a.t == 2);
  CHECK(a.p == 2);
  CHECK(a.c == 0);
  CHECK(a.e == 0);
}

TEST_CASE("a backend prefix and e in the unfolded form are read", "[allocation]") {
  allocation a = parse_allocation("megatron:d2p2t4e4");
  CHECK(a.backend == "megatron");
  CHECK(a.d == 2);
  CHECK(a.p == 2);
  CHECK(a.t == 4);
  CHECK(a.e == 4);
  CHECK(parse_allocation("fsdp:d8").d == 8);
  CHECK(parse_allocation(" megatron : t2 d 3 ").d == 3);  // whitespace is ignored
}

TEST_CASE("the folded form reads the attn and ffn halves separately", "[allocation]") {
  allocation a = parse_allocation("megatron:(attn:d1p4t2c2|ffn:d1p4t1e4)");
  CHECK(a.folded);
  CHECK((a.d == 1 && a.p == 4 && a.t == 2 && a.c == 2 && a.e == 0));
  CHECK((a.ffn_d == 1 && a.ffn_p == 4 && a.ffn_t == 1 && a.ffn_e == 4));
  allocation b = parse_allocation("megatron:attn:d4p2t2c2|ffn:t4e2");  // parentheses optional
  CHECK((b.folded && b.d == 4 && b.ffn_d == 0 && b.ffn_t == 4 && b.ffn_e == 2 && b.ffn_p == 0));
}

TEST_CASE("allocation mistakes name the column and the rule", "[allocation]") {
  CHECK_THAT(parse_error("megatron:(attn:d1p4e2|ffn:e4)"),
             Catch::Contains("column 20: 'e' is allowed only in the ffn half"));
  CHECK_THAT(parse_error("megatron:(attn:d1|ffn:c2e4)"),
             Catch::Contains("'c' is allowed only in the attn half"));
  CHECK_THAT(parse_error("d4x2"), Catch::Contains("column 3: 'x' is not a dimension here"));
  CHECK_THAT(parse_error("d4d2"), Catch::Contains("'d' is given twice"));
  CHECK_THAT(parse_error("d0t2"), Catch::Contains("d0: sizes start at 1"));
  CHECK_THAT(parse_error("t"), Catch::Contains("'t' needs a size after it"));
  CHECK_THAT(parse_error(""), Catch::Contains("no dimensions"));
  CHECK_THAT(parse_error("megatron:(attn:d2|ffn:e2"),
             Catch::Contains("expected ')' to close the folded form"));
  CHECK_THAT(parse_error("megatron:(attn:d2ffn:e2)"), Catch::Contains("column 18: expected '|' before \"ffn:\""));
  CHECK_THAT(parse_error("sglang:d4+megatron:d4"),
             Catch::Contains("muster plans one training component"));
  CHECK_THAT(parse_error("vllm:d4"), Catch::Contains("vllm is an inference backend"));
  CHECK_THAT(parse_error("fsdp:d2e2"), Catch::Contains("the fsdp backend has no expert parallelism"));
  CHECK_THAT(parse_error("d99999999999"), Catch::Contains("size too large"));
}

// Tests of byte sizes as users write them (common/byte_size.hpp).
#include <catch2/catch.hpp>

#include "common/byte_size.hpp"
#include "tests/support/expect_error.hpp"

TEST_CASE("byte sizes take binary and decimal units", "[byte_size]") {
  CHECK(muster::parse_byte_size("80GiB", "--gpu-memory") == 80LL << 30);
  CHECK(muster::parse_byte_size("141GB", "--gpu-memory") == 141'000'000'000LL);
  CHECK(muster::parse_byte_size("1.5 TiB", "x") == (3LL << 40) / 2);
  CHECK(muster::parse_byte_size("512mib", "x") == 512LL << 20);
  CHECK(muster::parse_byte_size("4096B", "x") == 4096);
  CHECK(muster::parse_byte_size("2G", "x") == 2LL << 30);
}

TEST_CASE("byte size mistakes name the input and give an example", "[byte_size]") {
  auto error = [](const char* text) {
    return muster::test::expect_error(muster::errc::invalid_input,
                                      [&] { muster::parse_byte_size(text, "--gpu-memory"); });
  };
  CHECK_THAT(error("80"), Catch::Contains("--gpu-memory: \"80\": give a unit; e.g. 80GiB"));
  CHECK_THAT(error("GiB"), Catch::Contains("expected a number"));
  CHECK_THAT(error("80 gigs"), Catch::Contains("unknown unit \"gigs\""));
  CHECK_THAT(error("1.2.3GB"), Catch::Contains("not a number"));
  CHECK_THAT(error("0GB"), Catch::Contains("out of range"));
  CHECK_THAT(error("99999999TiB"), Catch::Contains("out of range"));
}

TEST_CASE("byte sizes print in binary units with two decimals", "[byte_size]") {
  CHECK(muster::format_bytes(17) == "17 B");
  CHECK(muster::format_bytes(1536) == "1.50 KiB");
  CHECK(muster::format_bytes(80LL << 30) == "80.00 GiB");
  CHECK(muster::format_bytes(-(3LL << 29)) == "-1.50 GiB");
  CHECK(muster::format_bytes(0) == "0 B");
}

// Unit tests of common/hostlist: Slurm's hostlist grammar (expansion), scontrol-style
// compression, the errors muster adds where Slurm guesses, the limits (hosts, name length, name
// bytes), and the round-trip property expand(compress(x)) == x on random host vectors (seeded;
// MUSTER_TEST_SEED replays a failure).
// Expected values marked "scontrol 22.05" were checked against Debian's slurm-wlm 22.05.8; the
// forms where 22.05 and 23.02+ differ (text after ']', unclosed '[') follow 23.02+.
#include <catch2/catch.hpp>

#include <random>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "common/hostlist.hpp"
#include "tests/support/expect_error.hpp"
#include "tests/support/seed.hpp"

using muster::compress_hostlist;
using muster::count_hostlist;
using muster::expand_hostlist;
using muster::measure_hostlist;
using strings = std::vector<std::string>;

namespace {

// The message of the muster::error that expand_hostlist throws for `list` (fails if none).
std::string expand_error(const std::string& list) {
  return muster::test::expect_error(muster::errc::invalid_input, [&] {
    auto hosts = expand_hostlist(list);
    FAIL("expected an error for \"" << list << "\", got " << hosts.size() << " hosts");
  });
}

}  // namespace

TEST_CASE("hostlist expands the forms of Slurm's documented grammar", "[hostlist]") {
  struct row {
    std::string list;
    strings hosts;
  };
  const std::vector<row> table = {
      {"n1", {"n1"}},
      {"login", {"login"}},
      {"n[1-3]", {"n1", "n2", "n3"}},
      {"n[1-3,5]", {"n1", "n2", "n3", "n5"}},
      {"n[5,1-2]", {"n5", "n1", "n2"}},
      {"tux[0-2,12,20-21]", {"tux0", "tux1", "tux2", "tux12", "tux20", "tux21"}},
      {"n[1-2],m[3-4]", {"n1", "n2", "m3", "m4"}},
      {"n[1-2] m7\tx", {"n1", "n2", "m7", "x"}},
      {"a, b ,c", {"a", "b", "c"}},
      {"  a  ", {"a"}},
      {"[1-3]", {"1", "2", "3"}},      // scontrol 22.05
      {"n1-[2-3]", {"n1-2", "n1-3"}},  // scontrol 22.05
      {"n[7]", {"n7"}},
      {"n[1-1]", {"n1"}},
      {"n[2,2,1]", {"n2", "n2", "n1"}},  // order and duplicates kept
      {"a,a", {"a", "a"}},
      {"gpu-a07.cluster", {"gpu-a07.cluster"}},
      {"n[18446744073709551615]", {"n18446744073709551615"}},
      {"n[4294967295-4294967296]", {"n4294967295", "n4294967296"}},  // scontrol 22.05
      {"", {}},
      {" \t", {}},
  };
  for (const row& r : table) {
    INFO("list: \"" << r.list << "\"");
    CHECK(expand_hostlist(r.list) == r.hosts);
    CHECK(count_hostlist(r.list) == r.hosts.size());
  }
}

TEST_CASE("hostlist keeps zero padding from the low bound", "[hostlist]") {
  CHECK(expand_hostlist("n[01-3]") == strings{"n01", "n02", "n03"});       // scontrol 22.05
  CHECK(expand_hostlist("n[1-03]") == strings{"n1", "n2", "n3"});          // scontrol 22.05
  CHECK(expand_hostlist("n[8-11]") == strings{"n8", "n9", "n10", "n11"});  // scontrol 22.05
  CHECK(expand_hostlist("n[008-011]") == strings{"n008", "n009", "n010", "n011"});
  CHECK(expand_hostlist("n[99-101]") == strings{"n99", "n100", "n101"});
  CHECK(expand_hostlist("n[0-00]") == strings{"n0"});   // scontrol 22.05
  CHECK(expand_hostlist("n[00-0]") == strings{"n00"});  // scontrol 22.05
  CHECK(expand_hostlist("n[007]") == strings{"n007"});
  CHECK(expand_hostlist("n[1,02,003]") == strings{"n1", "n02", "n003"});
}

TEST_CASE("hostlist expands several bracket groups in Slurm's order", "[hostlist]") {
  // Two groups: the natural order (scontrol 22.05).
  CHECK(expand_hostlist("rack[1-2]-node[01-02]") ==
        strings{"rack1-node01", "rack1-node02", "rack2-node01", "rack2-node02"});
  CHECK(expand_hostlist("n[1-2][3-4]") == strings{"n13", "n14", "n23", "n24"});
  // Three and four groups: the last is fastest, then the first, ..., the second-to-last slowest
  // (scontrol 22.05; Slurm recurses on the prefix from its last '[').
  CHECK(expand_hostlist("a[1-2]b[1-2]c[1-2]") ==
        strings{"a1b1c1", "a1b1c2", "a2b1c1", "a2b1c2", "a1b2c1", "a1b2c2", "a2b2c1", "a2b2c2"});
  CHECK(expand_hostlist("a[1-2]b[3-4]c[5-6]d[7-8]") ==
        strings{"a1b3c5d7", "a1b3c5d8", "a2b3c5d7", "a2b3c5d8", "a1b4c5d7", "a1b4c5d8", "a2b4c5d7",
                "a2b4c5d8", "a1b3c6d7", "a1b3c6d8", "a2b3c6d7", "a2b3c6d8", "a1b4c6d7", "a1b4c6d8",
                "a2b4c6d7", "a2b4c6d8"});
  CHECK(count_hostlist("a[1-2]b[1-3,7]c[1-5]") == 2 * 4 * 5);
}

TEST_CASE("hostlist appends text after the last bracket as Slurm 23.02 does", "[hostlist]") {
  CHECK(expand_hostlist("n[1-2]-ib") == strings{"n1-ib", "n2-ib"});
  CHECK(expand_hostlist("n[1-2]x,n[1-2]y") == strings{"n1x", "n2x", "n1y", "n2y"});
  CHECK(expand_hostlist("r[1-2]-n[1-2].ib0") ==
        strings{"r1-n1.ib0", "r1-n2.ib0", "r2-n1.ib0", "r2-n2.ib0"});
}

TEST_CASE("hostlist rejects malformed lists with the input and a 1-based column", "[hostlist]") {
  struct row {
    std::string list;
    int column;
    std::string says;
  };
  const std::vector<row> table = {
      {"n[1-", 2, "never closed"},
      {"node[1-3", 5, "never closed"},
      {"n[3-1]", 3, "goes down"},
      {"n[a-b]", 3, "expected a number, found 'a'"},
      {"n[1-b]", 5, "expected a number, found 'b'"},
      {"n[1-10:2]", 7, "no step"},
      {"n[]", 3, "empty brackets"},
      {"a,,b", 3, "empty item between two commas"},
      {"a, ,b", 4, "empty item between two commas"},
      {",a", 1, "leading comma"},
      {"a,", 2, "trailing comma"},
      {"n[1,,2]", 5, "empty range between two commas"},
      {"n[,1]", 3, "empty range before ','"},
      {"n[1,]", 5, "empty range after ','"},
      {"n]1", 2, "']' without a matching '['"},
      {"n[1-2]]", 7, "']' without a matching '['"},
      {"n[[1-2]", 3, "'[' inside brackets"},
      {"n[1, 2]", 5, "whitespace inside brackets"},
      {"n[-1]", 3, "expected a number, found '-'"},
      {"n[+1]", 3, "expected a number, found '+'"},
      {"n[1-2-3]", 6, "expected ',' or ']'"},
      {"n[18446744073709551616]", 3, "larger than 18446744073709551615"},
  };
  for (const row& r : table) {
    INFO("list: \"" << r.list << "\"");
    std::string message = expand_error(r.list);
    CHECK_THAT(message, Catch::Contains("\"" + r.list + "\""));
    CHECK_THAT(message, Catch::Contains("column " + std::to_string(r.column) + ":"));
    CHECK_THAT(message, Catch::Contains(r.says));
    // The caret line points at the column under the quoted list.
    CHECK_THAT(message,
               Catch::EndsWith("\n  " + r.list + "\n  " +
                               std::string(static_cast<std::size_t>(r.column - 1), ' ') + "^"));
  }
}

TEST_CASE("hostlist quotes only the neighbourhood of a fault in a long list", "[hostlist]") {
  std::string list;
  for (int i = 0; i < 200; ++i) list += "node" + std::to_string(i) + ",";
  list += "bad]";
  std::string message = expand_error(list);
  CHECK_THAT(message, Catch::Contains("..."));
  CHECK_THAT(message, Catch::Contains("bad]"));
  CHECK_THAT(message, Catch::Contains(std::to_string(list.size()) + " characters"));
  CHECK(message.size() < 500);
}

TEST_CASE("hostlist caps the number of hosts before building any", "[hostlist]") {
  CHECK(muster::kMaxHostlistHosts == 1048576);
  CHECK(count_hostlist("n[1-1048576]") == 1048576);
  CHECK(count_hostlist("a[1-1024]b[1-1024]") == 1048576);
  CHECK_THAT(expand_error("n[0-1048576]"), Catch::Contains("1048577 hosts, more than the limit"));
  CHECK_THAT(expand_error("a,n[1-1048576]"), Catch::Contains("column 3"));
  // Sizes that overflow 64 bits are refused as too many, not wrapped around.
  CHECK_THAT(expand_error("n[0-18446744073709551615]"), Catch::Contains("more than the limit"));
  CHECK_THAT(expand_error("a[0-4294967295]b[0-4294967295]c[1-9]"),
             Catch::Contains("more than the limit"));
  CHECK_THROWS_AS(count_hostlist("n[1-600000],m[1-600000]"), muster::error);
}

TEST_CASE("hostlist measures the name bytes of what it would expand", "[hostlist]") {
  for (std::string list :
       {"n[8-11]", "n[01-3]x,ab", "a[1-2]b[9-10]", "n[0-100]", "n[007-1000]", "[1-3]", "x", "",
        "n[9999999999999999998-10000000000000000001]", "r[1-3,10]-n[1-2,100]-ib"}) {
    INFO("list: \"" << list << "\"");
    std::size_t bytes = 0;
    for (const std::string& host : expand_hostlist(list)) bytes += host.size();
    muster::hostlist_size size = measure_hostlist(list);
    CHECK(size.num_hosts == count_hostlist(list));
    CHECK(size.name_bytes == bytes);
  }
}

TEST_CASE("hostlist limits the length of one host name to 255 characters", "[hostlist]") {
  CHECK(muster::kMaxHostNameLength == 255);
  const std::string prefix(250, 'x');
  CHECK(expand_hostlist(prefix + "[00001-2]") == strings{prefix + "00001", prefix + "00002"});
  CHECK_THAT(expand_error("ok," + prefix + "[000001-2]"),
             Catch::Contains("column 4: this item makes host names of up to 256 characters, "
                             "more than the limit of 255"));
  CHECK_THAT(expand_error(std::string(256, 'y')), Catch::Contains("up to 256 characters"));
  // The high bound can be wider than the low one: 250 + 5 characters, then 250 + 6.
  CHECK(count_hostlist(prefix + "[99998-99999]") == 2);
  CHECK_THAT(expand_error(prefix + "[99998-100000]"), Catch::Contains("up to 256 characters"));
  // compress_hostlist refuses what expand_hostlist could not read back.
  CHECK_THAT(muster::test::expect_error(muster::errc::invalid_input,
                                        [&] {
                                          compress_hostlist({"a", prefix + "123456"});
                                        }),
             Catch::Contains("host 1 (\"xxxx") && Catch::Contains("is 256 characters long"));
}

TEST_CASE("hostlist refuses a short list of huge names before allocating them", "[hostlist]") {
  // 1,048,576 names of 100,003 characters: ~100 GB. Counted (not expanded), so a regression
  // fails here instead of exhausting memory.
  const std::string list = "n[" + std::string(100000, '0') + "1-1048576]";
  std::string message =
      muster::test::expect_error(muster::errc::invalid_input, [&] { count_hostlist(list); });
  CHECK_THAT(message, Catch::Contains("column 1: this item makes host names of up to 100002 "
                                      "characters, more than the limit of 255"));
  CHECK(message.size() < 600);
}

TEST_CASE("hostlist limits the bytes of all names to 64 MiB", "[hostlist]") {
  CHECK(muster::kMaxHostlistNameBytes == 64u << 20);
  // 524,288 names of 122 + 6 characters: exactly 64 MiB, accepted (measured, not expanded).
  const std::string prefix(122, 'p');
  muster::hostlist_size size = measure_hostlist(prefix + "[100000-624287]");
  CHECK(size.num_hosts == 524288);
  CHECK(size.name_bytes == muster::kMaxHostlistNameBytes);
  // One more name crosses it; the message points at the item that crosses.
  CHECK_THAT(expand_error(prefix + "[100000-624287]," + prefix + "1"),
             Catch::Contains("column 139: the list names 67108987 characters of host names, "
                             "more than the limit of 67108864"));
  // Under the host limit but 300,000 names of 246 characters (~74 MB): refused.
  CHECK_THAT(expand_error(std::string(240, 'q') + "[100000-399999]"),
             Catch::Contains("73800000 characters of host names, more than the limit"));
}

TEST_CASE("hostlist streams the same hosts it expands", "[hostlist]") {
  const std::string list = "gpu[01-03,7],login,a[1-2]b[1-2]c[1-2]-ib";
  strings streamed;
  muster::for_each_host(list, [&](std::string_view h) { streamed.emplace_back(h); });
  CHECK(streamed == expand_hostlist(list));
  bool called = false;
  CHECK_THROWS_AS(muster::for_each_host("ok,n[2-1]", [&](std::string_view) { called = true; }),
                  muster::error);
  CHECK_FALSE(called);  // validated before the first host
}

TEST_CASE("hostlist compresses like scontrol show hostlist", "[hostlist]") {
  struct row {
    strings hosts;
    std::string compressed;
  };
  const std::vector<row> table = {
      {{}, ""},
      {{"n1"}, "n1"},
      {{"n05"}, "n05"},
      {{"login"}, "login"},
      {{"n1", "n2", "n3", "n5"}, "n[1-3,5]"},  // scontrol 22.05
      {{"n9", "n10", "n1", "n02", "a", "a", "n1", "n2", "n3"}, "n[9-10,1,02],a,a,n[1-3]"},  // ditto
      {{"123", "124", "n", "n1", "n0", "x9", "x10", "x11", "x012"},
       "[123-124],n,n[1,0],x[9-11,012]"},                    // scontrol 22.05
      {{"n99", "n100", "n101", "n0100"}, "n[99-101,0100]"},  // scontrol 22.05
      {{"n3", "n2", "n1"}, "n[3,2,1]"},                      // never sorts
      {{"n1", "n1"}, "n[1,1]"},
      {{"n08", "n09", "n10"}, "n[08-10]"},
      {{"n1", "n02"}, "n[1,02]"},
      {{"n9", "n010"}, "n[9,010]"},
      {{"gpu1", "cpu1", "gpu2"}, "gpu1,cpu1,gpu2"},
      {{"r1-n1", "r1-n2", "r2-n1"}, "r1-n[1-2],r2-n1"},
      {{"a", "a1"}, "a,a1"},
      {{"n18446744073709551614", "n18446744073709551615"},
       "n[18446744073709551614-18446744073709551615]"},
      {{"n18446744073709551616"}, "n18446744073709551616"},  // too big to be a number: kept whole
  };
  for (const row& r : table) {
    INFO("compressed: \"" << r.compressed << "\"");
    CHECK(compress_hostlist(r.hosts) == r.compressed);
    CHECK(expand_hostlist(r.compressed) == r.hosts);
  }
}

TEST_CASE("hostlist refuses to compress names that could not round-trip", "[hostlist]") {
  for (std::string bad : {"", "a,b", "a b", "n[1]", "n]"}) {
    INFO("host: \"" << bad << "\"");
    CHECK_THAT(muster::test::expect_error(muster::errc::invalid_input,
                                          [&] {
                                            compress_hostlist({"ok1", bad});
                                          }),
               Catch::Contains("host 1 (\"" + bad + "\")"));
  }
}

namespace {

// A random host vector with the shapes that stress compression: runs of consecutive numbers,
// padding changes at 9/10 and 99/100, shared and distinct prefixes, names without numbers,
// all-digit names, duplicates and descending runs.
strings random_hosts(std::mt19937_64& rng) {
  static const strings prefixes = {"n", "gpu", "rack1-n", "", "a.b-", "x9y", "login"};
  auto pick = [&](std::size_t n) { return static_cast<std::size_t>(rng() % n); };
  strings hosts;
  std::size_t runs = 1 + pick(6);
  for (std::size_t run = 0; run < runs; ++run) {
    const std::string& prefix = prefixes[pick(prefixes.size())];
    if (pick(8) == 0 && !prefix.empty()) {
      hosts.push_back(prefix);  // no numeric suffix
      continue;
    }
    static const std::uint64_t starts[] = {0, 1, 7, 8, 9, 95, 98, 99, 998, 1000, 4294967295};
    std::uint64_t start = pick(3) == 0 ? rng() % 200 : starts[pick(std::size(starts))];
    int width = static_cast<int>(pick(4));  // 0: natural width
    std::size_t length = 1 + pick(5);
    bool descending = pick(6) == 0 && start >= length;
    for (std::size_t i = 0; i < length; ++i) {
      std::uint64_t num = descending ? start - i : start + i;
      if (pick(7) == 0) num = start;  // a duplicate
      std::string digits = std::to_string(num);
      if (static_cast<int>(digits.size()) < width)
        digits.insert(0, static_cast<std::size_t>(width) - digits.size(), '0');
      if (pick(5) == 0) width = static_cast<int>(pick(4));  // padding changes mid-run
      hosts.push_back(prefix + digits);
    }
  }
  return hosts;
}

}  // namespace

TEST_CASE("hostlist expands every compressed random host vector back to itself", "[hostlist]") {
  const std::uint64_t seed = muster::test::test_seed();
  INFO("seed " << seed << " (MUSTER_TEST_SEED=" << seed << " replays it)");
  std::mt19937_64 rng(seed);
  for (int round = 0; round < 3000; ++round) {
    strings hosts = random_hosts(rng);
    std::string compressed = compress_hostlist(hosts);
    INFO("compressed: " << compressed);
    REQUIRE(expand_hostlist(compressed) == hosts);
    std::size_t bytes = 0;
    for (const auto& h : hosts) bytes += h.size();
    REQUIRE(measure_hostlist(compressed).name_bytes == bytes);
    REQUIRE(compressed.size() <= [&] {
      std::size_t plain = hosts.empty() ? 0 : hosts.size() - 1;
      for (const auto& h : hosts) plain += h.size();
      return plain + 2 * hosts.size();  // never much longer than the plain comma list
    }());
  }
}

TEST_CASE("hostlist compresses a long consecutive run into one range", "[hostlist]") {
  strings hosts;
  for (int i = 1; i <= 100000; ++i) hosts.push_back("gpu" + std::to_string(i));
  CHECK(compress_hostlist(hosts) == "gpu[1-100000]");
  CHECK(expand_hostlist("gpu[1-100000]") == hosts);
}

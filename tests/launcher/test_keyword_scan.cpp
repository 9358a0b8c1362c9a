// The one-pass keyword filter of muster diagnose's reader (launcher/diagnose/keyword_scan.hpp)
// against the obvious search: the same lines, whatever the anchors tune() picks.
#include <catch2/catch.hpp>

#include <random>
#include <string>
#include <vector>

#include "launcher/diagnose/keyword_scan.hpp"
#include "tests/support/seed.hpp"

using muster::launcher::diagnose::keyword_scanner;

namespace {

// The starts of the lines of `text` that hold a keyword, the obvious way.
std::vector<std::size_t> obvious(std::string_view text,
                                 const std::vector<std::string_view>& words) {
  std::vector<std::size_t> out;
  for (std::size_t start = 0; start < text.size();) {
    const auto nl = text.find('\n', start);
    const auto line = text.substr(start, nl - start);
    for (auto w : words)
      if (line.find(w) != std::string_view::npos) {
        out.push_back(start);
        break;
      }
    if (nl == std::string_view::npos) break;
    start = nl + 1;
  }
  return out;
}

}  // namespace

TEST_CASE("the keyword scan finds the lines the obvious search finds", "[diagnose]") {
  const std::vector<std::string_view> words = {"CUDA out of memory", "Xid", "ab", "error:", "aaa",
                                               "Failures:",          "mx"};
  const auto seed = muster::test::test_seed();
  INFO("seed " << seed << " (MUSTER_TEST_SEED replays it)");
  std::mt19937 rng(static_cast<std::mt19937::result_type>(seed));
  const std::string alphabet = "abx \nCUDAoutfmemryXid:Failures";
  for (int round = 0; round < 300; ++round) {
    std::string text;
    const int len = std::uniform_int_distribution<int>(0, 400)(rng);
    for (int i = 0; i < len; ++i) {
      if (std::uniform_int_distribution<int>(0, 30)(rng) == 0)
        text += words[std::uniform_int_distribution<std::size_t>(0, words.size() - 1)(rng)];
      else
        text += alphabet[std::uniform_int_distribution<std::size_t>(0, alphabet.size() - 1)(rng)];
    }
    text += '\n';
    keyword_scanner scan(words);
    std::vector<std::size_t> found;
    scan.find_lines(text, found);
    INFO("round " << round << " text: " << text);
    CHECK(found == obvious(text, words));
    // anchors tuned on another text (or on this one) change nothing but the speed
    scan.tune(round % 2 ? text : std::string("abababab xxxx error: Failures: Xid"));
    found.clear();
    scan.find_lines(text, found);
    CHECK(found == obvious(text, words));
  }
}

TEST_CASE("the keyword scan handles keywords at the edges of the region", "[diagnose]") {
  const std::vector<std::string_view> words = {"NVRM: Xid", "oom_kill event"};
  keyword_scanner scan(words);
  scan.tune("NVRM: Xid 79 and then a long line with oom_kill event in it\n");
  std::vector<std::size_t> found;
  scan.find_lines("NVRM: Xid\nnothing\nlast oom_kill event", found);
  CHECK(found == std::vector<std::size_t>{0, 18});
  found.clear();
  scan.find_lines("", found);
  scan.find_lines("N", found);
  CHECK(found.empty());
}

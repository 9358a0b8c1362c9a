// Finding the lines of a buffer that hold any of a few dozen keywords, in one pass: the filter
// behind `muster diagnose`'s streaming read (log_reader.cpp), which must keep up with grep.
//
// Each keyword is given an anchor: the two bytes inside it that are rarest in a sample of the
// log (tune()). The scan tests every position's two bytes against a 64 Kibit set of anchors (it
// stays in L1) and compares the keywords anchored there only on a hit, so a healthy log costs
// about one table lookup per byte, however many keywords there are. Before tune() the anchors
// are each keyword's first two bytes.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace muster::launcher::diagnose {

class keyword_scanner {
 public:
  // Keywords of at least two bytes (shorter ones are ignored); they must outlive the scanner.
  explicit keyword_scanner(std::span<const std::string_view> keywords);

  // Re-picks the anchors from the two-byte frequencies of `sample`.
  void tune(std::string_view sample);

  // The offsets of the starts of the lines of `region` that hold a keyword, ascending, each
  // once, appended to `starts`. A keyword never spans a '\n'.
  void find_lines(std::string_view region, std::vector<std::size_t>& starts) const;

 private:
  struct anchored {
    std::uint16_t pair;    // the anchor's two bytes, as loaded from memory
    std::uint16_t offset;  // where the anchor is inside the keyword
    std::uint32_t keyword;
  };
  void place(const std::vector<std::size_t>& offsets);

  std::vector<std::string_view> keywords_;
  std::vector<anchored> anchors_;  // sorted by pair
  std::array<std::uint64_t, 1024> set_{};
};

}  // namespace muster::launcher::diagnose

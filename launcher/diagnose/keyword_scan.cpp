// Finding the lines that hold a keyword, in one pass: see keyword_scan.hpp.
#include "launcher/diagnose/keyword_scan.hpp"

#include <string.h>

#include <algorithm>
#include <cstring>

namespace muster::launcher::diagnose {
namespace {

std::uint16_t pair_at(const char* p) {
  std::uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

}  // namespace

keyword_scanner::keyword_scanner(std::span<const std::string_view> keywords) {
  for (auto k : keywords)
    if (k.size() >= 2 && k.size() <= 0xffff) keywords_.push_back(k);
  place(std::vector<std::size_t>(keywords_.size(), 0));
}

void keyword_scanner::place(const std::vector<std::size_t>& offsets) {
  anchors_.clear();
  set_.fill(0);
  for (std::size_t k = 0; k < keywords_.size(); ++k) {
    const auto pair = pair_at(keywords_[k].data() + offsets[k]);
    anchors_.push_back(
        {pair, static_cast<std::uint16_t>(offsets[k]), static_cast<std::uint32_t>(k)});
    set_[pair >> 6] |= std::uint64_t{1} << (pair & 63);
  }
  std::sort(anchors_.begin(), anchors_.end(),
            [](const anchored& a, const anchored& b) { return a.pair < b.pair; });
}

void keyword_scanner::tune(std::string_view sample) {
  if (sample.size() < 2) return;
  std::vector<std::uint32_t> count(1 << 16, 0);
  for (std::size_t i = 0; i + 1 < sample.size(); ++i) ++count[pair_at(sample.data() + i)];
  std::vector<std::size_t> offsets(keywords_.size(), 0);
  for (std::size_t k = 0; k < keywords_.size(); ++k) {
    const auto word = keywords_[k];
    for (std::size_t j = 1; j + 1 < word.size(); ++j)
      if (count[pair_at(word.data() + j)] < count[pair_at(word.data() + offsets[k])])
        offsets[k] = j;
  }
  place(offsets);
}

void keyword_scanner::find_lines(std::string_view region, std::vector<std::size_t>& starts) const {
  const char* data = region.data();
  const std::size_t n = region.size();
  for (std::size_t i = 0; i + 1 < n; ++i) {
    const auto pair = pair_at(data + i);
    if (!((set_[pair >> 6] >> (pair & 63)) & 1)) continue;
    bool found = false;
    std::size_t at = 0;
    auto a = std::lower_bound(anchors_.begin(), anchors_.end(), pair,
                              [](const anchored& x, std::uint16_t p) { return x.pair < p; });
    for (; a != anchors_.end() && a->pair == pair && !found; ++a) {
      const auto word = keywords_[a->keyword];
      if (i < a->offset || i - a->offset + word.size() > n) continue;
      at = i - a->offset;
      found = std::memcmp(data + at, word.data(), word.size()) == 0;
    }
    if (!found) continue;
    const void* nl_before = at > 0 ? ::memrchr(data, '\n', at) : nullptr;
    const std::size_t start =
        nl_before ? static_cast<std::size_t>(static_cast<const char*>(nl_before) - data) + 1 : 0;
    if (starts.empty() || starts.back() != start) starts.push_back(start);
    const void* nl_after = std::memchr(data + i, '\n', n - i);
    if (!nl_after) break;
    i = static_cast<std::size_t>(static_cast<const char*>(nl_after) - data);
  }
}

}  // namespace muster::launcher::diagnose

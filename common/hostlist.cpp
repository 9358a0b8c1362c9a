// Hostlist expansion and compression (see hostlist.hpp for the grammar and the contract).
//
// Expansion is two passes: a strict parser turns the list into items (text and bracket groups)
// and counts the hosts with saturating arithmetic, so an oversized list is rejected before any
// host is built; then a generator walks the groups in Slurm's order, rebuilding only the tail of
// a reused buffer for the fastest group. Compression mirrors Slurm's hostlist_push_host +
// hostlist_ranged_string: one pass that extends the last range, one pass that writes brackets.
// Not here: sorting, de-duplication, multi-dimensional names.
#include "common/hostlist.hpp"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <limits>
#include <utility>

#include "common/error.hpp"

namespace muster {
namespace {

constexpr std::uint64_t kU64Max = std::numeric_limits<std::uint64_t>::max();
constexpr std::size_t kShownChars = 100;  // longer lists are quoted around the fault only

std::uint64_t saturating_add(std::uint64_t a, std::uint64_t b) {
  return a > kU64Max - b ? kU64Max : a + b;
}

std::uint64_t saturating_mul(std::uint64_t a, std::uint64_t b) {
  if (a == 0 || b == 0) return 0;
  return a > kU64Max / b ? kU64Max : a * b;
}

bool is_separator(char c) {
  return c == ',' || c == ' ' || c == '\t' || c == '\n' || c == '\r';
}
bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

// Appends num in decimal, zero-padded on the left to at least `width` characters (printf %0*lu).
void append_number(std::string& out, std::uint64_t num, int width) {
  char digits[24];
  auto [end, ec] = std::to_chars(digits, digits + sizeof digits, num);
  int len = static_cast<int>(end - digits);
  if (width > len) out.append(static_cast<std::size_t>(width - len), '0');
  out.append(digits, end);
}

// One numeric range inside brackets, printed with `width` (the width of its low bound).
struct num_range {
  std::uint64_t lo = 0;
  std::uint64_t hi = 0;
  int width = 0;
};

// One bracket group: its ranges in order, and how many numbers they hold (saturating).
struct bracket_group {
  std::vector<num_range> ranges;
  std::uint64_t count = 0;
};

// One item of the list: texts[i] comes before groups[i]; texts.back() comes after the last group.
struct list_item {
  std::size_t offset = 0;  // 0-based offset of the item in the list, for error messages
  std::vector<std::string_view> texts;
  std::vector<bracket_group> groups;
  std::uint64_t count = 1;  // hosts it names (saturating)
};

// The strict parser. Every error goes through fail(), which quotes the list and points at it.
class hostlist_parser {
 public:
  explicit hostlist_parser(std::string_view list) : list_(list) {}

  // Parses the whole list and checks the cap; returns the items and sets total().
  std::vector<list_item> parse() {
    std::vector<list_item> items;
    while (true) {
      skip_separators(items.empty());
      if (pos_ == list_.size()) break;
      items.push_back(parse_item());
      total_ = saturating_add(total_, items.back().count);
    }
    check_cap(items);
    return items;
  }

  std::size_t total() const { return static_cast<std::size_t>(total_); }

 private:
  [[noreturn]] void fail(std::size_t at, std::string_view what) const {
    std::size_t begin = 0;
    std::size_t end = list_.size();
    if (list_.size() > kShownChars) {
      begin = at > kShownChars / 2 ? at - kShownChars / 2 : 0;
      end = std::min(list_.size(), begin + kShownChars);
    }
    std::string shown = begin > 0 ? "..." : "";
    std::size_t caret = at - begin + shown.size();
    shown.append(list_.substr(begin, end - begin));
    if (end < list_.size()) shown += "...";
    std::replace_if(
        shown.begin(), shown.end(), [](char c) { return c == '\t' || c == '\n' || c == '\r'; },
        ' ');
    std::string length_note =
        list_.size() > kShownChars ? fmt::format(" ({} characters)", list_.size()) : "";
    MUSTER_THROW(errc::invalid_input, "hostlist \"{}\"{}, column {}: {}\n  {}\n  {}^", shown,
                 length_note, at + 1, what, shown, std::string(caret, ' '));
  }

  // Skips a run of separators; a run holds at most one ',' and none before the first item or
  // after the last one.
  void skip_separators(bool before_first) {
    std::size_t comma = std::string_view::npos;
    for (; pos_ < list_.size() && is_separator(list_[pos_]); ++pos_) {
      if (list_[pos_] != ',') continue;
      if (before_first) fail(pos_, "empty item before ','; remove the leading comma");
      if (comma != std::string_view::npos) fail(pos_, "empty item between two commas");
      comma = pos_;
    }
    if (pos_ == list_.size() && comma != std::string_view::npos)
      fail(comma, "empty item after the last ','; remove the trailing comma");
  }

  list_item parse_item() {
    list_item item;
    item.offset = pos_;
    std::size_t text_start = pos_;
    while (pos_ < list_.size() && !is_separator(list_[pos_])) {
      char c = list_[pos_];
      if (c == ']') fail(pos_, "']' without a matching '['");
      if (c != '[') {
        ++pos_;
        continue;
      }
      item.texts.push_back(list_.substr(text_start, pos_ - text_start));
      item.groups.push_back(parse_group());
      item.count = saturating_mul(item.count, item.groups.back().count);
      text_start = pos_;
    }
    item.texts.push_back(list_.substr(text_start, pos_ - text_start));
    return item;
  }

  // pos_ is at '['; leaves pos_ one past the matching ']'.
  bracket_group parse_group() {
    std::size_t open = pos_;
    std::size_t close = open + 1;
    for (; close < list_.size() && list_[close] != ']'; ++close) {
      if (list_[close] == '[')
        fail(close,
             fmt::format("'[' inside brackets (the '[' at column {} is still open)", open + 1));
    }
    if (close == list_.size()) fail(open, "'[' is never closed; add the missing ']'");
    if (close == open + 1) fail(close, "empty brackets; write numbers or ranges, as in n[1-4,7]");
    bracket_group group;
    for (std::size_t at = open + 1;; ++at) {  // at: start of a range, after '[' or ','
      num_range range = parse_range(at, close);
      group.ranges.push_back(range);
      std::uint64_t span = range.hi - range.lo;
      group.count = saturating_add(group.count, span == kU64Max ? kU64Max : span + 1);
      if (at == close) break;
    }
    pos_ = close + 1;
    return group;
  }

  // Parses "lo" or "lo-hi" at `at`, leaving `at` on the ',' or ']' that follows.
  num_range parse_range(std::size_t& at, std::size_t close) {
    if (list_[at] == ',' || at == close) {
      bool after_comma = list_[at - 1] == ',';
      fail(at, after_comma
                   ? (at == close ? "empty range after ','" : "empty range between two commas")
                   : "empty range before ','");
    }
    std::size_t start = at;
    num_range range;
    range.lo = parse_number(at, close, range.width);
    range.hi = range.lo;
    if (at < close && list_[at] == '-') {
      int hi_width = 0;
      ++at;
      range.hi = parse_number(at, close, hi_width);
      if (range.lo > range.hi)
        fail(start, fmt::format("range {}-{} goes down; write the low bound first ({}-{})",
                                range.lo, range.hi, range.hi, range.lo));
    }
    if (at < close && list_[at] != ',') {
      char c = list_[at];
      if (c == ':') fail(at, "Slurm ranges have no step (':'); list the numbers instead");
      fail(at, fmt::format("expected ',' or ']' after the range, found '{}'", c));
    }
    return range;
  }

  std::uint64_t parse_number(std::size_t& at, std::size_t close, int& width) {
    std::size_t start = at;
    while (at < close && is_digit(list_[at])) ++at;
    if (at == start) {
      char c = at < close ? list_[at] : ']';
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') fail(at, "whitespace inside brackets");
      fail(at, fmt::format("expected a number, found '{}'", c));
    }
    std::uint64_t value = 0;
    auto [end, ec] = std::from_chars(list_.data() + start, list_.data() + at, value);
    if (ec != std::errc{})
      fail(start,
           fmt::format("number {} is larger than {}", list_.substr(start, at - start), kU64Max));
    width = static_cast<int>(at - start);
    return value;
  }

  void check_cap(const std::vector<list_item>& items) const {
    if (total_ <= kMaxHostlistHosts) return;
    std::uint64_t running = 0;
    std::size_t at = 0;
    for (const list_item& item : items) {
      running = saturating_add(running, item.count);
      at = item.offset;
      if (running > kMaxHostlistHosts) break;
    }
    std::string names =
        total_ == kU64Max ? fmt::format("more than {}", kU64Max - 1) : fmt::format("{}", total_);
    fail(at, fmt::format("the list names {} hosts, more than the limit of {}; the item here "
                         "crosses it",
                         names, kMaxHostlistHosts));
  }

  std::string_view list_;
  std::size_t pos_ = 0;
  std::uint64_t total_ = 0;
};

// Calls visit(std::string_view) for every host of one item, in Slurm's order: the last group
// fastest, then groups 0, 1, ..., k-2 (group k-2 slowest).
template <class Visit>
void generate_item(const list_item& item, std::string& buf, Visit& visit) {
  const std::size_t k = item.groups.size();
  if (k == 0) {
    visit(item.texts[0]);
    return;
  }
  std::vector<std::pair<std::size_t, std::uint64_t>> outer(k - 1);  // (range index, value)
  for (std::size_t g = 0; g + 1 < k; ++g) outer[g] = {0, item.groups[g].ranges[0].lo};
  while (true) {
    buf.clear();
    for (std::size_t g = 0; g + 1 < k; ++g) {
      buf.append(item.texts[g]);
      append_number(buf, outer[g].second, item.groups[g].ranges[outer[g].first].width);
    }
    buf.append(item.texts[k - 1]);
    const std::size_t head = buf.size();
    for (const num_range& r : item.groups[k - 1].ranges) {
      for (std::uint64_t v = r.lo;; ++v) {
        buf.resize(head);
        append_number(buf, v, r.width);
        buf.append(item.texts[k]);
        visit(std::string_view(buf));
        if (v == r.hi) break;
      }
    }
    std::size_t g = 0;  // advance the odometer of the outer groups, group 0 first
    for (; g + 1 < k; ++g) {
      auto& [ri, v] = outer[g];
      const auto& ranges = item.groups[g].ranges;
      if (v < ranges[ri].hi) {
        ++v;
        break;
      }
      if (ri + 1 < ranges.size()) {
        v = ranges[++ri].lo;
        break;
      }
      outer[g] = {0, ranges[0].lo};
    }
    if (g + 1 == k) return;
  }
}

template <class Visit>
std::size_t parse_and_generate(std::string_view list, Visit&& visit) {
  hostlist_parser parser(list);
  std::vector<list_item> items = parser.parse();
  std::string buf;
  for (const list_item& item : items) generate_item(item, buf, visit);
  return parser.total();
}

// ---- compression ----

// A host split Slurm's way: prefix + trailing decimal digits. `single` hosts have no usable
// numeric suffix (none, or one above 2^64-1, where Slurm's strtoul would clamp and corrupt it).
struct host_range {
  std::string_view prefix;
  std::uint64_t lo = 0;
  std::uint64_t hi = 0;
  int width = 0;
  bool single = false;
};

host_range split_host(std::string_view host) {
  std::size_t digits = host.size();
  while (digits > 0 && is_digit(host[digits - 1])) --digits;
  host_range r;
  r.prefix = host;
  r.single = true;
  if (digits == host.size()) return r;
  std::uint64_t value = 0;
  auto [end, ec] = std::from_chars(host.data() + digits, host.data() + host.size(), value);
  if (ec != std::errc{}) return r;
  r = {host.substr(0, digits), value, value, static_cast<int>(host.size() - digits), false};
  return r;
}

// Zeros that printing num with width adds (Slurm's _zero_padded).
int zero_padding(std::uint64_t num, int width) {
  int digits = 1;
  while (num /= 10) ++digits;
  return width > digits ? width - digits : 0;
}

// Slurm's _width_equiv: widths wn (of n) and wm (of m) are equivalent when they are equal, or
// when printing both numbers with one of them changes neither's padding; then adjusts the
// other width to match and returns true.
bool width_equiv(std::uint64_t n, int& wn, std::uint64_t m, int& wm) {
  if (wn == wm) return true;
  int npad = zero_padding(n, wn);
  int nmpad = zero_padding(n, wm);
  int mpad = zero_padding(m, wm);
  int mnpad = zero_padding(m, wn);
  if (npad != nmpad && mpad != mnpad) return false;
  if (npad != nmpad)
    wm = wn;
  else
    wn = wm;
  return true;
}

// Slurm's hostrange_within_range: both numbered, same prefix (they share one bracket).
bool same_bracket(const host_range& a, const host_range& b) {
  return !a.single && !b.single && a.prefix == b.prefix;
}

void check_host(const std::string& host, std::size_t index) {
  auto bad = std::find_if(host.begin(), host.end(),
                          [](char c) { return is_separator(c) || c == '[' || c == ']'; });
  if (host.empty() || bad != host.end())
    MUSTER_THROW(errc::invalid_input,
                 "host {} (\"{}\") {}; a host name cannot hold ',', whitespace, '[' or ']'", index,
                 host,
                 host.empty() ? "is empty"
                              : fmt::format("has '{}' at column {}", *bad, bad - host.begin() + 1));
}

std::vector<host_range> collapse_hosts(const std::vector<std::string>& hosts) {
  std::vector<host_range> ranges;
  ranges.reserve(hosts.size());
  for (std::size_t i = 0; i < hosts.size(); ++i) {
    check_host(hosts[i], i);
    host_range r = split_host(hosts[i]);
    if (!ranges.empty()) {
      host_range& tail = ranges.back();
      if (!r.single && !tail.single && r.lo > 0 && tail.hi == r.lo - 1 && tail.prefix == r.prefix &&
          width_equiv(tail.lo, tail.width, r.lo, r.width)) {
        tail.hi = r.hi;
        continue;
      }
    }
    ranges.push_back(r);
  }
  return ranges;
}

}  // namespace

std::vector<std::string> expand_hostlist(std::string_view list) {
  std::vector<std::string> hosts;
  hostlist_parser parser(list);
  std::vector<list_item> items = parser.parse();
  hosts.reserve(parser.total());
  std::string buf;
  auto push = [&hosts](std::string_view host) { hosts.emplace_back(host); };
  for (const list_item& item : items) generate_item(item, buf, push);
  return hosts;
}

std::size_t count_hostlist(std::string_view list) {
  hostlist_parser parser(list);
  parser.parse();
  return parser.total();
}

void for_each_host(std::string_view list, const std::function<void(std::string_view)>& visit) {
  parse_and_generate(list, visit);
}

std::string compress_hostlist(const std::vector<std::string>& hosts) {
  std::vector<host_range> ranges = collapse_hosts(hosts);
  std::string out;
  out.reserve(hosts.size() * 4 + 16);
  for (std::size_t i = 0; i < ranges.size();) {
    if (i > 0) out += ',';
    bool bracket = ranges[i].hi > ranges[i].lo ||
                   (i + 1 < ranges.size() && same_bracket(ranges[i], ranges[i + 1]));
    out.append(ranges[i].prefix);
    if (bracket) out += '[';
    std::size_t j = i;
    do {
      const host_range& r = ranges[j];
      if (j > i) out += ',';
      if (!r.single) append_number(out, r.lo, r.width);
      if (r.hi > r.lo) {
        out += '-';
        append_number(out, r.hi, r.width);
      }
      ++j;
    } while (j < ranges.size() && same_bracket(ranges[j], ranges[j - 1]));
    if (bracket) out += ']';
    i = j;
  }
  return out;
}

}  // namespace muster

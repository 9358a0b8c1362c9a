// Hostlist expansion and compression (see hostlist.hpp for the grammar and the contract).
//
// Expansion is two passes: a strict parser turns the list into items (text and bracket groups)
// and measures them with saturating arithmetic (hosts, the longest name, the name bytes), so a
// list over a limit is rejected before any host is built; then a generator walks the groups in
// Slurm's order, rebuilding only the tail of a reused buffer for the fastest group. Compression
// mirrors Slurm's hostlist_push_host + hostlist_ranged_string: one pass that extends the last
// range, one pass that writes brackets. Not here: sorting, de-duplication, multi-dimensional names.
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

// Decimal digits of num (1 for 0).
int num_digits(std::uint64_t num) {
  int digits = 1;
  while (num /= 10) ++digits;
  return digits;
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

  // Characters of all its numbers once printed (saturating), counted one decade at a time.
  std::uint64_t printed_bytes() const {
    std::uint64_t bytes = 0;
    std::uint64_t decade_lo = 0;  // the smallest number with `digits` digits (0 for one digit)
    for (int digits = 1; decade_lo <= hi; ++digits) {
      std::uint64_t decade_hi = digits >= 20 ? kU64Max : (decade_lo == 0 ? 9 : decade_lo * 10 - 1);
      std::uint64_t from = std::max(lo, decade_lo);
      std::uint64_t to = std::min(hi, decade_hi);
      if (from <= to) {
        std::uint64_t numbers = to - from == kU64Max ? kU64Max : to - from + 1;
        bytes = saturating_add(bytes, saturating_mul(numbers, std::max(width, digits)));
      }
      if (decade_hi == kU64Max) break;
      decade_lo = decade_hi + 1;
    }
    return bytes;
  }
};

// One bracket group: its ranges in order, how many numbers they hold and how many characters
// those take printed (both saturating), and the longest one.
struct bracket_group {
  std::vector<num_range> ranges;
  std::uint64_t count = 0;
  std::uint64_t printed_bytes = 0;
  std::size_t max_width = 0;
};

// One item of the list: texts[i] comes before groups[i]; texts.back() comes after the last group.
struct list_item {
  std::size_t offset = 0;  // 0-based offset of the item in the list, for error messages
  std::vector<std::string_view> texts;
  std::vector<bracket_group> groups;
  std::uint64_t count = 1;       // hosts it names (saturating)
  std::uint64_t name_bytes = 0;  // characters of all its names (saturating)
  std::size_t max_length = 0;    // characters of its longest name
};

// A parsed list and its size; every limit has been checked.
struct parsed_hostlist {
  std::vector<list_item> items;
  hostlist_size size;
};

// The strict parser. Every error goes through fail(), which quotes the list and points at it.
class hostlist_parser {
 public:
  explicit hostlist_parser(std::string_view list) : list_(list) {}

  // Parses the whole list and checks the limits (hostlist.hpp, "Limits").
  parsed_hostlist parse() {
    parsed_hostlist out;
    std::uint64_t num_hosts = 0;
    std::uint64_t name_bytes = 0;
    while (true) {
      skip_separators(out.items.empty());
      if (pos_ == list_.size()) break;
      out.items.push_back(parse_item());
      num_hosts = saturating_add(num_hosts, out.items.back().count);
      name_bytes = saturating_add(name_bytes, out.items.back().name_bytes);
    }
    check_limit(out.items, num_hosts, kMaxHostlistHosts, &list_item::count, "hosts");
    check_limit(out.items, name_bytes, kMaxHostlistNameBytes, &list_item::name_bytes,
                "characters of host names");
    out.size = {static_cast<std::size_t>(num_hosts), static_cast<std::size_t>(name_bytes)};
    return out;
  }

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
    measure_item(item);
    return item;
  }

  // Sets max_length and name_bytes of a parsed item; a name over kMaxHostNameLength is an error.
  void measure_item(list_item& item) const {
    std::uint64_t text_bytes = 0;
    for (std::string_view text : item.texts) text_bytes += text.size();
    item.max_length = static_cast<std::size_t>(text_bytes);
    for (const bracket_group& group : item.groups) item.max_length += group.max_width;
    if (item.max_length > kMaxHostNameLength)
      fail(item.offset, fmt::format("this item makes host names of up to {} characters, more "
                                    "than the limit of {}",
                                    item.max_length, kMaxHostNameLength));
    if (item.count > kMaxHostlistHosts) {  // rejected by the host limit; the product is inexact
      item.name_bytes = kU64Max;
      return;
    }
    // Every number of group g appears in count / group.count names: exact, as count <= 2^20.
    item.name_bytes = saturating_mul(item.count, text_bytes);
    for (const bracket_group& group : item.groups)
      item.name_bytes = saturating_add(
          item.name_bytes, saturating_mul(group.printed_bytes, item.count / group.count));
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
      group.printed_bytes = saturating_add(group.printed_bytes, range.printed_bytes());
      group.max_width = std::max(
          group.max_width, static_cast<std::size_t>(std::max(range.width, num_digits(range.hi))));
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

  // Fails when `total` (the sum of `field` over the items, saturating) is over `limit`,
  // pointing at the item that crosses it.
  void check_limit(const std::vector<list_item>& items, std::uint64_t total, std::size_t limit,
                   std::uint64_t list_item::*field, std::string_view what) const {
    if (total <= limit) return;
    std::uint64_t running = 0;
    std::size_t at = 0;
    for (const list_item& item : items) {
      running = saturating_add(running, item.*field);
      at = item.offset;
      if (running > limit) break;
    }
    std::string amount =
        total == kU64Max ? fmt::format("more than {}", kU64Max - 1) : fmt::format("{}", total);
    fail(at, fmt::format("the list names {} {}, more than the limit of {}; the item here "
                         "crosses it",
                         amount, what, limit));
  }

  std::string_view list_;
  std::size_t pos_ = 0;
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

// Calls visit(std::string_view) for every host of a parsed list, in order.
template <class Visit>
void generate(const parsed_hostlist& parsed, Visit&& visit) {
  std::string buf;
  buf.reserve(kMaxHostNameLength);
  for (const list_item& item : parsed.items) generate_item(item, buf, visit);
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
  int digits = num_digits(num);
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
  if (host.size() > kMaxHostNameLength)
    MUSTER_THROW(errc::invalid_input,
                 "host {} (\"{}...\") is {} characters long, more than the limit of {}", index,
                 host.substr(0, 40), host.size(), kMaxHostNameLength);
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
      if (same_bracket(tail, r) && r.lo > 0 && tail.hi == r.lo - 1 &&
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
  parsed_hostlist parsed = hostlist_parser(list).parse();
  std::vector<std::string> hosts;
  hosts.reserve(parsed.size.num_hosts);
  generate(parsed, [&hosts](std::string_view host) { hosts.emplace_back(host); });
  return hosts;
}

std::size_t count_hostlist(std::string_view list) {
  return measure_hostlist(list).num_hosts;
}

hostlist_size measure_hostlist(std::string_view list) {
  return hostlist_parser(list).parse().size;
}

void for_each_host(std::string_view list, const std::function<void(std::string_view)>& visit) {
  generate(hostlist_parser(list).parse(), visit);
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

// When a log line says it was written: see line_time.hpp.
#include "launcher/diagnose/line_time.hpp"

#include <time.h>

#include <array>
#include <cctype>
#include <charconv>
#include <string>

namespace muster::launcher::diagnose {
namespace {

constexpr std::size_t kLook = 80;  // a timestamp is near the start of its line

constexpr std::array<std::string_view, 12> kMonths = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                                      "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

bool digits(std::string_view s, std::size_t at, std::size_t n) {
  if (at + n > s.size()) return false;
  for (std::size_t i = at; i < at + n; ++i)
    if (!std::isdigit(static_cast<unsigned char>(s[i]))) return false;
  return true;
}

int number(std::string_view s, std::size_t at, std::size_t n) {
  int v = 0;
  std::from_chars(s.data() + at, s.data() + at + n, v);
  return v;
}

int current_year() {
  const time_t now = ::time(nullptr);
  struct tm tm {};
  localtime_r(&now, &tm);
  return tm.tm_year + 1900;
}

// Seconds since the epoch of a local date and time (logs are written in the node's zone), or
// nullopt when out of range.
std::optional<double> seconds(int year, int month, int day, int h, int m, int s, double fraction) {
  if (month < 1 || month > 12 || day < 1 || day > 31 || h > 23 || m > 59 || s > 60)
    return std::nullopt;
  struct tm tm {};
  tm.tm_year = year - 1900;
  tm.tm_mon = month - 1;
  tm.tm_mday = day;
  tm.tm_hour = h;
  tm.tm_min = m;
  tm.tm_sec = s;
  tm.tm_isdst = -1;  // the zone's rules decide
  const time_t t = mktime(&tm);
  if (t == static_cast<time_t>(-1)) return std::nullopt;
  return static_cast<double>(t) + fraction;
}

// "hh:mm:ss[.frac]" at `at`: the three numbers and the fraction.
bool clock_at(std::string_view s, std::size_t at, int& h, int& m, int& sec, double& fraction) {
  if (!digits(s, at, 2) || s.size() < at + 8 || s[at + 2] != ':' || !digits(s, at + 3, 2) ||
      s[at + 5] != ':' || !digits(s, at + 6, 2))
    return false;
  h = number(s, at, 2), m = number(s, at + 3, 2), sec = number(s, at + 6, 2);
  fraction = 0;
  if (at + 8 < s.size() && (s[at + 8] == '.' || s[at + 8] == ',')) {
    double scale = 0.1;
    for (std::size_t i = at + 9;
         i < s.size() && i < at + 15 && std::isdigit(static_cast<unsigned char>(s[i]));
         ++i, scale /= 10)
      fraction += (s[i] - '0') * scale;
  }
  return true;
}

int month_at(std::string_view s, std::size_t at) {
  for (std::size_t m = 0; m < kMonths.size(); ++m)
    if (s.substr(at, 3) == kMonths[m]) return static_cast<int>(m) + 1;
  return 0;
}

}  // namespace

std::optional<double> time_of_line(std::string_view line) {
  const auto s = line.substr(0, kLook);
  int h = 0, m = 0, sec = 0;
  double fraction = 0;
  for (std::size_t i = 0; i + 8 <= s.size(); ++i) {
    // ISO: yyyy-mm-dd[T ]hh:mm:ss
    if (digits(s, i, 4) && i + 19 <= s.size() && s[i + 4] == '-' && digits(s, i + 5, 2) &&
        s[i + 7] == '-' && digits(s, i + 8, 2) && (s[i + 10] == 'T' || s[i + 10] == ' ') &&
        clock_at(s, i + 11, h, m, sec, fraction))
      return seconds(number(s, i, 4), number(s, i + 5, 2), number(s, i + 8, 2), h, m, sec,
                     fraction);
    // glog: [IWEF]mmdd hh:mm:ss at the start of the line or after '[' (or a launcher's prefix)
    if ((s[i] == 'I' || s[i] == 'W' || s[i] == 'E' || s[i] == 'F') &&
        (i == 0 || s[i - 1] == '[' || s[i - 1] == ' ' || s[i - 1] == ':') && digits(s, i + 1, 4) &&
        i + 5 < s.size() && s[i + 5] == ' ' && clock_at(s, i + 6, h, m, sec, fraction))
      return seconds(current_year(), number(s, i + 1, 2), number(s, i + 3, 2), h, m, sec, fraction);
    // dmesg -T "Sun Nov 22 03:12:44 2026" and syslog "Nov 22 03:12:44"
    if (const int month = month_at(s, i); month > 0 && i + 4 < s.size() && s[i + 3] == ' ') {
      std::size_t at = i + 4;
      if (s[at] == ' ') ++at;  // "Nov  2"
      int day = 0;
      std::size_t n = 0;
      while (n < 2 && digits(s, at + n, 1)) ++n;
      if (n == 0 || at + n >= s.size() || s[at + n] != ' ') continue;
      day = number(s, at, n);
      if (!clock_at(s, at + n + 1, h, m, sec, fraction)) continue;
      const std::size_t end = at + n + 9;
      int year = current_year();
      if (end + 5 <= s.size() && s[end] == ' ' && digits(s, end + 1, 4))
        year = number(s, end + 1, 4);
      return seconds(year, month, day, h, m, sec, fraction);
    }
  }
  return std::nullopt;
}

}  // namespace muster::launcher::diagnose

// When a log line says it was written (launcher/diagnose/line_time.hpp), in the forms training
// logs carry, and nothing from lines that only look like a time.
#include <catch2/catch.hpp>

#include <time.h>

#include "launcher/diagnose/line_time.hpp"

using muster::launcher::diagnose::time_of_line;

namespace {

// Seconds since the epoch of a date and time in this host's zone.
double local(int year, int month, int day, int h, int m, int s) {
  struct tm tm {};
  tm.tm_year = year - 1900, tm.tm_mon = month - 1, tm.tm_mday = day;
  tm.tm_hour = h, tm.tm_min = m, tm.tm_sec = s;
  tm.tm_isdst = -1;
  return static_cast<double>(mktime(&tm));
}

int this_year() {
  const time_t now = time(nullptr);
  struct tm tm {};
  localtime_r(&now, &tm);
  return tm.tm_year + 1900;
}

}  // namespace

TEST_CASE("a line's time is read in the ISO, glog, dmesg -T and syslog forms", "[diagnose]") {
  CHECK(time_of_line("slurmstepd: error: *** JOB 4242 ON gpu-a07 CANCELLED AT "
                     "2026-11-22T03:00:01 DUE TO TIME LIMIT ***") == local(2026, 11, 22, 3, 0, 1));
  CHECK(*time_of_line("[2026-11-22 22:30:14.235] [launcher] [info] run") ==
        Approx(local(2026, 11, 22, 22, 30, 14) + 0.235));
  CHECK(*time_of_line("[rank3]:[E1122 03:12:44.123456 2211 ProcessGroupNCCL.cpp:616] [Rank 3] "
                      "Watchdog caught collective operation timeout") ==
        Approx(local(this_year(), 11, 22, 3, 12, 44) + 0.123456));
  CHECK(*time_of_line("E1122 03:12:50.123 2211 torch/distributed/elastic/multiprocessing/"
                      "api.py:826] failed (exitcode: -9)") ==
        Approx(local(this_year(), 11, 22, 3, 12, 50) + 0.123));
  CHECK(time_of_line("[Sun Nov 22 03:12:44 2026] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234") ==
        local(2026, 11, 22, 3, 12, 44));
  CHECK(time_of_line("Nov  2 03:12:44 gpu-a07 kernel: Out of memory: Killed process 4242") ==
        local(this_year(), 11, 2, 3, 12, 44));
  // no time, or only something like one
  CHECK_FALSE(time_of_line("[rank3]: torch.OutOfMemoryError: CUDA out of memory."));
  CHECK_FALSE(time_of_line("step 12:34:56 of the schedule"));
  CHECK_FALSE(time_of_line("E9999 99:99:99 not a date"));
  CHECK_FALSE(time_of_line(""));
}

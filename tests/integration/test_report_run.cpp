// muster report on runs the launcher made: the page is self-contained (no network, inline SVG),
// holds the diagnosis, the charts, the ranks and the events, escapes what the workers printed,
// and renders in headless Chromium (Debian's chromium) with a screenshot and no script error.
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include "tests/support/launch_output.hpp"
#include "tests/support/subprocess.hpp"
#include "tests/support/temp_dir.hpp"

namespace fs = std::filesystem;

namespace {

const std::string kMuster = std::string(MUSTER_BIN_DIR) + "/muster";
const std::string kWorker = std::string(MUSTER_BIN_DIR) + "/muster-test-worker";
const std::string kChromium = "/usr/bin/chromium";

std::size_t count(const std::string& text, const std::string& word) {
  std::size_t n = 0;
  for (auto at = text.find(word); at != std::string::npos; at = text.find(word, at + 1)) ++n;
  return n;
}

// Headless Chromium with a profile of its own (tests run side by side), nothing fetched in the
// background, and `args`.
muster::test::process_result chromium(const fs::path& profile, std::vector<std::string> args) {
  std::vector<std::string> argv = {kChromium,
                                   "--headless",
                                   "--no-sandbox",
                                   "--disable-gpu",
                                   "--disable-background-networking",
                                   "--disable-component-update",
                                   "--disable-sync",
                                   "--no-first-run",
                                   "--user-data-dir=" + profile.string()};
  argv.insert(argv.end(), args.begin(), args.end());
  return muster::test::run_process(argv);
}

// `page`'s DOM after its scripts ran, and what Chromium logged (console messages included) on
// stderr.
muster::test::process_result dump_dom(const fs::path& profile, const fs::path& page) {
  return chromium(profile,
                  {"--enable-logging=stderr", "--v=0", "--dump-dom", "file://" + page.string()});
}

// The width and height a PNG's header gives, or {0, 0} for a file that is not a PNG.
std::pair<int, int> png_size(const std::string& png) {
  if (png.size() < 24 || png.compare(0, 8, "\x89PNG\r\n\x1a\n") != 0) return {0, 0};
  auto be32 = [&](std::size_t at) {
    return (static_cast<unsigned char>(png[at]) << 24) |
           (static_cast<unsigned char>(png[at + 1]) << 16) |
           (static_cast<unsigned char>(png[at + 2]) << 8) | static_cast<unsigned char>(png[at + 3]);
  };
  return {be32(16), be32(20)};
}

}  // namespace

TEST_CASE("muster report writes one self-contained page of a failed run", "[report]") {
  muster::test::temp_dir runs("report-runs");
  const std::string oom =
      "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB. GPU 0 has a total "
      "capacity of 79.15 GiB of which 2.10 GiB is free. <script>alert(1)</script>";
  const auto run = muster::test::run_process({kMuster,
                                              "run",
                                              "launch.runs_dir=" + runs.path().string(),
                                              "launch.nproc=3",
                                              "--",
                                              kWorker,
                                              "--heartbeat-ms",
                                              "40",
                                              "--steps",
                                              "1000",
                                              "--sleep-ms",
                                              "30000",
                                              "--only-rank",
                                              "2",
                                              "--after-ms",
                                              "600",
                                              "--exit-code",
                                              "1",
                                              "--stderr-line",
                                              oom});
  REQUIRE(run.exit_code == 1);
  const auto dir = muster::test::only_run_dir(runs.path());
  const auto page = runs / "report.html";
  const auto made =
      muster::test::run_process({kMuster, "report", "--runs-dir", runs.path().string(),
                                 dir.filename().string(), "-o", page.string()});
  INFO(made.out << made.err);
  REQUIRE(made.exit_code == 0);
  CHECK_THAT(made.out, Catch::Contains("root cause cuda_oom"));
  CHECK_FALSE(fs::exists(page.string() + ".partial"));
  const auto html = muster::test::read_file(page);
  CHECK_THAT(html, Catch::StartsWith("<!DOCTYPE html>"));
  // self-contained: nothing to fetch
  CHECK(count(html, "http://") + count(html, "https://") ==
        count(html, "xmlns=\"http://www.w3.org/2000/svg\""));
  CHECK(count(html, " src=") == 0);
  CHECK(count(html, "<link") == 0);
  // the diagnosis, the charts, the ranks and the events
  CHECK_THAT(html, Catch::Contains("<span class=\"cat\">cuda_oom</span>"));
  CHECK_THAT(html, Catch::Contains("Root cause"));
  CHECK(count(html, "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart\"") == 4);
  CHECK_THAT(html, Catch::Contains("Step time per rank"));
  CHECK_THAT(html, Catch::Contains("rank 2 ("));  // a heatmap row per rank
  CHECK_THAT(html, Catch::Contains("first_failure"));
  // its workers say no waits: the ranks' pace is their step time's, and the table says so
  CHECK_THAT(html, Catch::Contains("% slower") && Catch::Contains(">vs median</th>"));
  // what a worker printed is text, never markup
  CHECK(count(html, "<script>") == 1);  // the page's own
  CHECK_THAT(html, Catch::Contains("&lt;script&gt;alert(1)&lt;/script&gt;"));

  // a report of a run that does not exist, or of a directory without a store, is bad input
  CHECK(muster::test::run_process({kMuster, "report", "--runs-dir", runs.path().string(), "nope"})
            .exit_code == 2);
}

TEST_CASE("the report renders in headless Chromium with no script error", "[report]") {
  if (!fs::exists(kChromium)) {
    WARN("skipped: " << kChromium << " is not installed (make deps installs Debian's chromium)");
    return;
  }
  muster::test::temp_dir runs("report-runs");
  REQUIRE(muster::test::run_process({kMuster, "run", "launch.runs_dir=" + runs.path().string(),
                                     "launch.nproc=2", "--", kWorker, "--heartbeat-ms", "30",
                                     "--steps", "1000", "--sleep-ms", "900"})
              .exit_code == 0);
  const auto dir = muster::test::only_run_dir(runs.path());
  const auto page = runs / "report.html";
  REQUIRE(
      muster::test::run_process({kMuster, "report", dir.string(), "-o", page.string()}).exit_code ==
      0);

  // the page's script ran to its end (it marks the page with the charts it found) and logged
  // no error; the same check catches a page whose script throws
  const auto profile = runs / "chromium-profile";
  const auto dom = dump_dom(profile, page);
  INFO(dom.err);
  REQUIRE(dom.exit_code == 0);
  CHECK_THAT(dom.out, Catch::Contains("data-ready=\"4\""));
  CHECK_THAT(dom.out, Catch::Contains("No failure found"));
  CHECK(count(dom.err, "Uncaught") == 0);
  muster::test::write_file(runs / "broken.html",
                           "<html><body><script>no_such_function();</script></body></html>");
  CHECK(count(dump_dom(profile, runs / "broken.html").err, "Uncaught") == 1);

  // the screenshot: a PNG of the window's size, with far more in it than a blank page
  const auto shot = [&](const fs::path& html, const fs::path& png) {
    return chromium(profile, {"--hide-scrollbars", "--window-size=1280,1600",
                              "--screenshot=" + png.string(), "file://" + html.string()});
  };
  REQUIRE(shot(page, runs / "report.png").exit_code == 0);
  muster::test::write_file(runs / "blank.html", "<html><body></body></html>");
  REQUIRE(shot(runs / "blank.html", runs / "blank.png").exit_code == 0);
  const auto png = muster::test::read_file(runs / "report.png");
  const auto blank = muster::test::read_file(runs / "blank.png");
  CHECK(png_size(png) == std::pair{1280, 1600});
  CHECK(png.size() > 5 * blank.size());
}

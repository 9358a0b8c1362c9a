// Run a piece of a test as an unprivileged user: tests often run as root (CI containers), and
// file permissions do not bind root, so checks of "cannot read/write" behaviour need a child
// that is someone else.
#pragma once

#include <filesystem>
#include <functional>
#include <string>

namespace muster::test {

// Runs `f` in a forked child and returns what it returned, or "error: <message>" when it threw
// (anything: a muster::error, another std::exception, or a failed Catch2 REQUIRE, whose own
// report is lost with the child). When this process is root, the child first
// drops every supplementary group and becomes user and group nobody (65534); otherwise it runs
// as this user. The child always ends with _exit, so it never returns into the test runner.
// The caller must hold no SQLite connection (or other fork-unsafe state) to what `f` opens.
// Throws std::runtime_error when the child cannot be started, cannot drop root, or does not
// exit normally.
std::string run_unprivileged(const std::function<std::string()>& f);

// Whether the user run_unprivileged runs as can reach `path`: every directory above it lets
// that user search it, so `path` can be stat'ed. Permission tests check this first and skip
// (with a WARN) when the test directory itself is out of reach, e.g. TMPDIR under a mode-0700
// /root, where every check would fail for a reason that has nothing to do with the code.
bool reachable_by_nobody(const std::filesystem::path& path);

}  // namespace muster::test

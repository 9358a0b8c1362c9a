// Run a piece of a test as an unprivileged user: tests run as root here, and file permissions do
// not bind root, so checks of "cannot read/write" behaviour need a child that is someone else.
#pragma once

#include <functional>
#include <string>

namespace muster::test {

// Runs `f` in a forked child, as user nobody (uid/gid 65534) when this process is root, and
// returns what it returned, or "error: <message>" when it threw. The caller must hold no SQLite
// connection (or other fork-unsafe state) to what `f` opens. Throws std::runtime_error when the
// child cannot be started or does not exit normally.
std::string run_unprivileged(const std::function<std::string()>& f);

}  // namespace muster::test

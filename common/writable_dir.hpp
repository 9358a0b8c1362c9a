// Whether a directory a program will make or write into can be: asked before the work that needs
// it (muster-train's checkpoint.dir before any rank starts, musterd's state and socket
// directories under --check-config), so the mistake is found there and not at the first write.
#pragma once

#include <filesystem>
#include <string>

namespace muster {

// Why `dir` could not be written, or made where it is missing, by this process: its nearest
// existing ancestor is not a directory, is on a file system that stores nothing (/proc, /sys),
// or denies this user write and search; "" when none of these.
std::string unwritable_dir(const std::filesystem::path& dir);

}  // namespace muster

// Finding the file a command names the way execvp would: a name with a '/' is taken as it is,
// any other is searched in the directories of a PATH value, in order (an empty entry is the
// current directory, as POSIX says). Directories are never a match. No I/O beyond access(2) and
// stat(2); nothing is thrown: the callers word the miss for their own users.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace muster {

// The file `command` runs, or nullopt when it is not found, not executable or a directory
// (errno is then left as the last access(2) or stat(2) left it, for a path with a '/').
// `path` is the PATH value searched; an empty one searches `default_path`.
std::optional<std::filesystem::path> executable_path(
    const std::string& command, std::string_view path,
    std::string_view default_path = "/usr/local/bin:/usr/bin:/bin");

}  // namespace muster

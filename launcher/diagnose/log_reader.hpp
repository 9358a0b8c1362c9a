// Reading a log for `muster diagnose`: line by line, streaming, in bounded memory whatever the
// file's size (a 1 GB slurm-%j.out is read through one buffer). Lines longer than
// kMaxLineBytes are cut there (the rest of such a line is skipped, not read as new lines).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <string_view>

namespace muster::launcher::diagnose {

inline constexpr std::size_t kMaxLineBytes = 64 * 1024;

// Calls on_line(line number from 1, line without its newline) for each line of `file`, or,
// given `keywords`, only for the lines that contain one of them (found by one anchored pass
// over each buffer, keyword_scan.hpp, so a long log where almost nothing matches is read at
// about memory speed; a keyword past a line's first kMaxLineBytes is not seen). Returns the
// number of lines in the file. Throws errc::invalid_input naming the file when it cannot be
// read.
std::int64_t read_log_lines(const std::filesystem::path& file,
                            const std::function<void(std::int64_t, std::string_view)>& on_line,
                            std::span<const std::string_view> keywords = {});

}  // namespace muster::launcher::diagnose

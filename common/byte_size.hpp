// Byte sizes as users write them ("80GiB", "141 GB", "512MiB") and as muster prints them.
// Binary units (KiB, MiB, GiB, TiB) are powers of 1024, decimal ones (KB, MB, GB, TB) powers of
// 1000, as GPU vendors quote memory; a bare number needs a unit, since "80" is ambiguous.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace muster {

// Parses `text` ("80GiB", "1.5 TB", "4096B"); `what` names the input in errors
// ("--gpu-memory"). Throws errc::invalid_input naming the input, the text and an example.
std::int64_t parse_byte_size(std::string_view text, std::string_view what);

// "1.50 GiB", "512.00 MiB", "17 B": binary units, two decimals.
std::string format_bytes(std::int64_t bytes);

}  // namespace muster

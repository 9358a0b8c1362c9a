// Splitting a verb's positional arguments into a job file and overrides: see verbs.hpp.
#include <fmt/format.h>

#include <filesystem>

#include "common/error.hpp"
#include "launcher/cli/verbs.hpp"

namespace muster::cli {

job_args split_job_args(const std::vector<std::string>& args, std::string_view verb,
                        std::string_view fix) {
  job_args out;
  for (const auto& arg : args) {
    if (arg.find('=') != std::string::npos) {
      out.overrides.push_back(arg);
      continue;
    }
    // a key without its value ("train.steps") reads as a second file
    const bool key_like = arg.find('.') != std::string::npos &&
                          arg.find('/') == std::string::npos && !arg.ends_with(".toml") &&
                          !std::filesystem::exists(arg);
    MUSTER_CHECK(
        out.file.empty(), errc::invalid_input, "{}: two job files given ({} and {}); {}", verb,
        out.file, arg,
        key_like ? fmt::format("{} is no file: an override is written key=value ({}=...)", arg, arg)
                 : fmt::format(fmt::runtime(fix), arg));
    out.file = arg;
  }
  return out;
}

}  // namespace muster::cli

// Workers' step lines into the run store: see step_collector.hpp.
#include "launcher/step_collector.hpp"

#include <fstream>

#include "common/step_line.hpp"

namespace muster::launcher {

step_collector::step_collector(std::vector<int> ranks,
                               std::function<std::filesystem::path(int)> file_of,
                               std::function<void(const std::vector<store::step_record>&)> write)
    : ranks_(std::move(ranks)), file_of_(std::move(file_of)), write_(std::move(write)) {}

std::size_t step_collector::collect() {
  std::vector<store::step_record> batch;
  for (int rank : ranks_) {
    const auto file = file_of_(rank);
    std::error_code ec;
    const auto size = std::filesystem::file_size(file, ec);
    auto& done = read_up_to_[rank];
    if (ec || size < done) {  // gone, or a new file (a restart): from its start
      if (!ec) done = 0;
      if (ec) continue;
    }
    if (size == done) continue;
    std::ifstream in(file, std::ios::binary);
    in.seekg(static_cast<std::streamoff>(done));
    std::string chunk(size - done, '\0');
    in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    chunk.resize(static_cast<std::size_t>(in.gcount()));
    const auto complete = chunk.rfind('\n');
    if (complete == std::string::npos) continue;  // a line still being written
    done += complete + 1;
    for (std::size_t at = 0; at <= complete;) {
      const auto end = chunk.find('\n', at);
      if (auto record = parse_step_line(std::string_view(chunk).substr(at, end - at + 1))) {
        record->rank = rank;
        batch.push_back(*record);
      }
      at = end + 1;
    }
  }
  if (!batch.empty()) write_(batch);
  return batch.size();
}

}  // namespace muster::launcher

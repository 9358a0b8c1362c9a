// The job's documents: see job_documents.hpp.
#include "engine/data/job_documents.hpp"

#include <filesystem>
#include <vector>

#include "common/error.hpp"

namespace muster::engine::data {

std::unique_ptr<document_source> open_job_documents(const job_config& config) {
  const std::vector<std::filesystem::path> paths(config.data.paths.begin(),
                                                 config.data.paths.end());
  auto documents = open_documents(config.data.format, paths);
  check_vocab(*documents, config.model);
  return documents;
}

void check_vocab(const document_source& documents, const model_section& model) {
  // a source whose bound is not known is checked as its rows are read (train/batch.hpp)
  MUSTER_CHECK(documents.vocab_size() <= model.vocab_size, errc::invalid_input,
               "data: {} holds token ids up to {} but model.vocab_size is {}; raise "
               "model.vocab_size (byte-level text needs 256)",
               documents.describe(), documents.vocab_size() - 1, model.vocab_size);
}

}  // namespace muster::engine::data

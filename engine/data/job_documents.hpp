// The documents a job trains on, opened from its [data] section and checked against its model,
// asked by muster-train as it starts and by the launchers before they start its ranks, so a
// missing or unreadable data.paths fails at once, before any run directory.
// Not here: reading the formats (document_source.hpp), the order of rows (pack_plan.hpp).
#pragma once

#include <memory>

#include "common/job_config.hpp"
#include "engine/data/document_source.hpp"

namespace muster::engine::data {

// open_documents over data.format and data.paths, then check_vocab against model.
std::unique_ptr<document_source> open_job_documents(const job_config& config);

// Throws errc::invalid_input naming the data and model.vocab_size when `documents` can hold
// token ids the model's embedding has no row for, by their format (document_source::vocab_size;
// one that does not say is checked row by row as it is read: train/batch.hpp).
void check_vocab(const document_source& documents, const model_section& model);

}  // namespace muster::engine::data

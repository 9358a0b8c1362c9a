// Training documents as token ids, read by index: plain text files through a byte-level
// tokenizer (one document per file, token = byte, vocabulary 256), or Megatron's indexed
// dataset (`<prefix>.bin` + `<prefix>.idx`, MMapIndexedDataset; one document per sequence),
// so data users already tokenized is read as it is. No LibTorch: the data path is plain C++.
// Not here: the order of documents and how they fill rows (pack_plan.hpp).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace muster::engine::data {

class document_source {
 public:
  virtual ~document_source() = default;
  virtual std::int64_t num_documents() const = 0;
  virtual std::int64_t document_length(std::int64_t doc) const = 0;
  // Appends tokens [offset, offset + count) of document `doc` to `out`.
  virtual void read(std::int64_t doc, std::int64_t offset, std::int64_t count,
                    std::vector<std::int64_t>& out) const = 0;
  // One more than the largest token id the source can hold, where its format says it (text's
  // bytes: 256); 0 where only reading the tokens says (a Megatron dataset: its token type
  // bounds its ids, not the vocabulary it was made with, which is usually far smaller).
  virtual std::int64_t vocab_size() const = 0;
  // For messages: "3 text files under /usr/share/common-licenses".
  virtual std::string describe() const = 0;
};

// Every regular file named, and every regular file under a named directory (recursively),
// in path order; each is one document of its bytes. Empty files are skipped. Throws
// errc::invalid_input naming the path when one does not exist or no non-empty file is found.
std::unique_ptr<document_source> open_text_files(const std::vector<std::filesystem::path>& paths);

// Megatron's MMapIndexedDataset at `prefix` (prefix.idx and prefix.bin, memory-mapped).
// Throws errc::invalid_input naming the file and what is wrong (missing, not an index of
// version 1, a token type that is not an integer, sizes that overrun the .bin).
std::unique_ptr<document_source> open_indexed_dataset(const std::filesystem::path& prefix);

// The source `format` ("text" or "indexed") names; several indexed prefixes are read one
// after the other.
std::unique_ptr<document_source> open_documents(const std::string& format,
                                                const std::vector<std::filesystem::path>& paths);

}  // namespace muster::engine::data

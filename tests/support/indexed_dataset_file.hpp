// Megatron's indexed dataset (prefix.idx + prefix.bin, MMapIndexedDataset version 1) written
// byte by byte from the format's description, not with muster's reader: the tests' data.
#pragma once

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/support/temp_dir.hpp"

namespace muster::test {

template <class T>
void put_bytes(std::string& out, T value) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));
  out.append(bytes, sizeof(T));
}

// Writes prefix.idx/.bin for `docs` with tokens of type T (dtype `code`: 1 uint8, 4 int32,
// 8 uint16, ...).
template <class T>
void write_indexed(const std::filesystem::path& prefix, const std::vector<std::vector<T>>& docs,
                   std::uint8_t code) {
  std::string bin, idx("MMIDIDX\0\0", 9);
  std::vector<std::int64_t> pointers;
  for (const auto& d : docs) {
    pointers.push_back(static_cast<std::int64_t>(bin.size()));
    for (T t : d) put_bytes(bin, t);
  }
  put_bytes<std::uint64_t>(idx, 1);
  put_bytes<std::uint8_t>(idx, code);
  put_bytes<std::uint64_t>(idx, docs.size());
  put_bytes<std::uint64_t>(idx, docs.size() + 1);
  for (const auto& d : docs) put_bytes<std::int32_t>(idx, static_cast<std::int32_t>(d.size()));
  for (auto p : pointers) put_bytes<std::int64_t>(idx, p);
  for (std::int64_t i = 0; i <= static_cast<std::int64_t>(docs.size()); ++i)
    put_bytes<std::int64_t>(idx, i);
  write_file(prefix.string() + ".bin", bin);
  write_file(prefix.string() + ".idx", idx);
}

}  // namespace muster::test

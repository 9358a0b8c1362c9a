// Reading training documents: text files as bytes, and Megatron's indexed dataset, whose
// files these tests write byte by byte from the format's description (not with our reader's
// code), plus the errors a user can cause.
#include <catch2/catch.hpp>

#include <cstring>
#include <fstream>

#include "common/error.hpp"
#include "engine/data/document_source.hpp"
#include "tests/support/expect_error.hpp"
#include "tests/support/indexed_dataset_file.hpp"
#include "tests/support/temp_dir.hpp"

using namespace muster::engine::data;
using muster::test::write_indexed;
namespace fs = std::filesystem;

namespace {

std::vector<std::int64_t> all_of(const document_source& s, std::int64_t doc) {
  std::vector<std::int64_t> out;
  s.read(doc, 0, s.document_length(doc), out);
  return out;
}

}  // namespace

TEST_CASE("text files are documents of bytes, found under folders in path order", "[data]") {
  muster::test::temp_dir dir;
  fs::create_directories(dir / "sub");
  muster::test::write_file(dir / "sub" / "b.txt", "w\xc3\xb6rld");
  muster::test::write_file(dir / "a.txt", "hello");
  muster::test::write_file(dir / "empty.txt", "");
  auto source = open_text_files({dir.path()});
  REQUIRE(source->num_documents() == 2);
  CHECK(all_of(*source, 0) == std::vector<std::int64_t>{'h', 'e', 'l', 'l', 'o'});
  CHECK(all_of(*source, 1) == std::vector<std::int64_t>{'w', 0xc3, 0xb6, 'r', 'l', 'd'});
  std::vector<std::int64_t> middle;
  source->read(0, 1, 3, middle);
  CHECK(middle == std::vector<std::int64_t>{'e', 'l', 'l'});
  CHECK(source->vocab_size() == 256);
  CHECK_THAT(source->describe(), Catch::Contains("2 text file(s)"));
}

TEST_CASE("the license texts of every Debian machine are a corpus", "[data]") {
  auto source = open_text_files({"/usr/share/common-licenses"});
  CHECK(source->num_documents() >= 10);
  std::int64_t bytes = 0;
  for (std::int64_t d = 0; d < source->num_documents(); ++d) bytes += source->document_length(d);
  CHECK(bytes > 100000);
}

TEST_CASE("a missing path or a folder without text is one clear error", "[data]") {
  muster::test::temp_dir dir;
  CHECK_THAT(muster::test::expect_error(muster::errc::invalid_input,
                                        [&] { open_text_files({dir / "nope"}); }),
             Catch::Contains("data.paths: " + (dir / "nope").string() + " does not exist"));
  CHECK_THAT(muster::test::expect_error(muster::errc::invalid_input,
                                        [&] { open_text_files({dir.path()}); }),
             Catch::Contains("no non-empty file"));
  CHECK_THAT(muster::test::expect_error(muster::errc::invalid_input,
                                        [&] { open_documents("json", {dir.path()}); }),
             Catch::Contains("data.format: 'json' is not text or indexed"));
}

TEST_CASE("Megatron's indexed dataset reads back uint16 and int32 tokens", "[data]") {
  muster::test::temp_dir dir;
  write_indexed<std::uint16_t>(dir / "corpus_text_document", {{1, 2, 3}, {40000, 5}}, 8);
  auto source = open_indexed_dataset(dir / "corpus_text_document");
  REQUIRE(source->num_documents() == 2);
  CHECK(all_of(*source, 0) == std::vector<std::int64_t>{1, 2, 3});
  CHECK(all_of(*source, 1) == std::vector<std::int64_t>{40000, 5});
  CHECK(source->vocab_size() == 0);  // its type bounds the ids, not the vocabulary
  write_indexed<std::int32_t>(dir / "wide", {{7}, {151935, 0, 9}}, 4);
  auto both = open_documents("indexed", {dir / "corpus_text_document", dir / "wide"});
  REQUIRE(both->num_documents() == 4);
  CHECK(all_of(*both, 3) == std::vector<std::int64_t>{151935, 0, 9});
  std::vector<std::int64_t> tail;
  both->read(1, 1, 1, tail);
  CHECK(tail == std::vector<std::int64_t>{5});
}

TEST_CASE("a broken indexed dataset names the file and what is wrong", "[data]") {
  muster::test::temp_dir dir;
  auto error_of = [&](const fs::path& prefix) {
    return muster::test::expect_error(muster::errc::invalid_input,
                                      [&] { open_indexed_dataset(prefix); });
  };
  CHECK_THAT(error_of(dir / "missing"), Catch::Contains("cannot open " + (dir / "missing.idx").string()));
  write_indexed<float>(dir / "floats", {{1.0f}}, 7);
  CHECK_THAT(error_of(dir / "floats"), Catch::Contains("token type code 7 is not an integer type"));
  write_indexed<std::uint16_t>(dir / "short", {{1, 2, 3}}, 8);
  fs::resize_file(dir.path() / "short.bin", 4);  // a copy cut short
  CHECK_THAT(error_of(dir / "short"), Catch::Contains("sequence 0 (3 tokens at byte 0) runs past the end"));
  muster::test::write_file(dir / "text.idx", "not an index at all");
  muster::test::write_file(dir / "text.bin", "");
  CHECK_THAT(error_of(dir / "text"), Catch::Contains("not a Megatron MMapIndexedDataset index"));
}

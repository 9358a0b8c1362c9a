// Reading a request's fields strictly: every field has one type, unknown fields are errors, and
// an error names the field by its path ("job.tp: expected a whole number from 1, got 0"). Shared
// by the requests' parsers; nothing here does I/O.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace muster::daemon {

// Thrown for a request that does not read as its schema; what() names the field.
struct bad_request : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A client's value for a message: scalars as written, arrays and objects by their type (never
// dumped: a deeply nested one would recurse as deep).
std::string brief(const nlohmann::json& v);

// `object`'s keys must all be in `known`; `where` names the object in the message.
void only_keys(const nlohmann::json& object, std::string_view where,
               std::initializer_list<std::string_view> known);

// The field `key`, or nullptr when absent.
const nlohmann::json* field(const nlohmann::json& object, const char* key);

// The object `key` (an empty object when absent); throws bad_request for another type.
const nlohmann::json& object_field(const nlohmann::json& object, const char* key,
                                   std::string_view where);

// Each reads `key` into `out` when present (out keeps its value when absent); throws bad_request
// naming `where`.`key` for another type or a number outside [low, high].
void read(const nlohmann::json& object, const char* key, std::string_view where, int& out,
          std::int64_t low = 1, std::int64_t high = 1'000'000);
void read(const nlohmann::json& object, const char* key, std::string_view where, std::int64_t& out,
          std::int64_t low, std::int64_t high);
void read(const nlohmann::json& object, const char* key, std::string_view where, bool& out);
void read(const nlohmann::json& object, const char* key, std::string_view where, std::string& out);

// The string `key`, which must be present and not empty.
std::string required_string(const nlohmann::json& object, const char* key, std::string_view where);

// A job step as requests name it: "job": {"id": "123", "step": "0", ...}. The step is "" when
// not given (the batch step, or a whole local run).
struct job_ref {
  std::string id;
  std::string step;
};

// The job step named in the object `job` (whose other fields the caller reads); nullopt when
// it names none and `required` is false. Ids are at most 128 printable characters.
std::optional<job_ref> read_job_ref(const nlohmann::json& job, bool required);

}  // namespace muster::daemon

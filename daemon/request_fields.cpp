// Reading a request's fields strictly: see request_fields.hpp.
#include "daemon/request_fields.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace muster::daemon {

using nlohmann::json;

std::string brief(const json& v) {
  return v.is_primitive() ? v.dump(-1, ' ', false, json::error_handler_t::replace) : v.type_name();
}

void only_keys(const json& object, std::string_view where,
               std::initializer_list<std::string_view> known) {
  for (const auto& [key, value] : object.items())
    if (std::find(known.begin(), known.end(), key) == known.end())
      throw bad_request(fmt::format("{}: unknown field \"{}\"", where, key));
}

const json* field(const json& object, const char* key) {
  auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

const json& object_field(const json& object, const char* key, std::string_view where) {
  static const json empty = json::object();
  const json* v = field(object, key);
  if (!v) return empty;
  if (!v->is_object())
    throw bad_request(fmt::format("{}.{}: expected an object, got {}", where, key, v->type_name()));
  return *v;
}

void read(const json& object, const char* key, std::string_view where, std::int64_t& out,
          std::int64_t low, std::int64_t high) {
  if (const json* v = field(object, key)) {
    const bool whole = v->is_number_integer();
    const auto n = whole ? v->get<long long>() : 0;
    if (!whole || n < low || n > high)
      throw bad_request(fmt::format("{}.{}: expected a whole number from {}{}, got {}", where, key,
                                    low, high < 1'000'000 ? fmt::format(" to {}", high) : "",
                                    brief(*v)));
    out = n;
  }
}

void read(const json& object, const char* key, std::string_view where, int& out, std::int64_t low,
          std::int64_t high) {
  std::int64_t value = out;
  read(object, key, where, value, low, high);
  out = static_cast<int>(value);
}

void read(const json& object, const char* key, std::string_view where, bool& out) {
  if (const json* v = field(object, key)) {
    if (!v->is_boolean())
      throw bad_request(
          fmt::format("{}.{}: expected true or false, got {}", where, key, brief(*v)));
    out = v->get<bool>();
  }
}

void read(const json& object, const char* key, std::string_view where, std::string& out) {
  if (const json* v = field(object, key)) {
    if (!v->is_string())
      throw bad_request(
          fmt::format("{}.{}: expected a string, got {}", where, key, v->type_name()));
    out = v->get<std::string>();
  }
}

std::string required_string(const json& object, const char* key, std::string_view where) {
  std::string out;
  read(object, key, where, out);
  if (out.empty())
    throw bad_request(fmt::format("{}.{}: required, a string that is not empty", where, key));
  return out;
}

namespace {

void check_id(const std::string& id, std::string_view where) {
  const bool printable = std::all_of(id.begin(), id.end(), [](char c) {
    return static_cast<unsigned char>(c) > 0x20 && static_cast<unsigned char>(c) < 0x7f;
  });
  if (id.size() > 128 || !printable)
    throw bad_request(
        fmt::format("{}: expected at most 128 printable characters without spaces", where));
}

}  // namespace

std::optional<job_ref> read_job_ref(const json& job, bool required) {
  if (!required && !field(job, "id")) {
    if (field(job, "step")) throw bad_request("job.step: given without job.id");
    return std::nullopt;
  }
  job_ref ref{required_string(job, "id", "job"), ""};
  read(job, "step", "job", ref.step);
  check_id(ref.id, "job.id");
  check_id(ref.step, "job.step");
  return ref;
}

}  // namespace muster::daemon

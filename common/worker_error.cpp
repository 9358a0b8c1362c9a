// A worker's error file: see worker_error.hpp.
#include "common/worker_error.hpp"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace muster {

std::string format_worker_error(const worker_error& e) {
  nlohmann::json extra = {{"timestamp", std::to_string(e.time_ms / 1000)},
                          {"muster_time_ms", e.time_ms}};
  if (!e.phase.empty()) extra["muster_phase"] = e.phase;
  if (!e.kind.empty()) extra["muster_kind"] = e.kind;
  if (e.step) extra["muster_step"] = *e.step;
  nlohmann::json file = {{"message", {{"message", e.message}, {"extraInfo", extra}}}};
  return file.dump();
}

worker_error parse_worker_error(std::string_view text) {
  worker_error e;
  auto json = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded() || !json.is_object()) {
    e.message = std::string(text.substr(0, 2000));
    return e;
  }
  auto message = json.value("message", nlohmann::json());
  if (message.is_object()) {
    const auto extra = message.value("extraInfo", nlohmann::json::object());
    if (extra.is_object()) {
      if (auto p = extra.find("muster_phase"); p != extra.end() && p->is_string()) e.phase = *p;
      if (auto k = extra.find("muster_kind"); k != extra.end() && k->is_string()) e.kind = *k;
      if (auto s = extra.find("muster_step"); s != extra.end() && s->is_number_integer())
        e.step = s->get<std::int64_t>();
      if (auto t = extra.find("muster_time_ms"); t != extra.end() && t->is_number_integer())
        e.time_ms = t->get<std::int64_t>();
    }
    message = message.value("message", nlohmann::json());
  }
  e.message = message.is_string() ? message.get<std::string>() : json.dump();
  return e;
}

std::optional<worker_error> read_worker_error(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  return parse_worker_error(text.str());
}

}  // namespace muster

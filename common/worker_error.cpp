// A worker's error file: see worker_error.hpp.
#include "common/worker_error.hpp"

#include <chrono>
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
      // torchelastic's @record: "timestamp" in epoch seconds, as a string
      else if (auto ts = extra.find("timestamp"); ts != extra.end() && ts->is_string())
        try {
          e.time_ms = std::stoll(ts->get<std::string>()) * 1000;
          e.time_in_seconds = true;
        } catch (const std::exception&) {
        }
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
  auto e = parse_worker_error(text.str());
  std::error_code ec;
  if (e.time_ms == 0)  // no time in it: when the file was written
    if (const auto written = std::filesystem::last_write_time(file, ec); !ec)
      e.time_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::file_clock::to_sys(written).time_since_epoch())
                      .count();
  return e;
}

}  // namespace muster

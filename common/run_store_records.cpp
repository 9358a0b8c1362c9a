// Names of the run store's enums and the clock: see run_store_records.hpp.
#include "common/run_store_records.hpp"
#include <cmath>

#include <array>
#include <chrono>
#include <utility>

namespace muster::store {
namespace {

template <class Enum, size_t N>
using name_table = std::array<std::pair<Enum, std::string_view>, N>;

constexpr name_table<run_state, 5> kRunStates{{
    {run_state::created, "created"},
    {run_state::running, "running"},
    {run_state::succeeded, "succeeded"},
    {run_state::failed, "failed"},
    {run_state::cancelled, "cancelled"},
}};

constexpr name_table<rank_state, 5> kRankStates{{
    {rank_state::pending, "pending"},
    {rank_state::running, "running"},
    {rank_state::succeeded, "succeeded"},
    {rank_state::failed, "failed"},
    {rank_state::killed, "killed"},
}};

constexpr name_table<severity, 4> kSeverities{{
    {severity::debug, "debug"},
    {severity::info, "info"},
    {severity::warn, "warn"},
    {severity::error, "error"},
}};

template <class Enum, size_t N>
std::string_view name_of(const name_table<Enum, N>& table, Enum value) {
  for (const auto& [entry, name] : table) {
    if (entry == value) return name;
  }
  return "unknown";
}

template <class Enum, size_t N>
std::optional<Enum> parse(const name_table<Enum, N>& table, std::string_view text) {
  for (const auto& [entry, name] : table) {
    if (name == text) return entry;
  }
  return std::nullopt;
}

}  // namespace

epoch_ms now_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

namespace {
bool same(double a, double b) {
  return a == b || (std::isnan(a) && std::isnan(b));
}
}  // namespace

bool step_record::operator==(const step_record& o) const {
  return rank == o.rank && step == o.step && same(loss, o.loss) && tokens == o.tokens &&
         same(step_time_s, o.step_time_s) && mem_bytes == o.mem_bytes && time_ms == o.time_ms &&
         same(aux_loss, o.aux_loss) && same(z_loss, o.z_loss) && same(grad_norm, o.grad_norm) &&
         same(lr, o.lr) && same(tokens_per_s, o.tokens_per_s) && same(mfu, o.mfu) &&
         peak_mem_bytes == o.peak_mem_bytes && same(comm_wait_s, o.comm_wait_s) &&
         mem_device == o.mem_device;
}

std::string_view to_string(run_state state) {
  return name_of(kRunStates, state);
}
std::string_view to_string(rank_state state) {
  return name_of(kRankStates, state);
}
std::string_view to_string(severity level) {
  return name_of(kSeverities, level);
}

std::optional<run_state> parse_run_state(std::string_view text) {
  return parse(kRunStates, text);
}
std::optional<rank_state> parse_rank_state(std::string_view text) {
  return parse(kRankStates, text);
}
std::optional<severity> parse_severity(std::string_view text) {
  return parse(kSeverities, text);
}

}  // namespace muster::store

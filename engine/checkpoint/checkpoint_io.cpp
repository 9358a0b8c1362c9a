// Saving and loading checkpoints: see checkpoint_io.hpp.
#include "engine/checkpoint/checkpoint_io.hpp"

#include <fstream>
#include <map>
#include <memory>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "common/hf_config.hpp"
#include "engine/checkpoint/hf_names.hpp"
#include "engine/checkpoint/safetensors.hpp"
#include "engine/train/lr_schedule.hpp"

namespace muster::engine::checkpoint {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::span<const std::byte> bytes_of(const torch::Tensor& t) {
  return {static_cast<const std::byte*>(t.data_ptr()), static_cast<std::size_t>(t.nbytes())};
}

void write_text(const fs::path& file, const std::string& text) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out << text;
  out.flush();
  MUSTER_CHECK(out.good(), errc::io, "cannot write {}", file.string());
}

json read_json_file(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  MUSTER_CHECK(in.good(), errc::io, "cannot read {}", file.string());
  try {
    return json::parse(in);
  } catch (const json::exception& e) {
    MUSTER_THROW(errc::invalid_input, "{} is not valid JSON: {}", file.string(), e.what());
  }
}

void barrier(comm::communicator* world) {
  if (world) world->barrier();
}

// A tensor's bytes on the host: the tensor itself on the CPU, else a host copy kept in `kept`
// (a GPU's buffers are written through one).
std::span<const std::byte> host_bytes(const torch::Tensor& t, std::vector<torch::Tensor>& kept) {
  if (t.is_cpu()) return bytes_of(t);
  kept.push_back(t.to(torch::kCPU));
  return bytes_of(kept.back());
}

std::vector<tensor_bytes> moments_of(parallel::sharded_model& model,
                                     parallel::flat_adamw& optimizer,
                                     std::vector<torch::Tensor>& kept) {
  std::vector<tensor_bytes> out;
  auto units = model.units();
  auto& moments = optimizer.moments();
  for (std::size_t i = 0; i < units.size(); ++i) {
    const auto n = moments[i].exp_avg.numel();
    out.push_back(
        {units[i]->name() + ".exp_avg", "F32", {n}, host_bytes(moments[i].exp_avg, kept)});
    out.push_back(
        {units[i]->name() + ".exp_avg_sq", "F32", {n}, host_bytes(moments[i].exp_avg_sq, kept)});
  }
  return out;
}

json layout_of(const job_config& config, comm::communicator* world) {
  return {{"world_size", world ? world->size() : 1},
          {"sharding", config.parallel.sharding},
          {"expert", config.parallel.expert}};
}

// One tensor of a checkpoint into `out` (fp32, its numel), converting BF16/F16.
void read_tensor(const safetensors_file& file, const std::string& hf,
                 const std::vector<std::int64_t>& shape, torch::Tensor out, const fs::path& dir) {
  const auto& e = file.tensors().at(hf);
  MUSTER_CHECK(static_cast<std::int64_t>((e.end - e.begin) / dtype_size(e.dtype)) == out.numel() &&
                   e.shape == shape,
               errc::invalid_input,
               "{}: tensor {} has shape [{}], the model's is [{}]; the checkpoint is of another "
               "model (compare its config.json with the job's model section)",
               dir.string(), hf, fmt::join(e.shape, ", "), fmt::join(shape, ", "));
  static const std::map<std::string, torch::ScalarType> kTypes{{"F32", torch::kFloat32},
                                                               {"BF16", torch::kBFloat16},
                                                               {"F16", torch::kFloat16},
                                                               {"F64", torch::kFloat64}};
  auto type = kTypes.find(e.dtype);
  MUSTER_CHECK(type != kTypes.end(), errc::invalid_input,
               "{}: tensor {} is {}; weights must be F32, BF16, F16 or F64", dir.string(), hf,
               e.dtype);
  auto raw = torch::empty({out.numel()}, type->second);
  file.read(hf, {static_cast<std::byte*>(raw.data_ptr()), static_cast<std::size_t>(raw.nbytes())});
  out.copy_(raw);
}

// `name` with its expert index, if any, as "*": "layers.1.mlp.experts.*.up_proj.weight"; and
// that index in `expert` (else -1).
std::string any_expert(const std::string& name, std::int64_t& expert) {
  static const std::string kExperts = ".mlp.experts.";
  expert = -1;
  const auto at = name.find(kExperts);
  if (at == std::string::npos) return name;
  const auto from = at + kExperts.size(), dot = name.find('.', from);
  if (dot == std::string::npos) return name;
  try {
    expert = std::stoll(name.substr(from, dot - from));
  } catch (const std::exception&) {
    return name;
  }
  return name.substr(0, from) + "*" + name.substr(dot);
}

// Throws errc::invalid_input naming the checkpoint's tensors (`where`, by our names) that are no
// parameter of the whole model: a checkpoint of a larger model (more layers, experts, a shared
// expert) loaded into a smaller one. This rank holds some experts of each MoE layer; the others'
// are the same names with another index below `num_experts`. Rotary inv_freq buffers, which
// some Hugging Face checkpoints carry, are no parameter and are passed over, and so is the
// lm_head.weight of a model whose head is its embedding (`tied`: some tied models ship it).
void check_all_used(const std::map<std::string, std::pair<std::string, std::string>>& where,
                    parallel::sharded_model& model, std::int64_t num_experts, bool tied,
                    const fs::path& dir) {
  std::set<std::string> ours;
  std::int64_t expert = 0;
  for (auto* unit : model.units())
    for (const auto& param : unit->params()) ours.insert(any_expert(param.first, expert));
  std::vector<std::string> unused;
  for (const auto& [name, at] : where) {
    if (name.ends_with("rotary_emb.inv_freq") || (tied && name == "lm_head.weight")) continue;
    if (!ours.contains(any_expert(name, expert)) || expert >= num_experts)
      unused.push_back(at.second);
  }
  if (unused.empty()) return;
  const std::size_t shown = std::min<std::size_t>(unused.size(), 4);
  MUSTER_THROW(errc::invalid_input,
               "checkpoint {} holds {} tensor(s) the model has no parameter for ({}{}); it is of "
               "a larger model: compare its config.json with the job's model section "
               "(num_layers, num_experts, shared expert)",
               dir.string(), unused.size(),
               fmt::join(unused.begin(), unused.begin() + static_cast<std::ptrdiff_t>(shown), ", "),
               unused.size() > shown ? ", ..." : "");
}

}  // namespace

fs::path save_checkpoint(const fs::path& root, std::int64_t steps_done, std::int64_t rows_consumed,
                         parallel::sharded_model& model, parallel::flat_adamw& optimizer,
                         const job_config& config, comm::communicator* world, int keep) {
  const int rank = world ? world->rank() : 0, size = world ? world->size() : 1;
  const auto done = root / fmt::format("step-{:08d}", steps_done);
  const auto partial = root / fmt::format("step-{:08d}.partial", steps_done);
  if (rank == 0) {
    std::error_code ec;
    fs::remove_all(partial, ec);
    fs::create_directories(partial / "optimizer", ec);
    MUSTER_CHECK(!ec, errc::io, "cannot create checkpoint directory {}: {}", partial.string(),
                 ec.message());
  }
  barrier(world);
  // The weights: one unit gathered at a time, kept only by its writer.
  std::vector<torch::Tensor> kept;
  std::vector<tensor_bytes> tensors;
  auto units = model.units();
  for (std::size_t i = 0; i < units.size(); ++i) {
    auto whole = units[i]->whole_values();
    if (!units[i]->writes(i)) continue;
    const auto& params = units[i]->params();
    for (std::size_t j = 0; j < params.size(); ++j) {
      const auto& p = params[j].second;
      kept.push_back(whole.narrow(0, units[i]->offsets()[j], p.numel())
                         .to(torch::TensorOptions().device(torch::kCPU), false, /*copy=*/true));
      tensors.push_back(
          {to_hf_name(params[j].first), "F32", p.sizes().vec(), bytes_of(kept.back())});
    }
  }
  const auto file = fmt::format("model-{:05d}-of-{:05d}.safetensors", rank + 1, size);
  write_safetensors(partial / file, tensors, {{"format", "pt"}});
  json part = {{"file", file}, {"names", json::array()}, {"bytes", 0}};
  std::int64_t bytes = 0;
  for (const auto& t : tensors) {
    part["names"].push_back(t.name);
    bytes += static_cast<std::int64_t>(t.data.size());
  }
  part["bytes"] = bytes;
  write_text(partial / fmt::format("index.part-{}.json", rank), part.dump());
  write_safetensors(partial / "optimizer" / fmt::format("rank-{:05d}.safetensors", rank),
                    moments_of(model, optimizer, kept),
                    {{"adam_steps", std::to_string(optimizer.steps_taken())}});
  barrier(world);
  if (rank == 0) {
    json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", json::object()}};
    std::int64_t total = 0;
    for (int r = 0; r < size; ++r) {
      const auto part_file = partial / fmt::format("index.part-{}.json", r);
      const auto p = read_json_file(part_file);
      for (const auto& name : p["names"]) index["weight_map"][name.get<std::string>()] = p["file"];
      total += p["bytes"].get<std::int64_t>();
      fs::remove(part_file);
    }
    index["metadata"]["total_size"] = total;
    write_text(partial / "model.safetensors.index.json", index.dump(2) + "\n");
    write_text(partial / "config.json", hf_config_text(config.model));
    auto state = layout_of(config, world);
    state["step"] = steps_done;
    state["rows_consumed"] = rows_consumed;  // the data's position, whatever the global batch
    state["seed"] = config.train.seed;
    // the learning-rate schedule it was trained on, for a resumed run to say where it differs
    state["schedule"] = {{"steps", config.train.steps},
                         {"warmup_steps", config.train.warmup_steps},
                         {"lr", config.train.lr},
                         {"min_lr", config.train.min_lr}};
    write_text(partial / "trainer_state.json", state.dump(2) + "\n");
    std::error_code ec;
    fs::remove_all(done, ec);
    fs::rename(partial, done, ec);
    MUSTER_CHECK(!ec, errc::io, "cannot rename {} to {}: {}", partial.string(), done.string(),
                 ec.message());
    if (keep > 0) {
      std::vector<fs::path> all;
      for (const auto& entry : fs::directory_iterator(root))
        if (entry.is_directory() && entry.path().filename().string().starts_with("step-") &&
            entry.path().extension() != ".partial")
          all.push_back(entry.path());
      std::sort(all.begin(), all.end());
      for (std::size_t i = 0; i + static_cast<std::size_t>(keep) < all.size(); ++i)
        fs::remove_all(all[i], ec);
    }
  }
  barrier(world);
  return done;
}

std::optional<std::int64_t> rows_consumed(const fs::path& dir) {
  if (!fs::exists(dir / "trainer_state.json")) return std::nullopt;
  const auto state = read_json_file(dir / "trainer_state.json");
  const auto it = state.find("rows_consumed");
  if (it == state.end() || !it->is_number_integer()) return std::nullopt;  // saved before
  return it->get<std::int64_t>();
}

std::int64_t load_checkpoint(const fs::path& dir, parallel::sharded_model& model,
                             parallel::flat_adamw& optimizer, const job_config& config,
                             comm::communicator* world) {
  // Which file holds each tensor, by our name.
  std::map<std::string, std::pair<std::string, std::string>> where;  // ours -> (file, hf name)
  if (fs::exists(dir / "model.safetensors.index.json")) {
    const auto index = read_json_file(dir / "model.safetensors.index.json");
    for (const auto& [hf, file] : index.at("weight_map").items())
      where[from_hf_name(hf)] = {file.get<std::string>(), hf};
  } else if (fs::exists(dir / "model.safetensors")) {
    const safetensors_file single(dir / "model.safetensors");
    for (const auto& [hf, e] : single.tensors())
      where[from_hf_name(hf)] = {"model.safetensors", hf};
  } else {
    MUSTER_THROW(errc::invalid_input,
                 "checkpoint.load = {}: neither model.safetensors.index.json nor "
                 "model.safetensors is there; name a checkpoint directory (step-N) or a Hugging "
                 "Face model directory",
                 dir.string());
  }
  check_all_used(where, model, config.model.num_experts, config.model.tie_embeddings, dir);
  std::map<std::string, std::unique_ptr<safetensors_file>> files;
  for (auto* unit : model.units()) {
    auto whole = torch::zeros({unit->numel()}, torch::kFloat32);
    const auto& params = unit->params();
    for (std::size_t j = 0; j < params.size(); ++j) {
      auto it = where.find(params[j].first);
      MUSTER_CHECK(it != where.end(), errc::invalid_input,
                   "checkpoint {} has no tensor {} (nor its Mixtral name); it is of another model",
                   dir.string(), to_hf_name(params[j].first));
      auto& file = files[it->second.first];
      if (!file) file = std::make_unique<safetensors_file>(dir / it->second.first);
      read_tensor(*file, it->second.second, params[j].second.sizes().vec(),
                  whole.narrow(0, unit->offsets()[j], params[j].second.numel()), dir);
    }
    unit->load_whole(whole);
  }
  if (!fs::exists(dir / "trainer_state.json")) return 0;  // weights only
  const auto state = read_json_file(dir / "trainer_state.json");
  // checkpoint.load_optim = false: the weights and the step, the optimizer afresh
  if (!config.checkpoint.load_optim) return state.at("step").get<std::int64_t>();
  const auto now = layout_of(config, world);
  for (const auto& key : {"world_size", "sharding", "expert"})
    MUSTER_CHECK(state.at(key) == now.at(key), errc::invalid_input,
                 "checkpoint {} was saved with {} = {}, this run has {}; its optimizer state is "
                 "sharded for that layout: run with the same layout, or set "
                 "checkpoint.load_optim = false to take its weights and step with a fresh "
                 "optimizer",
                 dir.string(), key, state.at(key).dump(), now.at(key).dump());
  const int rank = world ? world->rank() : 0;
  const safetensors_file moments(dir / "optimizer" / fmt::format("rank-{:05d}.safetensors", rank));
  auto units = model.units();
  auto& m = optimizer.moments();
  for (std::size_t i = 0; i < units.size(); ++i) {
    auto read = [&](const std::string& name, torch::Tensor& t) {
      auto host = t.is_cpu() ? t : torch::empty_like(t, torch::TensorOptions().device(torch::kCPU));
      moments.read(name, {static_cast<std::byte*>(host.data_ptr()),
                          static_cast<std::size_t>(host.nbytes())});
      if (!host.is_same(t)) t.copy_(host);
    };
    read(units[i]->name() + ".exp_avg", m[i].exp_avg);
    read(units[i]->name() + ".exp_avg_sq", m[i].exp_avg_sq);
  }
  optimizer.set_steps_taken(std::stoll(moments.metadata().at("adam_steps")));
  return state.at("step").get<std::int64_t>();
}

std::optional<std::string> schedule_change(const std::filesystem::path& dir,
                                           const train_section& now) {
  if (!fs::exists(dir / "trainer_state.json")) return std::nullopt;
  const auto state = read_json_file(dir / "trainer_state.json");
  if (!state.contains("schedule")) return std::nullopt;  // saved before it was kept
  const auto& saved_json = state.at("schedule");
  train_section saved = now;
  saved.steps = saved_json.at("steps").get<int>();
  saved.warmup_steps = saved_json.at("warmup_steps").get<int>();
  saved.lr = saved_json.at("lr").get<double>();
  saved.min_lr = saved_json.at("min_lr").get<double>();
  if (saved.steps == now.steps && saved.warmup_steps == now.warmup_steps && saved.lr == now.lr &&
      saved.min_lr == now.min_lr)
    return std::nullopt;
  const int step = state.at("step").get<int>();  // the next step, 0-based
  return fmt::format(
      "checkpoint {} was trained on the schedule of train.steps = {}, warmup_steps = {}, lr = "
      "{:g}, min_lr = {:g}; this run has {}, {}, {:g}, {:g}, and its learning rate follows this "
      "run's schedule from step {} on ({:.4g} there, where the checkpoint's gives {:.4g}). Set "
      "those keys as the checkpoint had them to continue its schedule",
      dir.string(), saved.steps, saved.warmup_steps, saved.lr, saved.min_lr, now.steps,
      now.warmup_steps, now.lr, now.min_lr, step + 1, train::lr_at(step, now),
      train::lr_at(step, saved));
}

}  // namespace muster::engine::checkpoint

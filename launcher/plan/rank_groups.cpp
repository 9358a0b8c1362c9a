// Megatron-Core's rank groups: see rank_groups.hpp. The arithmetic follows
// megatron/core/parallel_state.py; the enumeration is restructured so that building every
// group of a 16384-rank layout is a few linear passes.
#include "launcher/plan/rank_groups.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstddef>

#include "common/error.hpp"

namespace muster::launcher::plan {
namespace {

// The five dimensions of Megatron's rank generator; the values index per-dimension arrays.
enum dim : int { d_tp = 0, d_cp = 1, d_ep = 2, d_dp = 3, d_pp = 4 };
constexpr int kNumDims = 5;
constexpr std::array<std::string_view, kNumDims> kDimNames = {"tp", "cp", "ep", "dp", "pp"};
// Names missing from an order are appended in the order of Megatron's name_to_size dict.
constexpr std::array<dim, kNumDims> kAppendOrder = {d_tp, d_pp, d_dp, d_ep, d_cp};

int size_of(const mesh& m, int d) {
  switch (d) {
    case d_tp:
      return m.tp;
    case d_cp:
      return m.cp;
    case d_ep:
      return m.ep;
    case d_dp:
      return m.dp;
    default:
      return m.pp;
  }
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::vector<std::string_view> split_dashes(std::string_view s) {
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  while (true) {
    const std::size_t dash = s.find('-', start);
    parts.push_back(s.substr(start, dash == std::string_view::npos ? dash : dash - start));
    if (dash == std::string_view::npos) return parts;
    start = dash + 1;
  }
}

// The dimension called `name`, or -1.
int parse_dim(std::string_view name) {
  const auto it = std::find(kDimNames.begin(), kDimNames.end(), name);
  return it == kDimNames.end() ? -1 : static_cast<int>(it - kDimNames.begin());
}

// The dimensions of `order`, fastest first, with the missing ones appended as Megatron does.
std::array<int, kNumDims> ordered_dims(const mesh& m, std::string_view order) {
  const std::string text = lower(order);
  std::array<int, kNumDims> dims{};
  std::array<bool, kNumDims> seen{};
  int n = 0;
  for (std::string_view name : split_dashes(text)) {
    const int d = parse_dim(name);
    MUSTER_CHECK(d >= 0, errc::invalid_input,
                 "parallel.order = \"{}\": unknown name \"{}\"; name tp, cp, ep, dp and pp, "
                 "fastest-varying first, separated by '-', e.g. tp-cp-ep-dp-pp",
                 order, name);
    MUSTER_CHECK(!seen[d], errc::invalid_input,
                 "parallel.order = \"{}\": {} appears twice; name each of tp, cp, ep, dp and pp "
                 "at most once, e.g. tp-cp-ep-dp-pp",
                 order, name);
    seen[d] = true;
    dims[n++] = d;
  }
  for (dim d : kAppendOrder) {
    if (seen[d]) continue;
    MUSTER_CHECK(size_of(m, d) == 1, errc::invalid_input,
                 "parallel.order = \"{}\": {} has size {} but is missing from the order; add it, "
                 "e.g. tp-cp-ep-dp-pp",
                 order, kDimNames[d], size_of(m, d));
    dims[n++] = d;
  }
  return dims;
}

// Stride of each dimension (indexed by dim) under `order`.
std::array<int, kNumDims> strides_by_dim(const mesh& m, std::string_view order) {
  std::array<int, kNumDims> strides{};
  int stride = 1;
  for (int d : ordered_dims(m, order)) {
    strides[d] = stride;
    stride *= size_of(m, d);
  }
  return strides;
}

// sum_i idx[i] * stride[i] for every idx in the box `shape`, idx[0] varying fastest: the
// offsets Megatron's decompose/inner_product pair gives for index 0, 1, 2, ...
std::vector<int> box_offsets(const std::vector<int>& shape, const std::vector<int>& stride) {
  std::size_t total = 1;
  for (int s : shape) total *= static_cast<std::size_t>(s);
  std::vector<int> out;
  out.reserve(total);
  out.push_back(0);
  for (std::size_t i = 0; i < shape.size(); ++i) {
    const std::size_t inner = out.size();
    for (int k = 1; k < shape[i]; ++k) {
      for (std::size_t t = 0; t < inner; ++t) out.push_back(out[t] + k * stride[i]);
    }
  }
  return out;
}

// "[0, 4, 8]", with at most `limit` members shown.
std::string format_group(const std::vector<int>& g, std::size_t limit = 8) {
  std::string s = "[";
  for (std::size_t i = 0; i < g.size() && i < limit; ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(g[i]);
  }
  if (g.size() > limit) s += ", ...";
  return s + "]";
}

// The names of the dimensions that vary faster than pp in one mesh ("tp*cp", or "1" when
// none), and the product of their sizes. `names` renames the dimensions for the mesh.
struct inner_dims {
  std::string names;
  int product = 1;
};

inner_dims dims_before_pp(const mesh& m, std::string_view order,
                          const std::array<std::string_view, kNumDims>& names) {
  inner_dims out;
  for (int d : ordered_dims(m, order)) {
    if (d == d_pp) break;
    if (names[d].empty()) continue;  // fixed at 1 in this mesh
    if (!out.names.empty()) out.names.push_back('*');
    out.names += names[d];
    out.product *= size_of(m, d);
  }
  if (out.names.empty())
    out.names.assign(1, '1');  // chars, not "1": GCC 12 -O2 -Wrestrict false positive
  return out;
}

constexpr std::array<std::string_view, kNumDims> kAttnNames = {"tp", "cp", "", "dp", "pp"};
constexpr std::array<std::string_view, kNumDims> kExpertNames = {"etp", "", "ep", "edp", "pp"};

std::string describe_meshes(const layout& l) {
  return fmt::format(
      "attention mesh tp={} cp={} dp={} pp={}, expert mesh etp={} ep={} edp={} pp={}", l.attn.tp,
      l.attn.cp, l.attn.dp, l.attn.pp, l.expert.tp, l.expert.ep, l.expert.dp, l.expert.pp);
}

// Which mesh and which token Megatron uses for each group kind.
struct kind_source {
  bool expert;
  std::string_view token;
};

kind_source source_of(group_kind kind) {
  switch (kind) {
    case group_kind::tp:
      return {false, "tp"};
    case group_kind::cp:
      return {false, "cp"};
    case group_kind::dp:
      return {false, "dp"};
    case group_kind::dp_cp:
      return {false, "dp-cp"};
    case group_kind::pp:
      return {false, "pp"};
    case group_kind::mp:
      return {false, "tp-pp"};
    case group_kind::ep:
      return {true, "ep"};
    case group_kind::etp:
      return {true, "tp"};
    case group_kind::edp:
      return {true, "dp"};
    case group_kind::etp_ep:
      return {true, "tp-ep"};
  }
  MUSTER_THROW(errc::internal, "internal error: unknown group kind {}", static_cast<int>(kind));
}

}  // namespace

std::vector<std::vector<int>> masked_orthogonal_groups(int world, std::span<const int> sizes,
                                                       std::span<const bool> mask) {
  MUSTER_CHECK(sizes.size() == mask.size(), errc::invalid_input,
               "rank groups: {} dimension sizes but {} mask entries", sizes.size(), mask.size());
  long long product = 1;
  for (int s : sizes) {
    MUSTER_CHECK(s >= 1, errc::invalid_input,
                 "rank groups: a dimension has size {}; sizes are >= 1", s);
    product *= s;
    MUSTER_CHECK(product <= INT_MAX, errc::invalid_input,
                 "rank groups: the dimension sizes multiply past {} ranks", INT_MAX);
  }
  MUSTER_CHECK(product == world, errc::invalid_input,
               "rank groups: the dimension sizes multiply to {} ranks, not the world of {}",
               product, world);
  std::vector<int> masked_shape, masked_stride, unmasked_shape, unmasked_stride;
  int stride = 1;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    (mask[i] ? masked_shape : unmasked_shape).push_back(sizes[i]);
    (mask[i] ? masked_stride : unmasked_stride).push_back(stride);
    stride *= sizes[i];
  }
  const std::vector<int> member = box_offsets(masked_shape, masked_stride);
  const std::vector<int> base = box_offsets(unmasked_shape, unmasked_stride);
  std::vector<std::vector<int>> groups(base.size());
  for (std::size_t g = 0; g < base.size(); ++g) {
    groups[g].reserve(member.size());
    for (int offset : member) groups[g].push_back(base[g] + offset);
  }
  return groups;
}

std::vector<std::vector<int>> mesh_groups(const mesh& m, std::string_view order,
                                          std::string_view token) {
  const std::array<int, kNumDims> dims = ordered_dims(m, order);
  std::array<bool, kNumDims> wanted{};
  const std::string text = lower(token);  // split_dashes views into it
  for (std::string_view name : split_dashes(text)) {
    const int d = parse_dim(name);
    MUSTER_CHECK(d >= 0, errc::invalid_input,
                 "rank group \"{}\": unknown name \"{}\"; use tp, cp, ep, dp or pp joined by '-', "
                 "e.g. dp-cp",
                 token, name);
    MUSTER_CHECK(!wanted[d], errc::invalid_input, "rank group \"{}\": {} appears twice", token,
                 name);
    wanted[d] = true;
  }
  std::array<int, kNumDims> sizes{};
  std::array<bool, kNumDims> mask{};
  for (int i = 0; i < kNumDims; ++i) {
    sizes[i] = size_of(m, dims[i]);
    mask[i] = wanted[dims[i]];
  }
  return masked_orthogonal_groups(m.size(), sizes, mask);
}

std::string_view group_name(group_kind kind) {
  switch (kind) {
    case group_kind::tp:
      return "tp";
    case group_kind::cp:
      return "cp";
    case group_kind::dp:
      return "dp";
    case group_kind::dp_cp:
      return "dp-cp";
    case group_kind::pp:
      return "pp";
    case group_kind::mp:
      return "tp-pp";
    case group_kind::ep:
      return "ep";
    case group_kind::etp:
      return "expert-tp";
    case group_kind::edp:
      return "expert-dp";
    case group_kind::etp_ep:
      return "expert-tp-ep";
  }
  return "unknown";
}

std::optional<std::string> pipeline_groups_mismatch(const layout& l) {
  const auto attn = mesh_groups(l.attn, l.order, "pp");
  const auto expert = mesh_groups(l.expert, l.order, "pp");
  if (attn == expert) return std::nullopt;
  std::size_t g = 0;
  while (g < attn.size() && g < expert.size() && attn[g] == expert[g]) ++g;
  const std::string example =
      g < attn.size() && g < expert.size()
          ? fmt::format("pipeline group {} is {} in the attention mesh but {} in the expert mesh",
                        g, format_group(attn[g]), format_group(expert[g]))
          : fmt::format("{} pipeline groups in the attention mesh but {} in the expert mesh",
                        attn.size(), expert.size());
  const inner_dims a = dims_before_pp(l.attn, l.order, kAttnNames);
  const inner_dims e = dims_before_pp(l.expert, l.order, kExpertNames);
  return fmt::format(
      "parallel.order = \"{}\": the pipeline groups of the attention and expert meshes differ "
      "({}; {}), and Megatron-Core requires them to be the same: pipeline neighbours are {} = {} "
      "ranks apart in the attention mesh but {} = {} in the expert mesh; use an order where pp "
      "comes "
      "after tp, cp, ep and dp (e.g. tp-cp-ep-dp-pp), or sizes with {} == {}",
      l.order, describe_meshes(l), example, a.names, a.product, e.names, e.product, a.names,
      e.names);
}

std::optional<std::string> pp_last_order_mismatch(const layout& l) {
  const std::string order = lower(l.order);
  const bool pp_last = order.size() >= 2 && order.compare(order.size() - 2, 2, "pp") == 0;
  if (pp_last || l.attn.pp == 1 || l.expert.dp == l.attn.dp) return std::nullopt;
  return fmt::format(
      "parallel.order = \"{}\": pp is not last in the order and pp = {} > 1, so Megatron-Core "
      "requires the expert data-parallel size to equal the data-parallel size, but edp = {} and "
      "dp = {} ({}); use an order ending with pp (e.g. tp-cp-ep-dp-pp), or sizes with "
      "etp*ep == tp*cp",
      l.order, l.attn.pp, l.expert.dp, l.attn.dp, describe_meshes(l));
}

rank_groups::rank_groups(const layout& l, int gpus_per_node)
    : world_(l.world), gpus_per_node_(gpus_per_node), attn_(l.attn), expert_(l.expert) {
  MUSTER_CHECK(gpus_per_node >= 1, errc::invalid_input,
               "rank groups: {} GPUs per node; a node runs at least one rank", gpus_per_node);
  MUSTER_ASSERT(l.world >= 1);
  MUSTER_ASSERT(l.attn.size() == l.world);
  MUSTER_ASSERT(l.expert.size() == l.world);
  MUSTER_ASSERT(l.attn.ep == 1);
  MUSTER_ASSERT(l.expert.cp == 1);
  if (auto message = pipeline_groups_mismatch(l)) MUSTER_THROW(errc::invalid_input, "{}", *message);
  if (auto message = pp_last_order_mismatch(l)) MUSTER_THROW(errc::invalid_input, "{}", *message);
  attn_strides_ = strides_by_dim(attn_, l.order);
  expert_strides_ = strides_by_dim(expert_, l.order);
  for (group_kind kind : kGroupKinds) {
    const kind_source source = source_of(kind);
    kind_table& t = tables_[static_cast<std::size_t>(kind)];
    t.groups = mesh_groups(source.expert ? expert_ : attn_, l.order, source.token);
    t.index_of_rank.assign(static_cast<std::size_t>(world_), -1);
    t.position_of_rank.assign(static_cast<std::size_t>(world_), -1);
    for (std::size_t g = 0; g < t.groups.size(); ++g) {
      for (std::size_t j = 0; j < t.groups[g].size(); ++j) {
        const auto r = static_cast<std::size_t>(t.groups[g][j]);
        MUSTER_ASSERT(t.index_of_rank[r] == -1);  // each rank in exactly one group of a kind
        t.index_of_rank[r] = static_cast<int>(g);
        t.position_of_rank[r] = static_cast<int>(j);
      }
    }
  }
}

const rank_groups::kind_table& rank_groups::table(group_kind kind) const {
  const auto i = static_cast<std::size_t>(kind);
  MUSTER_ASSERT(i < tables_.size());
  return tables_[i];
}

void rank_groups::check_rank(int rank) const {
  MUSTER_CHECK(rank >= 0 && rank < world_, errc::invalid_input,
               "rank groups: rank {} is outside the world of {} ranks", rank, world_);
}

const std::vector<std::vector<int>>& rank_groups::groups(group_kind kind) const {
  return table(kind).groups;
}

int rank_groups::group_index(group_kind kind, int rank) const {
  check_rank(rank);
  return table(kind).index_of_rank[static_cast<std::size_t>(rank)];
}

std::span<const int> rank_groups::group_of(group_kind kind, int rank) const {
  const kind_table& t = table(kind);
  return t.groups[static_cast<std::size_t>(group_index(kind, rank))];
}

int rank_groups::rank_in_group(group_kind kind, int rank) const {
  check_rank(rank);
  return table(kind).position_of_rank[static_cast<std::size_t>(rank)];
}

rank_coords rank_groups::coords(int rank) const {
  check_rank(rank);
  const auto attn_at = [&](int d) { return rank / attn_strides_[d] % size_of(attn_, d); };
  const auto expert_at = [&](int d) { return rank / expert_strides_[d] % size_of(expert_, d); };
  rank_coords c;
  c.rank = rank;
  c.tp = attn_at(d_tp);
  c.cp = attn_at(d_cp);
  c.dp = attn_at(d_dp);
  c.pp = attn_at(d_pp);
  c.ep = expert_at(d_ep);
  c.etp = expert_at(d_tp);
  c.edp = expert_at(d_dp);
  c.node = rank / gpus_per_node_;
  c.local_rank = rank % gpus_per_node_;
  return c;
}

int rank_groups::node_of(int rank) const {
  check_rank(rank);
  return rank / gpus_per_node_;
}

std::vector<int> rank_groups::groups_across_nodes(group_kind kind) const {
  std::vector<int> across;
  const auto& all = groups(kind);
  for (std::size_t g = 0; g < all.size(); ++g) {
    const int first_node = all[g].front() / gpus_per_node_;
    const bool spans = std::any_of(all[g].begin(), all[g].end(),
                                   [&](int r) { return r / gpus_per_node_ != first_node; });
    if (spans) across.push_back(static_cast<int>(g));
  }
  return across;
}

}  // namespace muster::launcher::plan

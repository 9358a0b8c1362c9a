// The MoE router on the CPU: see muster/kernels/router.hpp. One token at a time: its scores in
// one pass over the logits, the top-k by partial selection, then the weights.
#include "muster/kernels/router.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

namespace muster::kernels {

void check_router_shape(const router_shape& s) {
  auto bad = [](const std::string& what) { throw std::invalid_argument("router: " + what); };
  if (s.num_tokens < 0) bad("num_tokens " + std::to_string(s.num_tokens) + " is negative");
  if (s.num_experts < 1 || s.num_experts > kRouterMaxExperts)
    bad("num_experts " + std::to_string(s.num_experts) + " is not within 1.." +
        std::to_string(kRouterMaxExperts));
  if (s.topk < 1 || s.topk > kRouterMaxTopk || s.topk > s.num_experts)
    bad("topk " + std::to_string(s.topk) + " is not within 1..min(" +
        std::to_string(kRouterMaxTopk) + ", num_experts " + std::to_string(s.num_experts) + ")");
}

namespace cpu {

void router_forward(const float* logits, float* scores, std::int64_t* experts, float* weights,
                    const router_shape& s) {
  check_router_shape(s);
  const std::int64_t n = s.num_experts;
  const int k = s.topk;
  std::vector<std::int64_t> order(static_cast<std::size_t>(n));
  for (std::int64_t t = 0; t < s.num_tokens; ++t) {
    const float* x = logits + t * n;
    float* p = scores + t * n;
    if (s.score == router_score::softmax) {
      const float top = *std::max_element(x, x + n);
      float sum = 0;
      for (std::int64_t e = 0; e < n; ++e) sum += p[e] = std::exp(x[e] - top);
      const float inv = 1.0f / sum;
      for (std::int64_t e = 0; e < n; ++e) p[e] *= inv;
    } else {
      for (std::int64_t e = 0; e < n; ++e) p[e] = 1.0f / (1.0f + std::exp(-x[e]));
    }
    for (std::int64_t e = 0; e < n; ++e) order[static_cast<std::size_t>(e)] = e;
    std::partial_sort(
        order.begin(), order.begin() + k, order.end(),
        [p](std::int64_t a, std::int64_t b) { return p[a] > p[b] || (p[a] == p[b] && a < b); });
    float total = 0;
    for (int j = 0; j < k; ++j) total += p[order[static_cast<std::size_t>(j)]];
    const float scale = s.renormalize ? 1.0f / total : 1.0f;
    for (int j = 0; j < k; ++j) {
      const auto e = order[static_cast<std::size_t>(j)];
      experts[t * k + j] = e;
      weights[t * k + j] = p[e] * scale;
    }
  }
}

void router_backward(const float* scores, const std::int64_t* experts, const float* grad_weights,
                     const float* grad_scores, float* grad_logits, const router_shape& s) {
  check_router_shape(s);
  const std::int64_t n = s.num_experts;
  const int k = s.topk;
  for (std::int64_t t = 0; t < s.num_tokens; ++t) {
    const float* p = scores + t * n;
    const std::int64_t* chosen = experts + t * k;
    const float* g = grad_weights + t * k;
    float* dx = grad_logits + t * n;
    // dL/dscore of each expert, held in dx for now: grad_scores, plus the weights' share
    if (grad_scores)
      std::copy(grad_scores + t * n, grad_scores + (t + 1) * n, dx);
    else
      std::fill(dx, dx + n, 0.0f);
    if (s.renormalize) {
      // w_j = p_j / S: dL/dp_m = (g_m - sum_j g_j w_j) / S
      float total = 0, dot = 0;
      for (int j = 0; j < k; ++j) total += p[chosen[j]];
      for (int j = 0; j < k; ++j) dot += g[j] * p[chosen[j]];
      dot /= total;
      for (int j = 0; j < k; ++j) dx[chosen[j]] += (g[j] - dot) / total;
    } else {
      for (int j = 0; j < k; ++j) dx[chosen[j]] += g[j];
    }
    if (s.score == router_score::softmax) {
      // dL/dx_i = p_i * (dp_i - sum_m p_m dp_m)
      float dot = 0;
      if (grad_scores) {
        for (std::int64_t e = 0; e < n; ++e) dot += p[e] * dx[e];
      } else {
        for (int j = 0; j < k; ++j) dot += p[chosen[j]] * dx[chosen[j]];
      }
      for (std::int64_t e = 0; e < n; ++e) dx[e] = p[e] * (dx[e] - dot);
    } else {
      for (std::int64_t e = 0; e < n; ++e) dx[e] *= p[e] * (1.0f - p[e]);
    }
  }
}

}  // namespace cpu
}  // namespace muster::kernels

// `muster report`'s page: see html_report.hpp.
#include "launcher/report/html_report.hpp"

#include <fmt/format.h>
#include <time.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>

#include "common/byte_size.hpp"
#include "launcher/report/put.hpp"
#include "launcher/report/svg_chart.hpp"
#include "launcher/status/status_output.hpp"

namespace muster::launcher::report {
namespace {

constexpr std::string_view kStyle = R"css(
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px auto;max-width:1280px;padding:0 16px;color:#111827;background:#fff}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #e5e7eb;padding-bottom:4px}
table{border-collapse:collapse;font-size:13px}td,th{padding:3px 10px 3px 0;text-align:left;vertical-align:top}
table.grid td,table.grid th{border-bottom:1px solid #f1f5f9}th{cursor:pointer;color:#374151}
.num{text-align:right;font-variant-numeric:tabular-nums}.muted{color:#6b7280}
.finding{border-left:4px solid #9ca3af;padding:6px 12px;margin:10px 0;background:#f9fafb}
.finding.root{border-color:#dc2626;background:#fef2f2}.cat{font-family:ui-monospace,monospace;font-size:12px;background:#e5e7eb;border-radius:3px;padding:1px 5px}
.evidence{font-family:ui-monospace,monospace;font-size:12px;white-space:pre-wrap;word-break:break-all;color:#374151;margin:4px 0}
.ok{border-left:4px solid #16a34a;background:#f0fdf4;padding:6px 12px}.charts{display:flex;flex-wrap:wrap;gap:16px}
.chart{background:#fff;border:1px solid #e5e7eb}.chart-title{font-weight:600;font-size:13px}.tick{font-size:10px;fill:#4b5563}
.axis{font-size:11px;fill:#374151}.legend{font-size:11px}.grid{stroke:#f1f5f9}.plot{fill:none;stroke:#d1d5db}
.bar{fill:#2563eb}.reference{stroke:#dc2626;stroke-dasharray:5 3}.chart-empty{font-size:12px;fill:#9ca3af}
.straggler{color:#b91c1c;font-weight:600}
)css";

constexpr std::string_view kScript = R"js(
document.querySelectorAll('table.sortable').forEach(function (table) {
  table.querySelectorAll('th').forEach(function (th, column) {
    th.addEventListener('click', function () {
      var body = table.tBodies[0];
      var rows = Array.prototype.slice.call(body.rows);
      var ascending = th.dataset.order !== 'asc';
      th.dataset.order = ascending ? 'asc' : 'desc';
      var key = function (row) {
        var cell = row.cells[column];
        var text = cell.dataset.v !== undefined ? cell.dataset.v : cell.textContent;
        var n = parseFloat(text);
        return isNaN(n) ? text : n;
      };
      rows.sort(function (a, b) {
        var x = key(a), y = key(b);
        return (x < y ? -1 : x > y ? 1 : 0) * (ascending ? 1 : -1);
      });
      rows.forEach(function (row) { body.appendChild(row); });
    });
  });
});
document.documentElement.dataset.ready = String(document.querySelectorAll('svg.chart').length);
)js";

std::string utc(store::epoch_ms ms) {
  const time_t t = static_cast<time_t>(ms / 1000);
  struct tm tm {};
  gmtime_r(&t, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return text;
}

double gib(std::int64_t bytes) {
  return static_cast<double>(bytes) / double(1LL << 30);
}

// A diverged loss is NaN: said so, not hidden as a missing value.
std::string loss_text(double v) {
  return std::isnan(v) ? "NaN" : fmt::format("{:.4f}", v);
}

void summary(std::string& out, const status::run_status& s, store::epoch_ms now) {
  const auto& r = *s.run;
  out += "<table>";
  auto row = [&](const char* name, const std::string& value) {
    put(out, "<tr><th>{}</th><td>{}</td></tr>", name, escape(value));
  };
  row("state", fmt::format("{} (updated {} ago)", store::to_string(r.state),
                           status::age_text(std::max(0.0, double(now - r.updated_ms) / 1000))));
  row("job", fmt::format("{}: {} rank(s) on {} node(s){}", r.name, r.world_size, r.num_nodes,
                         r.slurm_job_id ? ", Slurm job " + *r.slurm_job_id : ""));
  row("started", utc(r.created_ms));
  if (!s.layout.empty()) row("layout", s.layout);
  std::string progress = fmt::format(
      "step {}{}", s.steps_done, s.steps_planned > 0 ? fmt::format(" of {}", s.steps_planned) : "");
  if (s.loss) progress += fmt::format(", loss {:.4f}", *s.loss);
  if (s.tokens_per_s > 0) progress += fmt::format(", {:.0f} tokens/s", s.tokens_per_s);
  if (s.mfu) progress += fmt::format(", MFU {:.1f}%", 100 * *s.mfu);
  row("progress", progress);
  row("restarts", std::to_string(s.restarts));
  row("directory", s.dir.string());
  out += "</table>";
}

void diagnosis_section(std::string& out, const diagnose::diagnosis& d) {
  out += "<h2>Diagnosis</h2>";
  if (!d.failed()) {
    put(out, "<div class=\"ok\">No failure found in {} log lines.</div>", d.lines_read);
    if (!d.suspicious.empty()) {
      out += "<p>The most suspicious lines:</p>";
      for (const auto& e : d.suspicious)
        put(out, "<div class=\"evidence\">{}:{}: {}</div>", escape(e.file), e.line, escape(e.text));
    }
    return;
  }
  for (const auto& f : d.findings) {
    put(out, "<div class=\"finding{}\"><b>{}</b> <span class=\"cat\">{}</span> {}",
        f.root ? " root" : "", f.root ? "Root cause" : "Then", escape(f.category),
        escape(f.summary));
    for (const auto& e : f.evidence)
      put(out, "<div class=\"evidence\">{}:{}: {}</div>", escape(e.file), e.line, escape(e.text));
    if (f.count > static_cast<std::int64_t>(f.evidence.size()))
      put(out, "<div class=\"muted\">{} lines in all</div>", f.count);
    if (!f.fixes.empty()) {
      out += "<ol>";
      for (const auto& fix : f.fixes) put(out, "<li>{}</li>", escape(fix));
      out += "</ol>";
    }
    out += "</div>";
  }
}

// Every k-th of `points` so that at most kMaxLinePoints remain (the last one kept).
std::vector<std::pair<double, double>> thin(std::vector<std::pair<double, double>> points) {
  if (points.size() <= kMaxLinePoints) return points;
  const std::size_t k = (points.size() + kMaxLinePoints - 1) / kMaxLinePoints;
  std::vector<std::pair<double, double>> out;
  for (std::size_t i = 0; i < points.size(); i += k) out.push_back(points[i]);
  if (out.back() != points.back()) out.push_back(points.back());
  return out;
}

// Loss (the mean over the ranks) and tokens/s (the sum over the ranks) of each step.
std::pair<line_chart, line_chart> curves(const std::vector<store::step_record>& history) {
  std::map<std::int64_t, std::pair<double, int>> loss;
  std::map<std::int64_t, double> tokens;
  for (const auto& s : history) {
    if (!std::isnan(s.loss)) {
      auto& [sum, n] = loss[s.step];
      sum += s.loss;
      ++n;
    }
    double tps = s.tokens_per_s;
    if (std::isnan(tps)) tps = s.step_time_s > 0 ? double(s.tokens) / s.step_time_s : 0;
    tokens[s.step] += tps;
  }
  line_chart l{"Loss", "step", "loss (mean over ranks)", {{"loss", "#2563eb", {}}}};
  for (const auto& [step, v] : loss) l.lines[0].points.emplace_back(step + 1, v.first / v.second);
  l.lines[0].points = thin(std::move(l.lines[0].points));
  line_chart t{"Throughput", "step", "tokens/s (all ranks)", {{"tokens/s", "#059669", {}}}};
  for (const auto& [step, v] : tokens) t.lines[0].points.emplace_back(step + 1, v);
  t.lines[0].points = thin(std::move(t.lines[0].points));
  return {l, t};
}

double median(std::vector<double> v) {
  v.erase(std::remove_if(v.begin(), v.end(), [](double x) { return std::isnan(x); }), v.end());
  if (v.empty()) return std::nan("");
  std::sort(v.begin(), v.end());
  const auto n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Step time per rank (rows, grouped when there are too many: the slowest of the group) and
// step bucket (columns: the mean of the bucket's steps), coloured against each column's median.
heatmap step_heatmap(const status::run_status& s) {
  // with every rank's waits in collectives known, its busy time (synchronous training makes the
  // step times themselves alike: everyone waits for the slowest)
  const bool busy = !s.history.empty() && std::all_of(s.history.begin(), s.history.end(),
                                                      [](const store::step_record& h) {
                                                        return std::isfinite(h.comm_wait_s);
                                                      });
  heatmap m{
      busy ? "Busy time per rank (step time less waits in collectives)" : "Step time per rank",
      "steps",
      {},
      {},
      {},
      {},
      "s"};
  if (s.history.empty()) return m;
  std::int64_t first = s.history.front().step, last = first;
  std::map<std::int64_t, std::string> hosts;
  for (const auto& r : s.ranks) hosts[r.rank.rank] = r.rank.host;
  std::int64_t max_rank = 0;
  for (const auto& h : s.history) {
    first = std::min(first, h.step), last = std::max(last, h.step);
    max_rank = std::max(max_rank, h.rank);
  }
  const auto steps = static_cast<std::size_t>(last - first + 1);
  const std::size_t per_column = (steps + kMaxHeatColumns - 1) / kMaxHeatColumns;
  const std::size_t cols = (steps + per_column - 1) / per_column;
  const auto ranks = static_cast<std::size_t>(max_rank + 1);
  const std::size_t per_row = (ranks + kMaxHeatRows - 1) / kMaxHeatRows;
  const std::size_t rows = (ranks + per_row - 1) / per_row;
  // sums per rank first, then the groups take the slowest rank's mean
  std::vector<std::vector<std::pair<double, int>>> sum(ranks,
                                                       std::vector<std::pair<double, int>>(cols));
  for (const auto& h : s.history) {
    auto& [total, n] = sum[static_cast<std::size_t>(h.rank)]
                          [static_cast<std::size_t>(h.step - first) / per_column];
    total += busy ? std::max(0.0, h.step_time_s - h.comm_wait_s) : h.step_time_s;
    ++n;
  }
  m.values.assign(rows, std::vector<double>(cols, std::nan("")));
  for (std::size_t r = 0; r < ranks; ++r)
    for (std::size_t c = 0; c < cols; ++c) {
      const auto [total, n] = sum[r][c];
      if (n == 0) continue;
      auto& cell = m.values[r / per_row][c];
      const double mean = total / n;
      cell = std::isnan(cell) ? mean : std::max(cell, mean);
    }
  m.ratio.assign(rows, std::vector<double>(cols, std::nan("")));
  for (std::size_t c = 0; c < cols; ++c) {
    std::vector<double> column;
    for (std::size_t r = 0; r < rows; ++r) column.push_back(m.values[r][c]);
    const double mid = median(column);
    for (std::size_t r = 0; r < rows; ++r)
      if (mid > 0) m.ratio[r][c] = m.values[r][c] / mid;
  }
  for (std::size_t r = 0; r < rows; ++r) {
    const auto lo = static_cast<std::int64_t>(r * per_row);
    const auto hi =
        std::min<std::int64_t>(lo + static_cast<std::int64_t>(per_row), max_rank + 1) - 1;
    m.rows.push_back(lo == hi ? fmt::format("rank {} ({})", lo, hosts.count(lo) ? hosts[lo] : "?")
                              : fmt::format("ranks {}-{}", lo, hi));
  }
  for (std::size_t c = 0; c < cols; ++c) {
    const auto lo = first + static_cast<std::int64_t>(c * per_column) + 1;
    const auto hi = std::min(lo + static_cast<std::int64_t>(per_column) - 1, last + 1);
    m.columns.push_back(lo == hi ? std::to_string(lo) : fmt::format("{}-{}", lo, hi));
  }
  return m;
}

bar_chart memory_chart(const diagnose::rank_analysis& a) {
  bar_chart b{"Peak memory per rank", "GiB", {}, {}, std::nullopt, "", "GiB"};
  for (const auto& r : a.ranks) {
    b.labels.push_back(std::to_string(r.rank));
    b.values.push_back(gib(r.peak_mem_bytes));
  }
  if (a.planned_mem_bytes > 0) {
    b.reference = gib(a.planned_mem_bytes);
    b.reference_label = fmt::format("planner's estimate {}", format_bytes(a.planned_mem_bytes));
  }
  return b;
}

void analysis_section(std::string& out, const diagnose::rank_analysis& a) {
  out += "<ul>";
  if (a.median_step_s > 0) {
    // stragglers are judged by busy time (the step less its waits) where every step says its
    // waits: in synchronous training every rank's step time is the slowest's
    put(out, "<li>median step time {:.3f} s", a.median_step_s);
    if (a.by_busy)
      put(out, ", busy {:.3f} s (the step less its waits in collectives)", a.median_busy_s);
    const char* pace = a.by_busy ? "busier" : "slower";
    if (a.stragglers.empty())
      put(out, "; no rank more than {:.0f}% {}</li>", diagnose::kStragglerSlowdown * 100, pace);
    else
      put(out,
          "; <span class=\"straggler\">stragglers (more than {:.0f}% {}): rank {}</span></li>",
          diagnose::kStragglerSlowdown * 100, pace, fmt::join(a.stragglers, ", "));
  }
  if (a.oldest_heartbeat_rank)
    put(out, "<li>oldest heartbeat of a running rank: rank {}, {:.1f} s ago</li>",
        *a.oldest_heartbeat_rank, a.oldest_heartbeat_age_s);
  if (a.peak_mem_rank) put(out, "<li>{}</li>", escape(diagnose::memory_words(a)));
  out += "</ul>";
}

void ranks_table(std::string& out, const status::run_status& s,
                 const std::optional<diagnose::rank_analysis>& a) {
  std::map<std::int64_t, const diagnose::rank_timing*> timing;
  if (a)
    for (const auto& t : a->ranks) timing[t.rank] = &t;
  // its pace against the median's, by busy time where the stragglers are judged by it
  put(out,
      "<table class=\"grid sortable\"><thead><tr><th>rank</th><th>host</th><th>state</th>"
      "<th>exit</th><th class=\"num\">last step</th><th class=\"num\">loss</th>"
      "<th class=\"num\">median step s</th><th class=\"num\">{}</th>"
      "<th class=\"num\">heartbeat age s</th><th class=\"num\">peak memory</th></tr></thead>"
      "<tbody>",
      a && a->by_busy ? "busy vs median" : "vs median");
  for (const auto& r : s.ranks) {
    std::string exit;
    if (r.rank.signal)
      exit = fmt::format("signal {}", *r.rank.signal);
    else if (r.rank.exit_code)
      exit = fmt::format("exit {}", *r.rank.exit_code);
    const auto t = timing.find(r.rank.rank);
    const auto* rt = t == timing.end() ? nullptr : t->second;
    put(out,
        "<tr{}><td class=\"num\">{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"num\">{}</td>"
        "<td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\" data-v=\"{}\">{}</td>"
        "<td class=\"num\">{}</td><td class=\"num\" data-v=\"{}\">{}</td></tr>",
        rt && rt->straggler ? " class=\"straggler\"" : "", r.rank.rank, escape(r.rank.host),
        store::to_string(r.rank.state), exit, r.last ? std::to_string(r.last->step + 1) : "-",
        r.last ? loss_text(r.last->loss) : "-", rt ? fmt::format("{:.3f}", rt->median_step_s) : "-",
        rt ? rt->slower : 0.0,
        rt ? fmt::format("{:+.0f}%", std::abs(rt->slower) < 0.005 ? 0.0 : rt->slower * 100) : "-",
        r.heartbeat_age_s ? fmt::format("{:.1f}", *r.heartbeat_age_s) : "-",
        rt ? rt->peak_mem_bytes : 0,
        rt && rt->peak_mem_bytes > 0 ? format_bytes(rt->peak_mem_bytes) : "-");
  }
  out += "</tbody></table>";
}

void events_table(std::string& out, const std::vector<store::event_record>& events) {
  const std::size_t skip = events.size() > kMaxEvents ? events.size() - kMaxEvents : 0;
  if (skip > 0)
    put(out, "<p class=\"muted\">the newest {} of {} events</p>", kMaxEvents, events.size());
  out +=
      "<table class=\"grid sortable\"><thead><tr><th>time</th><th>rank</th><th>severity</th>"
      "<th>kind</th><th>message</th></tr></thead><tbody>";
  for (std::size_t i = skip; i < events.size(); ++i) {
    const auto& e = events[i];
    put(out,
        "<tr><td data-v=\"{}\">{}</td><td class=\"num\">{}</td><td>{}</td><td>{}</td><td>{}</td>"
        "</tr>",
        e.time_ms, utc(e.time_ms), e.rank ? std::to_string(*e.rank) : "node",
        store::to_string(e.level), escape(e.kind), escape(e.message));
  }
  out += "</tbody></table>";
}

}  // namespace

std::string html_report(const diagnose::run_diagnosis& d, store::epoch_ms now) {
  const auto& s = *d.run;
  std::string out;
  const std::string id = s.run ? s.run->run_id : s.dir.filename().string();
  put(out,
      "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>muster report: "
      "{}</title><meta name=\"viewport\" content=\"width=device-width\"><style>{}</style></head>"
      "<body><h1>muster report: {}</h1><p class=\"muted\">written {}</p>",
      escape(id), kStyle, escape(id), utc(now));
  if (s.run) summary(out, s, now);
  diagnosis_section(out, d.result);
  out += "<h2>Training and ranks</h2>";
  if (d.analysis) analysis_section(out, *d.analysis);
  const auto [loss, tokens] = curves(s.history);
  out += "<div class=\"charts\">" + render(loss) + render(tokens) + "</div>";
  out += "<div class=\"charts\">" + render(step_heatmap(s));
  if (d.analysis) out += render(memory_chart(*d.analysis));
  out += "</div>";
  ranks_table(out, s, d.analysis);
  out += "<h2>Events</h2>";
  events_table(out, d.events);
  put(out, "<script>{}</script></body></html>\n", kScript);
  return out;
}

}  // namespace muster::launcher::report

#include "trace/summary.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>

namespace ds41 {
namespace {

using Json = nlohmann::json;

double Mean(const std::vector<double>& v) {
  return v.empty() ? 0 : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

// Fills the shares, CVs and max/mean of a pool from its counts.
void Finish(PoolShare* pool, bool tokens) {
  int64_t requests = 0, computed = 0;
  for (const auto& [name, n] : pool->nodes) {
    requests += n.requests;
    computed += n.computed_tokens;
  }
  std::vector<double> rs, ts;
  for (auto& [name, n] : pool->nodes) {
    n.request_share = requests > 0 ? static_cast<double>(n.requests) / static_cast<double>(requests) : 0;
    n.token_share = computed > 0 ? static_cast<double>(n.computed_tokens) / static_cast<double>(computed) : 0;
    rs.push_back(n.request_share);
    ts.push_back(n.token_share);
  }
  auto max_over_mean = [](const std::vector<double>& v) {
    const double m = Mean(v);
    return m > 0 ? *std::max_element(v.begin(), v.end()) / m : 0;
  };
  pool->request_cv = CoefficientOfVariation(rs);
  pool->request_max_over_mean = max_over_mean(rs);
  if (tokens) {
    pool->token_cv = CoefficientOfVariation(ts);
    pool->token_max_over_mean = max_over_mean(ts);
  }
}

Json PoolJson(const PoolShare& p, bool tokens) {
  Json nodes = Json::object();
  for (const auto& [name, n] : p.nodes) {
    Json j = {{"requests", n.requests}, {"request_share", n.request_share}};
    if (tokens) {
      j["computed_tokens"] = n.computed_tokens;
      j["token_share"] = n.token_share;
    }
    nodes[name] = j;
  }
  Json j = {{"nodes", nodes}, {"request_cv", p.request_cv}, {"request_max_over_mean", p.request_max_over_mean}};
  if (tokens) {
    j["token_cv"] = p.token_cv;
    j["token_max_over_mean"] = p.token_max_over_mean;
  }
  return j;
}

std::string Fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), format, v);
  return buf;
}

void PrintPool(std::ostream& os, const char* title, const PoolShare& p, bool tokens) {
  os << title << " (" << p.nodes.size() << ")  requests CV " << Fmt("%.3f", p.request_cv) << ", max/mean "
     << Fmt("%.2f", p.request_max_over_mean);
  if (tokens) {
    os << "; computed tokens CV " << Fmt("%.3f", p.token_cv) << ", max/mean " << Fmt("%.2f", p.token_max_over_mean);
  }
  os << "\n";
  for (const auto& [name, n] : p.nodes) {
    os << "    " << name << "  " << n.requests << " requests (" << Fmt("%.1f", 100 * n.request_share) << " %)";
    if (tokens) os << ", " << n.computed_tokens << " tokens (" << Fmt("%.1f", 100 * n.token_share) << " %)";
    os << "\n";
  }
}

}  // namespace

double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  const size_t n = values.size();
  size_t rank = static_cast<size_t>(std::ceil(p / 100 * static_cast<double>(n)));
  rank = std::clamp<size_t>(rank, 1, n);
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(rank - 1), values.end());
  return values[rank - 1];
}

double CoefficientOfVariation(const std::vector<double>& values) {
  if (values.size() < 2) return 0;
  const double m = Mean(values);
  if (m == 0) return 0;
  double ss = 0;
  for (double v : values) ss += (v - m) * (v - m);
  return std::sqrt(ss / static_cast<double>(values.size())) / m;
}

double WallSecondsOf(const std::vector<RequestRecord>& records) {
  double wall = 0;
  for (const RequestRecord& r : records) wall = std::max(wall, r.arrival_s + std::max(0.0, r.e2e_s));
  return wall;
}

Summary Summarize(const std::vector<RequestRecord>& records, const HitCeiling& ceiling, const SloOptions& slo,
                  double wall_seconds, const ExpectedNodes& expected) {
  Summary s;
  s.wall_s = wall_seconds;
  s.slo = slo;
  for (const std::string& n : expected.decoders) s.decoders.nodes[n];
  for (const std::string& n : expected.encoders) s.encoders.nodes[n];
  std::vector<double> ttft, e2e, itl, refused;
  for (const RequestRecord& r : records) {
    ++s.requests;
    s.encoder_tokens += r.computed_tokens;
    s.kv_bytes_read += r.kv_bytes_read;
    if (r.outcome == kOutcomeRejected) {
      ++s.rejected;
      refused.push_back(r.e2e_s);
    } else if (r.outcome == kOutcomeTimeout) ++s.timeout;
    else if (r.outcome != kOutcomeOk) ++s.failed;
    if (!r.ok()) continue;
    ++s.ok;
    s.prompt_tokens += r.prompt_tokens;
    s.cached_tokens += r.cached_tokens;
    s.completion_tokens += r.completion_tokens;
    ttft.push_back(r.ttft_s);
    e2e.push_back(r.e2e_s);
    itl.insert(itl.end(), r.itl_s.begin(), r.itl_s.end());
    if (r.ttft_s <= slo.ttft_s && Mean(r.itl_s) <= slo.itl_s) ++s.good;
    if (!r.decoder.empty()) ++s.decoders.nodes[r.decoder].requests;
    if (!r.encoder.empty()) {
      NodeShare& e = s.encoders.nodes[r.encoder];
      ++e.requests;
      e.computed_tokens += r.computed_tokens;
    }
  }
  s.hit_share = s.prompt_tokens > 0 ? static_cast<double>(s.cached_tokens) / static_cast<double>(s.prompt_tokens) : 0;
  s.ceiling_share = ceiling.share();
  s.hit_over_ceiling = s.ceiling_share > 0 ? s.hit_share / s.ceiling_share : 0;
  s.ttft_mean = Mean(ttft);
  s.ttft_p50 = Percentile(ttft, 50);
  s.ttft_p90 = Percentile(ttft, 90);
  s.ttft_p99 = Percentile(ttft, 99);
  s.itl_p50 = Percentile(itl, 50);
  s.itl_p99 = Percentile(itl, 99);
  s.e2e_mean = Mean(e2e);
  s.e2e_p99 = Percentile(e2e, 99);
  s.reject_p50 = Percentile(refused, 50);
  s.reject_p99 = Percentile(refused, 99);
  s.goodput_rps = wall_seconds > 0 ? static_cast<double>(s.good) / wall_seconds : 0;
  s.goodput_share = s.requests > 0 ? static_cast<double>(s.good) / static_cast<double>(s.requests) : 0;
  Finish(&s.decoders, /*tokens=*/false);
  Finish(&s.encoders, /*tokens=*/true);
  return s;
}

double CausalCeilingShare(const std::vector<WorkloadRequest>& workload, const std::vector<RequestRecord>& records,
                          int unit_tokens) {
  std::vector<double> ready(workload.size(), std::numeric_limits<double>::infinity());
  for (const RequestRecord& r : records) {
    if (r.ok() && r.index >= 0 && static_cast<size_t>(r.index) < ready.size()) ready[r.index] = r.arrival_s + r.ttft_s;
  }
  return CausalHitCeiling(workload, ready, unit_tokens).share();
}

void PrintSummary(std::ostream& os, const Summary& s) {
  os << (s.label.empty() ? std::string("run") : "run " + s.label) << ": " << s.requests << " requests in "
     << Fmt("%.1f", s.wall_s) << " s: ok " << s.ok << ", rejected " << s.rejected << ", failed " << s.failed
     << ", timeout " << s.timeout << "\n";
  os << "  prefix hit      " << Fmt("%.1f", 100 * s.hit_share) << " % of prompt tokens (" << s.cached_tokens << " of "
     << s.prompt_tokens << "); ceiling " << Fmt("%.1f", 100 * s.ceiling_share) << " %, reached "
     << Fmt("%.2f", s.hit_over_ceiling) << " of it";
  if (s.causal_ceiling_share >= 0) {
    os << "; at this run's latencies at most " << Fmt("%.1f", 100 * s.causal_ceiling_share) << " % (reached "
       << Fmt("%.2f", s.causal_ceiling_share > 0 ? s.hit_share / s.causal_ceiling_share : 0) << ")";
  }
  os << "\n";
  os << "  TTFT            mean " << Fmt("%.3f", s.ttft_mean) << " s, p50 " << Fmt("%.3f", s.ttft_p50) << ", p90 "
     << Fmt("%.3f", s.ttft_p90) << ", p99 " << Fmt("%.3f", s.ttft_p99) << "\n";
  os << "  inter-token     p50 " << Fmt("%.1f", 1000 * s.itl_p50) << " ms, p99 " << Fmt("%.1f", 1000 * s.itl_p99)
     << " ms\n";
  os << "  end to end      mean " << Fmt("%.3f", s.e2e_mean) << " s, p99 " << Fmt("%.3f", s.e2e_p99) << " ("
     << s.completion_tokens << " tokens generated)\n";
  if (s.rejected > 0) {
    os << "  refusals        answered in p50 " << Fmt("%.1f", 1000 * s.reject_p50) << " ms, p99 "
       << Fmt("%.1f", 1000 * s.reject_p99) << " ms\n";
  }
  os << "  goodput         " << s.good << " requests with TTFT <= " << Fmt("%g", s.slo.ttft_s) << " s and mean ITL <= "
     << Fmt("%g", 1000 * s.slo.itl_s) << " ms: " << Fmt("%.3f", s.goodput_rps) << "/s, "
     << Fmt("%.1f", 100 * s.goodput_share) << " % of requests\n";
  os << "  encoders        " << s.encoder_tokens << " prompt tokens computed\n";
  os << "  store reads     " << Fmt("%.3f", static_cast<double>(s.kv_bytes_read) / 1e9) << " GB of prefix KV\n";
  PrintPool(os, "  decoders", s.decoders, /*tokens=*/false);
  PrintPool(os, "  encoders", s.encoders, /*tokens=*/true);
}

void PrintSummaryTable(std::ostream& os, const std::vector<Summary>& summaries) {
  os << "| run | ok / rejected / failed / timeout | hit % (of ceiling) | TTFT mean | p50 | p90 | p99 | goodput req/s (%) "
        "| decoders max/mean | encoders max/mean (tokens) |\n"
     << "|---|---|---|---|---|---|---|---|---|---|\n";
  char row[512];
  for (const Summary& s : summaries) {
    std::snprintf(row, sizeof row,
                  "| %s | %lld / %lld / %lld / %lld | %.1f (%.2f) | %.2f | %.2f | %.2f | %.2f | %.3f (%.0f) | %.2f | %.2f (%.2f) |\n",
                  s.label.c_str(), static_cast<long long>(s.ok), static_cast<long long>(s.rejected),
                  static_cast<long long>(s.failed), static_cast<long long>(s.timeout), 100 * s.hit_share, s.hit_over_ceiling,
                  s.ttft_mean, s.ttft_p50, s.ttft_p90, s.ttft_p99, s.goodput_rps, 100 * s.goodput_share,
                  s.decoders.request_max_over_mean, s.encoders.request_max_over_mean, s.encoders.token_max_over_mean);
    os << row;
  }
}

Json SummaryJson(const Summary& s) {
  return {{"label", s.label},
          {"requests", s.requests},
          {"ok", s.ok},
          {"rejected", s.rejected},
          {"failed", s.failed},
          {"timeout", s.timeout},
          {"wall_s", s.wall_s},
          {"prompt_tokens", s.prompt_tokens},
          {"cached_tokens", s.cached_tokens},
          {"hit_share", s.hit_share},
          {"ceiling_share", s.ceiling_share},
          {"hit_over_ceiling", s.hit_over_ceiling},
          {"causal_ceiling_share", s.causal_ceiling_share},
          {"ttft_s", {{"mean", s.ttft_mean}, {"p50", s.ttft_p50}, {"p90", s.ttft_p90}, {"p99", s.ttft_p99}}},
          {"itl_s", {{"p50", s.itl_p50}, {"p99", s.itl_p99}}},
          {"e2e_s", {{"mean", s.e2e_mean}, {"p99", s.e2e_p99}}},
          {"completion_tokens", s.completion_tokens},
          {"refusal_s", {{"p50", s.reject_p50}, {"p99", s.reject_p99}}},
          {"slo", {{"ttft_s", s.slo.ttft_s}, {"itl_s", s.slo.itl_s}}},
          {"good", s.good},
          {"goodput_rps", s.goodput_rps},
          {"goodput_share", s.goodput_share},
          {"encoder_tokens", s.encoder_tokens},
          {"kv_bytes_read", s.kv_bytes_read},
          {"decoders", PoolJson(s.decoders, false)},
          {"encoders", PoolJson(s.encoders, true)}};
}

}  // namespace ds41

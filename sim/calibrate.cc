#include "sim/calibrate.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <map>
#include <random>
#include <sstream>
#include <thread>

#include "sim/least_squares.h"
#include "trace/replay_client.h"
#include "trace/summary.h"

namespace ds41::sim {
namespace {

using Clock = std::chrono::steady_clock;

std::string Fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof(b), f, v);
  return b;
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

class Prober {
 public:
  Prober(ReplayClient* client, int unit, uint64_t seed) : client_(client), unit_(unit), rng_(seed) {
    // Block ids drawn for this run (far from a trace's small ones), so nothing stored before hits.
    next_id_ = static_cast<int64_t>((rng_() >> 24) + (int64_t{1} << 41));
  }

  // A prompt of `tokens` tokens: `shared` blocks (unit-sized) first, then fresh ones.
  WorkloadRequest Prompt(int64_t tokens, const std::vector<int64_t>& shared, const std::string& session, int64_t output) {
    WorkloadRequest w;
    w.index = next_index_++;
    w.arrival_s = 0;
    w.prompt_tokens = tokens;
    w.output_tokens = output;
    w.block_tokens = unit_;
    w.blocks = shared;
    while (static_cast<int64_t>(w.blocks.size()) * unit_ < tokens) w.blocks.push_back(next_id_++);
    w.session = session.empty() ? NewSession() : session;
    return w;
  }
  std::string NewSession() { return "calibrate-" + std::to_string(next_id_) + "-" + std::to_string(next_index_); }

  RequestRecord Send(const WorkloadRequest& w) { return client_->Send(w, Clock::now()); }
  // All at once from one start; records in the order given.
  std::vector<RequestRecord> SendTogether(const std::vector<WorkloadRequest>& ws) {
    std::vector<RequestRecord> out(ws.size());
    std::vector<std::thread> threads;
    const auto start = Clock::now();
    for (size_t i = 0; i < ws.size(); ++i) threads.emplace_back([&, i] { out[i] = client_->Send(ws[i], start); });
    for (auto& t : threads) t.join();
    return out;
  }

 private:
  ReplayClient* client_;
  const int unit_;
  std::mt19937_64 rng_;
  int64_t next_id_ = 0;
  int64_t next_index_ = 0;
};

Status CheckOk(const RequestRecord& r, const char* what) {
  if (r.ok() && r.ttft_s > 0) return Status::Ok();
  return UnavailableError(std::string("calibrate: a ") + what + " request failed (" + r.outcome + ", HTTP " +
                          std::to_string(r.http_status) + "): " + r.error);
}

}  // namespace

StatusOr<RateProfile> Calibrate(const CalibrateSpec& spec, std::ostream& os) {
  if (spec.unit_tokens < 2 || spec.repeats < 1 || spec.decode_tokens < 8)
    return InvalidArgumentError("calibrate: --unit-tokens >= 2, --repeats >= 1, --decode-tokens >= 8");
  for (int64_t h : spec.hit_tokens)
    if (h < 2 * spec.unit_tokens || h % (2 * spec.unit_tokens))
      return InvalidArgumentError("calibrate: hit lengths must be multiples of 2 x unit tokens");
  ReplayOptions ro;
  ro.endpoint = spec.endpoint;
  ro.model = spec.model;
  ro.api_key = spec.api_key;
  ro.min_token_id = spec.min_token_id;
  ro.vocab = spec.vocab;
  ro.deadline_s = spec.deadline_s;
  ro.progress = false;
  DS41_RETURN_IF_ERROR(ro.Validate());
  DS41_ASSIGN_OR_RETURN(std::unique_ptr<ReplayClient> client, ReplayClient::Create(ro));
  DS41_RETURN_IF_ERROR(client->Probe());
  Prober probe(client.get(), spec.unit_tokens, static_cast<uint64_t>(std::random_device{}()));

  RateProfile p;
  p.name = "calibrated";
  p.host_cores = spec.host_cores > 0 ? spec.host_cores : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int64_t window = p.window;
  auto replay_of = [&](int64_t n) { return static_cast<double>(std::min(window, n)); };

  // 1. Cold prefills: no hit, one at a time.
  os << "cold prefills (TTFT, one request at a time):\n";
  std::vector<std::vector<double>> rows;
  std::vector<double> ys;
  auto cold = [&](int64_t n, const RequestRecord& r) {
    const double x = static_cast<double>(n);
    rows.push_back({1, x, x * x, replay_of(n)});
    ys.push_back(r.ttft_s);
    os << "  N " << n << ": " << Fmt("%.3f", r.ttft_s) << " s (computed " << r.computed_tokens << ", cached "
       << r.cached_tokens << ", encoder " << r.encoder << ")\n";
  };
  for (int rep = 0; rep < spec.repeats; ++rep) {
    for (int64_t n : spec.prefill_tokens) {
      const RequestRecord r = probe.Send(probe.Prompt(n, {}, "", 1));
      DS41_RETURN_IF_ERROR(CheckOk(r, "cold prefill"));
      cold(n, r);
    }
  }

  // 2. Hits: A stores a prompt P of H tokens; B continues P in a new session (prefix from the
  // store, SWA state local or replayed); C shares only half of P (a replay: no one holds the state
  // there); D continues P in A's session (its decoder holds the session warm).
  struct Hit {
    int64_t H, N, replay;
    bool decoder_loaded;
    double ttft;
    std::string what;
  };
  std::vector<Hit> hits;
  os << "hits (TTFT):\n";
  for (int64_t H : spec.hit_tokens) {
    const std::string session = probe.NewSession();
    const WorkloadRequest a = probe.Prompt(H, {}, session, 1);
    const RequestRecord ra = probe.Send(a);
    DS41_RETURN_IF_ERROR(CheckOk(ra, "hit (store)"));
    cold(H, ra);
    const std::vector<int64_t> half(a.blocks.begin(), a.blocks.begin() + static_cast<std::ptrdiff_t>(a.blocks.size() / 2));
    const std::pair<WorkloadRequest, const char*> probes[] = {
        {probe.Prompt(H + spec.unit_tokens, a.blocks, "", 1), "new session"},
        {probe.Prompt(H / 2 + spec.unit_tokens, half, "", 1), "half the prefix"},
        {probe.Prompt(H + spec.unit_tokens, a.blocks, session, 1), "same session"}};
    for (const auto& [w, what] : probes) {
      const RequestRecord r = probe.Send(w);
      DS41_RETURN_IF_ERROR(CheckOk(r, "hit"));
      hits.push_back({r.cached_tokens, r.prompt_tokens, r.encoder_replay_tokens, r.prefix_source != "warm", r.ttft_s, what});
      os << "  H " << r.cached_tokens << " of " << r.prompt_tokens << " (" << what << "): " << Fmt("%.3f", r.ttft_s)
         << " s, prefix " << r.prefix_source << ", encoder replay " << r.encoder_replay_tokens << "\n";
    }
  }
  const Fit cf = NonNegativeLeastSquares(rows, ys);
  p.request_overhead_s = cf.coef[0];
  p.encoder.token_s = cf.coef[1];
  p.encoder.token_context_s = cf.coef[2];
  p.decoder.replay_token_s = cf.coef[3] > 0 ? cf.coef[3] : p.encoder.token_s;
  p.encoder.replay_token_s = p.encoder.token_s;  // refined below when a replay was seen

  // The hits' TTFT beyond what the cold fit predicts: loads and the encoder replay.
  std::vector<std::vector<double>> hrows;
  std::vector<double> hys;
  for (const Hit& h : hits) {
    const double predicted = p.request_overhead_s + p.EncodeWork(h.H, h.N) + p.decoder.replay_token_s * replay_of(h.N);
    hrows.push_back({h.decoder_loaded ? static_cast<double>(h.H) : 0.0, static_cast<double>(h.H), static_cast<double>(h.replay)});
    hys.push_back(h.ttft - predicted);
  }
  const Fit hf = NonNegativeLeastSquares(hrows, hys);
  p.decoder.load_token_s = hf.coef[0];
  p.encoder.load_token_s = hf.coef[1];
  bool replay_seen = false;
  for (const Hit& h : hits) replay_seen = replay_seen || h.replay > 0;
  if (replay_seen) p.encoder.replay_token_s = hf.coef[2];

  // 3. Decode steps: k streams at once; each stream's median gap while all of them decode.
  os << "decode (mean inter-token gap while every stream decodes):\n";
  std::vector<std::vector<double>> drows;
  std::vector<double> dys;
  for (int64_t n : spec.decode_prompt_tokens) {
    for (int k : spec.streams) {
      if (n > 256 && k > 4) continue;  // long prompts: the context term needs few points
      std::vector<WorkloadRequest> ws;
      for (int j = 0; j < k; ++j) ws.push_back(probe.Prompt(n, {}, "", spec.decode_tokens));
      const std::vector<RequestRecord> rs = probe.SendTogether(ws);
      double from = 0, to = 1e300;
      for (const RequestRecord& r : rs) {
        DS41_RETURN_IF_ERROR(CheckOk(r, "decode"));
        from = std::max(from, r.ttft_s);
        to = std::min(to, r.e2e_s);
      }
      std::map<std::string, std::vector<double>> by_decoder;  // its streams' mean gaps
      for (const RequestRecord& r : rs) {
        std::vector<double> inside, late;
        double t = r.ttft_s;
        for (size_t g = 0; g < r.itl_s.size(); ++g) {
          t += r.itl_s[g];
          if (t > from && t <= to) inside.push_back(r.itl_s[g]);
          if (g >= r.itl_s.size() / 2) late.push_back(r.itl_s[g]);
        }
        // The mean, not the median: tokens that came in one read split its gap among them.
        const std::vector<double>& g = inside.size() >= 4 ? inside : late;
        double sum = 0;
        for (double x : g) sum += x;
        if (!g.empty() && sum > 0) by_decoder[r.decoder].push_back(sum / static_cast<double>(g.size()));
      }
      for (const auto& [decoder, gaps] : by_decoder) {
        // Streams with no measurable gap still count in the batch.
        int64_t batch = 0;
        for (const RequestRecord& r : rs) batch += r.decoder == decoder ? 1 : 0;
        const double b = static_cast<double>(batch);
        const double ctx = static_cast<double>(n) + spec.decode_tokens / 2.0;
        const double gap = Median(gaps);
        drows.push_back({1, b, b * ctx});
        dys.push_back(gap);
        os << "  prompt " << n << ", " << k << " streams: decoder " << decoder << " batch " << batch << ", "
           << Fmt("%.2f", 1000 * gap) << " ms\n";
      }
    }
  }
  const Fit df = NonNegativeLeastSquares(drows, dys);
  p.decoder.step_s = df.coef[0];
  p.decoder.step_seq_s = df.coef[1];
  p.decoder.step_context_s = df.coef[2];
  if (p.decoder.step_s + p.decoder.step_seq_s <= 0) p.decoder.step_seq_s = Median(dys);

  char when[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(when, sizeof(when), "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
  std::ostringstream src;
  src << "ds41-sim calibrate against " << spec.endpoint << " at " << when << "; host_cores " << p.host_cores
      << "; fit rms: cold prefill " << Fmt("%.3f", cf.rms) << " s over " << ys.size() << ", hits " << Fmt("%.3f", hf.rms)
      << " s over " << hys.size() << ", decode step " << Fmt("%.4f", df.rms) << " s over " << dys.size();
  p.source = src.str();
  DS41_RETURN_IF_ERROR(p.Validate());
  os << "fit: overhead " << Fmt("%.4f", p.request_overhead_s) << " s; encoder token " << Fmt("%.3e", p.encoder.token_s)
     << " s + context " << Fmt("%.3e", p.encoder.token_context_s) << " s, replay " << Fmt("%.3e", p.encoder.replay_token_s)
     << " s, load " << Fmt("%.3e", p.encoder.load_token_s) << " s per token; decoder replay "
     << Fmt("%.3e", p.decoder.replay_token_s) << " s, load " << Fmt("%.3e", p.decoder.load_token_s)
     << " s per token; step " << Fmt("%.4f", p.decoder.step_s) << " s + " << Fmt("%.4f", p.decoder.step_seq_s)
     << " s per sequence + " << Fmt("%.3e", p.decoder.step_context_s) << " s per context token\n";
  os << p.source << "\n";
  if (!spec.out_path.empty()) {
    DS41_RETURN_IF_ERROR(WriteRateProfile(
        spec.out_path, p,
        "Rate profile measured by ds41-sim calibrate (sim/calibrate.h); fields: docs/simulator.md and\n"
        "router/rate_profile.h. *_s fields are CPU-seconds of one thread with nothing else running; host_cores\n"
        "is the machine the cluster ran on, all of whose nodes the simulator shares it among.\n" +
            p.source));
    os << "profile: " << spec.out_path << "\n";
  }
  return p;
}

}  // namespace ds41::sim

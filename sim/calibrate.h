// Calibrate: measures a rate profile (rate_profile.h) on a running cluster through its public API
// (streamed POST /v1/completions with token-id prompts and ignore_eos, as ds41-trace-replay sends
// them; usage.ds41 tells what each request computed, replayed and hit), one request at a time so
// each phase runs with nothing beside it: wall time is then CPU time, and the simulator's host model
// adds the sharing back. Series:
//   cold prefills of N tokens (no hit): TTFT = overhead + token_s N + token_context_s N^2
//     + decoder replay_token_s min(window, N)                          -> those four;
//   hits at H (a new session continuing a stored prompt, with and without the SWA state at H, and
//     the same session, whose decoder is warm): the TTFT left after the prefill's known part is
//     load per prefix token (the decoder's part seen apart from the encoder's where the warm probe
//     landed warm) and encoder replay per token;
//   k concurrent streams (k = 1, 2, 4, 8, 16), short and long prompts: each stream's mean
//     inter-token gap while all decode, against its decoder's batch size and context -> the decode step.
// Every prompt uses block ids drawn fresh for the run, so the store's content from earlier runs
// never hits. The fields it does not measure keep the defaults (sizes, budgets, bandwidths).
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "router/rate_profile.h"
#include "util/status.h"

namespace ds41::sim {

struct CalibrateSpec {
  std::string endpoint = "http://127.0.0.1:8000";
  std::string model = "deepseek-v4.1-flash";
  std::string api_key;
  int32_t min_token_id = 16, vocab = 4096;
  std::string out_path;  // "" : print only
  int host_cores = 0;    // the cluster's host: 0 = this machine's hardware threads
  int unit_tokens = 64;
  std::vector<int64_t> prefill_tokens = {16, 64, 128, 512, 1024, 2048, 4096};
  int repeats = 2;
  std::vector<int64_t> hit_tokens = {1024, 4096};  // H of the hit probes (multiples of 2 * unit_tokens)
  std::vector<int> streams = {1, 2, 4, 8, 16};
  int decode_tokens = 96;
  std::vector<int64_t> decode_prompt_tokens = {64, 1024};
  double deadline_s = 300;
};

// Runs the series, prints each measurement and the fit, writes the profile when out_path is set.
StatusOr<RateProfile> Calibrate(const CalibrateSpec& spec, std::ostream& os);

}  // namespace ds41::sim

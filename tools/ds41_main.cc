// ds41: the single-process engine on the command line.
//   ds41 generate --model DIR --tokens 1,2,3 [--max-tokens N] [--temperature T --top-p P --seed S] [--mode exact|ced]
//   ds41 logits   --model DIR --tokens 1,2,3 [--mode exact|ced] [--decode K] --out FILE.npy [--dump DIR]
//                 [--dspark DIR]   (DSpark drafts after the prompt and after every decode step)
//   ds41 info     --model DIR
//   ds41 vision   --model DIR --grid HxW [--seed S] --out DIR   one seeded image through tower and aligner:
//                 patches.npy, rows.npy (aligner rows), span.npy (the span's embeddings)
//   ds41 logits ... --image HxW@START   the positions of one image's span (tokens: image_token_id) take the
//                 tower's embeddings of seeded patches (written to the --dump folder as patches.npy)
//   ds41 session  --model DIR --turns FILE   greedy replies of a multi-turn session, as the cluster serves it
#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <limits>
#include <memory>
#include <sstream>

#include "engine/engine.h"
#include "engine/loading/model.h"
#include "engine/sampling.h"
#include "util/npy.h"

namespace {

using ds41::Status;

ds41::StatusOr<std::vector<int32_t>> ParseTokens(const std::string& s) {
  std::vector<int32_t> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    char* end = nullptr;
    const long v = std::strtol(item.c_str(), &end, 10);
    if (*end != '\0' || v < 0 || v > std::numeric_limits<int32_t>::max())
      return ds41::InvalidArgumentError("--tokens: \"" + item + "\" is not a token id");
    out.push_back(static_cast<int32_t>(v));
  }
  if (out.empty()) return ds41::InvalidArgumentError("--tokens: no token ids");
  return out;
}

int Fail(const Status& s) {
  std::cerr << "error: " << s.ToString() << "\n";
  return s.code() == ds41::StatusCode::kInvalidArgument ? 2 : 1;
}

// Per-position, per-layer stream capture for --dump: [positions, layers, hc*dim].
struct StreamDump {
  int layers = 0, width = 0;
  std::vector<std::vector<float>> by_pos;  // [pos] -> [layers * width]
  void Record(int layer, int64_t first_pos, int rows, const std::vector<float>& X) {
    for (int r = 0; r < rows; ++r) {
      const size_t p = static_cast<size_t>(first_pos + r);
      if (by_pos.size() <= p) by_pos.resize(p + 1, std::vector<float>(static_cast<size_t>(layers) * width, NAN));
      std::copy_n(&X[static_cast<size_t>(r) * width], width, &by_pos[p][static_cast<size_t>(layer) * width]);
    }
  }
};

Status WriteDump(const std::string& dir, const ds41::Model& model, const ds41::SequenceState& st, const StreamDump& sd,
                 const std::vector<int32_t>& tokens) {
  const ds41::ModelConfig& c = model.config();
  std::vector<float> flat;
  for (const auto& v : sd.by_pos) flat.insert(flat.end(), v.begin(), v.end());
  DS41_RETURN_IF_ERROR(ds41::WriteNpy(dir + "/streams.npy",
                                      {static_cast<int64_t>(sd.by_pos.size()), c.n_layers, c.hc_mult, c.dim}, flat.data()));
  DS41_RETURN_IF_ERROR(ds41::WriteNpy(dir + "/tokens.npy", {static_cast<int64_t>(tokens.size())}, tokens.data()));
  for (size_t i = 0; i < st.kv.size(); ++i) {
    const int L = c.kv_source_layers[i];
    const auto& kv = st.kv[i];
    const int64_t e = kv.entries(c.compress_ratios[L]);
    DS41_RETURN_IF_ERROR(ds41::WriteNpy(dir + "/main_kv_L" + std::to_string(L) + ".npy", {e, c.main_kv_bytes()}, kv.main_kv.data()));
    DS41_RETURN_IF_ERROR(
        ds41::WriteNpy(dir + "/index_keys_L" + std::to_string(L) + ".npy", {e, c.index_key_bytes()}, kv.index_keys.data()));
  }
  for (int L = 0; L < c.n_layers; ++L) {
    // Ring slots in position order: [held positions, entry bytes].
    const auto& ring = st.rings[L];
    std::vector<uint8_t> ordered;
    const int eb = c.window_entry_bytes();
    for (int64_t p = ring.first_valid(c.window_size); p < ring.end; ++p)
      ordered.insert(ordered.end(), ring.slots.begin() + (p % c.window_size) * eb,
                     ring.slots.begin() + (p % c.window_size + 1) * eb);
    DS41_RETURN_IF_ERROR(ds41::WriteNpy(dir + "/window_L" + std::to_string(L) + ".npy",
                                        {static_cast<int64_t>(ordered.size() / eb), eb}, ordered.data()));
  }
  return Status::Ok();
}

// Positions [a, b) flagged as an image span with seeded random embeddings (RMS 0.12, like text
// embeddings): exercises bias_vl and the Engram DEAD logic without the vision tower.
ds41::Status AddImageSpan(const std::string& arg, uint64_t seed, int dim, ds41::TokenSpan* span) {
  const auto colon = arg.find(':');
  if (colon == std::string::npos) return ds41::InvalidArgumentError("--image-span expects START:END");
  const long a = std::strtol(arg.substr(0, colon).c_str(), nullptr, 10), b = std::strtol(arg.substr(colon + 1).c_str(), nullptr, 10);
  const long n = static_cast<long>(span->tokens.size());
  if (a < 0 || b <= a || b > n) return ds41::InvalidArgumentError("--image-span outside the prompt");
  span->image.assign(n, 0);
  span->image_embeds.assign(static_cast<size_t>(b - a) * dim, 0.0f);
  ds41::Rng rng(seed);
  for (long p = a; p < b; ++p) {
    span->image[p] = 1;
    for (int d = 0; d < dim; ++d) {
      // Irwin-Hall approximation of a normal: the sum of 12 uniforms minus 6.
      double v = -6.0;
      for (int k = 0; k < 12; ++k) v += rng.Uniform();
      span->image_embeds[static_cast<size_t>(p - a) * dim + d] = ds41::RoundBf16(static_cast<float>(0.12 * v));
    }
  }
  return ds41::Status::Ok();
}

ds41::StatusOr<std::pair<int, int>> ParseGrid(const std::string& s) {
  const auto x = s.find('x');
  const std::string hs = s.substr(0, x), ws = x == std::string::npos ? "" : s.substr(x + 1);
  char* e1 = nullptr;
  char* e2 = nullptr;
  const long h = std::strtol(hs.c_str(), &e1, 10), w = std::strtol(ws.c_str(), &e2, 10);
  if (x == std::string::npos || *e1 != '\0' || *e2 != '\0' || h < 1 || w < 1 || h > 4096 || w > 4096)
    return ds41::InvalidArgumentError("grid \"" + s + "\": expected HxW patches, e.g. 12x9");
  return std::make_pair(static_cast<int>(h), static_cast<int>(w));
}

// Seeded patches [h * w, 3 * p * p] as bf16 values, roughly a normalized image's spread (std 0.5).
std::vector<float> SeededPatches(uint64_t seed, int64_t n, int inputs) {
  std::vector<float> out(static_cast<size_t>(n) * inputs);
  ds41::Rng rng(seed);
  for (float& v : out) {
    double u = -6.0;
    for (int k = 0; k < 12; ++k) u += rng.Uniform();
    v = ds41::RoundBf16(static_cast<float>(0.5 * u));
  }
  return out;
}

// `--image HxW@START`: one image's span at START with the tower's embeddings (the tokens there must be
// image_token_id, as REF's processor writes them).
ds41::Status AddImage(const std::string& arg, uint64_t seed, ds41::Engine& engine, const ds41::ModelConfig& c,
                      ds41::TokenSpan* span, std::vector<float>* patches_out) {
  const auto at = arg.find('@');
  if (at == std::string::npos) return ds41::InvalidArgumentError("--image expects HxW@START");
  DS41_ASSIGN_OR_RETURN(auto grid, ParseGrid(arg.substr(0, at)));
  const long start = std::strtol(arg.substr(at + 1).c_str(), nullptr, 10);
  DS41_ASSIGN_OR_RETURN(ds41::ImageGrid g, ds41::VisionGrid(c, grid.first, grid.second));
  const long n = static_cast<long>(span->tokens.size());
  if (start < 0 || start + g.span_length() > n)
    return ds41::InvalidArgumentError("--image: a span of " + std::to_string(g.span_length()) + " positions at " +
                                      std::to_string(start) + " does not fit the prompt of " + std::to_string(n));
  for (long p = start; p < start + g.span_length(); ++p)
    if (span->tokens[p] != c.image_token_id)
      return ds41::InvalidArgumentError("--image: token " + std::to_string(p) + " is not image_token_id " +
                                        std::to_string(c.image_token_id));
  *patches_out = SeededPatches(seed, g.patches(), c.vision_patch_inputs());
  DS41_ASSIGN_OR_RETURN(std::vector<float> rows, engine.EncodeImage(*patches_out, g.n_vit_h, g.n_vit_w));
  DS41_ASSIGN_OR_RETURN(std::vector<float> embeds, engine.ImageSpanEmbeds(rows, g.n_vit_h, g.n_vit_w));
  span->image.assign(n, 0);
  std::fill(span->image.begin() + start, span->image.begin() + start + g.span_length(), 1);
  span->image_embeds = std::move(embeds);  // the flagged rows' embeddings: the span's
  return ds41::Status::Ok();
}

// `ds41 vision`: one seeded image through the tower, its aligner rows and span embeddings as .npy.
Status RunVision(const ds41::Model& model, const std::string& grid_arg, uint64_t seed, const std::string& dir) {
  const ds41::ModelConfig& c = model.config();
  DS41_ASSIGN_OR_RETURN(auto grid, ParseGrid(grid_arg));
  DS41_ASSIGN_OR_RETURN(ds41::ImageGrid g, ds41::VisionGrid(c, grid.first, grid.second));
  ds41::Engine engine(model);
  const std::vector<float> patches = SeededPatches(seed, g.patches(), c.vision_patch_inputs());
  const auto t0 = std::chrono::steady_clock::now();
  DS41_ASSIGN_OR_RETURN(std::vector<float> rows, engine.EncodeImage(patches, g.n_vit_h, g.n_vit_w));
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  DS41_ASSIGN_OR_RETURN(std::vector<float> span, engine.ImageSpanEmbeds(rows, g.n_vit_h, g.n_vit_w));
  DS41_RETURN_IF_ERROR(ds41::WriteNpy(dir + "/patches.npy", {g.patches(), c.vision_patch_inputs()}, patches.data()));
  DS41_RETURN_IF_ERROR(ds41::WriteNpy(dir + "/rows.npy", {g.image_rows(), c.dim}, rows.data()));
  DS41_RETURN_IF_ERROR(ds41::WriteNpy(dir + "/span.npy", {g.span_length(), c.dim}, span.data()));
  std::printf("grid %dx%d patches -> %dx%d tokens, span %lld positions; tower+aligner %.3f s\n", g.n_vit_h, g.n_vit_w,
              g.n_h, g.n_w, static_cast<long long>(g.span_length()), secs);
  return Status::Ok();
}

struct RunResult {
  std::vector<float> logits;   // [rows, vocab]
  std::vector<int32_t> ids;    // greedy/sampled ids after the prompt
};

// DSpark drafts of `logits --dspark`: one greedy draft block after the prompt and after each decode
// step (REF's flow: the target's step records its hidden rows, they are appended, then the block
// [sampled token, noise ...] is drafted).
struct DsparkRun {
  ds41::DsparkState state;
  std::vector<ds41::Draft> drafts;
  std::vector<float> hidden;  // every appended position's target rows [positions, targets * dim]

  Status Step(ds41::Engine* engine, int64_t start, const std::vector<float>& rows, int32_t last) {
    DS41_RETURN_IF_ERROR(engine->DsparkAppend(&state, start, rows));
    hidden.insert(hidden.end(), rows.begin(), rows.end());
    std::vector<ds41::Draft> d;
    DS41_RETURN_IF_ERROR(engine->DsparkDraft({{&state, last}}, nullptr, &d));
    drafts.push_back(std::move(d[0]));
    return Status::Ok();
  }

  Status Write(const std::string& dir, const ds41::ModelConfig& c) const {
    const int64_t n = static_cast<int64_t>(drafts.size()), B = c.dspark_block_size;
    std::vector<int32_t> ids;
    std::vector<float> logits, conf;
    std::vector<int32_t> starts;
    for (const ds41::Draft& d : drafts) {
      ids.insert(ids.end(), d.tokens.begin(), d.tokens.end());
      logits.insert(logits.end(), d.logits.begin(), d.logits.end());
      conf.insert(conf.end(), d.confidence.begin(), d.confidence.end());
      starts.push_back(static_cast<int32_t>(d.start));
    }
    DS41_RETURN_IF_ERROR(ds41::WriteNpy(dir + "/dspark_tokens.npy", {n, B}, ids.data()));
    DS41_RETURN_IF_ERROR(ds41::WriteNpy(dir + "/dspark_logits.npy", {n, B, c.vocab_size}, logits.data()));
    DS41_RETURN_IF_ERROR(ds41::WriteNpy(dir + "/dspark_confidence.npy", {n, B}, conf.data()));
    DS41_RETURN_IF_ERROR(ds41::WriteNpy(dir + "/dspark_starts.npy", {n}, starts.data()));
    const int64_t width = static_cast<int64_t>(c.dspark_target_layer_ids.size()) * c.dim;
    DS41_RETURN_IF_ERROR(ds41::WriteNpy(dir + "/dspark_hidden.npy", {static_cast<int64_t>(hidden.size()) / width, width},
                                        hidden.data()));
    const int eb = c.window_entry_bytes(), W = c.window_size;
    for (int k = 0; k < c.n_mtp_layers; ++k) {  // ring slots in position order, as the backbone's dump
      const auto& ring = state.rings[k];
      std::vector<uint8_t> ordered;
      for (int64_t p = ring.first_valid(W); p < ring.end; ++p)
        ordered.insert(ordered.end(), ring.slots.begin() + (p % W) * eb, ring.slots.begin() + (p % W + 1) * eb);
      DS41_RETURN_IF_ERROR(ds41::WriteNpy(dir + "/dspark_window_M" + std::to_string(k) + ".npy",
                                          {static_cast<int64_t>(ordered.size() / eb), eb}, ordered.data()));
    }
    return Status::Ok();
  }
};

// Prompt (exact or CED), then `steps` decode steps feeding the sampled tokens back.
Status Run(const ds41::Model& model, ds41::Engine* engine, ds41::SequenceState* st, const ds41::TokenSpan& span,
           const std::string& mode, int64_t replay_start, int steps, const ds41::SamplingParams& sp, bool all_logits,
           bool stop_at_eos, RunResult* out, DsparkRun* dspark = nullptr) {
  const ds41::ModelConfig& c = model.config();
  const std::vector<int32_t>& tokens = span.tokens;
  std::vector<float> logits, hidden;
  std::vector<float>* capture = dspark != nullptr ? &hidden : nullptr;
  int64_t hidden_start = 0;
  const int V = c.vocab_size;
  if (mode == "exact") {
    DS41_RETURN_IF_ERROR(engine->Prefill(st, span, all_logits, &logits, capture));
  } else if (mode == "ced") {
    DS41_ASSIGN_OR_RETURN(ds41::EncoderHandoff h, engine->EncodePrefill(st, span));
    const int64_t n = static_cast<int64_t>(tokens.size());
    const int64_t s = replay_start >= 0 ? replay_start : ds41::DefaultReplayStart(c, n);
    DS41_RETURN_IF_ERROR(engine->DecoderReplay(st, span, h, s, &logits, all_logits, capture));
    hidden_start = s;
    if (all_logits) {
      // Positions before the replay start are not computed by CED (the decoder runs only [s, n)).
      std::vector<float> full(static_cast<size_t>(n) * V, NAN);
      std::copy(logits.begin(), logits.end(), full.begin() + s * V);
      logits = std::move(full);
    }
  } else {
    return ds41::InvalidArgumentError("--mode must be exact or ced");
  }
  out->logits = logits;
  ds41::Rng rng(sp.seed);
  int32_t next = ds41::SampleToken(&logits[logits.size() - V], V, sp, &rng);
  out->ids.push_back(next);
  if (dspark != nullptr) DS41_RETURN_IF_ERROR(dspark->Step(engine, hidden_start, hidden, next));
  for (int k = 0; k < steps; ++k) {
    if (stop_at_eos && next == c.eos_token_id) break;
    const int64_t pos = st->length;
    DS41_RETURN_IF_ERROR(engine->DecodeBatch({st}, {next}, &logits, capture));
    out->logits.insert(out->logits.end(), logits.begin(), logits.end());
    next = ds41::SampleToken(logits.data(), V, sp, &rng);
    out->ids.push_back(next);
    if (dspark != nullptr) DS41_RETURN_IF_ERROR(dspark->Step(engine, pos, hidden, next));
  }
  return Status::Ok();
}

void PrintIds(const std::vector<int32_t>& ids) {
  for (size_t i = 0; i < ids.size(); ++i) std::cout << (i ? "," : "") << ids[i];
  std::cout << std::endl;
}

// `ds41 session`: the greedy replies of an agent session's turns with the cluster's CED semantics
// (the reference tests/ops/chaos.py compares the cluster's replies with). Each line of `path` is a
// turn, "MAX_TOKENS ID,ID,...": its whole prompt, which extends the previous turn's prompt and
// reply. One state is continued over the turns (CedPrefill feeds each prompt's tokens past what the
// state holds; the last sampled token of a reply is not fed, as on a decoder), and each reply is
// greedy up to MAX_TOKENS or the end token (included). Prints one line of ids per turn.
Status RunSession(const ds41::Model& model, const std::string& path) {
  std::ifstream in(path);
  if (!in) return ds41::InvalidArgumentError("--turns: cannot read " + path);
  const ds41::ModelConfig& c = model.config();
  ds41::Engine engine(model);
  ds41::SequenceState st = ds41::SequenceState::Create(c);
  std::string line;
  std::vector<float> logits;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const size_t sp = line.find(' ');
    const long max_tokens = std::strtol(line.substr(0, sp).c_str(), nullptr, 10);
    if (sp == std::string::npos || max_tokens < 1) return ds41::InvalidArgumentError("--turns: bad line: " + line.substr(0, 40));
    DS41_ASSIGN_OR_RETURN(std::vector<int32_t> prompt, ParseTokens(line.substr(sp + 1)));
    if (static_cast<int64_t>(prompt.size()) <= st.length)
      return ds41::InvalidArgumentError("--turns: a prompt must extend what the session processed");
    DS41_RETURN_IF_ERROR(engine.CedPrefill(&st, {prompt, {}, {}}, -1, &logits));
    std::vector<int32_t> out;
    for (long i = 0; i < max_tokens; ++i) {
      out.push_back(ds41::Argmax(logits.data(), c.vocab_size));
      if (out.back() == c.eos_token_id || i + 1 == max_tokens) break;
      DS41_RETURN_IF_ERROR(engine.DecodeBatch({&st}, {out.back()}, &logits));
    }
    PrintIds(out);
  }
  return Status::Ok();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ds41: DeepSeek-V4.1-Flash single-process engine"};
  app.require_subcommand(1);
  std::string model_dir, tokens_arg, mode = "exact", out_path, dump_dir;
  int max_tokens = 16, decode = 0;
  int64_t replay_start = -1;
  ds41::SamplingParams sp;
  bool stop_at_eos = false;

  auto* gen = app.add_subcommand("generate", "token ids in, token ids out");
  gen->add_option("--model", model_dir, "checkpoint folder")->required();
  gen->add_option("--tokens", tokens_arg, "prompt token ids, comma separated")->required();
  gen->add_option("--max-tokens", max_tokens, "tokens to generate")->check(CLI::Range(1, 1 << 20));
  gen->add_option("--temperature", sp.temperature, "0 = greedy");
  gen->add_option("--top-p", sp.top_p, "nucleus mass");
  gen->add_option("--seed", sp.seed, "sampling seed");
  gen->add_option("--mode", mode, "exact or ced");
  gen->add_option("--replay-start", replay_start, "CED decoder replay start (default: n - window)");
  gen->add_flag("--stop-at-eos", stop_at_eos, "stop after the end-of-sequence token");

  auto* lg = app.add_subcommand("logits", "float32 logits [T+K, vocab] to a .npy file");
  lg->add_option("--model", model_dir, "checkpoint folder")->required();
  lg->add_option("--tokens", tokens_arg, "prompt token ids, comma separated")->required();
  lg->add_option("--mode", mode, "exact or ced");
  lg->add_option("--decode", decode, "greedy decode steps after the prompt")->check(CLI::Range(0, 1 << 20));
  lg->add_option("--replay-start", replay_start, "CED decoder replay start (default: n - window)");
  lg->add_option("--out", out_path, "output .npy")->required();
  lg->add_option("--dump", dump_dir, "also write per-layer streams and caches (.npy) into this folder");
  std::string image_span, dspark_dir;
  uint64_t image_seed = 7;
  lg->add_option("--dspark", dspark_dir, "also draft with DSpark after the prompt and every step; write the drafts "
                 "(dspark_*.npy) into this folder");
  lg->add_option("--image-span", image_span, "flag positions START:END as an image span (random embeddings)");
  lg->add_option("--image-seed", image_seed, "seed of the image-span embeddings (or of --image's patches)");
  std::string image_arg;
  lg->add_option("--image", image_arg, "an image span HxW@START: seeded patches of an HxW patch grid through the vision "
                 "tower, its span at START (tokens there: image_token_id)");

  std::string grid_arg, vision_out;
  uint64_t vision_seed = 1;
  auto* vis = app.add_subcommand("vision", "one seeded image through the vision tower and aligner, as .npy");
  vis->add_option("--model", model_dir, "checkpoint folder")->required();
  vis->add_option("--grid", grid_arg, "patch grid HxW")->required();
  vis->add_option("--seed", vision_seed, "seed of the patches");
  vis->add_option("--out", vision_out, "output folder (patches.npy, rows.npy, span.npy)")->required();

  auto* info = app.add_subcommand("info", "configuration, layer map and fingerprint");
  info->add_option("--model", model_dir, "checkpoint folder")->required();

  std::string turns_path;
  auto* session = app.add_subcommand("session", "greedy replies of a multi-turn session (CED, continued state)");
  session->add_option("--model", model_dir, "checkpoint folder")->required();
  session->add_option("--turns", turns_path, "one turn a line: MAX_TOKENS ID,ID,... (the whole prompt)")->required();

  CLI11_PARSE(app, argc, argv);

  // `info` only reads the configuration: no tile-major weight copy for it.
  auto model_or = ds41::Model::Open(model_dir, {info->parsed() ? ds41::WeightTiles::kOff : ds41::WeightTiles::kFile, ""});
  if (!model_or.ok()) return Fail(model_or.status());
  const ds41::Model& model = **model_or;
  const ds41::ModelConfig& c = model.config();

  if (info->parsed()) {
    std::cout << "model " << model_dir << "\nfingerprint " << model.fingerprint() << "\nmapped bytes " << model.mapped_bytes()
              << "\nlayers " << c.n_layers << " (encoder 0-" << c.ced_split - 1 << ", decoder " << c.ced_split << "-"
              << c.n_layers - 1 << (c.ced_capable ? "" : "; CED unavailable: " + c.ced_problem) << ")\n";
    static const char* kMode[] = {"window", "full", "reindex", "reuse"};
    for (int L = 0; L < c.n_layers; ++L) {
      const auto& r = c.roles[L];
      std::printf("  L%-3d ratio %d  %-8s kv %-3d topk %-3d%s%s%s\n", L, r.ratio, kMode[static_cast<int>(r.mode)], r.kv_source,
                  r.topk_source, r.candidate_publisher ? "  pool-publisher" : "", r.candidate_consumer ? "  pool-consumer" : "",
                  r.engram_slot >= 0 ? "  engram" : "");
    }
    if (c.has_dspark()) {
      std::cout << "dspark " << c.n_mtp_layers << " draft layers (mtp.0-" << c.n_mtp_layers - 1 << "), block "
                << c.dspark_block_size << ", targets";
      for (int L : c.dspark_target_layer_ids) std::cout << " " << L;
      std::cout << ", experts " << c.dspark_active() << " of " << c.dspark_experts() << "\n";
    }
    if (c.vision)
      std::cout << "vision " << c.vision_n_layers << " blocks of " << c.vision_dim << " (" << c.vision_n_heads
                << " heads), patch " << c.vision_patch_size << ", merge " << c.vision_downsample_ratio << "x"
                << c.vision_downsample_ratio << ", span cap " << c.vision_max_n_token << ", image token "
                << c.image_token_id << "\n";
    return 0;
  }
  if (session->parsed()) {
    const Status s = RunSession(model, turns_path);
    return s.ok() ? 0 : Fail(s);
  }
  if (vis->parsed()) {
    const Status s = RunVision(model, grid_arg, vision_seed, vision_out);
    return s.ok() ? 0 : Fail(s);
  }

  auto tokens = ParseTokens(tokens_arg);
  if (!tokens.ok()) return Fail(tokens.status());
  if (Status s = sp.Validate(); !s.ok()) return Fail(s);
  ds41::Engine engine(model);
  ds41::SequenceState st = ds41::SequenceState::Create(c);
  RunResult res;
  const auto t0 = std::chrono::steady_clock::now();
  ds41::TokenSpan span{*tokens, {}, {}};
  if (!image_span.empty()) {
    if (Status s = AddImageSpan(image_span, image_seed, c.dim, &span); !s.ok()) return Fail(s);
  }
  std::vector<float> image_patches;
  if (!image_arg.empty()) {
    if (!image_span.empty()) return Fail(ds41::InvalidArgumentError("--image and --image-span exclude each other"));
    if (Status s = AddImage(image_arg, image_seed, engine, c, &span, &image_patches); !s.ok()) return Fail(s);
  }

  if (gen->parsed()) {
    Status s = Run(model, &engine, &st, span, mode, replay_start, max_tokens - 1, sp, false, stop_at_eos, &res);
    if (!s.ok()) return Fail(s);
    PrintIds(res.ids);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(stderr, "%zu prompt tokens, %zu generated in %.2f s\n", tokens->size(), res.ids.size(), secs);
    return 0;
  }

  StreamDump sd;
  sd.layers = c.n_layers;
  sd.width = c.hc_dim();
  if (!dump_dir.empty())
    engine.set_layer_observer([&](int layer, int64_t first_pos, int rows, const std::vector<float>& X) {
      if (first_pos >= 0) sd.Record(layer, first_pos, rows, X);
    });
  ds41::SamplingParams greedy;
  std::unique_ptr<DsparkRun> dspark;
  if (!dspark_dir.empty()) {
    if (!c.has_dspark()) return Fail(ds41::FailedPreconditionError("--dspark: the model has no DSpark layers"));
    dspark = std::make_unique<DsparkRun>();
    dspark->state = ds41::DsparkState::Create(c);
  }
  Status s = Run(model, &engine, &st, span, mode, replay_start, decode, greedy, true, false, &res, dspark.get());
  if (!s.ok()) return Fail(s);
  if (dspark) {
    if (Status w = dspark->Write(dspark_dir, c); !w.ok()) return Fail(w);
  }
  const int64_t rows = static_cast<int64_t>(res.logits.size() / c.vocab_size);
  if (Status w = ds41::WriteNpy(out_path, {rows, c.vocab_size}, res.logits.data()); !w.ok()) return Fail(w);
  if (!dump_dir.empty()) {
    std::vector<int32_t> all = *tokens;
    all.insert(all.end(), res.ids.begin(), res.ids.end() - 1);
    if (Status w = WriteDump(dump_dir, model, st, sd, all); !w.ok()) return Fail(w);
    if (!span.image.empty()) {  // the flagged rows' embeddings, in order
      const int64_t flagged = static_cast<int64_t>(span.image_embeds.size() / c.dim);
      if (Status w = ds41::WriteNpy(dump_dir + "/image_embeds.npy", {flagged, c.dim}, span.image_embeds.data()); !w.ok())
        return Fail(w);
    }
    if (!image_patches.empty()) {
      const int64_t K = c.vision_patch_inputs();
      if (Status w = ds41::WriteNpy(dump_dir + "/patches.npy", {static_cast<int64_t>(image_patches.size()) / K, K},
                                    image_patches.data());
          !w.ok())
        return Fail(w);
    }
  }
  PrintIds(res.ids);
  return 0;
}

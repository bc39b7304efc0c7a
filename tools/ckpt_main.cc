// ds41-ckpt: writes a checkpoint in the release's format from a preset or a config.json, with
// key=value overrides of text_config, seeded synthetic weights and progress on stderr.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "chat/control_tokens.h"
#include "ckpt/tokenizer_corpus.h"
#include "ckpt/writer.h"
#include "engine/config/presets.h"
#include "util/mapped_file.h"

namespace {

std::string Human(uint64_t b) {
  char buf[32];
  if (b >= (uint64_t{1} << 30)) std::snprintf(buf, sizeof(buf), "%.2f GiB", b / 1073741824.0);
  else std::snprintf(buf, sizeof(buf), "%.1f MiB", b / 1048576.0);
  return buf;
}

uint64_t ParseBytes(const std::string& s) {
  double v = std::stod(s);
  const char u = s.empty() ? 0 : s.back();
  if (u == 'K' || u == 'k') v *= 1024;
  if (u == 'M' || u == 'm') v *= 1048576;
  if (u == 'G' || u == 'g') v *= 1073741824.0;
  return static_cast<uint64_t>(v);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ds41-ckpt: write a DeepSeek-V4.1-Flash checkpoint (release format, synthetic weights)"};
  std::string out, preset = "tiny", config_path, shard = "2G";
  std::vector<std::string> sets, corpus;
  std::string corpus_bytes = "2M";
  uint64_t seed = 0;
  bool quiet = false;
  app.add_option("--out", out, "output folder")->required();
  app.add_option("--preset", preset, "base configuration: tiny, tiny-dspark, tiny-vision, small or release");
  app.add_option("--config", config_path, "base configuration from an HF config.json instead of a preset");
  app.add_option("--set", sets, "override a text_config key: key=JSON (e.g. num_hidden_layers=4); "
                 "vision_config.KEY=JSON a vision_config key, image_token_id=N the top-level one");
  app.add_option("--seed", seed, "weight seed");
  app.add_option("--shard-size", shard, "bytes per shard (K/M/G suffixes)");
  app.add_flag("--quiet", quiet, "no progress output");
  app.add_option("--tokenizer-corpus", corpus, "files or folders to train tokenizer.json on (byte-level BPE, vocab_size entries)");
  app.add_option("--corpus-bytes", corpus_bytes, "corpus bytes read at most (K/M/G suffixes)");
  CLI11_PARSE(app, argc, argv);

  nlohmann::json j;
  if (!config_path.empty()) {
    auto text = ds41::ReadFileToString(config_path);
    if (!text.ok()) {
      std::cerr << text.status().ToString() << "\n";
      return 2;
    }
    j = nlohmann::json::parse(*text, nullptr, false);
    if (j.is_discarded()) {
      std::cerr << config_path << ": not valid JSON\n";
      return 2;
    }
  } else {
    auto base = ds41::PresetConfig(preset);
    if (!base.ok()) {
      std::cerr << base.status().ToString() << "\n";
      return 2;
    }
    j = nlohmann::json::parse(base->ToJson());
  }
  bool rows_given = false;
  bool image_token_set = false;
  for (const std::string& kv : sets) {
    const auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) {
      std::cerr << "--set expects key=value, got \"" << kv << "\"\n";
      return 2;
    }
    const std::string key = kv.substr(0, eq), val = kv.substr(eq + 1);
    nlohmann::json v = nlohmann::json::parse(val, nullptr, false);
    const nlohmann::json value = v.is_discarded() ? nlohmann::json(val) : v;
    static const std::string kVision = "vision_config.";
    if (key.rfind(kVision, 0) == 0)
      j["vision_config"][key.substr(kVision.size())] = value;
    else if (key == "image_token_id")
      j[key] = value;
    else
      j["text_config"][key] = value;
    rows_given |= key == "engram_num_embeddings";
    image_token_set |= key == "image_token_id";
  }
  if (!rows_given && j["text_config"].contains("engram_layer_ids")) {
    // Row counts follow from the other Engram keys; fill them so overrides stay consistent.
    auto& t = j["text_config"];
    t["engram_num_embeddings"] = std::vector<int64_t>(t["engram_layer_ids"].size(), 0);
  }
  auto parsed = ds41::ModelConfig::FromJson(j.dump());
  ds41::ModelConfig config;
  if (!parsed.ok()) {
    std::cerr << parsed.status().ToString() << "\n";
    return 2;
  }
  config = *parsed;
  if (!rows_given) {
    ds41::Status s = ds41::FillEngramRowCounts(&config);
    if (!s.ok()) {
      std::cerr << s.ToString() << "\n";
      return 2;
    }
  }

  // A trained tokenizer puts the image token where the chat format's order does; the config names it.
  if (!corpus.empty() && config.vision && !image_token_set) config.image_token_id = ds41::TrainedControlTokenId(ds41::chat::kImage);

  ds41::CheckpointWriteOptions opt;
  opt.out_dir = out;
  opt.seed = seed;
  opt.shard_bytes = ParseBytes(shard);
  auto start = std::chrono::steady_clock::now();
  auto last = start - std::chrono::seconds(1);
  if (!quiet) {
    opt.progress = [&](const ds41::WriteProgress& p) {
      auto now = std::chrono::steady_clock::now();
      if (p.tensors_done != p.tensors_total && now - last < std::chrono::milliseconds(250)) return;
      last = now;
      std::fprintf(stderr, "\r[%5.1f%%] %s / %s  tensors %d/%d  %-48.48s", 100.0 * p.bytes_done / std::max<uint64_t>(1, p.bytes_total),
                   Human(p.bytes_done).c_str(), Human(p.bytes_total).c_str(), p.tensors_done, p.tensors_total,
                   p.current.c_str());
      if (p.tensors_done == p.tensors_total) std::fprintf(stderr, "\n");
    };
  }
  ds41::Status s = ds41::WriteCheckpoint(config, opt);
  if (!s.ok()) {
    std::cerr << "\n" << s.ToString() << "\n";
    return 1;
  }
  if (!corpus.empty()) {
    auto texts = ds41::ReadCorpus(corpus, ParseBytes(corpus_bytes));
    s = texts.ok() ? ds41::WriteTrainedTokenizer(*texts, static_cast<int32_t>(config.vocab_size), out) : texts.status();
    if (!s.ok()) {
      std::cerr << "tokenizer: " << s.ToString() << "\n";
      return 1;
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!quiet) std::fprintf(stderr, "wrote %s in %.1f s\n", out.c_str(), secs);
  return 0;
}

// grammar_bench: the cost of constrained decoding's token mask (issue 44 item 4). For each
// tokenizer given and three schemas of increasing size (a flat object; a nested tool schema of 30
// properties; a recursive tree) and a tool-call block (tool_choice "required" over two tools, one
// of them the 30-property schema), it compiles the grammar (time of a compile), samples documents the
// grammar admits, tokenizes them, and walks each token as a decoder would: the mask from the
// matcher's state, then the matcher advanced by the token. Batch 1 times one sequence's steps;
// batch 32 runs 32 sequences at different places of their documents per step on one thread and
// reports the time per sequence. Rounds are repeated; medians and ranges are printed.
// With --model (the real-width slice of bench/slice_config.sh), the same run also times that
// model's decode steps at batch 1 and 32 on every core and prints each row's mask cost as a share
// of a step: the decoder fills a sequence's mask on the step's thread, so a step of 32 sequences
// pays 32 masks.
//
//   grammar_bench --tokenizer build/models/small/tokenizer.json --tokenizer /tmp/tok129280.json [--model /tmp/slice]
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <thread>

#include "bench/decode_batch.h"
#include "engine/loading/weight_packing.h"
#include "grammar/json_sample.h"
#include "grammar/token_mask.h"
#include "grammar/tool_call_grammar.h"
#include "grammar/tokenizer_masker.h"
#include "tokenizer/tokenizer.h"

namespace {

using Clock = std::chrono::steady_clock;
using ds41::grammar::CompileJsonSchema;
using ds41::grammar::Grammar;
using ds41::grammar::JsonMatcher;
using ds41::grammar::TokenBitmask;
using ds41::grammar::TokenMasker;
using Json = nlohmann::ordered_json;

double Us(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

Json FlatSchema() {
  return Json::parse(R"({"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"},
      "score": {"type": "number"}, "active": {"type": "boolean"}, "role": {"enum": ["admin", "user", "guest"]}},
      "required": ["name", "age", "score", "active", "role"], "additionalProperties": false})");
}

// A coding agent's tool: 30 properties, some nested objects and arrays, enums and nullable fields.
Json ToolSchema() {
  Json props = Json::object();
  const char* kinds[] = {"string", "integer", "number", "boolean"};
  for (int i = 0; i < 24; ++i) props["field_" + std::to_string(i)] = {{"type", kinds[i % 4]}};
  props["mode"] = {{"enum", {"read", "write", "append", "delete"}}};
  props["paths"] = {{"type", "array"}, {"items", {{"type", "string"}}}};
  props["note"] = {{"type", {"string", "null"}}};
  props["range"] = {{"type", "object"},
                    {"properties", {{"start", {{"type", "integer"}}}, {"end", {{"type", "integer"}}}}},
                    {"required", {"start", "end"}},
                    {"additionalProperties", false}};
  props["flags"] = {{"type", "array"}, {"items", {{"enum", {"recursive", "force", "dry_run"}}}}};
  props["options"] = {{"type", "object"},
                      {"properties", {{"timeout", {{"type", "number"}}}, {"retries", {{"type", "integer"}}}}},
                      {"required", {"timeout"}},
                      {"additionalProperties", false}};
  Json required = Json::array();
  for (auto it = props.begin(); it != props.end(); ++it) required.push_back(it.key());
  return {{"type", "object"}, {"properties", props}, {"required", required}, {"additionalProperties", false}};
}

Json RecursiveSchema() {
  return Json::parse(R"({"$ref": "#/$defs/node", "$defs": {"node": {"type": "object", "properties": {
      "name": {"type": "string"}, "value": {"type": ["number", "null"]},
      "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
      "required": ["name", "value", "children"], "additionalProperties": false}}})");
}

struct Figures {
  double compile_us = 0, b1_mean_us = 0, b1_p99_us = 0, b32_per_seq_us = 0;
};

struct Sorted {
  std::vector<double> v;
  double Median() {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  }
  double Min() { return *std::min_element(v.begin(), v.end()); }
  double Max() { return *std::max_element(v.begin(), v.end()); }
};

using Compile = std::function<std::shared_ptr<const Grammar>()>;

Compile SchemaGrammar(Json schema) {
  return [schema = std::move(schema)] { return *CompileJsonSchema(schema); };
}

Compile ToolCallGrammar() {
  return [] {
    const std::vector<ds41::grammar::ToolSpec> tools = {
        {"edit_file", ToolSchema(), true},
        {"read_file", Json::parse(R"({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]})"),
         false}};
    return *ds41::grammar::CompileToolCalls(tools, {});
  };
}

Figures RunRound(const Compile& compile, const TokenMasker& masker, const ds41::Tokenizer& tok, int docs, uint64_t seed) {
  Figures f;
  const int kCompiles = 50;
  std::shared_ptr<const Grammar> g;
  const auto c0 = Clock::now();
  for (int i = 0; i < kCompiles; ++i) g = compile();
  f.compile_us = Us(Clock::now() - c0) / kCompiles;

  std::vector<std::vector<int32_t>> token_docs;
  for (int d = 0; d < docs; ++d) {
    token_docs.push_back(tok.Encode(ds41::grammar::SampleDocument(*g, seed + static_cast<uint64_t>(d)), false));
  }
  // Batch 1: every token of every document, one sequence.
  std::vector<double> per_token;
  TokenBitmask mask;
  for (const auto& ids : token_docs) {
    JsonMatcher m(g);
    for (int32_t id : ids) {
      const auto t0 = Clock::now();
      masker.Fill(m, &mask);
      const bool ok = ds41::grammar::MaskHas(mask, id) && masker.Advance(&m, id);
      per_token.push_back(Us(Clock::now() - t0));
      if (!ok) {
        std::cerr << "grammar_bench: a sampled document's token was refused (a bug)\n";
        std::exit(1);
      }
    }
  }
  double sum = 0;
  for (double x : per_token) sum += x;
  f.b1_mean_us = sum / static_cast<double>(per_token.size());
  std::sort(per_token.begin(), per_token.end());
  f.b1_p99_us = per_token[per_token.size() * 99 / 100];
  // Batch 32: 32 sequences, each at its own document, stepped together.
  const size_t kBatch = 32;
  std::vector<JsonMatcher> ms;
  std::vector<size_t> doc_of, pos;
  for (size_t s = 0; s < kBatch; ++s) {
    ms.emplace_back(g);
    doc_of.push_back(s % token_docs.size());
    pos.push_back(0);
  }
  double step_us = 0;
  int64_t seq_steps = 0;
  for (;;) {
    size_t live = 0;
    const auto t0 = Clock::now();
    for (size_t s = 0; s < kBatch; ++s) {
      const auto& ids = token_docs[doc_of[s]];
      if (pos[s] >= ids.size()) continue;
      masker.Fill(ms[s], &mask);
      (void)masker.Advance(&ms[s], ids[pos[s]++]);
      ++live;
    }
    if (live == 0) break;
    step_us += Us(Clock::now() - t0);
    seq_steps += static_cast<int64_t>(live);
  }
  f.b32_per_seq_us = step_us / static_cast<double>(seq_steps);
  return f;
}

// Median milliseconds of a decode step of `model_dir` at batch 1 and 32 (`steps` steps a round), on
// every core; zeros and a message when the model cannot be opened or decoded.
struct StepTimes {
  double b1_ms = 0, b32_ms = 0;
};
StepTimes DecodeSteps(const std::string& model_dir, int steps, int rounds) {
  ds41::ThreadPool pool(static_cast<int>(std::thread::hardware_concurrency()), ds41::ThreadPool::Idle::kSpinThenSleep);
  auto tiles = ds41::ParseWeightTiles("file");
  auto model = ds41::Model::Open(model_dir, {*tiles, ""});
  if (!model.ok()) {
    std::cerr << "--model: " << model.status().ToString() << "\n";
    return {};
  }
  const ds41::ModelConfig& c = (*model)->config();
  ds41::Engine engine(**model, &pool);
  StepTimes out;
  for (int batch : {1, 32}) {
    Sorted ms;
    auto seqs = ds41::DecodeBatch::Create(engine, c, batch, 7);
    ds41::Status s = seqs.ok() ? seqs->Step() : seqs.status();  // a warm-up step
    for (int r = 0; r < rounds && s.ok(); ++r) {
      const auto t0 = Clock::now();
      for (int i = 0; i < steps && s.ok(); ++i) s = seqs->Step();
      ms.v.push_back(Us(Clock::now() - t0) / 1000 / steps);
    }
    if (!s.ok()) {
      std::cerr << "--model: decode at batch " << batch << ": " << s.ToString() << "\n";
      return {};
    }
    std::fprintf(stderr, "decode step, batch %d: %.1f ms [%.1f-%.1f] (%s, %d layers, hidden %d)\n", batch, ms.Median(),
                 ms.Min(), ms.Max(), model_dir.c_str(), c.n_layers, c.dim);
    (batch == 1 ? out.b1_ms : out.b32_ms) = ms.Median();
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"grammar_bench: constrained decoding's per-token mask cost"};
  std::vector<std::string> tokenizers;
  int rounds = 3, docs = 16;
  app.add_option("--tokenizer", tokenizers, "tokenizer.json files (byte-level BPE)")->required();
  app.add_option("--rounds", rounds, "rounds per figure (median and range printed)")->check(CLI::Range(1, 100));
  app.add_option("--docs", docs, "documents sampled per schema and round")->check(CLI::Range(1, 1000));
  std::string model_dir;
  int steps = 4;
  app.add_option("--model", model_dir, "also time this model's decode steps (batch 1 and 32) and print shares of a step");
  app.add_option("--steps", steps, "decode steps per round with --model")->check(CLI::Range(1, 1000));
  CLI11_PARSE(app, argc, argv);
  const StepTimes step = model_dir.empty() ? StepTimes{} : DecodeSteps(model_dir, steps, rounds);
  if (!model_dir.empty() && step.b1_ms <= 0) return 1;
  const std::pair<const char*, Compile> schemas[] = {{"flat-5", SchemaGrammar(FlatSchema())},
                                                    {"tool-30", SchemaGrammar(ToolSchema())},
                                                    {"recursive", SchemaGrammar(RecursiveSchema())},
                                                    {"tool-calls", ToolCallGrammar()}};
  std::printf("%-10s %-10s %14s %16s %18s %18s%s\n", "vocab", "schema", "compile_us", "b1_mean_us", "b1_p99_us",
              "b32_us_per_seq", step.b1_ms > 0 ? "  share_of_step_b1  share_of_step_b32" : "");
  for (const std::string& path : tokenizers) {
    auto tok = ds41::Tokenizer::Load(path);
    if (!tok.ok()) {
      std::cerr << tok.status().ToString() << "\n";
      return 1;
    }
    const int32_t V = tok->vocab_size();
    const auto b0 = Clock::now();
    const std::unique_ptr<TokenMasker> built = ds41::grammar::MaskerForTokenizer(*tok, V);
    const TokenMasker& masker = *built;
    std::fprintf(stderr, "vocab %d: masker built in %.1f ms\n", V, Us(Clock::now() - b0) / 1000);
    for (const auto& [name, grammar] : schemas) {
      Sorted compile, mean, p99, b32;
      for (int r = 0; r < rounds; ++r) {
        const Figures f = RunRound(grammar, masker, *tok, docs, 1000u * static_cast<uint64_t>(r + 1));
        compile.v.push_back(f.compile_us);
        mean.v.push_back(f.b1_mean_us);
        p99.v.push_back(f.b1_p99_us);
        b32.v.push_back(f.b32_per_seq_us);
      }
      auto cell = [](Sorted& s) {
        char buf[64];
        std::snprintf(buf, sizeof buf, "%.1f [%.1f-%.1f]", s.Median(), s.Min(), s.Max());
        return std::string(buf);
      };
      std::printf("%-10d %-10s %14s %16s %18s %18s", V, name, cell(compile).c_str(), cell(mean).c_str(),
                  cell(p99).c_str(), cell(b32).c_str());
      if (step.b1_ms > 0) {
        // A step's masks against the step: one sequence's at batch 1, 32 sequences' at batch 32.
        std::printf("  %15.5f%% %17.5f%%", 100 * mean.Median() / (step.b1_ms * 1000),
                    100 * 32 * b32.Median() / (step.b32_ms * 1000));
      }
      std::printf("\n");
    }
  }
  return 0;
}

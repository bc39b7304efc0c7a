#include "grammar/json_sample.h"

#include <random>

namespace ds41::grammar {
namespace {

void Generate(const Grammar& g, int32_t node, std::mt19937_64* rng, int depth, std::string* out) {
  const Node& n = g.nodes[static_cast<size_t>(node)];
  auto pick = [&](int k) { return static_cast<int>((*rng)() % static_cast<unsigned>(k)); };
  switch (n.kind) {
    case NodeKind::kLiteral: *out += n.literal; return;
    case NodeKind::kString: {
      static const std::vector<std::string> pieces = {"a", "Z", " ", "é", "\\\"", "\\\\", "\\n", "\\u00e9", "\\ud83d\\ude00", "{", "]", ":"};
      *out += '"';
      for (int i = pick(5); i > 0; --i) *out += pieces[static_cast<size_t>(pick(static_cast<int>(pieces.size())))];
      *out += '"';
      return;
    }
    case NodeKind::kNumber:
    case NodeKind::kInteger: {
      static const std::vector<std::string> ints = {"0", "-0", "7", "-42", "123456789012345"};
      static const std::vector<std::string> tails = {"", ".5", ".25e3", "E-7", "e+12"};
      *out += ints[static_cast<size_t>(pick(static_cast<int>(ints.size())))];
      if (n.kind == NodeKind::kNumber) *out += tails[static_cast<size_t>(pick(static_cast<int>(tails.size())))];
      return;
    }
    case NodeKind::kArray: {
      *out += '[';
      const int k = depth > 4 ? 0 : pick(4);
      for (int i = 0; i < k; ++i) {
        if (i) *out += ',';
        Generate(g, n.items, rng, depth + 1, out);
      }
      *out += ']';
      return;
    }
    case NodeKind::kObject: {
      *out += '{';
      bool first = true;
      for (const Property& p : n.properties) {
        if (!p.required && (depth > 4 || pick(2) == 0)) continue;
        if (!first) *out += ',';
        first = false;
        *out += '"' + p.key;
        Generate(g, p.value, rng, depth + 1, out);
      }
      *out += '}';
      return;
    }
    case NodeKind::kFreeObject: {
      *out += '{';
      const int k = depth > 4 ? 0 : pick(3);
      for (int i = 0; i < k; ++i) {
        if (i) *out += ',';
        *out += "\"k" + std::to_string(i) + "\":";
        Generate(g, n.items, rng, depth + 1, out);
      }
      *out += '}';
      return;
    }
    case NodeKind::kSequence:
      for (int32_t part : n.alternatives) Generate(g, part, rng, depth, out);
      return;
    case NodeKind::kRawUntil: {
      static const std::vector<std::string> pieces = {"a", " ", "\n", "<", "\"", "{}", "é"};
      for (int i = pick(6); i > 0; --i) *out += pieces[static_cast<size_t>(pick(static_cast<int>(pieces.size())))];
      *out += n.literal;
      return;
    }
    case NodeKind::kTextWithout: {
      static const std::vector<std::string> pieces = {"a", " ", "\n", "ok", "é"};
      for (int i = pick(6); i > 0; --i) *out += pieces[static_cast<size_t>(pick(static_cast<int>(pieces.size())))];
      return;
    }
    case NodeKind::kAnyOf: {
      // Deep down, the alternative with the shortest finite document (recursive schemas end).
      int32_t choice = n.alternatives[static_cast<size_t>(pick(static_cast<int>(n.alternatives.size())))];
      if (depth > 4) {
        for (int32_t a : n.alternatives)
          if (g.nodes[static_cast<size_t>(a)].min_depth < g.nodes[static_cast<size_t>(choice)].min_depth) choice = a;
      }
      Generate(g, choice, rng, depth, out);
      return;
    }
  }
}

}  // namespace

std::string SampleDocument(const Grammar& g, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string doc;
  Generate(g, g.root, &rng, 0, &doc);
  return doc;
}

}  // namespace ds41::grammar

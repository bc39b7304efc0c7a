// ds41-cache-audit: reads the ack logs roles wrote with --cache-ack-log (cache_client/ack_log.h)
// and fetches every unit they list from the shards, through the same client and placement the
// roles use. A unit is "lost" when no shard returns it and "changed" when the bytes returned differ
// (CRC32C and length) from the bytes that were acknowledged. Prints the counts as one JSON line;
// exit 0 when none is lost or changed, 1 otherwise, 2 on bad arguments.
//   ds41-cache-audit --cache S1,S2 LOG...
#include <CLI/CLI.hpp>
#include <fstream>
#include <iostream>
#include <map>
#include <set>

#include "cache_client/ack_log.h"
#include "cache_client/cache_client.h"
#include "util/crc32c.h"
#include "util/split_list.h"

int main(int argc, char** argv) {
  CLI::App app{"ds41-cache-audit: is every acknowledged cache unit still there, unchanged?"};
  std::string shards;
  std::vector<std::string> logs;
  int batch = 256;
  app.add_option("--cache", shards, "cache_service shard addresses, comma separated")->required();
  app.add_option("--batch", batch, "units per Get")->check(CLI::Range(1, 4096));
  app.add_option("logs", logs, "ack log files")->required();
  CLI11_PARSE(app, argc, argv);

  // Distinct units by namespace and key; a unit acknowledged twice (a retried put) must match both.
  struct Want {
    ds41::AckedUnit unit;
    bool conflicting = false;  // acknowledged with different bytes (never expected: keys name contents)
  };
  std::map<std::pair<std::string, std::string>, Want> want;
  std::map<std::string, ds41::CacheNamespace> namespaces;
  uint64_t lines = 0, torn = 0;
  for (const std::string& path : logs) {
    std::ifstream in(path);
    if (!in) {
      std::cerr << "cannot read " << path << "\n";
      return 2;
    }
    std::string line;
    while (std::getline(in, line)) {
      auto u = ds41::ParseAckLine(line);
      if (!u.ok()) {
        ++torn;  // a writer killed mid-line; the unit was not yet acknowledged to its caller
        continue;
      }
      ++lines;
      const std::string ns_key = ds41::KeyString(u->ns_id);
      auto& ns = namespaces[ns_key];
      ns.id = u->ns_id;
      ns.model_fingerprint = u->model_fingerprint;
      ns.format_version = u->format_version;
      auto [it, fresh] = want.try_emplace({ns_key, ds41::KeyString(u->key)}, Want{*u});
      if (!fresh && (it->second.unit.crc32c != u->crc32c || it->second.unit.bytes != u->bytes)) it->second.conflicting = true;
    }
  }
  ds41::ThreadPool io(8, ds41::ThreadPool::Idle::kSleep, "audit-io");  // the shards read in parallel
  ds41::CacheClientOptions co;
  co.shards = ds41::SplitList(shards);
  co.deadline = std::chrono::milliseconds(10000);
  co.io = &io;
  auto client = ds41::CacheClient::Create(co);
  if (!client.ok()) {
    std::cerr << client.status().ToString() << "\n";
    return 2;
  }
  uint64_t found = 0, lost = 0, changed = 0, conflicting = 0;
  std::vector<std::string> examples;
  for (const auto& [ns_key, ns] : namespaces) {
    std::vector<const Want*> units;
    for (auto it = want.lower_bound({ns_key, std::string()}); it != want.end() && it->first.first == ns_key; ++it)
      units.push_back(&it->second);
    for (size_t b = 0; b < units.size(); b += static_cast<size_t>(batch)) {
      const size_t e = std::min(units.size(), b + static_cast<size_t>(batch));
      std::vector<ds41::UnitGet> gets;
      for (size_t i = b; i < e; ++i) gets.push_back({units[i]->unit.key, units[i]->unit.parent});
      const auto got = (*client)->Get(ns, gets);
      for (size_t i = b; i < e; ++i) {
        const ds41::AckedUnit& u = units[i]->unit;
        conflicting += units[i]->conflicting;
        const auto& g = got[i - b];
        if (!g) {
          ++lost;
          if (examples.size() < 5) examples.push_back("lost " + ds41::KeyHex(u.key));
        } else if (g->size() != u.bytes || ds41::Crc32c(g->data(), g->size()) != u.crc32c) {
          ++changed;
          if (examples.size() < 5) examples.push_back("changed " + ds41::KeyHex(u.key));
        } else {
          ++found;
        }
      }
    }
  }
  std::cout << "{\"ack_lines\": " << lines << ", \"torn_lines\": " << torn << ", \"units\": " << want.size()
            << ", \"namespaces\": " << namespaces.size() << ", \"found\": " << found << ", \"lost\": " << lost
            << ", \"changed\": " << changed << ", \"acked_with_different_bytes\": " << conflicting << "}" << std::endl;
  for (const std::string& x : examples) std::cerr << x << "\n";
  return lost == 0 && changed == 0 ? 0 : 1;
}

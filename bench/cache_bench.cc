// cache_bench: the cache store against this machine's disk, in one run (issue: cache service).
//
//   1. sequential disk bandwidth with O_DIRECT (the limit), measured again right before each run;
//   2. Put and Get throughput of real-size units (the release's layout: 56,960-byte payload per
//      64-token unit) with 1, 4 and 16 concurrent clients, as ratios to that limit: through the
//      real CacheClient over the bulk data path (docs/cache_data_path.md), over plain gRPC streams
//      (the control plane's Put/Get), and against the store alone (in process, no transport: what
//      the disk layout allows; puts in PutMany calls of as many units as a client's Put sends, gets
//      one unit per call as the service reads them). Puts are timed until the data is on disk
//      (syncfs); Gets read after the page cache was emptied, so all are device-bound figures;
//      each client first puts and gets one call's worth untimed (a warm process, as a running
//      shard and its clients are); --repeat N prints each row's medians over N runs (and the
//      ratios' range), for hosts whose disk and CPUs drift;
//   2a. the loopback pipe (bench/loopback_pipe.h) with as many clients, measured right after the
//      disk before each transport run: what a TCP service with no work of its own reaches on this
//      machine, with its clients on the same CPUs (a reference, not a proven bound); the data-path
//      and gRPC rows are also given as shares of it, and its own rows as shares of the disk;
//   3. LookupPrefix latency p50/p99 for 1,000-unit chains;
//   4. on-disk bytes per cached token after compaction.
#include <CLI/CLI.hpp>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <optional>
#include <thread>

#include "bench/cpu_time.h"
#include "bench/disk_bandwidth.h"
#include "bench/loopback_pipe.h"
#include "cache.grpc.pb.h"
#include "cache_client/cache_client.h"
#include "cache_service/cache_node.h"
#include "cache_service/store/unit_store.h"
#include "engine/config/presets.h"
#include "rpc/server.h"
#include "unit/unit_format.h"
#include "unit/unit_key.h"
#include "util/malloc_tuning.h"

namespace {

using namespace ds41;
namespace pb = ds41::cache::v1;
using Steady = std::chrono::steady_clock;

const std::string kFp(64, 'c');
bool g_direct_io = StoreOptions().direct_io;  // --direct-io

std::string RealUnit(const UnitLayout& l, uint32_t seed) {
  Unit u;
  u.model = *ParseFingerprint(kFp);
  u.tokens = l.unit_tokens;
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (const auto& s : l.sources) {
    UnitSource us;
    us.main_kv.resize(static_cast<size_t>(u.tokens / s.ratio) * s.main_bytes);
    us.index_keys.resize(static_cast<size_t>(u.tokens / s.ratio) * s.index_bytes);
    for (auto* v : {&us.main_kv, &us.index_keys})
      for (auto& b : *v) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        b = static_cast<uint8_t>(x);
      }
    u.sources.push_back(us);
  }
  return EncodeUnit(l, u);
}

// Every store of the benchmark: the write mode asked for, a capacity no run reaches.
StoreOptions BenchStoreOptions(const std::string& path) {
  StoreOptions o;
  o.path = path;
  o.capacity_bytes = uint64_t{1} << 40;
  o.direct_io = g_direct_io;
  return o;
}

// How the stores wrote, as found (O_DIRECT may be refused by the file system); printed at the end.
const char* g_write_mode = "none opened";
void NoteWriteMode(const UnitStore& store) {
  g_write_mode = store.DirectIo() ? "O_DIRECT" : g_direct_io ? "buffered (O_DIRECT refused here)" : "buffered";
}

// A shard as cache_service runs it (CacheNode: the store, its bulk data path and the gRPC service).
struct Server {
  prometheus::Registry registry;
  std::unique_ptr<CacheNode> node;
  std::string addr;

  // `read_cache_bytes`: the store's RAM for units read again (unset: its default).
  explicit Server(const std::string& path, std::optional<uint64_t> read_cache_bytes = std::nullopt) {
    CacheNodeOptions o;
    o.store = BenchStoreOptions(path);
    if (read_cache_bytes) o.store.read_cache_bytes = *read_cache_bytes;
    o.service.model_fingerprint = kFp;
    o.rpc.threads = 32;
    node = std::move(CacheNode::Start(o, registry)).value();
    NoteWriteMode(*node->store());
    addr = "127.0.0.1:" + std::to_string(node->grpc_port());
  }
};

std::unique_ptr<pb::Cache::Stub> Stub(const std::string& addr, int id) {
  grpc::ChannelArguments a;
  a.SetMaxReceiveMessageSize(64 << 20);
  a.SetInt("ds41.bench.client", id);  // distinct args: a connection of its own
  return pb::Cache::NewStub(grpc::CreateCustomChannel(addr, grpc::InsecureChannelCredentials(), a));
}

pb::Namespace Ns(const UnitKey& root) {
  pb::Namespace n;
  n.set_id(KeyString(root));
  n.set_model_fingerprint(kFp);
  n.set_format_version(kUnitFormatVersion);
  return n;
}

UnitKey Key(uint32_t client, uint32_t i) {
  UnitKey k{};
  std::memcpy(k.data(), &client, 4);
  std::memcpy(k.data() + 4, &i, 4);
  k[31] = static_cast<uint8_t>(i * 131 + client);
  return k;
}

std::string KeyBytes(uint32_t client, uint32_t i) { return KeyString(Key(client, i)); }

struct Throughput {
  double put_bps = 0, get_bps = 0;
  double put_cores = 0, get_cores = 0;  // CPU seconds of the whole process (clients and server) per second
  // Those less the cache clients' threads ("cache-client"): the service's own, where the clients'
  // CPU can be told apart (negative: it cannot, over gRPC).
  double put_server_cores = -1, get_server_cores = -1;
  // The store's payload writes during the puts (its segment-write metrics): the share of the put
  // time a write was running, and bytes per second of it. This tells a store that leaves the device
  // idle from writes that are slower than the disk measured alone (partial batches pay a write's
  // fixed cost for fewer bytes; from 4 KiB pages this VM's disk also slowed under CPU load).
  double write_busy = 0, write_bps = 0;
};

// The payload bytes written and seconds spent writing them, so far, from a store's metrics.
struct WriteTotals {
  double bytes = 0, seconds = 0;
};
WriteTotals ReadWriteTotals(const StoreMetrics& m) {
  return {m.segment_write_bytes.Collect().histogram.sample_sum, m.segment_write_seconds.Collect().histogram.sample_sum};
}

// Units per put call and keys per get call of one client.
constexpr int kPutBatch = 256, kGetBatch = 64;
// Keys per GetMany of the store-alone rows: a gRPC read task's.
constexpr int kStoreGetBatch = 16;

// `clients` threads each put `per` units then, after the page cache was emptied, get them back;
// put(c, begin, end) and get(c, begin, end) return the unit bytes they moved. Before the clock
// starts, each client puts and gets its first call's units once (put again in the timed run): a
// shard and its clients are long-lived, and a new process's first calls also pay the first touch
// of their buffers. `client_threads`: the name prefix of the threads doing the clients' work, where
// they have one.
template <typename Put, typename Get>
Throughput Measure(const std::string& path, const StoreMetrics& store, int clients, int per, size_t unit_bytes, Put put,
                   Get get, const char* client_threads = nullptr) {
  // Every client calls fn over its first `upto` units, `batch` a call, at once; the bytes moved.
  auto run = [&](int batch, auto& fn, int upto) {
    std::atomic<uint64_t> bytes{0};
    std::vector<std::thread> th;
    for (int c = 0; c < clients; ++c)
      th.emplace_back([&, c] {
        for (int b = 0; b < upto; b += batch) bytes += fn(c, b, std::min(upto, b + batch));
      });
    for (auto& t : th) t.join();
    return bytes.load();
  };
  auto client_cpu = [&] { return client_threads != nullptr ? ThreadsCpuSeconds(client_threads) : 0.0; };
  run(kPutBatch, put, std::min(per, kPutBatch));  // the warm-up
  run(kGetBatch, get, std::min(per, kGetBatch));
  auto t0 = Steady::now();
  double cpu0 = ProcessCpuSeconds(), client0 = client_cpu();
  const WriteTotals w0 = ReadWriteTotals(store);
  const uint64_t put_bytes = run(kPutBatch, put, per);
  EvictFromPageCache(path);  // includes syncfs: the timing covers getting the bytes to disk
  const double put_s = std::chrono::duration<double>(Steady::now() - t0).count();
  const double put_cpu = ProcessCpuSeconds() - cpu0, put_client_cpu = client_cpu() - client0;
  const WriteTotals w1 = ReadWriteTotals(store);
  if (put_bytes != static_cast<uint64_t>(per) * clients * unit_bytes) std::fprintf(stderr, "puts failed\n");
  EvictFromPageCache(path);
  t0 = Steady::now();
  cpu0 = ProcessCpuSeconds();
  client0 = client_cpu();
  const uint64_t got = run(kGetBatch, get, per);
  const double get_s = std::chrono::duration<double>(Steady::now() - t0).count();
  const double get_cpu = ProcessCpuSeconds() - cpu0, get_client_cpu = client_cpu() - client0;
  if (got != put_bytes) std::fprintf(stderr, "gets returned %lu of %lu bytes\n", static_cast<unsigned long>(got),
                                     static_cast<unsigned long>(put_bytes));
  const double writing = w1.seconds - w0.seconds;
  Throughput t;
  t.put_bps = static_cast<double>(put_bytes) / put_s;
  t.get_bps = static_cast<double>(got) / get_s;
  t.put_cores = put_cpu / put_s;
  t.get_cores = get_cpu / get_s;
  if (client_threads != nullptr) {
    t.put_server_cores = (put_cpu - put_client_cpu) / put_s;
    t.get_server_cores = (get_cpu - get_client_cpu) / get_s;
  }
  t.write_busy = writing / put_s;
  t.write_bps = writing > 0 ? (w1.bytes - w0.bytes) / writing : 0;
  return t;
}

struct Sample {
  DiskBandwidth disk;
  std::optional<PipeThroughput> pipe;  // the loopback pipe with as many clients (transport rows only)
  Throughput t;
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// A row: clients; disk write, put MB/s, put/disk, put/pipe, cores, server, busy, writing; disk read,
// get MB/s, get/disk, get/pipe, cores, server. (The header and the ranges' line print text in the
// same columns.)
constexpr const char* kHeadFormat = "%-8s %11s %9s %9s %9s %6s %6s %5s %8s %10s %9s %9s %9s %6s %6s\n";
constexpr const char* kRowFormat = "%-8d %11.0f %9.0f %9.2f %9s %6.2f %6s %5s %8s %10.0f %9.0f %9.2f %9s %6.2f %6s\n";

std::string Fixed2(double v) {
  char s[32];
  std::snprintf(s, sizeof(s), "%.2f", v);
  return s;
}

// A server-cores figure, or "-" where the clients' CPU could not be told apart.
std::string ServerCores(double cores) { return cores < 0 ? "-" : Fixed2(cores); }

void PrintRow(int clients, const std::vector<Sample>& runs) {
  auto med = [&](auto f) {
    std::vector<double> v;
    for (const Sample& s : runs) v.push_back(f(s));
    return Median(v);
  };
  const bool stored = std::all_of(runs.begin(), runs.end(), [](const Sample& s) { return s.t.write_bps > 0; });
  const bool piped = std::all_of(runs.begin(), runs.end(), [](const Sample& s) { return s.pipe && s.pipe->ok; });
  auto put_ratio = [](const Sample& s) { return s.t.put_bps / s.disk.write_bytes_per_s; };
  auto get_ratio = [](const Sample& s) { return s.t.get_bps / s.disk.read_bytes_per_s; };
  auto put_of_pipe = [](const Sample& s) { return s.t.put_bps / s.pipe->put_bps; };
  auto get_of_pipe = [](const Sample& s) { return s.t.get_bps / s.pipe->get_bps; };
  const std::string put_pipe = piped ? Fixed2(med(put_of_pipe)) : "-", get_pipe = piped ? Fixed2(med(get_of_pipe)) : "-";
  const std::string busy = stored ? Fixed2(med([](const Sample& s) { return s.t.write_busy; })) : "-";
  const std::string writing = stored ? std::to_string(std::lround(med([](const Sample& s) { return s.t.write_bps / 1e6; }))) : "-";
  std::printf(kRowFormat, clients, med([](const Sample& s) { return s.disk.write_bytes_per_s / 1e6; }),
              med([](const Sample& s) { return s.t.put_bps / 1e6; }), med(put_ratio), put_pipe.c_str(),
              med([](const Sample& s) { return s.t.put_cores; }),
              ServerCores(med([](const Sample& s) { return s.t.put_server_cores; })).c_str(), busy.c_str(), writing.c_str(),
              med([](const Sample& s) { return s.disk.read_bytes_per_s / 1e6; }),
              med([](const Sample& s) { return s.t.get_bps / 1e6; }), med(get_ratio), get_pipe.c_str(),
              med([](const Sample& s) { return s.t.get_cores; }),
              ServerCores(med([](const Sample& s) { return s.t.get_server_cores; })).c_str());
  if (runs.size() < 2) return;
  auto range = [&](auto f) {
    double lo = f(runs[0]), hi = lo;
    for (const Sample& s : runs) lo = std::min(lo, f(s)), hi = std::max(hi, f(s));
    return Fixed2(lo) + "-" + Fixed2(hi);
  };
  const std::string put_range = range(put_ratio), get_range = range(get_ratio);
  const std::string put_pipe_range = piped ? range(put_of_pipe) : "", get_pipe_range = piped ? range(get_of_pipe) : "";
  std::printf(kHeadFormat, "  range", "", "", put_range.c_str(), put_pipe_range.c_str(), "", "", "", "", "", "",
              get_range.c_str(), get_pipe_range.c_str(), "", "");
}

}  // namespace

int main(int argc, char** argv) {
  ds41::TuneMallocForLargeBuffers();
  CLI::App app{"cache_bench: cache store throughput against the disk's sequential bandwidth"};
  std::string dir = "/tmp/ds41-cache-bench";
  int units = 4096, lookups = 200, repeat = 1;
  uint64_t disk_mib = 1024;
  app.add_option("--dir", dir, "scratch directory on the disk under test (removed at the end)");
  app.add_option("--units", units, "units per throughput run");
  app.add_option("--disk-mib", disk_mib, "MiB for the sequential bandwidth measurement");
  app.add_option("--lookups", lookups, "lookups for the latency figures");
  std::string only = "pipe,data,grpc,store,lookup";
  std::vector<int> client_counts = {1, 4, 16};
  app.add_option("--direct-io", g_direct_io, "store payload writes with O_DIRECT (true) or through the page cache (false)");
  app.add_option("--only", only, "sections to run, comma-separated: pipe, data, grpc, store, lookup");
  app.add_option("--clients", client_counts, "clients (or threads) of the throughput rows, comma-separated")
      ->delimiter(',')
      ->check(CLI::Range(1, 256));
  app.add_option("--repeat", repeat, "runs per throughput row (medians printed, with the ratios' range)")->check(CLI::Range(1, 99));
  CLI11_PARSE(app, argc, argv);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);

  const UnitLayout layout = *UnitLayout::FromConfig(ReleaseConfig(), 64);
  std::vector<std::string> pool;
  for (uint32_t i = 0; i < 64; ++i) pool.push_back(RealUnit(layout, i));
  const size_t unit_bytes = pool[0].size();
  const std::vector<std::string_view> pool_views(pool.begin(), pool.end());
  std::printf("inputs: %d units per run, %zu bytes per unit (payload %zu = %zu B/token), disk test %lu MiB, "
              "%u hardware threads, store writes asked: %s\n",
              units, unit_bytes, layout.PayloadBytes(64), layout.PayloadBytes(64) / 64,
              static_cast<unsigned long>(disk_mib), std::thread::hardware_concurrency(),
              g_direct_io ? "O_DIRECT" : "buffered");

  // The disk is measured again right before each run, and the run's ratios are to that measurement:
  // on shared or virtual disks the bandwidth drifts within one run (here 1.6-2.7 GB/s in an hour).
  bool disk_direct = true;

  // The loopback pipe with the transport rows' clients, calls and units.
  auto pipe_with = [&](int clients, const std::string& in_dir) {
    return MeasureLoopbackPipe(in_dir, {clients, units / clients, kPutBatch, kGetBatch}, pool_views);
  };
  auto section = [&](const char* name) { return ("," + only + ",").find(std::string(",") + name + ",") != std::string::npos; };
  // One throughput section: a row for each of --clients (1, 4 and 16 clients or threads); each row
  // runs `repeat` times, each run on a fresh store after its own disk measurement, and prints the
  // medians.
  // `against_pipe`: each run is also measured against the loopback pipe, right after the disk.
  auto run_section = [&](const char* name, const char* title, const char* unit_col, bool against_pipe,
                         const std::function<Throughput(int, const std::string&)>& run) {
    if (!section(name)) return;
    std::printf("\n%s\n", title);
    std::printf(kHeadFormat, unit_col, "disk write", "put MB/s", "put/disk", "put/pipe", "cores", "server", "busy", "writing",
                "disk read", "get MB/s", "get/disk", "get/pipe", "cores", "server");
    for (int n : client_counts) {
      std::vector<Sample> samples;
      for (int r = 0; r < repeat; ++r) {
        const DiskBandwidth disk = MeasureDiskBandwidth(dir, disk_mib << 20);
        disk_direct = disk_direct && disk.direct_io;
        const std::string path = dir + "/" + name + std::to_string(n) + "-" + std::to_string(r);
        std::optional<PipeThroughput> pipe;
        if (against_pipe) pipe = pipe_with(n, dir);
        samples.push_back({disk, pipe, run(n, path)});
        std::filesystem::remove_all(path);
      }
      PrintRow(n, samples);
    }
    std::printf("(disk: sequential MB/s with O_DIRECT %s, measured right before each run, its CPUs idle; each client\n"
                " warmed up by one untimed put and get call; cores: CPU seconds per second of this process, clients and\n"
                " server together, of %u hardware threads; server: those less the cache clients' threads, \"-\" where\n"
                " they cannot be told apart; busy: share of the put time the store's payload writes ran; writing: their\n"
                " MB/s while they ran; put/pipe, get/pipe: as shares of the loopback pipe's, measured with as many\n"
                " clients right after the disk%s)\n",
                disk_direct ? "on" : "unavailable", std::thread::hardware_concurrency(),
                repeat > 1 ? "; medians of the runs, the ratios' range below each row" : "");
  };
  run_section("pipe",
              "the loopback pipe (bench/loopback_pipe.h): the same calls' bytes over a connection per client, received\n"
              "straight into 4 MiB O_DIRECT writes (overlapped), acknowledged per call, then read back the same way; no\n"
              "framing, checksum, index or copies of its own",
              "clients", /*against_pipe=*/false, [&](int clients, const std::string& path) {
                std::filesystem::create_directories(path);
                const PipeThroughput p = pipe_with(clients, path);
                if (!p.ok) std::fprintf(stderr, "the loopback pipe failed\n");
                Throughput t;
                t.put_bps = p.put_bps;
                t.get_bps = p.get_bps;
                t.put_cores = p.put_cores;
                t.get_cores = p.get_cores;
                return t;
              });
  run_section("data", "through CacheClient over the bulk data path on loopback", "clients", /*against_pipe=*/true, [&](int clients, const std::string& path) {
    Server srv(path);
    // One per client, as every role process has its own, each with an I/O pool for its stripes.
    std::vector<std::unique_ptr<ThreadPool>> io;
    std::vector<std::unique_ptr<CacheClient>> cl;
    for (int c = 0; c < clients; ++c) {
      io.push_back(std::make_unique<ThreadPool>(2, ThreadPool::Idle::kSleep, "bench-io"));
      CacheClientOptions co;
      co.shards = {srv.addr};
      co.deadline = std::chrono::milliseconds(20000);
      co.io = io.back().get();
      cl.push_back(std::move(CacheClient::Create(co)).value());
    }
    const CacheNamespace ns = CacheNamespace::Make(kFp, "bench");
    // Every client's put calls built before the clock starts: a role hands over units it already
    // holds, so copying them into the calls is not the service's time.
    const int per = units / clients;
    std::vector<std::vector<std::vector<UnitPut>>> calls(clients);
    for (int c = 0; c < clients; ++c)
      for (int b = 0; b < per; b += kPutBatch) {
        auto& puts = calls[c].emplace_back();
        for (int i = b; i < std::min(per, b + kPutBatch); ++i) puts.push_back({Key(c, i), std::nullopt, pool[(c + i) % pool.size()]});
      }
    const Throughput t = Measure(
        path, srv.node->store_metrics(), clients, per, unit_bytes,
        [&](int c, int b, int) { return static_cast<uint64_t>(cl[c]->Put(ns, calls[c][b / kPutBatch]).acked) * unit_bytes; },
        [&](int c, int b, int e) {
          std::vector<UnitGet> gets;
          for (int i = b; i < e; ++i) gets.push_back({Key(c, i), std::nullopt});
          uint64_t n = 0;
          for (const auto& g : cl[c]->Get(ns, gets)) n += g ? g->size() : 0;
          return n;
        },
        "cache-client");  // (CacheClient does a call's work on its pool's threads)
    if (srv.node->data_metrics().put_ok.Value() < units / clients * clients) std::fprintf(stderr, "puts bypassed the data path\n");
    return t;
  });

  run_section("grpc", "over plain gRPC streams on loopback", "clients", /*against_pipe=*/true, [&](int clients, const std::string& path) {
    Server srv(path);
    const UnitKey root{};
    std::vector<std::unique_ptr<pb::Cache::Stub>> stubs;
    for (int c = 0; c < clients; ++c) stubs.push_back(Stub(srv.addr, c));
    const Throughput t = Measure(
        path, srv.node->store_metrics(), clients, units / clients, unit_bytes,
        [&](int c, int b, int e) -> uint64_t {
          grpc::ClientContext ctx;
          auto s = stubs[c]->Put(&ctx);
          pb::PutRequest r;
          *r.mutable_ns() = Ns(root);
          for (int i = b; i < e; ++i) {
            r.mutable_ref()->set_key(KeyBytes(c, i));
            r.set_unit(pool[(c + i) % pool.size()]);
            s->Write(r);
          }
          s->WritesDone();
          pb::PutAck a;
          uint64_t acked = 0;
          while (s->Read(&a)) ++acked;
          return s->Finish().ok() ? acked * unit_bytes : 0;
        },
        [&](int c, int b, int e) {
          grpc::ClientContext ctx;
          pb::GetRequest g;
          *g.mutable_ns() = Ns(root);
          for (int i = b; i < e; ++i) g.add_refs()->set_key(KeyBytes(c, i));
          auto rd = stubs[c]->Get(&ctx, g);
          pb::GetResponse r;
          uint64_t n = 0;
          while (rd->Read(&r)) n += r.unit().size();
          rd->Finish().IgnoreError();
          return n;
        });
    return t;
  });

  run_section("store", "store alone (in process, no transport; PutMany of 256 units, GetMany of 16 as the gRPC service's tasks)", "threads", /*against_pipe=*/false, [&](int threads, const std::string& path) {
    prometheus::Registry registry;
    StoreMetrics metrics(registry);
    auto store = std::move(UnitStore::Open(BenchStoreOptions(path), &metrics)).value();
    NoteWriteMode(*store);
    const Key32 ns{};
    Throughput t = Measure(
        path, metrics, threads, units / threads, unit_bytes,
        [&](int c, int b, int e) {
          // Units in calls of kPutBatch, as the clients' Puts send them (and the service stores
          // what a connection has read in one call).
          std::vector<UnitStore::PutItem> items;
          for (int i = b; i < e; ++i) items.push_back({ns, Key(c, i), nullptr, 64, pool[(c + i) % pool.size()]});
          const std::vector<Status> st = store->PutMany(items);
          uint64_t n = 0;
          for (size_t i = 0; i < st.size(); ++i)
            if (st[i].ok()) n += items[i].unit.size();
          return n;
        },
        [&](int c, int b, int e) {
          uint64_t n = 0;
          for (int f = b; f < e; f += kStoreGetBatch) {
            std::vector<Key32> keys;
            for (int i = f; i < std::min(e, f + kStoreGetBatch); ++i) keys.push_back(Key(c, i));
            for (const auto& g : store->GetMany(ns, keys))
              if (g.ok() && g->has_value()) n += (*g)->size();
          }
          return n;
        });
    t.put_server_cores = t.put_cores;  // (no clients: every thread does the store's work)
    t.get_server_cores = t.get_cores;
    return t;
  });

  if (section("lookup")) {  // Lookup latency for 1,000-unit chains (64,000 tokens), all hits, and the on-disk footprint.
    const std::string path = dir + "/lookup";
    Server srv(path, /*read_cache_bytes=*/0);  // (so that every chain fetch below reads the device)
    CacheClientOptions co;
    co.shards = {srv.addr};
    auto client = std::move(CacheClient::Create(co)).value();
    const CacheNamespace ns = CacheNamespace::Make(kFp, "bench");
    std::vector<int32_t> tokens(64 * 1000);
    for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>((i * 7919) % 129280);
    const auto keys = ChainKeys(ns.id, tokens, 64);
    std::vector<UnitPut> puts;
    for (size_t i = 0; i < keys.size(); ++i) puts.push_back({keys[i], std::nullopt, pool[i % pool.size()]});
    const PutResult pr = client->Put(ns, puts);
    std::vector<double> lat;
    for (int i = 0; i < lookups; ++i) {
      const auto t0 = Steady::now();
      const PrefixHit h = client->LookupPrefix(ns, tokens, 64);
      lat.push_back(std::chrono::duration<double>(Steady::now() - t0).count());
      if (h.full_units != 1000) std::fprintf(stderr, "lookup found %d units\n", h.full_units);
    }
    std::sort(lat.begin(), lat.end());
    std::printf("\nlookup of a 1000-unit chain (64,000 tokens, all cached): p50 %.2f ms, p99 %.2f ms (%d lookups)\n",
                lat[lat.size() / 2] * 1e3, lat[std::min(lat.size() - 1, lat.size() * 99 / 100)] * 1e3, lookups);
    // A decoder's prefix hit: the whole chain in one Get, every unit from the device. A decoder is a
    // long-lived process: the first fetches of a new one also pay for the first touch of its
    // buffers (page faults; the shard's read buffers too), so the p50 is of the fetches after two,
    // and the first is shown apart.
    std::vector<UnitGet> gets;
    for (const UnitKey& k : keys) gets.push_back({k, std::nullopt});
    const DiskBandwidth disk = MeasureDiskBandwidth(dir, disk_mib << 20);
    constexpr int kWarm = 2, kFetches = 9;
    std::vector<double> fetch;
    double first_s = 0;
    uint64_t fetched = 0;
    for (int i = 0; i < kWarm + kFetches; ++i) {
      const auto t0 = Steady::now();
      fetched = 0;
      for (const auto& g : client->Get(ns, gets)) fetched += g ? g->size() : 0;
      const double s = std::chrono::duration<double>(Steady::now() - t0).count();
      if (i == 0) first_s = s;
      if (i >= kWarm) fetch.push_back(s);
    }
    uint64_t put_bytes = 0;
    for (const UnitPut& u : puts) put_bytes += u.bytes.size();
    if (fetched != put_bytes)
      std::fprintf(stderr, "chain fetch returned %lu of %lu bytes\n", static_cast<unsigned long>(fetched),
                   static_cast<unsigned long>(put_bytes));
    std::sort(fetch.begin(), fetch.end());
    const double bps = static_cast<double>(fetched) / fetch[fetch.size() / 2];
    std::printf("get of that chain in one call (%.0f MB, from the device): p50 %.1f ms of %d = %.0f MB/s, %.2f of the disk's "
                "read bandwidth (%.0f MB/s); the process's first such call %.1f ms\n",
                static_cast<double>(fetched) / 1e6, fetch[fetch.size() / 2] * 1e3, kFetches, bps / 1e6,
                bps / disk.read_bytes_per_s, disk.read_bytes_per_s / 1e6, first_s * 1e3);
    if (!srv.node->store()->Compact().ok()) std::fprintf(stderr, "compaction failed\n");
    const uint64_t disk_bytes = DirectoryBytes(path);
    std::printf("on disk after compaction: %lu bytes for %d units = %.1f bytes per cached token (payload 890)\n",
                static_cast<unsigned long>(disk_bytes), pr.acked, static_cast<double>(disk_bytes) / (pr.acked * 64.0));
  }
  std::printf("store writes, as found: %s\n", g_write_mode);
  std::filesystem::remove_all(dir);
  return 0;
}

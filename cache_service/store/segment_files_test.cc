// SegmentFiles' grouped writes: bytes land where Append says, in both write modes, under concurrent
// appends, segment rollovers and reads, and a reopened directory reads back every acknowledged byte.
#include "cache_service/store/segment_files.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <functional>
#include <algorithm>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

namespace ds41 {
namespace {

// Recognisable bytes of odd lengths, so appends end inside 4 KiB blocks and later batches rewrite them.
std::string Payload(int i) {
  std::string s(static_cast<size_t>(3000 + (i * 7919) % 20000), '\0');
  std::mt19937 rng(static_cast<uint32_t>(i));
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

// `threads` threads each append `groups` calls of `per_group` payloads (call g of thread t takes
// those from first(t, g) on; even calls synced when `sync_even`), commit them, then every payload
// is read back.
void AppendInGroupsAndReadBack(SegmentFiles& files, const std::vector<std::string_view>& payloads, int threads, int groups,
                               int per_group, const std::function<int(int, int)>& first, bool sync_even) {
  std::vector<SegmentLocation> locs(payloads.size());
  std::vector<std::thread> th;
  std::atomic<int> failed{0};
  for (int t = 0; t < threads; ++t)
    th.emplace_back([&, t] {
      for (int g = 0; g < groups; ++g) {
        const int from = first(t, g);
        const std::vector<std::string_view> group(payloads.begin() + from, payloads.begin() + from + per_group);
        auto got = files.AppendMany(group, /*sync=*/sync_even && g % 2 == 0);
        for (int j = 0; j < per_group; ++j) {
          if (!got[j].ok()) {
            ++failed;
            continue;
          }
          files.Commit(*got[j]);
          locs[from + j] = *got[j];
        }
      }
    });
  for (auto& t : th) t.join();
  ASSERT_EQ(failed.load(), 0);
  for (size_t i = 0; i < payloads.size(); ++i) {
    auto got = files.Read(locs[i]);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ASSERT_TRUE(*got == payloads[i]) << i;  // (not EXPECT_EQ: kilobytes in a failure message)
  }
}

class SegmentFilesTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("segment_files_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::unique_ptr<SegmentFiles> Open(uint64_t segment_bytes) {
    auto s = SegmentFiles::Open(dir_.string(), segment_bytes, /*direct_io=*/GetParam());
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    // O_DIRECT is used exactly when asked for and the file system takes it.
    const std::string probe = (dir_ / "probe").string();
    const int fd = open(probe.c_str(), O_CREAT | O_WRONLY | O_DIRECT, 0644);
    EXPECT_EQ((*s)->DirectIo(), GetParam() && fd >= 0);
    EXPECT_EQ((*s)->ReadsDirect(), (*s)->DirectIo());  // reads follow the writes' mode
    if (fd >= 0) close(fd);
    unlink(probe.c_str());
    direct_refused_ = GetParam() && fd < 0;
    return std::move(s).value();
  }
  std::filesystem::path dir_;
  bool direct_refused_ = false;  // the Direct run would only repeat the buffered one
};

TEST_P(SegmentFilesTest, ConcurrentAppendsAndReadsAcrossSegments) {
  constexpr int kThreads = 8, kPerThread = 60;
  std::vector<SegmentLocation> locs(kThreads * kPerThread);
  {
    auto files = Open(/*segment_bytes=*/200 << 10);  // ~15 appends per segment: many rollovers
    if (direct_refused_) GTEST_SKIP() << "O_DIRECT refused by the file system under " << dir_;
    std::atomic<int> bad_reads{0};
    std::vector<std::thread> th;
    for (int t = 0; t < kThreads; ++t)
      th.emplace_back([&, t] {
        for (int j = 0; j < kPerThread; ++j) {
          const int i = t * kPerThread + j;
          auto loc = files->Append(Payload(i), /*sync=*/j % 3 == 0);  // flushes overlapping across threads
          ASSERT_TRUE(loc.ok()) << loc.status().ToString();
          files->Commit(*loc);
          locs[i] = *loc;
          // Read back at once, and an earlier one of this thread's (its block may be rewritten now).
          for (int back : {i, t * kPerThread + j / 2}) {
            auto got = files->Read(locs[back]);
            if (!got.ok() || *got != Payload(back)) ++bad_reads;
          }
        }
      });
    for (auto& t : th) t.join();
    EXPECT_EQ(bad_reads.load(), 0);
    EXPECT_GT(files->FileCount(), 10u);
    uint64_t total = 0;
    for (int i = 0; i < kThreads * kPerThread; ++i) total += Payload(i).size();
    EXPECT_EQ(files->FileBytes(), total);
  }
  // The files hold exactly the appended bytes (the O_DIRECT padding is cut off) and reopen intact.
  uint64_t on_disk = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir_)) on_disk += e.file_size();
  uint64_t total = 0;
  for (int i = 0; i < kThreads * kPerThread; ++i) total += Payload(i).size();
  EXPECT_EQ(on_disk, total);
  auto files = Open(200 << 10);
  for (int i = 0; i < kThreads * kPerThread; ++i) {
    ASSERT_TRUE(files->Recount(locs[i])) << i;
    auto got = files->Read(locs[i]);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(*got, Payload(i)) << i;
  }
}

// Groups of units, as the store's PutMany hands them over, big enough to fill 4 MiB batches: each
// group spans batches (a full one queued, the next continuing its last block) while other threads'
// bytes are being copied into the same batches outside the lock.
TEST_P(SegmentFilesTest, ConcurrentGroupsFillingBatchesReadBackIntact) {
  constexpr int kThreads = 4, kGroups = 6, kPerGroup = 150;  // ~2 MB a group
  auto files = Open(/*segment_bytes=*/24 << 20);
  if (direct_refused_) GTEST_SKIP() << "O_DIRECT refused by the file system under " << dir_;
  std::vector<std::string> payloads;
  for (int i = 0; i < kThreads * kGroups * kPerGroup; ++i) payloads.push_back(Payload(i));
  AppendInGroupsAndReadBack(*files, std::vector<std::string_view>(payloads.begin(), payloads.end()), kThreads, kGroups,
                            kPerGroup, [](int t, int g) { return (t * kGroups + g) * kPerGroup; }, /*sync_even=*/true);
}

TEST_P(SegmentFilesTest, MoreBatchesAtOnceThanStagingBuffers) {
  // Twelve calls of ~6 MB each reserve ~20 batches at once, more than the eight staging buffers:
  // calls wait for buffers their own and the others' written batches give back. Every tenth call
  // also carries a unit larger than a batch, which gets a buffer of its own. A wait that could not
  // end hangs here; a batch staged from the wrong bytes fails the comparison.
  constexpr int kThreads = 12, kGroups = 3, kPerGroup = 450;
  auto files = Open(/*segment_bytes=*/48 << 20);
  if (direct_refused_) GTEST_SKIP() << "O_DIRECT refused by the file system under " << dir_;
  std::vector<std::string> distinct;
  for (int i = 0; i < 600; ++i) distinct.push_back(Payload(i));
  std::string big(5 << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 131 + (i >> 12));
  std::vector<std::string_view> payloads;
  for (int i = 0; i < kThreads * kGroups * kPerGroup; ++i)
    payloads.push_back(i % (10 * kPerGroup) == kPerGroup / 2 ? std::string_view(big) : std::string_view(distinct[i % 600]));
  AppendInGroupsAndReadBack(*files, payloads, kThreads, kGroups, kPerGroup,
                            [](int t, int g) { return (g * kThreads + t) * kPerGroup; }, /*sync_even=*/false);
}

// ReadMany: neighbouring units come in runs (a gap of another writer's unit read through), units
// far apart, in other segments or asked for twice each come right, in the order asked; a location
// past a file's end fails alone; a location in a segment gone is NotFound alone.
TEST_P(SegmentFilesTest, ReadManyAnswersEveryLocationInOrder) {
  auto files = Open(/*segment_bytes=*/2 << 20);  // ~150 units per segment: the units span segments
  if (direct_refused_) GTEST_SKIP() << "O_DIRECT refused by the file system under " << dir_;
  constexpr int kUnits = 400;
  std::vector<std::string> payloads;
  for (int i = 0; i < kUnits; ++i) payloads.push_back(Payload(i));
  std::vector<std::string_view> views(payloads.begin(), payloads.end());
  std::vector<StatusOr<SegmentLocation>> got = files->AppendMany(views, /*sync=*/false);
  std::vector<SegmentLocation> locs;
  for (int i = 0; i < kUnits; ++i) {
    ASSERT_TRUE(got[i].ok()) << got[i].status().ToString();
    files->Commit(*got[i]);
    locs.push_back(*got[i]);
  }
  ASSERT_GT(files->FileCount(), 2u);
  // Every third unit is left out (gaps within a run), the rest asked for in a shuffled order, some twice.
  std::vector<int> asked;
  for (int i = 0; i < kUnits; ++i)
    if (i % 3 != 0) asked.push_back(i);
  for (int i = 0; i < kUnits; i += 37) asked.push_back(i);
  std::shuffle(asked.begin(), asked.end(), std::mt19937(5));
  std::vector<SegmentLocation> want;
  for (int i : asked) want.push_back(locs[i]);
  SegmentLocation past = locs.back();
  past.offset += 64 << 10;  // past the active segment's end
  want.push_back(past);
  SegmentLocation gone = locs.front();
  gone.segment = 9999;
  want.push_back(gone);
  const std::vector<StatusOr<std::string>> read = files->ReadMany(want);
  ASSERT_EQ(read.size(), want.size());
  for (size_t k = 0; k < asked.size(); ++k) {
    ASSERT_TRUE(read[k].ok()) << k << ": " << read[k].status().ToString();
    ASSERT_TRUE(*read[k] == payloads[asked[k]]) << "unit " << asked[k];
  }
  EXPECT_EQ(read[asked.size()].status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(read[asked.size() + 1].status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(files->ReadMany({}).empty());
}

// Direct reads take their buffers from one pool: threads reading runs, single units and a unit
// larger than a pooled buffer at once each get their own bytes.
TEST_P(SegmentFilesTest, ConcurrentReadsGetTheirOwnBytes) {
  auto files = Open(/*segment_bytes=*/64 << 20);
  if (direct_refused_) GTEST_SKIP() << "O_DIRECT refused by the file system under " << dir_;
  constexpr int kUnits = 120, kThreads = 8, kRounds = 40;
  std::vector<std::string> payloads;
  for (int i = 0; i < kUnits; ++i) payloads.push_back(Payload(i));
  std::string big(3 << 20, '\0');  // more than a pooled read buffer: one of its own
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 31 + (i >> 10));
  payloads.push_back(big);
  std::vector<std::string_view> views(payloads.begin(), payloads.end());
  std::vector<StatusOr<SegmentLocation>> got = files->AppendMany(views, /*sync=*/false);
  std::vector<SegmentLocation> locs;
  for (auto& g : got) {
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    files->Commit(*g);
    locs.push_back(*g);
  }
  std::atomic<int> bad{0};
  std::vector<std::thread> th;
  for (int t = 0; t < kThreads; ++t)
    th.emplace_back([&, t] {
      std::mt19937 rng(static_cast<uint32_t>(t));
      for (int r = 0; r < kRounds; ++r) {
        // A run of neighbours (one device read), a lone unit, and now and then the large one.
        const int from = static_cast<int>(rng() % (kUnits - 8));
        std::vector<int> asked = {from, from + 1, from + 2, from + 3, static_cast<int>(rng() % kUnits)};
        if (r % 8 == t % 8) asked.push_back(kUnits);
        std::vector<SegmentLocation> want;
        for (int i : asked) want.push_back(locs[i]);
        const std::vector<StatusOr<std::string>> read = files->ReadMany(want);
        for (size_t k = 0; k < asked.size(); ++k)
          if (!read[k].ok() || *read[k] != payloads[asked[k]]) ++bad;
      }
    });
  for (auto& t : th) t.join();
  EXPECT_EQ(bad.load(), 0);
}

// The read buffers are pooled, not one per reading thread: reads one after another, from any number
// of threads, reuse one buffer; the pool grows only with the reads that run at once.
TEST_P(SegmentFilesTest, ReadBuffersGrowWithConcurrentReadsOnly) {
  auto files = Open(/*segment_bytes=*/64 << 20);
  if (direct_refused_) GTEST_SKIP() << "O_DIRECT refused by the file system under " << dir_;
  auto loc = files->Append(Payload(7), /*sync=*/false);
  ASSERT_TRUE(loc.ok());
  files->Commit(*loc);
  const uint64_t before = files->BufferBytes();  // the staging buffer the append took
  auto reads_in_turn = [&](int threads) {
    for (int t = 0; t < threads; ++t)
      std::thread([&] {
        for (int r = 0; r < 3; ++r) EXPECT_EQ(*files->Read(*loc), Payload(7));
      }).join();
    return files->BufferBytes() - before;
  };
  const uint64_t one = reads_in_turn(1);
  EXPECT_EQ(reads_in_turn(12), one);  // the same buffer, whichever thread reads
  if (!GetParam()) {
    EXPECT_EQ(one, 0u);  // buffered reads need none
    return;
  }
  EXPECT_GT(one, 0u);
  std::vector<std::thread> th;
  for (int t = 0; t < 6; ++t)
    th.emplace_back([&] {
      for (int r = 0; r < 20; ++r) EXPECT_EQ(*files->Read(*loc), Payload(7));
    });
  for (auto& t : th) t.join();
  EXPECT_LE(files->BufferBytes() - before, 6 * one);
}

// The read pool has a byte budget: however many threads read at once, it never holds more than
// kMaxReadBuffers buffers (the readers past it wait), and every read still gets its own bytes.
TEST_P(SegmentFilesTest, ReadBuffersStayWithinTheirBoundUnderManyReaders) {
  auto files = Open(/*segment_bytes=*/64 << 20);
  if (direct_refused_) GTEST_SKIP() << "O_DIRECT refused by the file system under " << dir_;
  if (!GetParam()) GTEST_SKIP() << "buffered reads use no pooled buffers";
  // Runs of neighbours about 1.5 MiB long: each read takes long enough for many to overlap.
  constexpr int kUnits = 96, kRun = 64, kThreads = 32, kRounds = 6;
  std::vector<std::string> payloads;
  for (int i = 0; i < kUnits; ++i) payloads.push_back(Payload(i));
  std::vector<std::string_view> views(payloads.begin(), payloads.end());
  std::vector<SegmentLocation> locs;
  for (auto& g : files->AppendMany(views, /*sync=*/false)) {
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    files->Commit(*g);
    locs.push_back(*g);
  }
  const uint64_t before = files->BufferBytes();  // the staging buffers the appends took
  std::atomic<int> bad{0};
  std::vector<std::thread> th;
  for (int t = 0; t < kThreads; ++t)
    th.emplace_back([&, t] {
      for (int r = 0; r < kRounds; ++r) {
        const int from = (t * 7 + r * 13) % (kUnits - kRun);
        const std::vector<SegmentLocation> want(locs.begin() + from, locs.begin() + from + kRun);
        const std::vector<StatusOr<std::string>> read = files->ReadMany(want);
        for (int k = 0; k < kRun; ++k)
          if (!read[k].ok() || *read[k] != payloads[from + k]) ++bad;
      }
    });
  for (auto& t : th) t.join();
  EXPECT_EQ(bad.load(), 0);
  const uint64_t grown = files->BufferBytes() - before;
  EXPECT_GT(grown, 0u);
  EXPECT_LE(grown, SegmentFiles::kMaxReadBuffers * (2u << 20));
}

TEST_P(SegmentFilesTest, AppendLargerThanABatch) {
  auto files = Open(64 << 20);
  if (direct_refused_) GTEST_SKIP() << "O_DIRECT refused by the file system under " << dir_;
  std::string big(9 << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 131 + (i >> 12));
  auto small = files->Append(Payload(1), false);
  auto large = files->Append(big, true);
  auto after = files->Append(Payload(2), false);
  ASSERT_TRUE(small.ok() && large.ok() && after.ok());
  EXPECT_EQ(large->offset, small->offset + small->size);
  EXPECT_EQ(*files->Read(*small), Payload(1));
  EXPECT_TRUE(*files->Read(*large) == big);  // (not EXPECT_EQ: 9 MiB in a failure message)
  EXPECT_EQ(*files->Read(*after), Payload(2));
}

TEST_P(SegmentFilesTest, SealedSegmentIsWrittenBeforeTheNextOne) {
  auto files = Open(64 << 20);
  if (direct_refused_) GTEST_SKIP() << "O_DIRECT refused by the file system under " << dir_;
  auto a = files->Append(Payload(3), false);
  ASSERT_TRUE(a.ok());
  files->Commit(*a);
  ASSERT_TRUE(files->Seal().ok());
  auto b = files->Append(Payload(4), false);
  ASSERT_TRUE(b.ok());
  files->Commit(*b);
  EXPECT_NE(a->segment, b->segment);
  EXPECT_EQ(*files->Read(*a), Payload(3));
  EXPECT_EQ(*files->Read(*b), Payload(4));
}

INSTANTIATE_TEST_SUITE_P(WriteModes, SegmentFilesTest, ::testing::Values(true, false),
                         [](const auto& p) { return p.param ? "Direct" : "Buffered"; });

}  // namespace
}  // namespace ds41

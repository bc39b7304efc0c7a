#include "bench/loopback_pipe.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <random>

namespace ds41 {
namespace {

class LoopbackPipeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("loopback_pipe_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    const std::string probe = dir_ + "/probe";
    const int fd = ::open(probe.c_str(), O_CREAT | O_WRONLY | O_DIRECT, 0644);
    if (fd < 0) GTEST_SKIP() << "O_DIRECT refused by the file system under " << dir_;
    ::close(fd);
    ::unlink(probe.c_str());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string dir_;
};

// Units of odd sizes, so that calls and 4 MiB blocks end mid-unit and reads start off a 4 KiB boundary.
std::vector<std::string> OddUnits() {
  std::mt19937 rng(7);
  std::vector<std::string> units;
  for (size_t n : {300000u, 1u, 123457u, 4096u, 65537u}) {
    std::string u(n, '\0');
    for (char& b : u) b = static_cast<char>(rng());
    units.push_back(std::move(u));
  }
  return units;
}

TEST_F(LoopbackPipeTest, GetsBackWhatItPut) {
  const std::vector<std::string> units = OddUnits();
  const std::vector<std::string_view> views(units.begin(), units.end());
  // About 10 MB per client: put calls of ~5.5 MB (two blocks each), get calls across the blocks.
  PipeRun run;
  run.clients = 3;
  run.units_per_client = 99;
  run.put_call_units = 50;
  run.get_call_units = 7;
  run.verify = true;
  const PipeThroughput r = MeasureLoopbackPipe(dir_, run, views);
  EXPECT_TRUE(r.ok);
  EXPECT_GT(r.put_bps, 0);
  EXPECT_GT(r.get_bps, 0);
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/loopback-pipe.tmp"));
}

TEST_F(LoopbackPipeTest, OneUnitCallsAndOneClient) {
  const std::vector<std::string> units = OddUnits();
  const std::vector<std::string_view> views(units.begin(), units.end());
  PipeRun run;
  run.units_per_client = 12;
  run.verify = true;
  EXPECT_TRUE(MeasureLoopbackPipe(dir_, run, views).ok);
}

TEST_F(LoopbackPipeTest, RefusesEmptyRuns) {
  const std::string unit(100, 'u');
  PipeRun run;
  run.units_per_client = 1;
  EXPECT_FALSE(MeasureLoopbackPipe(dir_, run, {}).ok);
  run.clients = 0;
  EXPECT_FALSE(MeasureLoopbackPipe(dir_, run, {unit}).ok);
  EXPECT_FALSE(MeasureLoopbackPipe(dir_ + "/missing", PipeRun{1, 1, 1, 1, false}, {unit}).ok);
}

}  // namespace
}  // namespace ds41

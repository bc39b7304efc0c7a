// Plots: the PNGs are written when gnuplot is there, and its absence is a clear error.
#include "trace/plot.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace ds41 {
namespace {

PlotRun FakeRun(const std::string& label, double scale) {
  PlotRun run;
  run.label = label;
  for (int i = 0; i < 20; ++i) {
    RequestRecord r;
    r.ttft_s = scale * (0.1 + 0.05 * i);
    r.e2e_s = r.ttft_s + 1;
    if (i == 19) r.outcome = std::string(kOutcomeTimeout);
    run.records.push_back(r);
  }
  run.summary = Summarize(run.records, {}, {}, 10);
  run.summary.label = label;
  return run;
}

bool IsPng(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char sig[8] = {};
  in.read(sig, 8);
  return in && std::string(sig + 1, 3) == "PNG";
}

TEST(PlotTest, MissingGnuplotIsAClearError) {
  auto r = PlotRuns({FakeRun("a", 1)}, testing::TempDir() + "plots_none", "/nonexistent/gnuplot");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("gnuplot-nox"), std::string::npos);
}

TEST(PlotTest, CdfAndLoadSweep) {
  if (::access("/usr/bin/gnuplot", X_OK) != 0) GTEST_SKIP() << "gnuplot is not installed (apt-get install gnuplot-nox)";
  const std::string dir = testing::TempDir() + "plots_" + std::to_string(::getpid());
  auto cdf_only = PlotRuns({FakeRun("alone", 1), FakeRun("other", 2)}, dir);
  ASSERT_TRUE(cdf_only.ok()) << cdf_only.status().ToString();
  ASSERT_EQ(cdf_only->size(), 1u);
  EXPECT_TRUE(IsPng((*cdf_only)[0]));
  auto sweep = PlotRuns({FakeRun("rr@1", 1), FakeRun("rr@2", 2), FakeRun("cost@1", 0.5), FakeRun("cost@2", 0.8)}, dir);
  ASSERT_TRUE(sweep.ok()) << sweep.status().ToString();
  ASSERT_EQ(sweep->size(), 3u);
  for (const std::string& p : *sweep) EXPECT_TRUE(IsPng(p)) << p;
  // Loads that are not numbers: categorical axis.
  auto named = PlotRuns({FakeRun("rr@low", 1), FakeRun("rr@high", 2)}, dir);
  ASSERT_TRUE(named.ok()) << named.status().ToString();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ds41

#include "util/thread_scratch.h"

#include <gtest/gtest.h>

#include <thread>

namespace ds41 {
namespace {

ThreadScratch<float>& Floats() {
  thread_local ThreadScratch<float> v;
  return v;
}
ThreadScratch<int>& Ints() {
  thread_local ThreadScratch<int> v;
  return v;
}

TEST(ThreadScratchTest, ReleaseFreesEveryBufferOfTheCallingThreadOnly) {
  Floats().resize(1000, 1.0f);
  Ints().resize(500, 7);
  EXPECT_GE(ThreadScratchBytes(), 1000 * sizeof(float) + 500 * sizeof(int));
  std::thread other([] {
    Floats().resize(300);
    EXPECT_GE(ThreadScratchBytes(), 300 * sizeof(float));
    ReleaseThreadScratch();  // another thread's release: ours stay
    EXPECT_EQ(Floats().capacity(), 0u);
    EXPECT_EQ(ThreadScratchBytes(), 0u);
  });
  other.join();
  EXPECT_EQ(Floats().size(), 1000u);
  EXPECT_EQ(Ints()[499], 7);
  {
    ScratchReleaser releaser;
  }
  EXPECT_EQ(Floats().capacity(), 0u);
  EXPECT_EQ(Ints().capacity(), 0u);
  EXPECT_EQ(ThreadScratchBytes(), 0u);
  Floats().resize(10);  // usable again after a release
  EXPECT_EQ(Floats().size(), 10u);
  ReleaseThreadScratch();
}

}  // namespace
}  // namespace ds41

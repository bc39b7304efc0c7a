#include "util/task_group.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace ds41 {
namespace {

// Wait returns only once the group's tasks, the ones they schedule and what it holds are done;
// another owner's tasks on the same pool are not waited for.
TEST(TaskGroupTest, WaitCoversTheGroupsOwnTasksOnly) {
  ThreadPool pool(3, ThreadPool::Idle::kSleep, "tg-test");
  std::atomic<bool> release_other{false};
  TaskGroup other(&pool);
  other.Schedule([&] {
    while (!release_other.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  std::atomic<int> done{0};
  {
    TaskGroup mine(&pool);
    for (int i = 0; i < 20; ++i) {
      mine.Schedule([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        mine.Schedule([&] { done.fetch_add(1); });  // scheduled by a task of the group
        done.fetch_add(1);
      });
    }
    mine.Hold();
    std::thread late([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
      mine.Schedule([&] { done.fetch_add(100); });
      mine.Release();
    });
    mine.Wait();
    EXPECT_EQ(done.load(), 140);
    late.join();
  }  // (and the destructor waits too: nothing left)
  release_other = true;
  other.Wait();
}

TEST(TaskGroupTest, WithoutAPoolTasksRunInline) {
  TaskGroup g(nullptr);
  const std::thread::id caller = std::this_thread::get_id();
  std::thread::id ran;
  g.Schedule([&] { ran = std::this_thread::get_id(); });
  EXPECT_EQ(ran, caller);
  g.Wait();
}

}  // namespace
}  // namespace ds41

#include "util/task_group.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <utility>
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

// After Wait, nothing a task captured is left on a pool thread: its last reference goes before
// the task counts as done (a data-path session's socket must not outlive its server's Wait).
TEST(TaskGroupTest, WhatATaskCapturedIsGoneWhenWaitReturns) {
  ThreadPool pool(2, ThreadPool::Idle::kSleep, "tg-test");
  // A capture whose destruction takes a while: Wait must not return before it has finished.
  struct SlowToGo {
    std::atomic<bool>* gone;
    SlowToGo(std::atomic<bool>* g) : gone(g) {}
    SlowToGo(SlowToGo&& o) noexcept : gone(std::exchange(o.gone, nullptr)) {}
    ~SlowToGo() {
      if (gone == nullptr) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      gone->store(true);
    }
  };
  for (int round = 0; round < 5; ++round) {
    std::atomic<bool> gone{false};
    TaskGroup g(&pool);
    g.Schedule([slow = SlowToGo(&gone)] {});
    g.Wait();
    ASSERT_TRUE(gone.load()) << round;
  }
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

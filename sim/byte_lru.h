// ByteLru: a byte-bounded least-recently-used table with an idle time-to-live, the shape of every
// cache the simulator models — the store's units, a node's SWA pool, a decoder's warm sessions.
// Entries past their TTL (idle since their last touch) count as absent and are dropped when met;
// beyond the byte budget the least recently used go first (an entry alone over the budget too).
// O(1) per operation plus what it evicts; the list lives in a slot vector (no allocation per entry
// once warmed up). Not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "sim/flat_index.h"
#include "sim/huge_pages.h"

namespace ds41::sim {

template <typename Value>
class ByteLru {
 public:
  // ttl_s <= 0: entries never expire.
  ByteLru(uint64_t capacity_bytes, double ttl_s) : capacity_(capacity_bytes), ttl_s_(ttl_s) {}

  // Called with each entry evicted (capacity or TTL), not with Erase's.
  void set_on_evict(std::function<void(uint64_t key, const Value&)> f) { on_evict_ = std::move(f); }

  // The entry, touched (most recent now); nullptr when absent or expired.
  Value* Find(uint64_t key, double now) {
    const int32_t s = Live(key, now);
    if (s < 0) return nullptr;
    Unlink(s);
    PushFront(s);
    slots_[s].used = now;
    return &slots_[s].value;
  }
  // The entry without touching it (an expired one is dropped); nullptr when absent.
  const Value* Peek(uint64_t key, double now) {
    const int32_t s = Live(key, now);
    return s < 0 ? nullptr : &slots_[s].value;
  }
  bool Contains(uint64_t key, double now) { return Live(key, now) >= 0; }

  // Keeps `value` under `key` (replacing the entry there) as the most recent, then evicts.
  void Put(uint64_t key, uint64_t bytes, Value value, double now) {
    int32_t& at = index_.FindOrInsert(key);
    int32_t s = at;
    if (s >= 0) {  // replace in place
      Unlink(s);
      bytes_ -= slots_[s].bytes;
    } else {
      if (!free_.empty()) {
        s = free_.back();
        free_.pop_back();
      } else {
        s = static_cast<int32_t>(slots_.size());
        slots_.emplace_back();
      }
      at = s;  // before anything else touches the index
    }
    Slot& e = slots_[s];
    e.key = key;
    e.bytes = bytes;
    e.used = now;
    e.value = std::move(value);
    PushFront(s);
    bytes_ += bytes;
    Evict(now);
  }

  // Removes the entry; returns whether there was one (its value into *out when given).
  bool Erase(uint64_t key, Value* out = nullptr) {
    const int32_t s = index_.Find(key);
    if (s < 0) return false;
    if (out) *out = std::move(slots_[s].value);
    Remove(s);
    return true;
  }

  // Starts loading the index slot of `key` (see FlatIndex::Prefetch).
  void Prefetch(uint64_t key) const { index_.Prefetch(key); }

  // Makes room for `n` entries up front: no slot copy or index rehash until there are more.
  void Reserve(size_t n) {
    slots_.reserve(n);
    AdviseHugePages(slots_.data(), slots_.capacity() * sizeof(Slot));
    index_.Reserve(n);
  }

  // Drops expired entries from the old end (the budget is enforced at every Put).
  void Expire(double now) { Evict(now); }

  uint64_t bytes() const { return bytes_; }
  size_t size() const { return index_.size(); }
  uint64_t capacity() const { return capacity_; }
  uint64_t evicted_capacity() const { return evicted_capacity_; }
  uint64_t evicted_ttl() const { return evicted_ttl_; }

  // Each live entry, most recent first.
  template <typename F>
  void ForEach(F&& f) const {
    for (int32_t s = head_; s >= 0; s = slots_[s].next) f(slots_[s].key, slots_[s].value);
  }

 private:
  struct Slot {
    uint64_t key = 0;
    uint64_t bytes = 0;
    double used = 0;
    int32_t prev = -1, next = -1;
    Value value{};
  };
  bool Expired(const Slot& e, double now) const { return ttl_s_ > 0 && now - e.used > ttl_s_; }
  int32_t Live(uint64_t key, double now) {
    const int32_t s = index_.Find(key);
    if (s < 0) return -1;
    if (Expired(slots_[s], now)) {
      ++evicted_ttl_;
      if (on_evict_) on_evict_(key, slots_[s].value);
      Remove(s);
      return -1;
    }
    return s;
  }
  void Unlink(int32_t s) {
    Slot& e = slots_[s];
    (e.prev >= 0 ? slots_[e.prev].next : head_) = e.next;
    (e.next >= 0 ? slots_[e.next].prev : tail_) = e.prev;
    e.prev = e.next = -1;
  }
  void PushFront(int32_t s) {
    Slot& e = slots_[s];
    e.prev = -1;
    e.next = head_;
    if (head_ >= 0) slots_[head_].prev = s;
    head_ = s;
    if (tail_ < 0) tail_ = s;
  }
  void Remove(int32_t s) {
    Unlink(s);
    bytes_ -= slots_[s].bytes;
    index_.Erase(slots_[s].key);
    slots_[s].value = Value{};
    free_.push_back(s);
  }
  void Evict(double now) {
    while (tail_ >= 0) {
      Slot& e = slots_[tail_];
      const bool expired = Expired(e, now);
      if (bytes_ <= capacity_ && !expired) break;
      ++(expired ? evicted_ttl_ : evicted_capacity_);
      if (on_evict_) on_evict_(e.key, e.value);
      Remove(tail_);
    }
  }

  const uint64_t capacity_;
  const double ttl_s_;
  std::vector<Slot> slots_;
  std::vector<int32_t> free_;
  FlatIndex index_;
  int32_t head_ = -1, tail_ = -1;
  uint64_t bytes_ = 0;
  uint64_t evicted_capacity_ = 0, evicted_ttl_ = 0;
  std::function<void(uint64_t, const Value&)> on_evict_;
};

}  // namespace ds41::sim

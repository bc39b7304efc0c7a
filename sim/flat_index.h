// FlatIndex: uint64 key -> int32 slot, open addressing with linear probing and backward-shift
// deletion. The simulator's caches hold tens of millions of units; a node-based hash map costs two
// or three cache misses a lookup there, this one about one. Not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "sim/huge_pages.h"

namespace ds41::sim {

class FlatIndex {
 public:
  FlatIndex() { Rehash(16); }

  // The value under `key`, or -1.
  int32_t Find(uint64_t key) const {
    for (size_t i = Home(key);; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.value < 0) return -1;
      if (s.key == key) return s.value;
    }
  }
  // The value slot under `key`, inserted as -1 when absent (the caller sets it to a value >= 0
  // before any other call): one probe for a lookup that may insert.
  int32_t& FindOrInsert(uint64_t key) {
    if ((size_ + 1) * 2 > slots_.size()) Rehash(slots_.size() * 2);
    for (size_t i = Home(key);; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (s.value < 0) {
        s.key = key;
        ++size_;
        return s.value;
      }
      if (s.key == key) return s.value;
    }
  }
  // Inserts or replaces. REQUIRES: value >= 0.
  void Put(uint64_t key, int32_t value) {
    if ((size_ + 1) * 2 > slots_.size()) Rehash(slots_.size() * 2);
    for (size_t i = Home(key);; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (s.value < 0) {
        s = Slot{key, value};
        ++size_;
        return;
      }
      if (s.key == key) {
        s.value = value;
        return;
      }
    }
  }
  bool Erase(uint64_t key) {
    size_t i = Home(key);
    for (;; i = (i + 1) & mask_) {
      if (slots_[i].value < 0) return false;
      if (slots_[i].key == key) break;
    }
    // Backward shift: move later entries of the run into the hole when their home allows it.
    for (size_t j = (i + 1) & mask_;; j = (j + 1) & mask_) {
      if (slots_[j].value < 0) break;
      const size_t h = Home(slots_[j].key);
      // Movable when h is not in the cyclic range (i, j].
      if ((j > i && (h <= i || h > j)) || (j < i && (h <= i && h > j))) {
        slots_[i] = slots_[j];
        i = j;
      }
    }
    slots_[i].value = -1;
    --size_;
    return true;
  }
  size_t size() const { return size_; }
  // Starts loading `key`'s home slot: a prompt's units are looked up one after another at random
  // places in a table far larger than the caches, so misses overlap when their keys are known ahead.
  void Prefetch(uint64_t key) const { __builtin_prefetch(&slots_[Home(key)]); }
  // Grows the table now so that `n` keys fit without a rehash (a rehash re-inserts every key, one
  // cache miss each, and holds the old and the new table at once).
  void Reserve(size_t n) {
    size_t cap = slots_.size();
    while ((n + 1) * 2 > cap) cap *= 2;
    if (cap > slots_.size()) Rehash(cap);
  }

 private:
  struct Slot {
    uint64_t key = 0;
    int32_t value = -1;  // -1: empty
  };
  size_t Home(uint64_t key) const { return static_cast<size_t>((key * 0x9e3779b97f4a7c15ULL) >> shift_); }
  void Rehash(size_t n) {
    std::vector<Slot> old;
    old.swap(slots_);
    slots_.reserve(n);
    AdviseHugePages(slots_.data(), n * sizeof(Slot));
    slots_.assign(n, Slot{});
    mask_ = n - 1;
    shift_ = 64;
    for (size_t k = n; k > 1; k >>= 1) --shift_;
    size_ = 0;
    for (const Slot& s : old)
      if (s.value >= 0) Put(s.key, s.value);
  }

  std::vector<Slot> slots_;
  size_t mask_ = 0;
  int shift_ = 64;
  size_t size_ = 0;
};

}  // namespace ds41::sim

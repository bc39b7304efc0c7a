#include "engine/expert_cache.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

namespace ds41 {
namespace {

size_t Fp4Bytes(const Fp4Linear& w) { return static_cast<size_t>(w.out * w.in / 2); }
size_t Fp4ScaleBytes(const Fp4Linear& w) { return static_cast<size_t>(w.out * (w.in / 32)); }
size_t TileScaleBytes(const Fp4Linear& w) { return w.tiles ? static_cast<size_t>(Fp4ScaleTilesBytes(w.out, w.in)) : 0; }
size_t CodeBytes(const Fp4Linear& w) { return w.tiles ? static_cast<size_t>(Fp4TilesBytes(w.out, w.in)) : Fp4Bytes(w); }

// Drops our mapping's pages of [p, p + n) (page-aligned inside); the file stays intact.
void ReleaseMapped(const uint8_t* p, size_t n) {
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t lo = (reinterpret_cast<uintptr_t>(p) + page - 1) & ~(page - 1);
  const uintptr_t hi = (reinterpret_cast<uintptr_t>(p) + n) & ~(page - 1);
  if (hi > lo) madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_DONTNEED);
}

}  // namespace

ExpertCache::ExpertCache(const ModelWeights& weights, uint64_t budget_bytes) : weights_(weights), budget_(budget_bytes) {}

std::shared_ptr<const CachedExpert> ExpertCache::Acquire(int layer, int expert) {
  const int64_t id = static_cast<int64_t>(layer) * 1'000'000 + expert;
  {
    MutexLock l(&mu_);
    auto it = map_.find(id);
    if (it != map_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second.pos);
      ++hits_;
      return it->second.expert;
    }
  }
  ++misses_;
  const ExpertWeights& src = weights_.layers[layer].experts[expert];
  auto e = std::make_shared<CachedExpert>();
  const Fp4Linear* parts[3] = {&src.w1, &src.w3, &src.w2};
  size_t total = 0;
  for (const Fp4Linear* w : parts) total += CodeBytes(*w) + Fp4ScaleBytes(*w) + TileScaleBytes(*w);
  e->bytes.resize(total);
  uint8_t* p = e->bytes.data();
  Fp4Linear* dst[3] = {&e->weights.w1, &e->weights.w3, &e->weights.w2};
  for (int i = 0; i < 3; ++i) {
    // The codes in the layout the matmul reads: tile-major when the model has it, else row-major.
    const Fp4Linear& w = *parts[i];
    const uint8_t* codes = w.tiles ? w.tiles : w.packed;
    const size_t n = CodeBytes(w), ns = Fp4ScaleBytes(w), nt = TileScaleBytes(w);
    std::memcpy(p, codes, n);
    std::memcpy(p + n, w.scales, ns);
    if (nt > 0) std::memcpy(p + n + ns, w.tile_scales, nt);
    *dst[i] = w.tiles ? Fp4Linear{w.packed, p + n, w.out, w.in, p, p + n + ns} : Fp4Linear{p, p + n, w.out, w.in};
    ReleaseMapped(codes, n);
    p += n + ns + nt;
  }
  MutexLock l(&mu_);
  auto it = map_.find(id);
  if (it != map_.end()) return it->second.expert;  // loaded concurrently
  lru_.push_front(id);
  map_[id] = Slot{e, lru_.begin()};
  resident_ += total;
  while (resident_ > budget_ && lru_.size() > 1) {
    const int64_t victim = lru_.back();
    lru_.pop_back();
    auto v = map_.find(victim);
    resident_ -= v->second.expert->bytes.size();
    map_.erase(v);
    ++evictions_;
  }
  return e;
}

}  // namespace ds41

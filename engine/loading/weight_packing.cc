#include "engine/loading/weight_packing.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>
#include <vector>

#include "engine/kernels/vector_ops.h"
#include "engine/loading/weight_tiles.h"

namespace ds41 {
namespace {

constexpr char kMagic[8] = {'D', 'S', '4', '1', 'T', 'I', 'L', '1'};
constexpr size_t kDataAlign = 4096;

// One matmul weight to pack: its name (for the identity), format, shape, source codes and the view
// field that receives the copy's address.
struct Target {
  std::string name;
  enum Format { kFp8, kFp4, kBf16, kFp4Scales } format = kFp8;
  int64_t n = 0, k = 0;
  const uint8_t* codes = nullptr;
  const uint8_t** tiles = nullptr;
  size_t offset = 0;  // from the data start
  ExponentRange* exponents = nullptr;  // bf16: the view's range, measured on the bound copy
  size_t bytes() const {
    switch (format) {
      case kFp8: return static_cast<size_t>(Fp8TilesBytes(n, k));
      case kFp4: return static_cast<size_t>(Fp4TilesBytes(n, k));
      case kBf16: return static_cast<size_t>(Bf16TilesBytes(n, k));
      case kFp4Scales: return static_cast<size_t>(Fp4ScaleTilesBytes(n, k));
    }
    return 0;
  }
  size_t source_bytes() const {
    switch (format) {
      case kFp8: return static_cast<size_t>(n * k);
      case kFp4: return static_cast<size_t>(n * k / 2);
      case kBf16: return static_cast<size_t>(2 * n * k);
      case kFp4Scales: return static_cast<size_t>(n * (k / 32));
    }
    return 0;
  }
};

std::vector<Target> Targets(ModelWeights* w) {
  std::vector<Target> out;
  auto fp8 = [&](const std::string& name, Fp8Linear& l) {
    if (l.codes != nullptr) out.push_back({name, Target::kFp8, l.out, l.in, l.codes, &l.tiles});
  };
  auto fp4 = [&](const std::string& name, Fp4Linear& l) {
    if (l.packed == nullptr) return;
    out.push_back({name, Target::kFp4, l.out, l.in, l.packed, &l.tiles});
    out.push_back({name + ".scales", Target::kFp4Scales, l.out, l.in, l.scales, &l.tile_scales});
  };
  auto bf16 = [&](const std::string& name, Bf16View& v) {
    if (v.p == nullptr || v.cols % 32 != 0) return;
    out.push_back({name, Target::kBf16, v.rows, v.cols, v.p, &v.tiles});
    out.back().exponents = &v.exponents;
  };
  bf16("head", w->head);
  auto block = [&](const std::string& p, LayerWeights& L) {
    fp8(p + "wq_a", L.wq_a);
    fp8(p + "wq_b", L.wq_b);
    fp8(p + "wkv", L.wkv);
    fp8(p + "wo_a", L.wo_a);
    fp8(p + "wo_b", L.wo_b);
    fp8(p + "idx_wq_b", L.idx_wq_b);
    fp8(p + "sh_w1", L.sh_w1);
    fp8(p + "sh_w2", L.sh_w2);
    fp8(p + "sh_w3", L.sh_w3);
    fp8(p + "engram_wkv", L.engram_wkv);
    bf16(p + "comp_wkv", L.comp_wkv);
    bf16(p + "comp_wgate", L.comp_wgate);
    bf16(p + "idx_wk", L.idx_wk);
    bf16(p + "idx_weights_proj", L.idx_weights_proj);
    bf16(p + "gate", L.gate);
    for (size_t e = 0; e < L.experts.size(); ++e) {
      const std::string q = p + "experts." + std::to_string(e) + ".";
      fp4(q + "w1", L.experts[e].w1);
      fp4(q + "w2", L.experts[e].w2);
      fp4(q + "w3", L.experts[e].w3);
    }
  };
  for (size_t i = 0; i < w->layers.size(); ++i) block("layers." + std::to_string(i) + ".", w->layers[i]);
  // DSpark layers after the backbone, so a checkpoint without them packs exactly as before.
  for (size_t k = 0; k < w->dspark.layers.size(); ++k) block("mtp." + std::to_string(k) + ".", w->dspark.layers[k]);
  fp8("mtp.main_proj", w->dspark.main_proj);
  bf16("mtp.markov_head", w->dspark.markov_head);
  // The vision tower last, likewise (the patch embedding's 3·p·p inputs are no whole K block: unpacked).
  for (size_t b = 0; b < w->vision.blocks.size(); ++b) {
    VisionBlockWeights& vb = w->vision.blocks[b];
    const std::string p = "vision.blocks." + std::to_string(b) + ".";
    bf16(p + "wqkv", vb.wqkv);
    bf16(p + "wo", vb.wo);
    bf16(p + "w1", vb.w1);
    bf16(p + "w2", vb.w2);
  }
  bf16("aligner.w1", w->vision.aligner_w1);
  bf16("aligner.w2", w->vision.aligner_w2);
  return out;
}

// What the copy is derived from: the checkpoint files (name, size, mtime) and the packed layout.
std::string Identity(const SafetensorsCheckpoint& ckpt, const std::vector<Target>& targets) {
  std::string id = "ds41 tile-major weights v3 (16 rows x 32 k; formats 0 fp8, 1 fp4, 2 bf16, 3 fp4 scales)\n";
  for (const MappedFile& f : ckpt.files()) {
    struct stat st {};
    ::stat(f.path().c_str(), &st);
    const std::string base = f.path().substr(f.path().rfind('/') + 1);
    id += "file " + base + " " + std::to_string(st.st_size) + " " + std::to_string(st.st_mtim.tv_sec) + "." +
          std::to_string(st.st_mtim.tv_nsec) + "\n";
  }
  for (const Target& t : targets)
    id += t.name + " " + std::to_string(static_cast<int>(t.format)) + " " + std::to_string(t.n) + "x" + std::to_string(t.k) + " @" +
          std::to_string(t.offset) + "\n";
  return id;
}

size_t DataStart(const std::string& identity) {
  return (sizeof(kMagic) + 8 + identity.size() + kDataAlign - 1) / kDataAlign * kDataAlign;
}

void Pack(const Target& t, uint8_t* out) {
  switch (t.format) {
    case Target::kFp8: PackFp8Tiles(t.codes, t.n, t.k, out); break;
    case Target::kFp4: PackFp4Tiles(t.codes, t.n, t.k, out); break;
    case Target::kBf16: PackBf16Tiles(t.codes, t.n, t.k, out); break;
    case Target::kFp4Scales: PackFp4ScaleTiles(t.codes, t.n, t.k, out); break;
  }
  // The row-major source is not read by the matmuls any more: drop its pages from this process
  // (they stay in the page cache for whoever else maps the checkpoint).
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t b = (reinterpret_cast<uintptr_t>(t.codes) + page - 1) / page * page;
  const uintptr_t e = (reinterpret_cast<uintptr_t>(t.codes) + t.source_bytes()) / page * page;
  if (e > b) madvise(reinterpret_cast<void*>(b), e - b, MADV_DONTNEED);
}

bool Matches(const MappedFile& f, const std::string& identity, size_t total) {
  if (f.size() != total || std::memcmp(f.data(), kMagic, sizeof(kMagic)) != 0) return false;
  uint64_t len = 0;
  std::memcpy(&len, f.data() + sizeof(kMagic), 8);
  return len == identity.size() && std::memcmp(f.data() + sizeof(kMagic) + 8, identity.data(), len) == 0;
}

Status ErrnoError(const std::string& what, const std::string& path) {
  return UnavailableError(what + " " + path + ": " + std::strerror(errno));
}

// Writes the whole file under a temporary name, syncs it and renames it into place: readers only
// ever see a complete file (two processes building at once both succeed; the last rename wins).
Status WriteTilesFile(const std::string& path, const std::string& identity, const std::vector<Target>& targets,
                      size_t total) {
  std::random_device rd;
  const std::string tmp = path + ".tmp." + std::to_string(getpid()) + "." + std::to_string(rd());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoError("cannot create", tmp);
  auto fail = [&](const std::string& what) {
    Status s = ErrnoError(what, tmp);
    ::close(fd);
    ::unlink(tmp.c_str());
    return s;
  };
  auto write_at = [&](const void* p, size_t n, size_t off) {
    const char* c = static_cast<const char*>(p);
    while (n > 0) {
      const ssize_t w = ::pwrite(fd, c, n, static_cast<off_t>(off));
      if (w <= 0) return false;
      c += w;
      n -= static_cast<size_t>(w);
      off += static_cast<size_t>(w);
    }
    return true;
  };
  if (::ftruncate(fd, static_cast<off_t>(total)) != 0) return fail("cannot size");
  const uint64_t len = identity.size();
  if (!write_at(kMagic, sizeof(kMagic), 0) || !write_at(&len, 8, sizeof(kMagic)) ||
      !write_at(identity.data(), identity.size(), sizeof(kMagic) + 8))
    return fail("cannot write");
  const size_t start = DataStart(identity);
  std::vector<uint8_t> buf;
  for (const Target& t : targets) {
    buf.resize(t.bytes());
    Pack(t, buf.data());
    if (!write_at(buf.data(), buf.size(), start + t.offset)) return fail("cannot write");
  }
  if (::fdatasync(fd) != 0) return fail("cannot sync");
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    Status s = ErrnoError("cannot rename into place", tmp);
    ::unlink(tmp.c_str());
    return s;
  }
  return Status::Ok();
}

std::string GiB(size_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f GiB", static_cast<double>(bytes) / 1073741824.0);
  return buf;
}

}  // namespace

struct PackedWeights::Anonymous {
  uint8_t* p = nullptr;
  size_t n = 0;
  ~Anonymous() {
    if (p != nullptr) munmap(p, n);
  }
};

StatusOr<WeightTiles> ParseWeightTiles(const std::string& s) {
  if (s == "file") return WeightTiles::kFile;
  if (s == "memory") return WeightTiles::kMemory;
  if (s == "off") return WeightTiles::kOff;
  return InvalidArgumentError("weight tiles must be file, memory or off, not '" + s + "'");
}

StatusOr<PackedWeights> PackedWeights::Bind(const std::string& ckpt_dir, const SafetensorsCheckpoint& ckpt,
                                            ModelWeights* w, WeightTiles mode, const std::string& pack_dir) {
  PackedWeights out;
  if (mode == WeightTiles::kOff) return out;
  std::vector<Target> targets = Targets(w);
  size_t data = 0;
  for (Target& t : targets) {
    t.offset = data;
    data += (t.bytes() + 63) / 64 * 64;
  }
  out.bytes_ = data;
  const std::string identity = Identity(ckpt, targets);
  const size_t total = DataStart(identity) + data;
  const uint8_t* base = nullptr;
  std::string why_memory;
  if (mode == WeightTiles::kFile) {
    const std::string path = (pack_dir.empty() ? ckpt_dir : pack_dir) + "/" + kFileName;
    auto existing = MappedFile::Open(path);
    bool ready = existing.ok() && Matches(*existing, identity, total);
    bool built = false;
    if (!ready) {
      Status s = WriteTilesFile(path, identity, targets, total);
      if (!s.ok()) why_memory = ", " + s.message();
      if (s.ok()) {
        existing = MappedFile::Open(path);
        ready = existing.ok() && Matches(*existing, identity, total);
        built = ready;
      }
    }
    if (ready) {
      out.file_ = std::move(*existing);
      base = out.file_.data() + DataStart(identity);
      out.summary_ = "mapped from " + path + " (" + GiB(data) + (built ? ", built now" : "") + ")";
    }
  }
  if (base == nullptr) {  // kMemory, or a folder we cannot write
    auto mem = std::make_shared<Anonymous>();
    mem->n = std::max<size_t>(data, 1);
    void* p = mmap(nullptr, mem->n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return ResourceExhaustedError("cannot allocate " + GiB(data) + " for tile-major weights");
    mem->p = static_cast<uint8_t*>(p);
    for (const Target& t : targets) Pack(t, mem->p + t.offset);
    out.memory_ = std::move(mem);
    base = out.memory_->p;
    out.summary_ = "in memory (" + GiB(data) + why_memory + ")";
  }
  for (const Target& t : targets) {
    *t.tiles = base + t.offset;
    // (Rows past the end repeat the last row: the copy holds the same set of values.)
    if (t.exponents != nullptr)
      *t.exponents = Bf16ExponentRange(reinterpret_cast<const uint16_t*>(*t.tiles), static_cast<int64_t>(t.bytes() / 2));
  }
  return out;
}

}  // namespace ds41

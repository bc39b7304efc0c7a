#include "ckpt/writer.h"

#include <filesystem>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>

#include "ckpt/tensor_init.h"
#include "engine/loading/engram_layout.h"
#include "engine/loading/tensor_table.h"
#include "util/mapped_file.h"

namespace ds41 {
namespace {

using json = nlohmann::json;

struct Planned {
  TensorSpec spec;
  std::vector<StoredTensor> stored;
  uint64_t bytes = 0;
  int width = 0;  // element size, for ordering inside a shard (keeps every tensor aligned)
};

Status MakeDir(const std::string& d) {
  std::error_code ec;
  std::filesystem::create_directories(d, ec);
  if (ec) return UnavailableError("cannot create " + d + ": " + ec.message());
  return Status::Ok();
}

class File {
 public:
  static StatusOr<File> Create(const std::string& path) {
    File f;
    f.path_ = path;
    f.fp_ = std::fopen(path.c_str(), "wb");
    if (f.fp_ == nullptr) return UnavailableError("cannot create " + path + ": " + std::strerror(errno));
    return f;
  }
  File() = default;
  File(File&& o) noexcept : fp_(o.fp_), path_(std::move(o.path_)) { o.fp_ = nullptr; }
  ~File() {
    if (fp_) std::fclose(fp_);
  }
  Status Write(const void* p, size_t n) {
    if (n && std::fwrite(p, 1, n, fp_) != n) return UnavailableError("cannot write " + path_ + ": " + std::strerror(errno));
    return Status::Ok();
  }
  Status Close() {
    const int rc = std::fclose(fp_);
    fp_ = nullptr;
    return rc == 0 ? Status::Ok() : UnavailableError("cannot close " + path_);
  }

 private:
  FILE* fp_ = nullptr;
  std::string path_;
};

}  // namespace

Status FillEngramRowCounts(ModelConfig* c) {
  c->engram_num_embeddings.clear();
  for (const auto& moduli : EngramModuli(*c)) {
    int64_t rows = 0;
    for (int64_t m : moduli) rows += m;
    c->engram_num_embeddings.push_back(rows);
  }
  return c->Validate();
}

Status WriteCheckpoint(const ModelConfig& config, const CheckpointWriteOptions& opt) {
  DS41_RETURN_IF_ERROR(EngramLayout::Build(config).status());
  DS41_RETURN_IF_ERROR(MakeDir(opt.out_dir));

  std::vector<Planned> plan;
  uint64_t total = 0;
  ForEachTensor(config, [&](const TensorSpec& s) {
    Planned p;
    p.spec = s;
    p.stored = StoredTensors(s);
    for (const StoredTensor& st : p.stored) {
      uint64_t n = static_cast<uint64_t>(DTypeSize(st.dtype));
      for (int64_t d : st.shape) n *= static_cast<uint64_t>(d);
      p.bytes += n;
    }
    p.width = DTypeSize(p.stored[0].dtype);
    total += p.bytes;
    plan.push_back(std::move(p));
  });

  // Greedy shards in table order; a logical tensor (weight + scale) stays in one shard.
  std::vector<std::vector<const Planned*>> shards(1);
  uint64_t in_shard = 0;
  for (const Planned& p : plan) {
    if (in_shard > 0 && in_shard + p.bytes > opt.shard_bytes) {
      shards.emplace_back();
      in_shard = 0;
    }
    shards.back().push_back(&p);
    in_shard += p.bytes;
  }

  WriteProgress prog;
  prog.bytes_total = total;
  prog.tensors_total = static_cast<int>(plan.size());
  json weight_map = json::object();
  char name_buf[64];
  for (size_t si = 0; si < shards.size(); ++si) {
    std::snprintf(name_buf, sizeof(name_buf), "model-%05zu-of-%05zu.safetensors", si + 1, shards.size());
    const std::string shard_name = name_buf;
    // Wider elements first so every tensor starts aligned to its element size.
    std::vector<const Planned*> order = shards[si];
    std::stable_sort(order.begin(), order.end(), [](const Planned* a, const Planned* b) { return a->width > b->width; });
    json header = json::object();
    header["__metadata__"] = {{"format", "pt"}};
    uint64_t off = 0;
    for (const Planned* p : order) {
      for (const StoredTensor& st : p->stored) {
        uint64_t n = static_cast<uint64_t>(DTypeSize(st.dtype));
        for (int64_t d : st.shape) n *= static_cast<uint64_t>(d);
        header[st.name] = {{"dtype", std::string(DTypeName(st.dtype))}, {"shape", st.shape}, {"data_offsets", {off, off + n}}};
        off += n;
        weight_map[st.name] = shard_name;
      }
    }
    std::string h = header.dump();
    while ((h.size() + 8) % 8 != 0) h.push_back(' ');
    DS41_ASSIGN_OR_RETURN(File f, File::Create(opt.out_dir + "/" + shard_name));
    uint8_t len[8];
    for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(static_cast<uint64_t>(h.size()) >> (8 * i));
    DS41_RETURN_IF_ERROR(f.Write(len, 8));
    DS41_RETURN_IF_ERROR(f.Write(h.data(), h.size()));
    for (const Planned* p : order) {
      GeneratedTensor t = GenerateTensor(p->spec, opt.seed);
      DS41_RETURN_IF_ERROR(f.Write(t.data.data(), t.data.size()));
      DS41_RETURN_IF_ERROR(f.Write(t.scale.data(), t.scale.size()));
      prog.bytes_done += p->bytes;
      ++prog.tensors_done;
      prog.current = p->spec.name;
      if (opt.progress) opt.progress(prog);
    }
    DS41_RETURN_IF_ERROR(f.Close());
  }

  json index;
  index["metadata"] = {{"total_size", total}};
  index["weight_map"] = weight_map;
  DS41_RETURN_IF_ERROR(WriteStringToFile(opt.out_dir + "/model.safetensors.index.json", index.dump(2) + "\n"));
  DS41_RETURN_IF_ERROR(WriteStringToFile(opt.out_dir + "/config.json", config.ToJson()));
  if (!config.engram_layer_ids.empty()) {
    json map = SyntheticEngramTokenMap(config.vocab_size, config.engram_compressed_vocab_size);
    DS41_RETURN_IF_ERROR(WriteStringToFile(opt.out_dir + "/engram_token_map.json", map.dump() + "\n"));
  }
  return Status::Ok();
}

}  // namespace ds41

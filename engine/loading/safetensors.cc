#include "engine/loading/safetensors.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <sys/stat.h>

namespace ds41 {
namespace {

using json = nlohmann::json;

bool FileExists(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0;
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace

std::string_view DTypeName(DType t) {
  switch (t) {
    case DType::kF8E4M3: return "F8_E4M3";
    case DType::kF8E8M0: return "F8_E8M0";
    case DType::kI8: return "I8";
    case DType::kBF16: return "BF16";
    case DType::kF32: return "F32";
    case DType::kOther: break;
  }
  return "other";
}

DType DTypeFromName(std::string_view n) {
  if (n == "F8_E4M3") return DType::kF8E4M3;
  if (n == "F8_E8M0") return DType::kF8E8M0;
  if (n == "I8") return DType::kI8;
  if (n == "BF16") return DType::kBF16;
  if (n == "F32") return DType::kF32;
  return DType::kOther;
}

int DTypeSize(DType t) {
  switch (t) {
    case DType::kF8E4M3:
    case DType::kF8E8M0:
    case DType::kI8: return 1;
    case DType::kBF16: return 2;
    case DType::kF32: return 4;
    case DType::kOther: break;
  }
  return 0;
}

std::string TensorView::Describe() const { return dtype_name + " " + ShapeString(shape); }

size_t SafetensorsCheckpoint::mapped_bytes() const {
  size_t n = 0;
  for (const auto& f : files_) n += f.size();
  return n;
}

const TensorView* SafetensorsCheckpoint::Find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

StatusOr<std::vector<TensorView>> ParseSafetensorsShard(const uint8_t* base, size_t size, const std::string& file) {
  if (size < 8) return DataLossError(file + ": truncated (" + std::to_string(size) + " bytes, no header)");
  uint64_t header_len = 0;
  for (int i = 0; i < 8; ++i) header_len |= static_cast<uint64_t>(base[i]) << (8 * i);
  if (header_len > size - 8 || header_len > (100u << 20))
    return DataLossError(file + ": header length " + std::to_string(header_len) + " exceeds the file (" +
                         std::to_string(size) + " bytes): truncated or not a safetensors file");
  json header = json::parse(reinterpret_cast<const char*>(base + 8), reinterpret_cast<const char*>(base + 8 + header_len),
                            nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded() || !header.is_object()) return DataLossError(file + ": header is not a JSON object");
  const uint8_t* data = base + 8 + header_len;
  const size_t data_size = size - 8 - header_len;
  std::vector<TensorView> views;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    const std::string& name = it.key();
    const json& e = it.value();
    auto bad = [&](const std::string& what) { return DataLossError(file + ": tensor " + name + ": " + what); };
    if (!e.is_object() || !e.contains("dtype") || !e.contains("shape") || !e.contains("data_offsets"))
      return bad("entry needs dtype, shape and data_offsets");
    if (!e["dtype"].is_string() || !e["shape"].is_array() || !e["data_offsets"].is_array() || e["data_offsets"].size() != 2)
      return bad("malformed entry");
    TensorView v;
    v.name = name;
    v.file = file;
    v.dtype_name = e["dtype"].get<std::string>();
    v.dtype = DTypeFromName(v.dtype_name);
    int64_t elems = 1;
    for (const json& d : e["shape"]) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0) return bad("shape must be non-negative integers");
      v.shape.push_back(d.get<int64_t>());
      if (elems > 0 && v.shape.back() > (int64_t{1} << 40) / elems) return bad("shape too large");
      elems *= v.shape.back();
    }
    const json& off = e["data_offsets"];
    if (!off[0].is_number_unsigned() || !off[1].is_number_unsigned()) return bad("data_offsets must be non-negative");
    const uint64_t b = off[0].get<uint64_t>(), en = off[1].get<uint64_t>();
    if (b > en || en > data_size)
      return DataLossError(file + ": tensor " + name + " lies at bytes [" + std::to_string(b) + ", " + std::to_string(en) +
                           ") beyond the data (" + std::to_string(data_size) + " bytes): file truncated?");
    v.nbytes = static_cast<size_t>(en - b);
    const int esize = DTypeSize(v.dtype);
    if (esize > 0 && static_cast<uint64_t>(elems) * esize != v.nbytes)
      return bad(v.Describe() + " needs " + std::to_string(elems * esize) + " bytes, entry holds " + std::to_string(v.nbytes));
    v.data = data + b;
    views.push_back(std::move(v));
  }
  return views;
}

StatusOr<std::vector<std::pair<std::string, std::string>>> ParseSafetensorsIndex(std::string_view text,
                                                                                  const std::string& path) {
  json index = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (index.is_discarded() || !index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object())
    return DataLossError(path + ": expected an object with a weight_map");
  std::vector<std::pair<std::string, std::string>> entries;
  for (auto it = index["weight_map"].begin(); it != index["weight_map"].end(); ++it) {
    if (!it.value().is_string()) return DataLossError(path + ": weight_map[" + it.key() + "] is not a file name");
    const std::string f = it.value().get<std::string>();
    if (f.empty() || f.find('/') != std::string::npos || f == "." || f == "..")
      return DataLossError(path + ": weight_map[" + it.key() + "] = \"" + f + "\" is not a plain file name");
    entries.emplace_back(it.key(), f);
  }
  return entries;
}

Status SafetensorsCheckpoint::AddShard(const std::string& dir, const std::string& file) {
  DS41_ASSIGN_OR_RETURN(MappedFile mf, MappedFile::Open(dir + "/" + file));
  DS41_ASSIGN_OR_RETURN(std::vector<TensorView> views, ParseSafetensorsShard(mf.data(), mf.size(), file));
  for (TensorView& v : views) {
    if (tensors_.count(v.name)) return DataLossError("tensor " + v.name + " appears in " + tensors_[v.name].file + " and " + file);
    std::string name = v.name;
    tensors_.emplace(std::move(name), std::move(v));
  }
  files_.push_back(std::move(mf));
  return Status::Ok();
}

StatusOr<SafetensorsCheckpoint> SafetensorsCheckpoint::Open(const std::string& dir) {
  SafetensorsCheckpoint ck;
  const std::string index_path = dir + "/model.safetensors.index.json";
  if (!FileExists(index_path)) {
    if (!FileExists(dir + "/model.safetensors"))
      return NotFoundError(dir + ": neither model.safetensors.index.json nor model.safetensors");
    DS41_RETURN_IF_ERROR(ck.AddShard(dir, "model.safetensors"));
    return ck;
  }
  DS41_ASSIGN_OR_RETURN(std::string text, ReadFileToString(index_path));
  DS41_ASSIGN_OR_RETURN(auto entries, ParseSafetensorsIndex(text, index_path));
  std::vector<std::string> shards;
  for (const auto& [tensor, f] : entries)
    if (std::find(shards.begin(), shards.end(), f) == shards.end()) shards.push_back(f);
  for (const std::string& f : shards) DS41_RETURN_IF_ERROR(ck.AddShard(dir, f));
  for (const auto& [tensor, f] : entries) {
    const TensorView* v = ck.Find(tensor);
    if (v == nullptr) return DataLossError(index_path + " lists tensor " + tensor + " in " + f + ", which does not hold it");
    if (v->file != f) return DataLossError(index_path + " lists tensor " + tensor + " in " + f + " but it is in " + v->file);
  }
  return ck;
}

}  // namespace ds41

#include "engine/layers/state.h"

#include <algorithm>
#include <cstring>

#include "engine/loading/engram_layout.h"

namespace ds41 {
namespace {

constexpr char kMagic[8] = {'D', 'S', '4', '1', 'S', 'E', 'Q', '1'};
constexpr char kSwaMagic[8] = {'D', 'S', '4', '1', 'S', 'W', 'A', '1'};
constexpr uint32_t kVersion = 1;

uint64_t Fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

class Writer {
 public:
  template <typename T>
  void Pod(const T& v) {
    out_.append(reinterpret_cast<const char*>(&v), sizeof(T));
  }
  template <typename T>
  void Vec(const std::vector<T>& v) {
    Pod<uint64_t>(v.size());
    out_.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
  }
  void Raw(const char* p, size_t n) { out_.append(p, n); }
  std::string Take() { return std::move(out_); }

 private:
  std::string out_;
};

class Reader {
 public:
  // Reads s[offset, end); `s` must outlive the reader.
  Reader(const std::string& s, size_t offset) : p_(s.data() + offset), end_(s.data() + s.size()) {}
  template <typename T>
  bool Pod(T* v) {
    if (static_cast<size_t>(end_ - p_) < sizeof(T)) return false;
    std::memcpy(v, p_, sizeof(T));
    p_ += sizeof(T);
    return true;
  }
  // Reads a vector whose element count must equal `expect`.
  template <typename T>
  bool Vec(std::vector<T>* v, uint64_t expect) {
    uint64_t n;
    if (!Pod(&n) || n != expect) return false;
    if (static_cast<uint64_t>(end_ - p_) / sizeof(T) < n) return false;
    v->resize(n);
    std::memcpy(v->data(), p_, n * sizeof(T));
    p_ += n * sizeof(T);
    return true;
  }
  bool done() const { return p_ == end_; }

 private:
  const char* p_;
  const char* end_;
};

}  // namespace

uint64_t ConfigFingerprint(const ModelConfig& config) { return Fnv1a(config.ToJson()); }

SequenceState SequenceState::Create(const ModelConfig& c) {
  SequenceState s;
  s.rings.resize(c.n_layers);
  for (auto& r : s.rings) r.slots.assign(static_cast<size_t>(c.window_size) * c.window_entry_bytes(), 0);
  s.kv.resize(c.kv_source_layers.size());
  for (size_t i = 0; i < s.kv.size(); ++i) {
    const int m = c.compress_ratios[c.kv_source_layers[i]];
    s.kv[i].pending_kv.assign(static_cast<size_t>(m - 1) * c.head_dim, 0.0f);
    if (m > 1) s.kv[i].pending_gate.assign(static_cast<size_t>(m - 1) * c.head_dim, 0.0f);
  }
  s.engram_history.assign(c.engram_layer_ids.empty() ? 0 : c.engram_max_ngram_size - 1, kEngramBeforeStart);
  s.encoder_out.x.assign(static_cast<size_t>(c.window_size) * c.hc_dim(), 0);
  s.encoder_out.pre.assign(static_cast<size_t>(c.window_size) * c.hc_mult, 0.0f);
  return s;
}

size_t SequenceState::ByteSize() const {
  size_t n = sizeof(*this) + engram_history.size() * 8 + encoder_out.x.size() * 2 + encoder_out.pre.size() * 4;
  for (const auto& r : rings) n += r.slots.size();
  for (const auto& k : kv)
    n += k.main_kv.size() + k.index_keys.size() + 4 * (k.pending_kv.size() + k.pending_gate.size());
  return n;
}

std::string SequenceState::Serialize(const ModelConfig& c) const {
  Writer w;
  w.Raw(kMagic, sizeof(kMagic));
  w.Pod(kVersion);
  w.Pod(ConfigFingerprint(c));
  w.Pod(length);
  for (const auto& r : rings) {
    w.Pod(r.end);
    w.Pod(r.floor);
    w.Vec(r.slots);
  }
  for (const auto& k : kv) {
    w.Pod(k.processed);
    w.Vec(k.main_kv);
    w.Vec(k.index_keys);
    w.Vec(k.pending_kv);
    w.Vec(k.pending_gate);
  }
  w.Vec(engram_history);
  w.Pod(encoder_out.end);
  w.Pod(encoder_out.floor);
  w.Vec(encoder_out.x);
  w.Vec(encoder_out.pre);
  return w.Take();
}

StatusOr<SequenceState> SequenceState::Deserialize(const std::string& bytes, const ModelConfig& c) {
  auto bad = [](const std::string& what) { return DataLossError("sequence state: " + what); };
  if (bytes.size() < sizeof(kMagic) || std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0)
    return bad("not a serialized sequence state (bad magic)");
  Reader r(bytes, sizeof(kMagic));
  uint32_t version = 0;
  uint64_t fp = 0;
  if (!r.Pod(&version) || version != kVersion) return bad("unsupported version");
  if (!r.Pod(&fp)) return bad("truncated header");
  if (fp != ConfigFingerprint(c))
    return FailedPreconditionError("sequence state: made for a different model configuration");
  SequenceState s = Create(c);
  if (!r.Pod(&s.length) || s.length < 0) return bad("bad length");
  const uint64_t ring_bytes = static_cast<uint64_t>(c.window_size) * c.window_entry_bytes();
  for (auto& ring : s.rings) {
    if (!r.Pod(&ring.end) || !r.Pod(&ring.floor) || !r.Vec(&ring.slots, ring_bytes)) return bad("bad window ring");
    if (ring.end < 0 || ring.floor < 0 || ring.end > s.length) return bad("window ring beyond the sequence");
  }
  for (size_t i = 0; i < s.kv.size(); ++i) {
    auto& k = s.kv[i];
    const int m = c.compress_ratios[c.kv_source_layers[i]];
    if (!r.Pod(&k.processed) || k.processed < 0 || k.processed > s.length) return bad("bad kv source counter");
    const uint64_t e = static_cast<uint64_t>(k.processed / m);
    if (!r.Vec(&k.main_kv, e * c.main_kv_bytes()) || !r.Vec(&k.index_keys, e * c.index_key_bytes()) ||
        !r.Vec(&k.pending_kv, static_cast<uint64_t>(m - 1) * c.head_dim) ||
        !r.Vec(&k.pending_gate, m > 1 ? static_cast<uint64_t>(m - 1) * c.head_dim : 0))
      return bad("bad compressed KV of layer " + std::to_string(c.kv_source_layers[i]));
  }
  if (!r.Vec(&s.engram_history, s.engram_history.size())) return bad("bad engram history");
  if (!r.Pod(&s.encoder_out.end) || !r.Pod(&s.encoder_out.floor) ||
      !r.Vec(&s.encoder_out.x, static_cast<uint64_t>(c.window_size) * c.hc_dim()) ||
      !r.Vec(&s.encoder_out.pre, static_cast<uint64_t>(c.window_size) * c.hc_mult))
    return bad("bad encoder output ring");
  if (s.encoder_out.end < 0 || s.encoder_out.end > s.length) return bad("encoder output ring beyond the sequence");
  if (!r.done()) return bad("trailing bytes");
  return s;
}

std::string SequenceState::SerializeSwa(const ModelConfig& c) const {
  Writer w;
  w.Raw(kSwaMagic, sizeof(kSwaMagic));
  w.Pod(kVersion);
  w.Pod(ConfigFingerprint(c));
  w.Pod(length);
  for (int L = 0; L <= c.ced_split && L < c.n_layers; ++L) {
    w.Pod(rings[L].end);
    w.Pod(rings[L].floor);
    w.Vec(rings[L].slots);
  }
  for (const auto& k : kv) {
    w.Pod(k.processed);
    w.Vec(k.pending_kv);
    w.Vec(k.pending_gate);
  }
  w.Vec(engram_history);
  w.Pod(encoder_out.end);
  w.Pod(encoder_out.floor);
  w.Vec(encoder_out.x);
  w.Vec(encoder_out.pre);
  return w.Take();
}

StatusOr<int64_t> SequenceState::SwaPosition(const std::string& bytes, const ModelConfig& c) {
  if (bytes.size() < sizeof(kSwaMagic) || std::memcmp(bytes.data(), kSwaMagic, sizeof(kSwaMagic)) != 0)
    return DataLossError("SWA state: bad magic");
  Reader r(bytes, sizeof(kSwaMagic));
  uint32_t version = 0;
  uint64_t fp = 0;
  int64_t len = 0;
  if (!r.Pod(&version) || version != kVersion || !r.Pod(&fp) || !r.Pod(&len)) return DataLossError("SWA state: bad header");
  if (fp != ConfigFingerprint(c)) return FailedPreconditionError("SWA state: made for a different model configuration");
  return len;
}

Status SequenceState::RestoreSwa(const std::string& bytes, const ModelConfig& c) {
  DS41_ASSIGN_OR_RETURN(int64_t len, SwaPosition(bytes, c));
  auto bad = [](const std::string& what) { return DataLossError("SWA state: " + what); };
  if (len < 0) return bad("negative position");
  for (size_t i = 0; i < kv.size(); ++i) {
    const int m = c.compress_ratios[c.kv_source_layers[i]];
    if (kv[i].entries(m) != len / m)
      return FailedPreconditionError("SWA state at position " + std::to_string(len) + " but the global KV of layer " +
                                     std::to_string(c.kv_source_layers[i]) + " holds " +
                                     std::to_string(kv[i].entries(m)) + " entries");
  }
  SequenceState t = Create(c);  // parse into a scratch state so a failure changes nothing
  Reader r(bytes, sizeof(kSwaMagic) + 4 + 8 + 8);
  const uint64_t ring_bytes = static_cast<uint64_t>(c.window_size) * c.window_entry_bytes();
  for (int L = 0; L <= c.ced_split && L < c.n_layers; ++L) {
    WindowRing& ring = t.rings[L];
    if (!r.Pod(&ring.end) || !r.Pod(&ring.floor) || !r.Vec(&ring.slots, ring_bytes)) return bad("bad window ring");
    if (ring.end < 0 || ring.floor < 0 || ring.end > len) return bad("window ring beyond the position");
  }
  for (size_t i = 0; i < t.kv.size(); ++i) {
    const int m = c.compress_ratios[c.kv_source_layers[i]];
    auto& k = t.kv[i];
    if (!r.Pod(&k.processed) || k.processed != len ||
        !r.Vec(&k.pending_kv, static_cast<uint64_t>(m - 1) * c.head_dim) ||
        !r.Vec(&k.pending_gate, m > 1 ? static_cast<uint64_t>(m - 1) * c.head_dim : 0))
      return bad("bad compressor state");
  }
  if (!r.Vec(&t.engram_history, t.engram_history.size())) return bad("bad engram history");
  if (!r.Pod(&t.encoder_out.end) || !r.Pod(&t.encoder_out.floor) ||
      !r.Vec(&t.encoder_out.x, static_cast<uint64_t>(c.window_size) * c.hc_dim()) ||
      !r.Vec(&t.encoder_out.pre, static_cast<uint64_t>(c.window_size) * c.hc_mult))
    return bad("bad encoder output ring");
  if (t.encoder_out.end < 0 || t.encoder_out.end > len) return bad("encoder output ring beyond the position");
  if (!r.done()) return bad("trailing bytes");
  for (int L = 0; L <= c.ced_split && L < c.n_layers; ++L) rings[L] = std::move(t.rings[L]);
  for (size_t i = 0; i < kv.size(); ++i) {
    kv[i].processed = len;
    kv[i].pending_kv = std::move(t.kv[i].pending_kv);
    kv[i].pending_gate = std::move(t.kv[i].pending_gate);
  }
  engram_history = std::move(t.engram_history);
  encoder_out = std::move(t.encoder_out);
  length = len;
  return Status::Ok();
}

void BeginUndo(const ModelConfig& c, const SequenceState& s, int rows, StateUndo* u) {
  const int W = c.window_size, eb = c.window_entry_bytes(), HD = c.hc_dim(), hc = c.hc_mult;
  u->start = s.length;
  u->rows = rows;
  u->ring_slots.assign(s.rings.size(), std::vector<uint8_t>(static_cast<size_t>(u->rows) * eb));
  u->stream_x.resize(static_cast<size_t>(u->rows) * HD);
  u->stream_pre.resize(static_cast<size_t>(u->rows) * hc);
  for (int i = 0; i < u->rows; ++i) {
    const size_t slot = static_cast<size_t>((u->start + i) % W);
    for (size_t L = 0; L < s.rings.size(); ++L)
      std::copy_n(&s.rings[L].slots[slot * eb], eb, &u->ring_slots[L][static_cast<size_t>(i) * eb]);
    std::copy_n(&s.encoder_out.x[slot * HD], HD, &u->stream_x[static_cast<size_t>(i) * HD]);
    std::copy_n(&s.encoder_out.pre[slot * hc], hc, &u->stream_pre[static_cast<size_t>(i) * hc]);
  }
  u->kv.resize(s.kv.size());
  for (size_t k = 0; k < s.kv.size(); ++k) {
    StateUndo::Compressor& cu = u->kv[k];
    cu.pending_kv = s.kv[k].pending_kv;
    cu.pending_gate = s.kv[k].pending_gate;
    const size_t n = s.kv[k].pending_gate.empty() ? 0 : static_cast<size_t>(u->rows) * c.head_dim;
    cu.row_kv.assign(n, 0.0f);
    cu.row_gate.assign(n, 0.0f);
  }
  u->history.assign(1, s.engram_history);  // the pass appends one per row (ForwardPass::ComputeEngramRows)
}

Status RollBack(const ModelConfig& c, const StateUndo& u, int64_t length, SequenceState* s) {
  const int64_t end = u.start + u.rows;
  if (s->length != end) return InvalidArgumentError("rollback: the state is not where the recorded pass left it");
  if (length < u.start || length > end) return InvalidArgumentError("rollback: length outside the recorded pass");
  const int W = c.window_size, eb = c.window_entry_bytes(), HD = c.hc_dim(), hc = c.hc_mult;
  // The slots the cut rows overwrote get their old entries back (the stream ring only where the
  // pass ran the layer that records it).
  const bool stream = s->encoder_out.end == end;
  for (int64_t p = length; p < end; ++p) {
    const size_t slot = static_cast<size_t>(p % W), i = static_cast<size_t>(p - u.start);
    for (size_t L = 0; L < s->rings.size(); ++L)
      std::copy_n(&u.ring_slots[L][i * eb], eb, &s->rings[L].slots[slot * eb]);
    if (!stream) continue;
    std::copy_n(&u.stream_x[i * HD], HD, &s->encoder_out.x[slot * HD]);
    std::copy_n(&u.stream_pre[i * hc], hc, &s->encoder_out.pre[slot * hc]);
  }
  for (WindowRing& r : s->rings) r.end = length;
  if (stream) s->encoder_out.end = length;
  for (size_t k = 0; k < s->kv.size(); ++k) {
    const int m = c.compress_ratios[c.kv_source_layers[k]];
    KvSourceCache& kv = s->kv[k];
    kv.processed = length;
    kv.main_kv.resize(static_cast<size_t>(length / m) * c.main_kv_bytes());
    kv.index_keys.resize(static_cast<size_t>(length / m) * c.index_key_bytes());
    if (m == 1) continue;
    // The open group at `length`: as before the pass while still the same group (a straight run
    // writes only its own slots), else empty (a closed group is zeroed); then the cut pass's rows in it.
    const int64_t g0 = length / m * m;
    const StateUndo::Compressor& cu = u.kv[k];
    if (g0 == u.start / m * m) {
      kv.pending_kv = cu.pending_kv;
      kv.pending_gate = cu.pending_gate;
    } else {
      std::fill(kv.pending_kv.begin(), kv.pending_kv.end(), 0.0f);
      std::fill(kv.pending_gate.begin(), kv.pending_gate.end(), 0.0f);
    }
    const size_t hd = static_cast<size_t>(c.head_dim);
    for (int64_t q = std::max(g0, u.start); q < length; ++q) {
      const size_t row = static_cast<size_t>(q - u.start), slot = static_cast<size_t>(q - g0);
      std::copy_n(&cu.row_kv[row * hd], hd, &kv.pending_kv[slot * hd]);
      std::copy_n(&cu.row_gate[row * hd], hd, &kv.pending_gate[slot * hd]);
    }
  }
  // Without Engram layers the pass logs no rows and the history stays empty.
  if (u.history.size() > 1) s->engram_history = u.history[static_cast<size_t>(length - u.start)];
  s->length = length;
  return Status::Ok();
}

}  // namespace ds41

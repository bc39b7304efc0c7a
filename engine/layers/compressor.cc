// Compressor and index keys of ForwardPass (MODEL.md §6.4, §6.5): ratio-m pooling of the KV source's
// latent, FP4 main KV with E4M3 scales and FP4 index keys with E8M0 scales, in the byte formats of
// §10.3. Positions already compressed (state->kv[].processed beyond them) are skipped, which is what
// replays rely on.
#include <algorithm>
#include <cmath>

#include "engine/layers/forward.h"
#include "engine/kernels/numerics.h"
#include "util/check.h"

namespace ds41 {
namespace {

// Packs E2M1 codes two per byte, even element in the low nibble.
void PackNibbles(const uint8_t* codes, int n, uint8_t* out) {
  for (int k = 0; k < n; k += 2) out[k / 2] = static_cast<uint8_t>(codes[k] | (codes[k + 1] << 4));
}

}  // namespace

void ForwardPass::Compress(int L, const std::vector<float>& x) {
  const LayerRole& role = c_.roles[L];
  const LayerWeights& w = model_.weights().layers[L];
  const int hd = c_.head_dim, ihd = c_.index_head_dim, rd = c_.rope_head_dim, m = role.ratio, D = c_.dim;
  const RopeTable& rope = model_.rope(/*yarn=*/true);
  const float eps = static_cast<float>(c_.norm_eps);
  std::vector<float> cs(rd / 2), sn(rd / 2), roped(hd), ik(ihd);
  std::vector<uint8_t> codes(std::max(hd, ihd));

  for (const Segment& seg : segs_) {
    KvSourceCache& kvs = seg.state->kv[role.kv_slot];
    // Rows at positions already compressed are skipped (replays); the rest follow on directly.
    const int first = static_cast<int>(std::clamp<int64_t>(kvs.processed - seg.start, 0, seg.n()));
    const int cnt = seg.n() - first;
    if (cnt == 0) continue;
    DS41_CHECK(seg.start + first == kvs.processed, "layer " << L << " compressor at " << kvs.processed << ", rows from "
                                                             << seg.start + first);
    const float* xs = &x[static_cast<size_t>(seg.row0 + first) * D];
    std::vector<float> kv(static_cast<size_t>(cnt) * hd), latents;
    std::vector<int64_t> entry_ids;
    MatMulBf16(xs, cnt, w.comp_wkv, kv.data(), pool_);
    if (m == 1) {  // LinBF: bf16 out, no gate, no fp32 pooling
      RoundToBf16(kv.data(), static_cast<int64_t>(kv.size()));
      latents.resize(kv.size());
      for (int i = 0; i < cnt; ++i) {
        RmsNormRow(&kv[static_cast<size_t>(i) * hd], w.comp_norm, hd, eps, &latents[static_cast<size_t>(i) * hd]);
        entry_ids.push_back(seg.start + first + i);
      }
    } else {  // Lin32 kv and gate (fp32, kept fp32), per-channel softmax over the group's m tokens
      std::vector<float> gate(kv.size()), pooled(hd), lat(hd);
      MatMulBf16(xs, cnt, w.comp_wgate, gate.data(), pool_);
      for (int i = 0; i < cnt; ++i) {
        const int64_t p = seg.start + first + i;
        const float* kvrow = &kv[static_cast<size_t>(i) * hd];
        const float* gaterow = &gate[static_cast<size_t>(i) * hd];
        const int u = static_cast<int>(p % m);
        if (seg.undo != nullptr) {
          StateUndo::Compressor& log = seg.undo->kv[role.kv_slot];
          const size_t at = static_cast<size_t>(p - seg.undo->start) * hd;
          std::copy_n(kvrow, hd, &log.row_kv[at]);
          std::copy_n(gaterow, hd, &log.row_gate[at]);
        }
        if (u < m - 1) {
          std::copy_n(kvrow, hd, &kvs.pending_kv[static_cast<size_t>(u) * hd]);
          std::copy_n(gaterow, hd, &kvs.pending_gate[static_cast<size_t>(u) * hd]);
          continue;
        }
        for (int ch = 0; ch < hd; ++ch) {
          auto g = [&](int k) { return k < m - 1 ? kvs.pending_gate[static_cast<size_t>(k) * hd + ch] : gaterow[ch]; };
          auto v = [&](int k) { return k < m - 1 ? kvs.pending_kv[static_cast<size_t>(k) * hd + ch] : kvrow[ch]; };
          float mx = g(0);
          for (int k = 1; k < m; ++k) mx = std::max(mx, g(k));
          float e[128] = {};
          float sum = 0.0f;
          for (int k = 0; k < m; ++k) {
            e[k] = ExpF(g(k) - mx);
            sum += e[k];
          }
          float acc = (e[0] / sum) * v(0);
          for (int k = 1; k < m; ++k) acc = acc + (e[k] / sum) * v(k);
          pooled[ch] = RoundBf16(acc);
        }
        RmsNormRow(pooled.data(), w.comp_norm, hd, eps, lat.data());
        latents.insert(latents.end(), lat.begin(), lat.end());
        entry_ids.push_back(p / m);
        // A closed group leaves no carry: keep the state canonical (serialized bytes depend only on
        // the tokens, not on which group closed last).
        std::fill(kvs.pending_kv.begin(), kvs.pending_kv.end(), 0.0f);
        std::fill(kvs.pending_gate.begin(), kvs.pending_gate.end(), 0.0f);
      }
    }
    kvs.processed = seg.start + seg.n();

    // Emit the new entries: index keys from the pre-RoPE latent (§6.5), main KV from the RoPE'd one.
    const int ne = static_cast<int>(entry_ids.size());
    if (ne == 0) continue;
    std::vector<float> ik_raw(static_cast<size_t>(ne) * ihd);
    MatMulBf16(latents.data(), ne, w.idx_wk, ik_raw.data(), pool_);
    RoundToBf16(ik_raw.data(), static_cast<int64_t>(ik_raw.size()));
    const size_t ib = static_cast<size_t>(c_.index_key_bytes()), mb = static_cast<size_t>(c_.main_kv_bytes());
    for (int e = 0; e < ne; ++e) {
      const int64_t j = entry_ids[e];
      rope.Angles(j * m, cs.data(), sn.data());  // an entry sits at its group's first position
      RmsNormRow(&ik_raw[static_cast<size_t>(e) * ihd], w.idx_k_norm, ihd, eps, ik.data());
      ApplyRope(ik.data() + (ihd - rd), rd / 2, cs.data(), sn.data(), false);
      const size_t io = kvs.index_keys.size();
      kvs.index_keys.resize(io + ib);
      for (int g = 0; g < ihd / 32; ++g)
        kvs.index_keys[io + ihd / 2 + g] = QuantizeQdq4e8(ik.data() + g * 32, 32, codes.data() + g * 32).scale_e8m0;
      PackNibbles(codes.data(), ihd, &kvs.index_keys[io]);
      std::copy_n(&latents[static_cast<size_t>(e) * hd], hd, roped.data());
      ApplyRope(roped.data() + (hd - rd), rd / 2, cs.data(), sn.data(), false);
      const size_t mo = kvs.main_kv.size();
      kvs.main_kv.resize(mo + mb);
      for (int g = 0; g < hd / 16; ++g)
        kvs.main_kv[mo + hd / 2 + g] = QuantizeQdq4e4(roped.data() + g * 16, 16, codes.data() + g * 16).scale_e4m3;
      PackNibbles(codes.data(), hd, &kvs.main_kv[mo]);
    }
  }
}

}  // namespace ds41

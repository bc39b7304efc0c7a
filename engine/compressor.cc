// Compressor and index keys of ForwardPass (MODEL.md §6.4, §6.5): ratio-m pooling of the KV source's
// latent, FP4 main KV with E4M3 scales and FP4 index keys with E8M0 scales, in the byte formats of
// §10.3. Positions already compressed (state->kv[].processed beyond them) are skipped, which is what
// replays rely on.
#include <algorithm>
#include <cmath>

#include "engine/forward.h"
#include "engine/numerics.h"
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
  std::vector<float> kvrow(hd), gaterow(hd), latent(hd), roped(hd), pooled(hd), ik_raw(ihd), ik(ihd);
  std::vector<float> cs(rd / 2), sn(rd / 2);
  std::vector<uint8_t> codes(std::max(hd, ihd));

  // Emits compressed entry j from its pre-RoPE latent.
  auto emit = [&](KvSourceCache& kvs, int64_t j, const float* lat) {
    rope.Angles(j * m, cs.data(), sn.data());
    // Index key: k_norm(wk(latent)), RoPE at the group's first position, QDQ4e8 (§6.5).
    MatMulBf16(lat, 1, w.idx_wk, ik_raw.data(), pool_);
    RoundToBf16(ik_raw.data(), ihd);
    RmsNormRow(ik_raw.data(), w.idx_k_norm, ihd, eps, ik.data());
    ApplyRope(ik.data() + (ihd - rd), rd / 2, cs.data(), sn.data(), false);
    const size_t ib = static_cast<size_t>(c_.index_key_bytes());
    const size_t io = kvs.index_keys.size();
    kvs.index_keys.resize(io + ib);
    for (int g = 0; g < ihd / 32; ++g)
      kvs.index_keys[io + ihd / 2 + g] = QuantizeQdq4e8(ik.data() + g * 32, 32, codes.data() + g * 32).scale_e8m0;
    PackNibbles(codes.data(), ihd, &kvs.index_keys[io]);
    // Main KV: RoPE'd latent, QDQ4e4 in groups of 16 (§6.4).
    std::copy_n(lat, hd, roped.data());
    ApplyRope(roped.data() + (hd - rd), rd / 2, cs.data(), sn.data(), false);
    const size_t mb = static_cast<size_t>(c_.main_kv_bytes());
    const size_t mo = kvs.main_kv.size();
    kvs.main_kv.resize(mo + mb);
    for (int g = 0; g < hd / 16; ++g)
      kvs.main_kv[mo + hd / 2 + g] = QuantizeQdq4e4(roped.data() + g * 16, 16, codes.data() + g * 16).scale_e4m3;
    PackNibbles(codes.data(), hd, &kvs.main_kv[mo]);
  };

  for (const Segment& seg : segs_) {
    KvSourceCache& kvs = seg.state->kv[role.kv_slot];
    for (int i = 0; i < seg.n(); ++i) {
      const int64_t p = seg.start + i;
      if (p < kvs.processed) continue;  // already compressed (replays)
      DS41_CHECK(p == kvs.processed, "layer " << L << " compressor at " << kvs.processed << ", row at " << p);
      const float* xr = &x[static_cast<size_t>(seg.row0 + i) * D];
      if (m == 1) {
        MatMulBf16(xr, 1, w.comp_wkv, kvrow.data(), pool_);  // LinBF, no gate, no fp32 (ratio 1)
        RoundToBf16(kvrow.data(), hd);
        RmsNormRow(kvrow.data(), w.comp_norm, hd, eps, latent.data());
        emit(kvs, p, latent.data());
      } else {
        MatMulBf16(xr, 1, w.comp_wkv, kvrow.data(), pool_);  // Lin32: fp32 out, kept fp32
        MatMulBf16(xr, 1, w.comp_wgate, gaterow.data(), pool_);
        const int u = static_cast<int>(p % m);
        if (u < m - 1) {
          std::copy_n(kvrow.data(), hd, &kvs.pending_kv[static_cast<size_t>(u) * hd]);
          std::copy_n(gaterow.data(), hd, &kvs.pending_gate[static_cast<size_t>(u) * hd]);
        } else {
          // Per-channel softmax over the m tokens of the group, fp32 (§6.4).
          for (int ch = 0; ch < hd; ++ch) {
            auto gate = [&](int k) { return k < m - 1 ? kvs.pending_gate[static_cast<size_t>(k) * hd + ch] : gaterow[ch]; };
            auto val = [&](int k) { return k < m - 1 ? kvs.pending_kv[static_cast<size_t>(k) * hd + ch] : kvrow[ch]; };
            float mx = gate(0);
            for (int k = 1; k < m; ++k) mx = std::max(mx, gate(k));
            float e[128] = {};
            float sum = 0.0f;
            for (int k = 0; k < m; ++k) {
              e[k] = ExpF(gate(k) - mx);
              sum += e[k];
            }
            float acc = (e[0] / sum) * val(0);
            for (int k = 1; k < m; ++k) acc = acc + (e[k] / sum) * val(k);
            pooled[ch] = RoundBf16(acc);
          }
          RmsNormRow(pooled.data(), w.comp_norm, hd, eps, latent.data());
          emit(kvs, p / m, latent.data());
          // A closed group leaves no carry: keep the state canonical (serialized bytes depend only on
          // the tokens, not on which group closed last).
          std::fill(kvs.pending_kv.begin(), kvs.pending_kv.end(), 0.0f);
          std::fill(kvs.pending_gate.begin(), kvs.pending_gate.end(), 0.0f);
        }
      }
      kvs.processed = p + 1;
    }
  }
}

}  // namespace ds41

"""Independent PyTorch oracle for the ds41 engine (exact path, MODEL.md §4-§8).

Written from MODEL.md and the release's reference model.py / kernel.py; shares no code with the C++
engine. It follows the reference's operations and rounding points (bf16 after every op the reference
rounds, fp32 where it uses fp32) and the project's canonical summation order (docs/numerics.md):

* every linear sums exact products in 32-wide K blocks in fp32, in order; block sums are scaled and
  added in K order in fp32 (torch elementwise ops, so the order is ours, not a BLAS kernel's);
* other long reductions (norm statistics, softmax denominators, PV products, fp32-weight mixes) are
  computed in float64 and rounded once to float32;
* transcendentals are evaluated in float64 and rounded once to float32.

With these choices, an engine that implements the same semantics agrees with this oracle bit for bit
(almost always), so its streams, logits and cache codes can be compared exactly.

Runs the reference's own flow: one prefill at position 0 over the whole prompt, then one-token
decode steps; keeps every position's window KV (no ring) and every group's compressor inputs.

DSpark (MODEL.md §9.3, REF DSparkBlock / Transformer.forward_spec): forward() also records, per row,
the mean of the hc copies of the stream entering each dspark target layer (self.last_hidden);
dspark_append() turns target rows into main_x and each draft layer's window KV; dspark_draft() runs
the draft block [last token, noise...] through the mtp layers (ring slots in REF's slot order, then
the block, bidirectional), the shared head, the Markov head's bias and the confidence head.
"""

import json
import math
import os
import struct

import numpy as np
import torch

torch.set_grad_enabled(False)
F32, F64 = torch.float32, torch.float64


# ---------------------------------------------------------------------------------------------- io
def read_safetensors(folder):
    """name -> (dtype string, shape, raw bytes as np.uint8) for every tensor of the checkpoint."""
    index_path = os.path.join(folder, "model.safetensors.index.json")
    if os.path.exists(index_path):
        with open(index_path) as f:
            shards = sorted(set(json.load(f)["weight_map"].values()))
    else:
        shards = ["model.safetensors"]
    out = {}
    for shard in shards:
        with open(os.path.join(folder, shard), "rb") as f:
            blob = f.read()
        (hlen,) = struct.unpack("<Q", blob[:8])
        header = json.loads(blob[8 : 8 + hlen])
        base = 8 + hlen
        for name, e in header.items():
            if name == "__metadata__":
                continue
            b, en = e["data_offsets"]
            out[name] = (e["dtype"], e["shape"], np.frombuffer(blob, dtype=np.uint8, count=en - b, offset=base + b))
    return out


def _e4m3_table():
    t = np.zeros(256, dtype=np.float64)
    for c in range(256):
        s, e, m = c >> 7, (c >> 3) & 15, c & 7
        if e == 15 and m == 7:
            v = float("nan")
        elif e == 0:
            v = m * 2.0**-9
        else:
            v = (1 + m / 8.0) * 2.0 ** (e - 7)
        t[c] = -v if s else v
    return torch.tensor(t, dtype=F32)


E4M3 = _e4m3_table()
# The engine's FP4 numerics (engine/kernels/kernels.h Fp4Numerics), from the same environment variable
# (DS41_ORACLE_FP4_NUMERICS overrides it, for the test that the check tells them apart): "grid" rounds
# Lin8's activation codes to multiples of 1/64 before MXFP4 matmuls.
FP4_GRID = os.environ.get("DS41_ORACLE_FP4_NUMERICS", os.environ.get("DS41_FP4_NUMERICS")) == "grid"


class Fp4Weights(tuple):
    """(E2M1 values, scales) of an MXFP4 linear: lin8 knows them by this type."""


E2M1 = torch.tensor([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6], dtype=F32)


def e8m0(codes):
    return torch.pow(torch.tensor(2.0, dtype=F64), codes.to(F64) - 127).to(F32)


class Weights:
    def __init__(self, folder):
        self.raw = read_safetensors(folder)

    def bf16(self, name):
        dt, shape, b = self.raw[name]
        assert dt == "BF16", name
        u16 = torch.from_numpy(b.view(np.uint16).astype(np.int32))
        return (u16 << 16).view(F32).reshape(shape)

    def f32(self, name):
        dt, shape, b = self.raw[name]
        assert dt == "F32", name
        return torch.from_numpy(b.view(np.float32).copy()).reshape(shape)

    def fp8(self, name):
        """(codes as float e4m3 values [out, in], scales per 32x32 tile as floats [out_blocks, in_blocks])."""
        dt, shape, b = self.raw[name]
        assert dt == "F8_E4M3", name
        codes = E4M3[torch.from_numpy(b.astype(np.int64))].reshape(shape)
        sdt, sshape, sb = self.raw[name[: -len(".weight")] + ".scale"]
        return codes, e8m0(torch.from_numpy(sb.astype(np.int64))).reshape(sshape)

    def fp4(self, name):
        """(E2M1 values [out, in], scales [out, in/32])."""
        dt, shape, b = self.raw[name]
        assert dt == "I8", name
        by = torch.from_numpy(b.astype(np.int64)).reshape(shape)
        vals = torch.stack([E2M1[by & 15], E2M1[by >> 4]], dim=-1).reshape(shape[0], shape[1] * 2)
        sdt, sshape, sb = self.raw[name[: -len(".weight")] + ".scale"]
        return Fp4Weights((vals, e8m0(torch.from_numpy(sb.astype(np.int64))).reshape(sshape)))

    def engram_rows(self, name, rows):
        """Dequantized Engram table rows (FP8 with per-row 32-channel scales) as bf16 values."""
        dt, shape, b = self.raw[name]
        d = shape[1]
        codes = torch.from_numpy(b.reshape(shape[0], d)[rows.numpy()].astype(np.int64))
        sb = self.raw[name[: -len(".weight")] + ".scale"][2].reshape(shape[0], d // 32)
        s = e8m0(torch.from_numpy(sb[rows.numpy()].astype(np.int64)))
        return E4M3[codes] * s.repeat_interleave(32, dim=-1)

    def has(self, name):
        return name in self.raw


# ------------------------------------------------------------------------------------- numerics
def bf16(x):
    return x.to(torch.bfloat16).to(F32)


def f64_then_f32(fn, x):
    return fn(x.to(F64)).to(F32)


def exp_c(x):
    return f64_then_f32(torch.exp, x)


def sigmoid_c(x):
    return f64_then_f32(lambda d: 1.0 / (1.0 + torch.exp(-d)), x)


def silu_c(x):
    return f64_then_f32(lambda d: d / (1.0 + torch.exp(-d)), x)


def softplus_c(x):
    return torch.where(x > 20, x, f64_then_f32(lambda d: torch.log1p(torch.exp(d)), x))


def rsqrt_c(x):
    return f64_then_f32(lambda d: 1.0 / torch.sqrt(d), x)


def mean_sq(x):
    """mean(x^2) over the last dim: exact squares summed in float64, divided, rounded once."""
    return ((x.to(F64) ** 2).sum(-1) / x.shape[-1]).to(F32)


def rms_norm(x, w, eps):
    r = rsqrt_c(mean_sq(x) + eps)
    return bf16(w * (x * r.unsqueeze(-1)))


def block_linear(a, w, a_scale=None, w_scale=None):
    """sum_b ((sum_{k in b} a_k w_k, fp32 in order) * a_scale_b) * w_scale_b, blocks added in order.

    a [..., M, K], w [..., N, K] (batch dims broadcast); a_scale [M, K/32] or None; w_scale [N, K/32]
    or None. Products are exact in fp32, so only the order of the additions matters, and it is this."""
    K = a.shape[-1]
    nb = K // 32
    A = a.reshape(*a.shape[:-1], 1, nb, 32)
    W = w.reshape(*w.shape[:-2], 1, w.shape[-2], nb, 32)
    part = A[..., 0] * W[..., 0]
    for j in range(1, 32):
        part = part + A[..., j] * W[..., j]
    acc = None
    for b in range(nb):
        t = part[..., b]
        if a_scale is not None:
            t = t * a_scale[:, b : b + 1]
        if w_scale is not None:
            t = t * w_scale[:, b].unsqueeze(0)
        acc = t if acc is None else acc + t
    return acc


def fast_round_scale(amax, max_inv):
    x = (amax * max_inv).contiguous()
    bits = x.view(torch.int32)
    log2_ceil = ((bits >> 23) & 0xFF) - 127 + ((bits & 0x7FFFFF) != 0).to(torch.int32)
    return ((log2_ceil + 127) << 23).view(F32)


def e4m3_encode(x):
    """float32 -> (byte code, value) with round-to-nearest-even, saturating at 448."""
    sign = torch.signbit(x)
    a = x.abs().clamp(max=448.0).to(F64)
    sub = a < 2.0**-6
    q_sub = torch.round(a * 512.0)  # half-to-even
    m, e = torch.frexp(torch.where(sub, torch.ones_like(a), a))
    E = e.to(F64) - 1
    q = torch.round(a * torch.pow(2.0, 3 - E))
    carry = q == 16
    q = torch.where(carry, torch.full_like(q, 8), q)
    E = E + carry.to(F64)
    sat = (E > 8) | ((E == 8) & (q > 14))
    q = torch.where(sat, torch.full_like(q, 14), q)
    E = torch.where(sat, torch.full_like(E, 8), E)
    code = torch.where(sub, q_sub, (E + 7) * 8 + (q - 8)).to(torch.int64) | (sign.to(torch.int64) << 7)
    return code, E4M3[code]


_MIDS = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0], dtype=F32)
_TIE_UP = torch.tensor([False, True, False, True, False, True, False])


def e2m1_encode(v):
    mag = v.abs().unsqueeze(-1)
    code = (mag > _MIDS).sum(-1) + ((mag == _MIDS) & _TIE_UP).sum(-1)
    code = code | (torch.signbit(v).to(torch.int64) << 3)
    return code, E2M1[code]


INV448 = torch.tensor(1.0 / 448.0, dtype=F32)
INV6 = torch.tensor(1.0 / 6.0, dtype=F32)


def qdq8(x):
    """QDQ8 over groups of 32 of the last dim -> (codes, values, scales [.., K/32], e8m0 bytes)."""
    g = x.reshape(*x.shape[:-1], -1, 32)
    amax = g.abs().amax(-1).clamp_min(1e-4)
    s = fast_round_scale(amax, INV448)
    code, val = e4m3_encode((g / s.unsqueeze(-1)).clamp(-448, 448))
    sbyte = (s.view(torch.int32) >> 23) & 0xFF
    return code.reshape(x.shape), (val * s.unsqueeze(-1)).reshape(x.shape), s, sbyte


def qdq4e8(x):
    g = x.reshape(*x.shape[:-1], -1, 32)
    amax = g.abs().amax(-1).clamp_min(6 * 2.0**-126)
    s = fast_round_scale(amax, INV6)
    code, val = e2m1_encode((g / s.unsqueeze(-1)).clamp(-6, 6))
    sbyte = (s.view(torch.int32) >> 23) & 0xFF
    return code.reshape(x.shape), (val * s.unsqueeze(-1)).reshape(x.shape), sbyte


def qdq4e4(x):
    g = x.reshape(*x.shape[:-1], -1, 16)
    amax = g.abs().amax(-1).clamp_min(6 * 2.0**-9)
    scode, s = e4m3_encode(amax / 6.0)
    code, val = e2m1_encode((g / s.unsqueeze(-1)).clamp(-6, 6))
    return code.reshape(x.shape), (val * s.unsqueeze(-1)).reshape(x.shape), scode


def pack_nibbles(codes):
    return (codes[..., 0::2] | (codes[..., 1::2] << 4)).to(torch.uint8)


def lin8(x, wq):
    """Linear with FP8 or MXFP4 weights and QDQ8 activations, bf16 out."""
    codes_w, sw = wq
    _, xv, sx, _ = qdq8(x)
    xc = xv.reshape(x.shape[0], -1, 32) / sx.unsqueeze(-1)  # exact: back to the codes' values
    if FP4_GRID and isinstance(wq, Fp4Weights):
        xc = torch.round(xc * 64) / 64 + 0.0  # half to even, as the engine; -0 becomes +0
    N, K = codes_w.shape
    if sw.shape[0] != N:  # 32x32 tiles -> per row
        sw = sw.repeat_interleave(32, dim=0)[:N]
    return bf16(block_linear(xc.reshape(x.shape[0], K), codes_w, sx, sw))


# ---------------------------------------------------------------------------------------- model
class Config:
    def __init__(self, folder):
        with open(os.path.join(folder, "config.json")) as f:
            root = json.load(f)
        t = root["text_config"]
        self.t = t
        self.vocab, self.dim, self.inter = t["vocab_size"], t["hidden_size"], t["moe_intermediate_size"]
        self.n_layers, self.heads, self.hd = t["num_hidden_layers"], t["num_attention_heads"], t["head_dim"]
        self.rd, self.q_lora, self.o_lora, self.o_groups = t["qk_rope_head_dim"], t["q_lora_rank"], t["o_lora_rank"], t["o_groups"]
        self.limit, self.eps = t["swiglu_limit"], t["rms_norm_eps"]
        self.rope_theta, self.comp_theta = t["rope_theta"], t["compress_rope_theta"]
        rs = t["rope_scaling"]
        self.factor, self.beta_fast, self.beta_slow = rs["factor"], rs["beta_fast"], rs["beta_slow"]
        self.orig = rs["original_max_position_embeddings"]
        self.n_exp, self.topk_exp, self.route_scale = t["n_routed_experts"], t["num_experts_per_tok"], t["routed_scaling_factor"]
        self.window = t["sliding_window"]
        self.ratios = t["compress_ratios"][: self.n_layers]
        self.kv_sources, self.index_sources = t["kv_source_layer_ids"], t["index_source_layer_ids"]
        self.ih, self.ihd, self.itopk = t["index_n_heads"], t["index_head_dim"], t["index_topk"]
        self.cand, self.cand_blocks, self.cand_bs = t.get("candidate_source_layer_id", -1), t.get("candidate_topk_blocks", 0), t.get("candidate_block_size", 0)
        self.hc, self.sinkhorn, self.hc_eps = t["hc_mult"], t["hc_sinkhorn_iters"], t["hc_eps"]
        self.engram_layers = t.get("engram_layer_ids", [])
        self.engram_rows = t.get("engram_num_embeddings", [])
        self.ngram, self.engram_vocab = t.get("engram_max_ngram_size", 0), t.get("engram_vocab_size", 0)
        self.engram_heads, self.engram_hd = t.get("engram_n_heads", 0), t.get("engram_head_dim", 0)
        self.engram_pad, self.engram_cvocab = t.get("engram_pad_token_id", 2), t.get("engram_compressed_vocab_size", 0)
        self.n_mtp = t.get("num_nextn_predict_layers", 0)
        self.block = t.get("dspark_block_size", 0)
        self.noise = t.get("dspark_noise_token_id", 0)
        self.targets = t.get("dspark_target_layer_ids", [])
        self.markov_rank = t.get("dspark_markov_rank", 256)
        # REF get_moe_config: 0 falls back to the backbone's counts
        self.d_exp = t.get("dspark_n_routed_experts", 0) or self.n_exp
        self.d_topk = t.get("dspark_num_experts_per_tok", 0) or self.topk_exp

    def kv_source(self, L):
        return max([s for s in self.kv_sources if s <= L], default=-1)

    def topk_source(self, L):
        return max([s for s in self.index_sources if s <= L], default=-1)


def rope_freqs(cfg, yarn):
    dim = cfg.rd
    base = cfg.comp_theta if yarn else cfg.rope_theta
    expo = torch.arange(0, dim, 2, dtype=F32) / dim
    freqs = 1.0 / (torch.tensor(base, dtype=F64) ** expo.to(F64)).to(F32)
    if yarn and cfg.orig > 0:
        cd = lambda r: dim * math.log(cfg.orig / (r * 2 * math.pi)) / (2 * math.log(base))
        low = max(math.floor(cd(cfg.beta_fast)), 0)
        high = min(math.ceil(cd(cfg.beta_slow)), dim - 1)
        ramp = ((torch.arange(dim // 2, dtype=F32) - low) / max(high - low, 1e-3)).clamp(0, 1)
        smooth = 1 - ramp
        freqs = freqs / cfg.factor * (1 - smooth) + freqs * smooth
    return freqs


def rope(x, pos, freqs, inverse=False):
    """Rotate adjacent pairs of the last dim of x [..., rows, ..., 2k] by positions pos (one per row)."""
    ang = (pos.to(F32).unsqueeze(-1) * freqs).to(F64)  # fp32 angles, cos/sin in double
    c, s = torch.cos(ang).to(F32).to(F64), torch.sin(ang).to(F32).to(F64)
    if inverse:
        s = -s
    while c.dim() < x.dim():
        c, s = c.unsqueeze(-2), s.unsqueeze(-2)
    xr, xi = x[..., 0::2].to(F64), x[..., 1::2].to(F64)
    yr = (xr * c - xi * s).to(F32)
    yi = (xr * s + xi * c).to(F32)
    return bf16(torch.stack([yr, yi], dim=-1).flatten(-2))


def sinkhorn_split(m, scale, base, hc, iters, eps):
    pre = sigmoid_c(m[..., :hc] * scale[0] + base[:hc]) + eps
    post = 2 * sigmoid_c(m[..., hc : 2 * hc] * scale[1] + base[hc : 2 * hc])
    C = (m[..., 2 * hc :] * scale[2] + base[2 * hc :]).unflatten(-1, (hc, hc))

    def rsum(X):  # sequential over j
        s = X[..., 0]
        for j in range(1, hc):
            s = s + X[..., j]
        return s.unsqueeze(-1)

    def csum(X):  # sequential over i
        s = X[..., 0, :]
        for i in range(1, hc):
            s = s + X[..., i, :]
        return s.unsqueeze(-2)

    C = exp_c(C - C.amax(-1, keepdim=True))
    C = C / rsum(C) + eps
    C = C / (csum(C) + eps)
    for _ in range(iters - 1):
        C = C / (rsum(C) + eps)
        C = C / (csum(C) + eps)
    return pre, post, C


def numpy_multipliers(layer_ids, ngram, cvocab):
    bound = max(1, (np.iinfo(np.int64).max // cvocab) // 2)
    return [(np.random.default_rng(10007 * l).integers(0, bound, size=(ngram,), dtype=np.int64) * 2 + 1).tolist() for l in layer_ids]


def is_prime(n):
    if n < 2:
        return False
    i = 2
    while i * i <= n:
        if n % i == 0:
            return False
        i += 1
    return True


class Oracle:
    def __init__(self, folder):
        self.cfg = cfg = Config(folder)
        self.w = Weights(folder)
        self.freqs = {False: rope_freqs(cfg, False), True: rope_freqs(cfg, True)}
        if cfg.engram_layers:
            with open(os.path.join(folder, "engram_token_map.json")) as f:
                self.token_map = json.load(f)
            seen, self.primes = set(), []
            for _ in cfg.engram_layers:
                per = []
                for _n in range(cfg.ngram - 1):
                    cur = cfg.engram_vocab - 1
                    row = []
                    for _h in range(cfg.engram_heads):
                        cur += 1
                        while not is_prime(cur) or cur in seen:
                            cur += 1
                        seen.add(cur)
                        row.append(cur)
                    per.append(row)
                self.primes.append(per)
            self.mult = numpy_multipliers(cfg.engram_layers, cfg.ngram, cfg.engram_cvocab)
        self.reset()

    def reset(self):
        cfg = self.cfg
        self.pos = 0
        self.cids = []  # compressed ids (or -1 for image tokens) of every position
        self.win = {L: [] for L in range(cfg.n_layers)}  # per layer: [window value, code bytes] per position
        self.comp_rows = {L: [] for L in cfg.kv_sources}  # per kv source: (kv, gate) fp32 of each position
        self.ckv = {L: [] for L in cfg.kv_sources}  # compressed entries: (values, bytes)
        self.ik = {L: [] for L in cfg.kv_sources}  # index keys: (values, bytes)

    # ----------------------------------------------------------------------------- per-token parts
    def engram_hashes(self, tokens, image):
        cfg = self.cfg
        pad = self.token_map[cfg.engram_pad]
        out = []
        for i, t in enumerate(tokens):
            self.cids.append(-1 if image[i] else self.token_map[t])
            p = len(self.cids) - 1
            tok, blocked = [], False
            for k in range(cfg.ngram):
                src = self.cids[p - k] if p - k >= 0 else None
                blocked = blocked or src is None or src == -1
                tok.append(pad if blocked else src)
            rows = []
            for li in range(len(cfg.engram_layers)):
                m = self.mult[li]
                prod = [tok[k] * m[k] for k in range(cfg.ngram)]
                rolling, per_layer = prod[0], []
                for n in range(1, cfg.ngram):
                    rolling ^= prod[n]
                    per_layer += [rolling % prime for prime in self.primes[li][n - 1]]
                offs = np.cumsum([0] + [p for row in self.primes[li] for p in row][:-1])
                rows.append([int(v) + int(o) for v, o in zip(per_layer, offs)])
            out.append(rows)
        return out  # [T][engram layer][cols]

    def engram(self, L, X, hashes, image):
        cfg, w = self.cfg, self.w
        li = cfg.engram_layers.index(L)
        p = f"layers.{L}.engram."
        rows = torch.tensor([h[li] for h in hashes], dtype=torch.int64)  # [T, cols]
        e = self.w.engram_rows(p + "embed.weight", rows.flatten()).reshape(rows.shape[0], -1)
        kv = lin8(e, w.fp8(p + "wkv.weight"))
        D, hc = cfg.dim, cfg.hc
        key, value = kv[:, : hc * D].reshape(-1, hc, D), kv[:, hc * D :]
        wqk = w.bf16(p + "q_weight") * w.bf16(p + "k_weight")
        rstd = rsqrt_c(mean_sq(X) + cfg.eps) * rsqrt_c(mean_sq(key) + cfg.eps)
        dot = ((X * wqk) * key).to(F64).sum(-1).to(F32) * rstd * torch.tensor(D**-0.5, dtype=F32)
        gate = sigmoid_c(torch.copysign(dot.abs().clamp_min(1e-6).sqrt(), dot))
        gate = torch.where(torch.tensor(image).unsqueeze(-1), torch.zeros_like(gate), gate)
        return bf16(X + gate.unsqueeze(-1) * value.unsqueeze(1))

    def hc_mixes(self, X, site, L, block=None):
        cfg, w = self.cfg, self.w
        p = f"{block or f'layers.{L}.'}hc_{site}_"
        z = X.reshape(X.shape[0], -1)
        r = rsqrt_c(mean_sq(z) + cfg.eps)
        m = (z.to(F64) @ w.f32(p + "fn").to(F64).T).to(F32) * r.unsqueeze(-1)
        return sinkhorn_split(m, w.f32(p + "scale"), w.f32(p + "base"), cfg.hc, cfg.sinkhorn, cfg.hc_eps)

    @staticmethod
    def collapse(X, pre):
        s = pre[:, 0:1] * X[:, 0]
        for i in range(1, X.shape[1]):
            s = s + pre[:, i : i + 1] * X[:, i]
        return bf16(s)

    @staticmethod
    def expand(X, h, post, C):
        out = []
        for j in range(X.shape[1]):
            s = C[:, 0, j : j + 1] * X[:, 0]
            for i in range(1, X.shape[1]):
                s = s + C[:, i, j : j + 1] * X[:, i]
            out.append(bf16(post[:, j : j + 1] * h + s))
        return torch.stack(out, dim=1)

    def moe(self, L, x, image, block=None, n_exp=None, topk=None):
        cfg, w = self.cfg, self.w
        p = f"{block or f'layers.{L}.'}ffn."
        n_exp, topk = n_exp or cfg.n_exp, topk or cfg.topk_exp
        z = block_linear(x, w.bf16(p + "gate.weight"))
        s = softplus_c(z).sqrt()
        bias = w.f32(p + "gate.bias").unsqueeze(0).expand_as(s)
        if w.has(p + "gate.bias_vl"):
            bias = torch.where(torch.tensor(image).unsqueeze(-1), w.f32(p + "gate.bias_vl").unsqueeze(0), bias)
        order = torch.sort(s + bias, dim=-1, descending=True, stable=True).indices[:, :topk]
        sel = s.gather(1, order)
        total = sel.to(F64).sum(-1, keepdim=True).to(F32)
        wts = sel / (total + 1e-20) if topk > 1 else sel
        wts = wts * cfg.route_scale

        def expert(prefix, xs, wt, fmt):
            a = lin8(xs, fmt(prefix + "w1.weight"))
            u = lin8(xs, fmt(prefix + "w3.weight"))
            u = u.clamp(-cfg.limit, cfg.limit)
            a = a.clamp(max=cfg.limit)
            h = silu_c(a) * u
            if wt is not None:
                h = wt.unsqueeze(-1) * h
            return lin8(bf16(h), fmt(prefix + "w2.weight"))

        y = torch.zeros_like(x)
        for e in range(n_exp):
            rows, slot = torch.where(order == e)
            if rows.numel() == 0:
                continue
            y[rows] = y[rows] + expert(f"{p}experts.{e}.", x[rows], wts[rows, slot], w.fp4)
        return bf16(y + expert(p + "shared_experts.", x, None, w.fp8))

    # ------------------------------------------------------------------------------- attention
    def compress(self, L, x, positions):
        """Compressor of KV source L over new rows; emits every group completed by them (§6.4)."""
        cfg, w = self.cfg, self.w
        p = f"layers.{L}.attn."
        m = cfg.ratios[L]
        if m == 1:
            lat = rms_norm(bf16(block_linear(x, w.bf16(p + "compressor.wkv.weight"))), w.bf16(p + "compressor.norm.weight"), cfg.eps)
            for i in range(x.shape[0]):
                self.emit(L, lat[i], positions[i])
            return
        kv = block_linear(x, w.bf16(p + "compressor.wkv.weight"))
        gate = block_linear(x, w.bf16(p + "compressor.wgate.weight"))
        for i in range(x.shape[0]):
            self.comp_rows[L].append((kv[i], gate[i]))
            if (positions[i] + 1) % m == 0:
                rows = self.comp_rows[L][-m:]
                g = torch.stack([r[1] for r in rows])
                e = exp_c(g - g.amax(0, keepdim=True))
                ssum = e[0]
                for k in range(1, m):
                    ssum = ssum + e[k]
                acc = (e[0] / ssum) * rows[0][0]
                for k in range(1, m):
                    acc = acc + (e[k] / ssum) * rows[k][0]
                lat = rms_norm(bf16(acc), w.bf16(p + "compressor.norm.weight"), cfg.eps)
                self.emit(L, lat, positions[i] // m)

    def emit(self, L, lat, j):
        cfg, w = self.cfg, self.w
        p = f"layers.{L}.attn."
        m = cfg.ratios[L]
        pos = torch.tensor([j * m])
        k = rms_norm(bf16(block_linear(lat.unsqueeze(0), w.bf16(p + "indexer.wk.weight"))), w.bf16(p + "indexer.k_norm.weight"), cfg.eps)
        k = torch.cat([k[:, : cfg.ihd - cfg.rd], rope(k[:, cfg.ihd - cfg.rd :], pos, self.freqs[True])], dim=-1)[0]
        codes, val, sbyte = qdq4e8(k)
        self.ik[L].append((val, torch.cat([pack_nibbles(codes), sbyte.to(torch.uint8)])))
        r = torch.cat([lat[: cfg.hd - cfg.rd], rope(lat[cfg.hd - cfg.rd :].unsqueeze(0), pos, self.freqs[True])[0]])
        codes, val, scode = qdq4e4(r)
        self.ckv[L].append((val, torch.cat([pack_nibbles(codes), scode.to(torch.uint8)])))

    def index(self, L, x, cq, positions, state):
        cfg, w = self.cfg, self.w
        p = f"layers.{L}.attn.indexer."
        m, src = cfg.ratios[L], cfg.kv_source(L)
        T = x.shape[0]
        q = lin8(cq, w.fp8(p + "wq_b.weight")).reshape(T, cfg.ih, cfg.ihd)
        q = torch.cat([q[..., : cfg.ihd - cfg.rd], rope(q[..., cfg.ihd - cfg.rd :], positions, self.freqs[True])], dim=-1)
        _, q, _ = qdq4e8(q)
        hw = bf16(bf16(block_linear(x, w.bf16(p + "weights_proj.weight"))) * torch.tensor(cfg.ihd**-0.5 * cfg.ih**-0.5, dtype=F32))
        E = len(self.ik[src])
        picks = []
        if E == 0:
            state["topk"] = [[] for _ in range(T)]
            return
        keys = torch.stack([v for v, _ in self.ik[src]])  # [E, ihd]
        qk = bf16(block_linear(q.reshape(T * cfg.ih, cfg.ihd), keys)).reshape(T, cfg.ih, E)
        sc = bf16(qk.clamp_min(0) * hw.unsqueeze(-1))
        score = bf16(sc.to(F64).sum(1).to(F32))  # [T, E]
        V = ((positions + 1) // m).clamp(max=E)
        score = torch.where(torch.arange(E).unsqueeze(0) < V.unsqueeze(1), score, torch.full_like(score, -math.inf))
        if L == cfg.cand:
            bs = cfg.cand_bs
            nb = (E + bs - 1) // bs
            padded = torch.cat([score, torch.full((T, nb * bs - E), -math.inf)], dim=1)
            bscore = padded.reshape(T, nb, bs).amax(-1)
            keep = torch.zeros(T, nb, dtype=torch.bool)
            for t in range(T):
                if V[t] > 0:
                    bscore[t, (V[t] - 1) // bs] = math.inf
                order = torch.sort(bscore[t], descending=True, stable=True).indices
                finite = int((bscore[t] > -math.inf).sum())
                keep[t, order[: min(cfg.cand_blocks, finite)]] = True
            state["pool"] = keep
        elif cfg.cand >= 0 and L > cfg.cand:
            keep = state["pool"].repeat_interleave(cfg.cand_bs, dim=1)[:, :E]
            score = torch.where(keep, score, torch.full_like(score, -math.inf))
        for t in range(T):
            order = torch.sort(score[t], descending=True, stable=True).indices
            finite = int(torch.isfinite(score[t]).sum())
            picks.append(sorted(order[: min(cfg.itopk, finite)].tolist()))
        state["topk"] = picks

    def attention(self, L, x, positions, state):
        cfg, w = self.cfg, self.w
        p = f"layers.{L}.attn."
        T, H, hd, rd = x.shape[0], cfg.heads, cfg.hd, cfg.rd
        yarn = cfg.ratios[L] > 0
        fr = self.freqs[yarn]
        cq = rms_norm(lin8(x, w.fp8(p + "wq_a.weight")), w.bf16(p + "q_norm.weight"), cfg.eps)
        q = lin8(cq, w.fp8(p + "wq_b.weight")).reshape(T, H, hd)
        q = torch.cat([q[..., : hd - rd], rope(q[..., hd - rd :], positions, fr)], dim=-1)
        val, byts = self.window_kv(p, x, positions, fr)
        for i in range(T):
            self.win[L].append((val[i], byts[i]))
        if yarn:
            src = cfg.kv_source(L)
            if src == L:
                self.compress(L, x, positions)
            if cfg.topk_source(L) == L:
                self.index(L, x, cq, positions, state)
        # Key list per row: `window` slots (positions ascending, absent last), then the picks.
        W = cfg.window
        nsl = W + (cfg.itopk if yarn else 0)
        keys = torch.zeros(T, nsl, hd)
        valid = torch.zeros(T, nsl, dtype=torch.bool)
        for i in range(T):
            t = int(positions[i])
            lo = max(0, t - W + 1)
            for k, pp in enumerate(range(lo, t + 1)):
                keys[i, k] = self.win[L][pp][0]
                valid[i, k] = True
            if yarn:
                entries = self.ckv[cfg.kv_source(L)]
                for k, j in enumerate(state["topk"][i]):
                    keys[i, W + k] = entries[j][0]
                    valid[i, W + k] = True
        o = self.sparse_attn(q, keys, valid, w.f32(p + "attn_sink"))
        return self.output(p, o, positions, fr)

    def window_kv(self, p, x, positions, fr):
        """Window KV entries (§6.3) of rows x at positions: (values [T, hd], code bytes [T, hd + hd/32])."""
        cfg, w = self.cfg, self.w
        hd, rd = cfg.hd, cfg.rd
        kv = rms_norm(lin8(x, w.fp8(p + "wkv.weight")), w.bf16(p + "kv_norm.weight"), cfg.eps)
        kv = torch.cat([kv[:, : hd - rd], rope(kv[:, hd - rd :], positions, fr)], dim=-1)
        codes, val, _, sbyte = qdq8(kv)
        return val, torch.cat([codes.to(torch.uint8), sbyte.to(torch.uint8)], dim=-1)

    def output(self, p, o, positions, fr):
        """De-rotation at the query positions, grouped wo_a (bf16, no activation quantization), wo_b."""
        cfg, w = self.cfg, self.w
        T, hd, rd = o.shape[0], cfg.hd, cfg.rd
        o = torch.cat([o[..., : hd - rd], rope(o[..., hd - rd :], positions, fr, inverse=True)], dim=-1)
        G = cfg.o_groups
        codes_a, s_a = w.fp8(p + "wo_a.weight")
        og = o.reshape(T, G, -1)
        outs = []
        for g in range(G):
            rows = slice(g * cfg.o_lora, (g + 1) * cfg.o_lora)
            sw = s_a.repeat_interleave(32, dim=0)[rows]
            outs.append(bf16(block_linear(og[:, g], codes_a[rows], None, sw)))
        return lin8(torch.cat(outs, dim=-1), w.fp8(p + "wo_b.weight"))

    def sparse_attn(self, q, keys, valid, sink):
        """Online softmax over blocks of 64 slots with the sink (MODEL.md §6.9, REF sparse_attn)."""
        T, H, hd = q.shape
        scale = torch.tensor(hd**-0.5, dtype=F32)
        m = torch.full((T, H), -1e30)
        l = torch.zeros(T, H)
        acc = torch.zeros(T, H, hd)
        for b in range(0, keys.shape[1], 64):
            kb, vb = keys[:, b : b + 64], valid[:, b : b + 64]
            if not bool(vb.any()):
                continue
            s = block_linear(q, kb) * scale  # [T, H, S]
            s = torch.where(vb.unsqueeze(1), s, torch.full_like(s, -math.inf))
            m_new = torch.maximum(m, s.amax(-1))
            sf = exp_c(m - m_new)
            pr = exp_c(s - m_new.unsqueeze(-1))
            l = l * sf + pr.to(F64).sum(-1).to(F32)
            pv = torch.einsum("ths,tsd->thd", bf16(pr).to(F64), kb.to(F64)).to(F32)
            acc = acc * sf.unsqueeze(-1) + pv
            m = m_new
        l = l + exp_c(sink.unsqueeze(0) - m)
        return bf16(acc / l.unsqueeze(-1))

    # ---------------------------------------------------------------------------------- forward
    def forward(self, tokens, image=None, image_embeds=None):
        """Runs all layers over `tokens` at positions [self.pos, ...). Returns (logits [T, V], streams
        [T, layers, hc, dim])."""
        cfg, w = self.cfg, self.w
        T = len(tokens)
        image = image or [False] * T
        positions = torch.arange(self.pos, self.pos + T)
        emb = w.bf16("embed.weight")[torch.tensor(tokens)]
        if image_embeds is not None:
            emb = torch.where(torch.tensor(image).unsqueeze(-1), bf16(image_embeds), emb)
        X = emb.unsqueeze(1).repeat(1, cfg.hc, 1)
        pre = torch.zeros(T, cfg.hc)
        pre[:, 0] = 1
        hashes = self.engram_hashes(tokens, image) if cfg.engram_layers else None
        state, streams = {}, []
        hidden = [None] * len(cfg.targets)
        for L in range(cfg.n_layers):
            p = f"layers.{L}."
            if L in cfg.engram_layers:
                X = self.engram(L, X, hashes, image)
            if cfg.n_mtp and L in cfg.targets:  # REF: the input stream's mean over the hc copies
                acc = X[:, 0]
                for i in range(1, cfg.hc):
                    acc = acc + X[:, i]
                hidden[cfg.targets.index(L)] = bf16(acc / cfg.hc)
            a_pre, a_post, a_comb = self.hc_mixes(X, "attn", L)
            x = rms_norm(self.collapse(X, pre), w.bf16(p + "attn_norm.weight"), cfg.eps)
            X = self.expand(X, self.attention(L, x, positions, state), a_post, a_comb)
            f_pre, f_post, f_comb = self.hc_mixes(X, "ffn", L)
            x = rms_norm(self.collapse(X, a_pre), w.bf16(p + "ffn_norm.weight"), cfg.eps)
            X = self.expand(X, self.moe(L, x, image), f_post, f_comb)
            pre = f_pre
            streams.append(X.clone())
        y = rms_norm(self.collapse(X, pre), w.bf16("norm.weight"), cfg.eps)
        logits = block_linear(y, w.bf16("head.weight"))
        self.pos += T
        self.last_hidden = torch.cat(hidden, dim=-1) if cfg.n_mtp else None
        return logits, torch.stack(streams, dim=1)

    # ------------------------------------------------------------------------------------ DSpark
    # The draft layers' ring in position order instead of REF's slot order: wrong once the window
    # exceeds 64 keys and the ring has wrapped (tests/CMakeLists.txt oracle_dspark_detects_key_order).
    dspark_position_order = os.environ.get("DS41_ORACLE_DSPARK_POSITION_ORDER") == "1"

    def dspark_reset(self):
        self.dwin = {k: {} for k in range(self.cfg.n_mtp)}  # per draft layer: position -> (values, bytes)
        self.dend = 0

    def dspark_append(self, start, hidden):
        """Target rows at positions [start, ...): main_x (stage 0) and every draft layer's window KV."""
        cfg, w = self.cfg, self.w
        main_x = rms_norm(lin8(hidden, w.fp8("mtp.0.main_proj.weight")), w.bf16("mtp.0.main_norm.weight"), cfg.eps)
        positions = torch.arange(start, start + hidden.shape[0])
        for k in range(cfg.n_mtp):
            val, byts = self.window_kv(f"mtp.{k}.attn.", main_x, positions, self.freqs[False])
            for i in range(hidden.shape[0]):
                self.dwin[k][start + i] = (val[i], byts[i])
        self.dend = start + hidden.shape[0]

    def dspark_attention(self, k, x, positions):
        cfg, w = self.cfg, self.w
        p = f"mtp.{k}.attn."
        T, H, hd, rd, W = x.shape[0], cfg.heads, cfg.hd, cfg.rd, cfg.window
        fr = self.freqs[False]  # ratio 0: rope_theta, no YaRN
        cq = rms_norm(lin8(x, w.fp8(p + "wq_a.weight")), w.bf16(p + "q_norm.weight"), cfg.eps)
        q = lin8(cq, w.fp8(p + "wq_b.weight")).reshape(T, H, hd)
        q = torch.cat([q[..., : hd - rd], rope(q[..., hd - rd :], positions, fr)], dim=-1)
        bval, _ = self.window_kv(p, x, positions, fr)
        end = int(positions[0])
        nring = min(W, end)
        keys = torch.zeros(T, nring + T, hd)
        valid = torch.zeros(T, nring + T, dtype=torch.bool)
        for sl in range(nring):  # REF's list: ring slots 0..min(W, end)-1 in slot order
            pos = sl + (end - 1 - sl) // W * W
            if self.dspark_position_order:  # a deliberately wrong list (proves the check can fail)
                pos = end - nring + sl
            if pos in self.dwin[k]:
                keys[:, sl] = self.dwin[k][pos][0]
                valid[:, sl] = True
        keys[:, nring:] = bval.unsqueeze(0)  # then the whole block, every query sees every draft key
        valid[:, nring:] = True
        o = self.sparse_attn(q, keys, valid, w.f32(p + "attn_sink"))
        return self.output(p, o, positions, fr)

    def dspark_draft(self, last):
        """Drafts a block after the appended positions: (tokens [B], logits [B, V] with the Markov bias,
        confidence [B] fp32)."""
        cfg, w = self.cfg, self.w
        B, start = cfg.block, self.dend
        tokens = [last] + [cfg.noise] * (B - 1)
        positions = torch.arange(start, start + B)
        X = w.bf16("embed.weight")[torch.tensor(tokens)].unsqueeze(1).repeat(1, cfg.hc, 1)
        pre = torch.zeros(B, cfg.hc)
        pre[:, 0] = 1
        for k in range(cfg.n_mtp):
            blk = f"mtp.{k}."
            a_pre, a_post, a_comb = self.hc_mixes(X, "attn", None, blk)
            x = rms_norm(self.collapse(X, pre), w.bf16(blk + "attn_norm.weight"), cfg.eps)
            X = self.expand(X, self.dspark_attention(k, x, positions), a_post, a_comb)
            f_pre, f_post, f_comb = self.hc_mixes(X, "ffn", None, blk)
            x = rms_norm(self.collapse(X, a_pre), w.bf16(blk + "ffn_norm.weight"), cfg.eps)
            X = self.expand(X, self.moe(None, x, [False] * B, blk, cfg.d_exp, cfg.d_topk), f_post, f_comb)
            pre = f_pre
        last_blk = f"mtp.{cfg.n_mtp - 1}."
        hid = self.collapse(X, pre)
        logits = block_linear(rms_norm(hid, w.bf16(last_blk + "norm.weight"), cfg.eps), w.bf16("head.weight"))
        m_embed = w.bf16(last_blk + "markov_head.embed.weight")
        m_head = w.bf16(last_blk + "markov_head.head.weight")
        proj = w.bf16(last_blk + "confidence_head.proj.weight")
        out, conf, prev = [], [], last
        for i in range(B):
            e = m_embed[prev].unsqueeze(0)
            logits[i] = logits[i] + block_linear(e, m_head)[0]
            prev = int(torch.argmax(logits[i]))
            out.append(prev)
            conf.append(block_linear(torch.cat([hid[i : i + 1], e], dim=-1), proj)[0, 0])
        return out, logits, torch.stack(conf)

    def dspark_caches(self):
        """Each draft layer's window entries of the last `window` appended positions (engine dump layout)."""
        out = {}
        for k in range(self.cfg.n_mtp):
            ps = [p for p in sorted(self.dwin[k]) if p >= self.dend - self.cfg.window]
            out[f"dspark_window_M{k}"] = torch.stack([self.dwin[k][p][1] for p in ps]).numpy()
        return out

    def caches(self):
        """Cache bytes in the engine's dump layout: main KV / index keys per KV source, window entries
        of the last `window` positions per layer."""
        out = {}
        for L in self.cfg.kv_sources:
            out[f"main_kv_L{L}"] = torch.stack([b for _, b in self.ckv[L]]).numpy() if self.ckv[L] else np.zeros((0, 0), np.uint8)
            out[f"index_keys_L{L}"] = torch.stack([b for _, b in self.ik[L]]).numpy() if self.ik[L] else np.zeros((0, 0), np.uint8)
        for L in range(self.cfg.n_layers):
            out[f"window_L{L}"] = torch.stack([b for _, b in self.win[L][-self.cfg.window :]]).numpy()
        return out


# ------------------------------------------------------------------------------------------ vision
# The vision tower and aligner (MODEL.md §2.5, §9.2), from the reference's semantics (REF vision.py:
# ViT, Aligner; model.py encode_image / merge_image_embeddings) with the project's rounding and
# summation choices (engine/layers/vision.h): bf16 linears with bias added in fp32 before the one
# rounding; RMSNorm eps 1e-6; 2-D RoPE, rotate-half over the whole head; softmax probabilities rounded
# to bf16 before P.V; exact-erf GELU.
#
# Deliberate errors that the WILL_FAIL tests use to show the check can fail:
#   DS41_ORACLE_VISION_UNFOLD=spatial  the r x r merge in (ky, kx, c) order instead of F.unfold's (c, ky, kx)
#   DS41_ORACLE_VISION_ROPE=wh         the rope's h and w frequency halves swapped
def _pad32(x):
    k = x.shape[-1]
    kp = (k + 31) // 32 * 32
    return x if kp == k else torch.nn.functional.pad(x, (0, kp - k))


def linear_bias(x, w, b=None):
    y = block_linear(_pad32(x), _pad32(w))
    return bf16(y + b if b is not None else y)


def gelu_c(x):
    return f64_then_f32(lambda d: 0.5 * d * (1.0 + torch.erf(d / math.sqrt(2.0))), x)


class VisionConfig:
    def __init__(self, folder):
        with open(os.path.join(folder, "config.json")) as f:
            root = json.load(f)
        v = root.get("vision_config") or {}
        self.layers = v.get("num_hidden_layers", 0)
        self.dim, self.heads = v.get("hidden_size", 1024), v.get("num_attention_heads", 16)
        self.inter, self.patch = v.get("intermediate_size", 2816), v.get("patch_size", 14)
        self.theta, self.r = v.get("rope_theta", 10000.0), v.get("downsample_ratio", 3)
        self.max_tokens = v.get("max_image_tokens", 1024)
        self.hd = self.dim // self.heads
        self.text_dim = root["text_config"]["hidden_size"]
        self.image_token_id = root.get("image_token_id", -1)


def vision_cos_sin(n_h, n_w, hd, theta):
    """REF get_vision_cos_sin over rope dim hd/2: [n, hd/2] with the h frequencies, then the w ones."""
    rd = hd // 2
    expo = torch.arange(0, rd, 2, dtype=F32) / rd
    inv = 1.0 / (torch.tensor(theta, dtype=F64) ** expo.to(F64)).to(F32)
    hpos = torch.arange(n_h).unsqueeze(1).expand(n_h, n_w).reshape(-1).to(F32)
    wpos = torch.arange(n_w).unsqueeze(0).expand(n_h, n_w).reshape(-1).to(F32)
    first, second = (wpos, hpos) if os.environ.get("DS41_ORACLE_VISION_ROPE") == "wh" else (hpos, wpos)
    ang = torch.cat([first.unsqueeze(1) * inv, second.unsqueeze(1) * inv], dim=1)
    return f64_then_f32(torch.cos, ang), f64_then_f32(torch.sin, ang)


def vision_rotate(x, cos, sin):
    """x [n, heads, hd]; cos/sin [n, hd/2]."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    c, s = cos.unsqueeze(1), sin.unsqueeze(1)
    return bf16(torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1))


def aligner_unfold(x, n_h, n_w, r):
    """[n_h*n_w, C] -> [ceil(n_h/r)*ceil(n_w/r), C*r*r] in F.unfold's column order (c, ky, kx)."""
    C = x.shape[-1]
    g = x.reshape(n_h, n_w, C).permute(2, 0, 1)
    g = torch.nn.functional.pad(g, (0, -n_w % r, 0, -n_h % r))
    H, W = g.shape[1] // r, g.shape[2] // r
    blocks = g.reshape(C, H, r, W, r).permute(1, 3, 0, 2, 4)  # [H, W, C, ky, kx]
    if os.environ.get("DS41_ORACLE_VISION_UNFOLD") == "spatial":
        blocks = blocks.permute(0, 1, 3, 4, 2)  # [H, W, ky, kx, C]: the wrong order
    return blocks.reshape(H * W, C * r * r)


class Vision:
    def __init__(self, folder, weights=None):
        self.cfg = VisionConfig(folder)
        self.w = weights or Weights(folder)

    def attention(self, qkv, n):
        cfg = self.cfg
        V, H, hd = cfg.dim, cfg.heads, cfg.hd
        scale = torch.tensor(1.0 / math.sqrt(hd), dtype=F64).to(F32)
        out = torch.zeros(n, V)
        for h in range(H):
            q = qkv[:, h * hd : (h + 1) * hd]
            k = qkv[:, V + h * hd : V + (h + 1) * hd]
            v = qkv[:, 2 * V + h * hd : 2 * V + (h + 1) * hd]
            s = block_linear(q, k) * scale  # [n, n]
            e = exp_c(s - s.amax(-1, keepdim=True))
            l = e.to(F64).sum(-1).to(F32)
            p = bf16(e / l.unsqueeze(-1))
            out[:, h * hd : (h + 1) * hd] = bf16(block_linear(_pad32(p), _pad32(v.t().contiguous())))
        return out

    def tower(self, patches, n_h, n_w):
        """patches [n, 3*p*p] (bf16 values) -> final norm output [n, dim]."""
        cfg, w = self.cfg, self.w
        n = n_h * n_w
        x = linear_bias(patches, w.bf16("vision.patch_embed.proj.weight"), w.bf16("vision.patch_embed.proj.bias"))
        cos, sin = vision_cos_sin(n_h, n_w, cfg.hd, cfg.theta)
        V, I = cfg.dim, cfg.inter
        for b in range(cfg.layers):
            p = f"vision.blocks.{b}."
            h = rms_norm(x, w.bf16(p + "norm1.weight"), 1e-6)
            qkv = linear_bias(h, w.bf16(p + "attn.wqkv.weight"), w.bf16(p + "attn.wqkv.bias"))
            q = vision_rotate(qkv[:, :V].reshape(n, cfg.heads, cfg.hd), cos, sin).reshape(n, V)
            k = vision_rotate(qkv[:, V : 2 * V].reshape(n, cfg.heads, cfg.hd), cos, sin).reshape(n, V)
            qkv = torch.cat([q, k, qkv[:, 2 * V :]], dim=1)
            a = linear_bias(self.attention(qkv, n), w.bf16(p + "attn.wo.weight"), w.bf16(p + "attn.wo.bias"))
            x = bf16(x + a)
            h = rms_norm(x, w.bf16(p + "norm2.weight"), 1e-6)
            gu = linear_bias(h, w.bf16(p + "mlp.w1.weight"))
            act = bf16(bf16(silu_c(gu[:, :I])) * gu[:, I:])
            x = bf16(x + linear_bias(act, w.bf16(p + "mlp.w2.weight")))
        return rms_norm(x, w.bf16("vision.norm.weight"), 1e-6)

    def aligner(self, feats, n_h, n_w):
        w = self.w
        m = aligner_unfold(feats, n_h, n_w, self.cfg.r)
        h = bf16(gelu_c(linear_bias(m, w.bf16("aligner.w1.weight"), w.bf16("aligner.w1.bias"))))
        return linear_bias(h, w.bf16("aligner.w2.weight"), w.bf16("aligner.w2.bias"))

    def encode_image(self, patches, n_h, n_w):
        return self.aligner(self.tower(patches, n_h, n_w), n_h, n_w)

    def span(self, rows, n_h, n_w):
        """REF merge_image_embeddings for one image: [start] ([image]*tw [newline])*th [end]."""
        r = self.cfg.r
        th, tw = -(-n_h // r), -(-n_w // r)
        w = self.w
        out = [w.bf16("image_start")]
        for y in range(th):
            out.extend(rows[y * tw : (y + 1) * tw])
            out.append(w.bf16("image_newline"))
        out.append(w.bf16("image_end"))
        return torch.stack(out)

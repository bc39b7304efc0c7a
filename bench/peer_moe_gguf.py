#!/usr/bin/python3
"""A random Mixtral-style MoE in llama.cpp's GGUF (Q4_0 weights, f32 norms and router), for timing
llama.cpp beside the engine on a model of comparable shape (bench/peer_side_by_side.sh), and the
accounting both figures are taken in: weight bytes read per decoded token and matmul FLOPs per
prefilled token.

  peer_moe_gguf.py write OUT.gguf     (needs llama.cpp's gguf-py on PYTHONPATH, and numpy)
  peer_moe_gguf.py account IN.gguf    prints "bytes_per_token N" and "flop_per_token N"

Shape: hidden 2048, 12 layers, 16 heads of 128, 64 experts top-6 of width 1408, vocabulary 32000
(a smaller sibling of the engine's real-width slice: experts top-6 of 64 and 4-bit weights)."""
import sys

import numpy as np

HIDDEN, LAYERS, HEADS, HEAD_DIM, EXPERTS, TOP_K, EXPERT_WIDTH, VOCAB = 2048, 12, 16, 128, 64, 6, 1408, 32000
Q4_0_BLOCK = 18  # bytes per 32 weights: an fp16 scale and 16 bytes of 4-bit codes


def q4_0_blocks(rng, rows, n_in):
    """Random Q4_0 rows of n_in weights: codes uniform, the scale set so outputs keep unit variance."""
    blocks = rows * n_in // 32
    out = np.empty((blocks, Q4_0_BLOCK), dtype=np.uint8)
    code_std = np.sqrt(21.25)  # of (code - 8) for codes uniform in 0..15
    scale = (rng.uniform(0.5, 1.5, blocks) / (code_std * np.sqrt(n_in))).astype(np.float16)
    out[:, :2] = scale.view(np.uint8).reshape(blocks, 2)
    out[:, 2:] = rng.integers(0, 256, size=(blocks, 16), dtype=np.uint8)
    return out


def tensors():
    """(name, logical shape [.., n_in], kind): q (Q4_0), norm (ones) or router (f32 normal)."""
    yield "token_embd.weight", (VOCAB, HIDDEN), "q"
    yield "output_norm.weight", (HIDDEN,), "norm"
    yield "output.weight", (VOCAB, HIDDEN), "q"
    for i in range(LAYERS):
        b = f"blk.{i}."
        yield b + "attn_norm.weight", (HIDDEN,), "norm"
        for proj in ("attn_q", "attn_k", "attn_v"):
            yield b + proj + ".weight", (HEADS * HEAD_DIM, HIDDEN), "q"
        yield b + "attn_output.weight", (HIDDEN, HEADS * HEAD_DIM), "q"
        yield b + "ffn_norm.weight", (HIDDEN,), "norm"
        yield b + "ffn_gate_inp.weight", (EXPERTS, HIDDEN), "router"
        yield b + "ffn_gate_exps.weight", (EXPERTS, EXPERT_WIDTH, HIDDEN), "q"
        yield b + "ffn_up_exps.weight", (EXPERTS, EXPERT_WIDTH, HIDDEN), "q"
        yield b + "ffn_down_exps.weight", (EXPERTS, HIDDEN, EXPERT_WIDTH), "q"


def write(path):
    import gguf  # llama.cpp's gguf-py

    rng = np.random.default_rng(20261208)
    w = gguf.GGUFWriter(path, "llama")
    w.add_context_length(4096)
    w.add_embedding_length(HIDDEN)
    w.add_block_count(LAYERS)
    w.add_feed_forward_length(EXPERT_WIDTH)
    w.add_head_count(HEADS)
    w.add_head_count_kv(HEADS)
    w.add_rope_dimension_count(HEAD_DIM)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(VOCAB)
    w.add_expert_count(EXPERTS)
    w.add_expert_used_count(TOP_K)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_Q4_0)
    # A byte-level vocabulary padded with plain tokens: llama-bench feeds token ids, never text.
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{i:02X}>" for i in range(256)]
    types = [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL] + [gguf.TokenType.BYTE] * 256
    tokens += [f"tok{i}" for i in range(VOCAB - len(tokens))]
    types += [gguf.TokenType.NORMAL] * (VOCAB - len(types))
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores([0.0] * VOCAB)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    specs = list(tensors())
    for name, shape, kind in specs:
        if kind == "q":
            raw = (*shape[:-1], shape[-1] // 32 * Q4_0_BLOCK)
            w.add_tensor_info(name, raw, np.dtype(np.uint8), int(np.prod(raw)), raw_dtype=gguf.GGMLQuantizationType.Q4_0)
        else:
            w.add_tensor_info(name, shape, np.dtype(np.float32), int(np.prod(shape)) * 4)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    for name, shape, kind in specs:
        if kind == "q":
            rows = int(np.prod(shape[:-1]))
            data = q4_0_blocks(rng, rows, shape[-1]).reshape(*shape[:-1], shape[-1] // 32 * Q4_0_BLOCK)
        elif kind == "norm":
            data = np.ones(shape, dtype=np.float32)
        else:
            data = rng.normal(0.0, 1.0 / np.sqrt(shape[-1]), shape).astype(np.float32)
        w.write_tensor_data(data)
    w.close()


def account(path):
    """Bytes a decoded token reads: every tensor but the embedding table (one row of it) and the
    experts, whose top-k of n are read. FLOPs a prefilled token does in matmuls: 2 per weight of the
    attention projections, the router and its top-k experts (the output head runs for the last token
    only in llama-bench's prompt test)."""
    from gguf import GGUFReader

    reader = GGUFReader(path)
    nbytes, params = {}, {}
    for t in reader.tensors:
        n = t.name
        kind = ("experts" if "_exps" in n else "router" if "gate_inp" in n else "norm" if "norm" in n
                else "embedding" if n.startswith("token_embd") else "head" if n.startswith("output.") else "attention")
        nbytes[kind] = nbytes.get(kind, 0) + int(t.n_bytes)
        params[kind] = params.get(kind, 0) + int(t.n_elements)
    share = TOP_K / EXPERTS
    read = sum(v for k, v in nbytes.items() if k not in ("experts", "embedding")) + nbytes["experts"] * share
    flops = 2 * (params["attention"] + params["router"] + params["experts"] * share)
    print(f"bytes_per_token {read:.0f}")
    print(f"flop_per_token {flops:.0f}")


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("write", "account"):
        sys.exit(__doc__)
    (write if sys.argv[1] == "write" else account)(sys.argv[2])

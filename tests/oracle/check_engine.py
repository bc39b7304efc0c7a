"""Checks the C++ engine against the independent oracle (oracle.py), MODEL.md §12 test plan.

For every prompt length: runs `ds41 logits --dump` (prompt then greedy decode steps), runs the oracle
on the same tokens (one prefill, then one-token decode steps), and requires
  * logits and every layer's residual stream within 1e-3 relative L2 at every position and step,
  * identical cache codes (FP4 main KV, FP4 index keys, FP8 window entries),
  * identical greedy tokens.
With --dspark (a checkpoint with DSpark layers, MODEL.md §9.3) the engine also drafts a block after
the prompt and after every decode step (`ds41 logits --dspark`) and the oracle does the same from the
same target tokens; required then, for every draft:
  * the target rows DSpark reads (mean of the hc copies entering each target layer) and the draft
    logits (Markov bias included) within 1e-3 relative L2, per slot,
  * the confidence head's outputs within 1e-3 relative L2,
  * identical draft tokens and identical draft-layer window KV codes.
Prints per-prompt figures (max relative L2 and the share of bit-identical values). Exit 1 on failure.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle as orc  # noqa: E402

TOL = 1e-3


def rel_l2(a, b):
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    d = np.linalg.norm(a - b)
    n = np.linalg.norm(b)
    return d / n if n > 0 else d


def prompt_tokens(n, vocab, seed):
    rng = np.random.default_rng(seed * 1000 + n)
    return [int(t) for t in rng.integers(3, vocab, size=n)]


def run_case(args, ckpt, model, n, decode, image_span=None, image_grid=None, vision=None):
    """image_grid (h, w, start, span_len): the span's tokens are image_token_id and its embeddings come
    from the vision tower (the engine's `--image`; the oracle's own tower on the engine's patches)."""
    tokens = prompt_tokens(n, model.cfg.vocab, args.seed)
    if image_grid:
        gh, gw, start, slen = image_grid
        tokens[start : start + slen] = [vision.cfg.image_token_id] * slen
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "logits.npy")
        cmd = [args.engine, "logits", "--model", ckpt, "--tokens", ",".join(map(str, tokens)), "--decode", str(decode),
               "--out", out, "--dump", tmp]
        if image_span:
            cmd += ["--image-span", f"{image_span[0]}:{image_span[1]}"]
        if image_grid:
            cmd += ["--image", f"{gh}x{gw}@{start}", "--image-seed", str(args.seed)]
        if args.dspark:
            cmd += ["--dspark", tmp]
        t0 = time.time()
        res = subprocess.run(cmd, capture_output=True, text=True)
        t_engine = time.time() - t0
        if res.returncode != 0:
            return False, f"engine failed: {res.stderr.strip()}"
        ids = [int(x) for x in res.stdout.strip().split(",")]
        e_logits = np.load(out)
        e_streams = np.load(os.path.join(tmp, "streams.npy"))
        e_cache = {f[:-4]: np.load(os.path.join(tmp, f)) for f in os.listdir(tmp) if f.startswith(("main_kv", "index_keys", "window"))}
        e_dspark = {f[:-4]: np.load(os.path.join(tmp, f)) for f in os.listdir(tmp) if f.startswith("dspark_")}
        image = None
        embeds = None
        if image_span:
            image = [image_span[0] <= i < image_span[1] for i in range(n)]
            rows = torch.from_numpy(np.load(os.path.join(tmp, "image_embeds.npy")))  # the flagged rows only
            embeds = torch.zeros(n, rows.shape[1], dtype=rows.dtype)
            embeds[image_span[0]:image_span[1]] = rows
        span_note = ""
        if image_grid:
            image = [start <= i < start + slen for i in range(n)]
            e_embeds = np.load(os.path.join(tmp, "image_embeds.npy"))  # the flagged rows only: the span
            patches = torch.from_numpy(np.load(os.path.join(tmp, "patches.npy")))
            o_span = vision.span(vision.encode_image(patches, gh, gw), gh, gw)
            embeds = torch.zeros(n, model.cfg.dim)
            embeds[start : start + slen] = o_span
            span_l2 = rel_l2(e_embeds, o_span.numpy())
            span_note = f" tower span relL2 {span_l2:.1e}"

    t0 = time.time()
    model.reset()
    o_logits, o_streams = model.forward(tokens, image, embeds)
    logits_rows, stream_rows = [o_logits], [o_streams]
    o_ids = [int(torch.argmax(o_logits[-1]))]
    drafts, hidden_rows = [], []
    if args.dspark:  # REF's flow: append the target rows, draft from the engine's token (as decode does)
        model.dspark_reset()
        model.dspark_append(0, model.last_hidden)
        hidden_rows.append(model.last_hidden)
        drafts.append(model.dspark_draft(ids[0]))
    for _ in range(decode):
        pos = model.pos
        lg, st = model.forward([ids[len(o_ids) - 1]])
        logits_rows.append(lg)
        stream_rows.append(st)
        o_ids.append(int(torch.argmax(lg[-1])))
        if args.dspark:
            model.dspark_append(pos, model.last_hidden)
            hidden_rows.append(model.last_hidden)
            drafts.append(model.dspark_draft(ids[len(o_ids) - 1]))
    t_oracle = time.time() - t0
    o_logits = torch.cat(logits_rows).numpy()
    o_streams = torch.cat(stream_rows).numpy()
    o_cache = model.caches()

    problems = []
    if ids != o_ids:
        first = next(i for i in range(min(len(ids), len(o_ids))) if ids[i] != o_ids[i])
        problems.append(f"greedy tokens differ from step {first}: engine {ids[first]} oracle {o_ids[first]}")
    if e_logits.shape != o_logits.shape:
        problems.append(f"logits shape {e_logits.shape} vs {o_logits.shape}")
        return False, "; ".join(problems)
    worst_logit = max(rel_l2(e_logits[i], o_logits[i]) for i in range(len(o_logits)))
    es = e_streams.reshape(o_streams.shape)
    worst_stream = max(rel_l2(es[i, L], o_streams[i, L]) for i in range(es.shape[0]) for L in range(es.shape[1]))
    same_logits = float(np.mean(e_logits == o_logits))
    same_streams = float(np.mean(es == o_streams))
    if worst_logit > TOL:
        problems.append(f"logits rel L2 {worst_logit:.2e} > {TOL}")
    if image_grid and span_l2 > TOL:
        problems.append(f"image span embeddings rel L2 {span_l2:.2e} > {TOL}")
    if worst_stream > TOL:
        problems.append(f"stream rel L2 {worst_stream:.2e} > {TOL}")
    for k, ov in o_cache.items():
        ev = e_cache.get(k)
        if ev is None or ev.shape != ov.shape or not np.array_equal(ev, ov):
            diff = "missing" if ev is None else (f"shape {ev.shape} vs {ov.shape}" if ev.shape != ov.shape else
                                                 f"{int(np.sum(ev != ov))} of {ov.size} bytes differ")
            problems.append(f"cache {k}: {diff}")
    dspark_note = ""
    if args.dspark:
        dspark_note = check_dspark(model, e_dspark, drafts, hidden_rows, problems)
    tag = f"n={n:<4d}" + (f" image {image_span[0]}:{image_span[1]}" if image_span else "")
    if image_grid:
        tag += f" image {gh}x{gw} patches at {start}:{start + slen}{span_note}"
    print(f"  {tag} steps={decode} logits relL2 {worst_logit:.1e} (bit-identical {same_logits:.4f}) "
          f"streams relL2 {worst_stream:.1e} (bit-identical {same_streams:.4f}) caches "
          f"{'identical' if not any(p.startswith('cache') for p in problems) else 'DIFFER'} "
          f"tokens {'same' if ids == o_ids else 'DIFFER'}{dspark_note}  [engine {t_engine:.1f}s, oracle {t_oracle:.1f}s]",
          flush=True)
    return not problems, "; ".join(problems)


def check_dspark(model, e, drafts, hidden_rows, problems):
    """Compares the engine's drafts (e: dspark_*.npy) with the oracle's; appends problems, returns a note."""
    o_tokens = np.array([d[0] for d in drafts], dtype=np.int32)
    o_logits = torch.stack([d[1] for d in drafts]).numpy()
    o_conf = torch.stack([d[2] for d in drafts]).numpy()
    o_hidden = torch.cat(hidden_rows).numpy()
    if "dspark_logits" not in e:
        problems.append("dspark: the engine wrote no drafts")
        return " dspark MISSING"
    if e["dspark_logits"].shape != o_logits.shape:
        problems.append(f"dspark logits shape {e['dspark_logits'].shape} vs {o_logits.shape}")
        return " dspark DIFFER"
    worst_hidden = max(rel_l2(e["dspark_hidden"][i], o_hidden[i]) for i in range(len(o_hidden)))
    worst_logit = max(rel_l2(e["dspark_logits"][i, s], o_logits[i, s]) for i in range(o_logits.shape[0])
                      for s in range(o_logits.shape[1]))
    worst_conf = max(rel_l2(e["dspark_confidence"][i], o_conf[i]) for i in range(len(o_conf)))
    same_logits = float(np.mean(e["dspark_logits"] == o_logits))
    same_conf = float(np.mean(e["dspark_confidence"] == o_conf))
    for what, worst in (("hidden", worst_hidden), ("logits", worst_logit), ("confidence", worst_conf)):
        if worst > TOL:
            problems.append(f"dspark {what} rel L2 {worst:.2e} > {TOL}")
    if not np.array_equal(e["dspark_tokens"], o_tokens):
        bad = np.argwhere(e["dspark_tokens"] != o_tokens)[0]
        problems.append(f"dspark draft tokens differ at draft {bad[0]} slot {bad[1]}")
    caches_ok = True
    for k, ov in model.dspark_caches().items():
        ev = e.get(k)
        if ev is None or ev.shape != ov.shape or not np.array_equal(ev, ov):
            caches_ok = False
            problems.append(f"dspark cache {k}: " + ("missing" if ev is None else f"shape {ev.shape} vs {ov.shape}"
                                                      if ev.shape != ov.shape else f"{int(np.sum(ev != ov))} bytes differ"))
    return (f" | dspark drafts={o_logits.shape[0]}x{o_logits.shape[1]} logits relL2 {worst_logit:.1e} (bit-identical "
            f"{same_logits:.4f}) conf relL2 {worst_conf:.1e} (bit-identical {same_conf:.2f}) hidden relL2 {worst_hidden:.1e} "
            f"rings {'identical' if caches_ok else 'DIFFER'} tokens "
            f"{'same' if np.array_equal(e['dspark_tokens'], o_tokens) else 'DIFFER'}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--engine", required=True)
    ap.add_argument("--ckpt", required=True, help="checkpoint folder the engine runs")
    ap.add_argument("--oracle-ckpt", default="", help="checkpoint the oracle runs (default: the same); a different "
                    "one must make the check fail, which proves it can")
    ap.add_argument("--prompts", default="1,2,3,15,16,17,33,64,257,300")
    ap.add_argument("--decode", type=int, default=24)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--image-span", default="", help="also run one prompt with START:END flagged as image")
    ap.add_argument("--dspark", action="store_true", help="also check DSpark drafts after the prompt and every step")
    args = ap.parse_args()
    torch.set_num_threads(1)
    model = orc.Oracle(args.oracle_ckpt or args.ckpt)
    print(f"checkpoint {args.ckpt}: {model.cfg.n_layers} layers, dim {model.cfg.dim}, window {model.cfg.window}")
    failures = []
    for n in [int(x) for x in args.prompts.split(",") if x]:
        ok, why = run_case(args, args.ckpt, model, n, args.decode)
        if not ok:
            failures.append(f"n={n}: {why}")
    if args.image_span:
        a, b = [int(x) for x in args.image_span.split(":")]
        n = max(b + 8, 40)
        ok, why = run_case(args, args.ckpt, model, n, args.decode, (a, b))
        if not ok:
            failures.append(f"image n={n}: {why}")
    if failures:
        print("FAILED:\n  " + "\n  ".join(failures))
        sys.exit(1)
    print("all cases agree")


if __name__ == "__main__":
    main()

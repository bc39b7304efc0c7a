"""Checks the engine's vision tower and aligner against the oracle (oracle.py Vision; MODEL.md §2.5, §9.2).

For every patch grid: `ds41 vision` encodes seeded patches; the oracle encodes the same patches; required:
  * the aligner rows within 1e-3 relative L2 per row (the share of bit-identical values is printed),
  * the span embeddings ([start] ([image]*n_w [newline])*n_h [end]) within 1e-3 relative L2,
  * a grid whose span exceeds max_image_tokens refused with InvalidArgument (exit code 2).
With --e2e HxW the whole path too: a prompt whose image span (image_token_id tokens) takes the tower's
embeddings, logits and streams compared as check_engine.py does (prompt, then decode steps).
Exit 1 on failure.
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
import check_engine  # noqa: E402
import oracle as orc  # noqa: E402

TOL = 1e-3


def parse_grid(s):
    h, w = s.split("x")
    return int(h), int(w)


def check_grid(args, vision, h, w):
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.time()
        res = subprocess.run([args.engine, "vision", "--model", args.ckpt, "--grid", f"{h}x{w}", "--seed", str(args.seed),
                              "--out", tmp], capture_output=True, text=True)
        t_engine = time.time() - t0
        if res.returncode != 0:
            return False, f"engine failed: {res.stderr.strip()}"
        patches = torch.from_numpy(np.load(os.path.join(tmp, "patches.npy")))
        e_rows = np.load(os.path.join(tmp, "rows.npy"))
        e_span = np.load(os.path.join(tmp, "span.npy"))
    t0 = time.time()
    o_rows = vision.encode_image(patches, h, w).numpy()
    o_span = vision.span(torch.from_numpy(o_rows), h, w).numpy()
    t_oracle = time.time() - t0
    problems = []
    if e_rows.shape != o_rows.shape:
        return False, f"rows shape {e_rows.shape} vs {o_rows.shape}"
    if e_span.shape != o_span.shape:
        return False, f"span shape {e_span.shape} vs {o_span.shape}"
    worst = max(check_engine.rel_l2(e_rows[i], o_rows[i]) for i in range(len(o_rows)))
    span_l2 = check_engine.rel_l2(e_span, o_span)
    same = float(np.mean(e_rows == o_rows))
    if worst > TOL:
        problems.append(f"aligner rows rel L2 {worst:.2e} > {TOL}")
    if span_l2 > TOL:
        problems.append(f"span rel L2 {span_l2:.2e} > {TOL}")
    print(f"  grid {h}x{w}: {o_rows.shape[0]} rows, span {o_span.shape[0]}; rows relL2 {worst:.1e} (bit-identical "
          f"{same:.4f}) span relL2 {span_l2:.1e}  [engine {t_engine:.1f}s, oracle {t_oracle:.1f}s]", flush=True)
    return not problems, "; ".join(problems)


def check_refused(args, vision):
    """The smallest square grid over the span cap must be refused (InvalidArgument: exit code 2)."""
    r = vision.cfg.r
    t = 1
    while t * (t + 1) + 2 <= vision.cfg.max_tokens:
        t += 1
    g = t * r
    with tempfile.TemporaryDirectory() as tmp:
        res = subprocess.run([args.engine, "vision", "--model", args.ckpt, "--grid", f"{g}x{g}", "--out", tmp],
                             capture_output=True, text=True)
    ok = res.returncode == 2 and "vision_max_n_token" in res.stderr
    print(f"  grid {g}x{g} ({t}x{t} tokens, span {t * (t + 1) + 2} > {vision.cfg.max_tokens}): "
          f"{'refused' if ok else 'NOT refused as expected'} ({res.stderr.strip()[:120]})", flush=True)
    return ok, "" if ok else f"grid {g}x{g} over the cap not refused with InvalidArgument: rc {res.returncode}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--engine", required=True)
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--grids", default="1x1,3x3,7x5,12x12")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--e2e", default="", help="also an end-to-end prompt with an HxW image span")
    ap.add_argument("--decode", type=int, default=4)
    args = ap.parse_args()
    torch.set_num_threads(1)
    vision = orc.Vision(args.ckpt)
    c = vision.cfg
    print(f"checkpoint {args.ckpt}: vision {c.layers} blocks, dim {c.dim}, {c.heads} heads, inter {c.inter}, "
          f"patch {c.patch}, downsample {c.r}, max tokens {c.max_tokens}")
    failures = []
    for g in [x for x in args.grids.split(",") if x]:
        h, w = parse_grid(g)
        ok, why = check_grid(args, vision, h, w)
        if not ok:
            failures.append(f"grid {g}: {why}")
    ok, why = check_refused(args, vision)
    if not ok:
        failures.append(why)
    if args.e2e:
        h, w = parse_grid(args.e2e)
        th, tw = -(-h // c.r), -(-w // c.r)
        slen = th * (tw + 1) + 2
        start = 3
        n = start + slen + 6
        model = orc.Oracle(args.ckpt)
        model.w = vision.w  # one read of the checkpoint
        eargs = argparse.Namespace(engine=args.engine, seed=args.seed, dspark=False)
        ok, why = check_engine.run_case(eargs, args.ckpt, model, n, args.decode, image_grid=(h, w, start, slen),
                                        vision=vision)
        if not ok:
            failures.append(f"e2e {args.e2e}: {why}")
    if failures:
        print("FAILED:\n  " + "\n  ".join(failures))
        sys.exit(1)
    print("all cases agree")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""The simulator against the real cluster (issue 25 item 5), run by run.

  scripts/sim-agreement.py AB_DIR PROFILE [--build BUILD] [--tag sim]

AB_DIR is what scripts/placement-ab.sh wrote: its runs.txt holds the exact replay command of every
run. For each run (the capacity run aside) this runs build/sim/ds41-sim with the same workload,
client and policy flags and the rate PROFILE (ds41-sim calibrate's, measured on the same cluster),
writes AB_DIR/<tag>-<label>.jsonl, and prints a markdown row: hit share (points apart), TTFT mean
and p90 (simulated over real). Figures are computed as trace/summary.h computes them (ok requests;
nearest-rank percentiles).
"""
import argparse
import json
import math
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def figures(path):
    ok = []
    with open(path) as f:
        for line in f:
            if not line.strip():
                continue
            r = json.loads(line)
            if "run" in r or r.get("outcome") != "ok":
                continue
            ok.append(r)
    if not ok:
        return 0.0, 0.0, 0.0
    ttft = sorted(r["ttft_s"] for r in ok)
    hit = 100.0 * sum(r["cached_tokens"] for r in ok) / max(1, sum(r["prompt_tokens"] for r in ok))
    p90 = ttft[max(0, math.ceil(0.9 * len(ttft)) - 1)]
    return hit, sum(ttft) / len(ttft), p90


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("ab_dir")
    ap.add_argument("profile")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--tag", default="sim")
    a = ap.parse_args()
    sim = os.path.join(a.build, "sim", "ds41-sim")
    copied = ["--trace", "--session-sample", "--token-scale", "--unit-tokens", "--time-scale", "--start",
              "--duration", "--concurrency", "--deadline"]
    print("| policy @ load | hit % real / sim (points) | TTFT mean real / sim (ratio) | p90 real / sim (ratio) |")
    print("|---|---|---|---|")
    with open(os.path.join(a.ab_dir, "runs.txt")) as f:
        runs = [line.split() for line in f if "--label" in line]
    for args in runs:
        label = args[args.index("--label") + 1]
        if label == "capacity":
            continue
        out = os.path.join(a.ab_dir, f"{a.tag}-{label}.jsonl")
        cmd = [sim, "run", "--profile", a.profile, "--encoders", "2", "--decoders", "2",
               "--policy", label.split("@")[0], "--label", label, "--out", out]
        for flag in copied:
            if flag in args:
                cmd += [flag, args[args.index(flag) + 1]]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        real, simulated = figures(os.path.join(a.ab_dir, f"{label}.jsonl")), figures(out)
        ratio = lambda s, r: s / r if r > 0 else float("nan")
        print(f"| {label} | {real[0]:.1f} / {simulated[0]:.1f} ({simulated[0] - real[0]:+.1f}) "
              f"| {real[1]:.2f} / {simulated[1]:.2f} ({ratio(simulated[1], real[1]):.2f}) "
              f"| {real[2]:.2f} / {simulated[2]:.2f} ({ratio(simulated[2], real[2]):.2f}) |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

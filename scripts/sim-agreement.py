#!/usr/bin/env python3
"""The simulator against the real cluster (issue 25 item 5), run by run.

  scripts/sim-agreement.py AB_DIR PROFILE [--build BUILD] [--tag sim] [--cost-profile FILE]
                           [--repeat AB_DIR2 ...] [--plot PNG]

AB_DIR is what scripts/placement-ab.sh wrote: its runs.txt holds the exact replay command of every
run. For each run (the capacity run aside) this runs build/sim/ds41-sim with the same workload,
client and policy flags and the rate PROFILE (ds41-sim calibrate's, measured on the same cluster),
writes AB_DIR/<tag>-<label>.jsonl, and prints a markdown row: hit share (points apart), TTFT mean
and p90 (simulated over real). Figures are computed as trace/summary.h computes them (ok requests;
nearest-rank percentiles). --cost-profile: the runs' routers had --cost-profile FILE
(DS41_COST_PROFILE), so the simulated router gets it too. --repeat: other rounds of the same runs
(placement-ab.sh again, same --capacity); the real figures are then the mean over the rounds, and a
last column gives each run's mean TTFT range over them: how far the cluster agrees with itself. --plot: a PNG (gnuplot) of each run's mean TTFT, every
round's and the simulator's.
"""
import argparse
import json
import math
import os
import shutil
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
    ap.add_argument("--cost-profile", default="")
    ap.add_argument("--repeat", action="append", default=[], help="another round's AB_DIR (repeatable)")
    ap.add_argument("--plot", default="", help="PNG of the mean TTFT per run: each round's and the simulator's")
    a = ap.parse_args()
    sim = os.path.join(a.build, "sim", "ds41-sim")
    copied = ["--trace", "--session-sample", "--token-scale", "--unit-tokens", "--time-scale", "--start",
              "--duration", "--concurrency", "--deadline"]
    rounds = [a.ab_dir] + a.repeat
    spread = " real mean TTFT over rounds (max/min) |" if a.repeat else ""
    print("| policy @ load | hit % real / sim (points) | TTFT mean real / sim (ratio) | p90 real / sim (ratio) |" + spread)
    print("|---|---|---|---|" + ("---|" if a.repeat else ""))
    points = []  # (label, [each round's mean TTFT], simulated mean TTFT)
    with open(os.path.join(a.ab_dir, "runs.txt")) as f:
        runs = [line.split() for line in f if "--label" in line]
    for args in runs:
        label = args[args.index("--label") + 1]
        if label == "capacity":
            continue
        out = os.path.join(a.ab_dir, f"{a.tag}-{label}.jsonl")
        cmd = [sim, "run", "--profile", a.profile, "--encoders", "2", "--decoders", "2",
               "--policy", label.split("@")[0], "--label", label, "--out", out]
        if a.cost_profile:
            cmd += ["--cost-profile", a.cost_profile]
        for flag in copied:
            if flag in args:
                cmd += [flag, args[args.index(flag) + 1]]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        each = [figures(os.path.join(d, f"{label}.jsonl")) for d in rounds
                if os.path.exists(os.path.join(d, f"{label}.jsonl"))]
        real = [sum(f[k] for f in each) / len(each) for k in range(3)]
        simulated = figures(out)
        ratio = lambda s, r: s / r if r > 0 else float("nan")
        row = (f"| {label} | {real[0]:.1f} / {simulated[0]:.1f} ({simulated[0] - real[0]:+.1f}) "
               f"| {real[1]:.2f} / {simulated[1]:.2f} ({ratio(simulated[1], real[1]):.2f}) "
               f"| {real[2]:.2f} / {simulated[2]:.2f} ({ratio(simulated[2], real[2]):.2f}) |")
        means = [f[1] for f in each]
        if a.repeat:
            row += f" {min(means):.2f}–{max(means):.2f} ({ratio(max(means), min(means)):.2f}, {len(each)} runs) |"
        print(row, flush=True)
        points.append((label, means, simulated[1]))
    if a.plot:
        plot(a.plot, points)
    return 0


def plot(png, points):
    gp = shutil.which("gnuplot")
    if not gp or not points:
        print("no plot: gnuplot missing or no runs", file=sys.stderr)
        return
    dat = os.path.splitext(png)[0] + ".dat"
    rounds = max(len(p[1]) for p in points)
    with open(dat, "w") as f:
        for i, (label, real, simulated) in enumerate(points):
            cols = real + ["NaN"] * (rounds - len(real))
            f.write(f"{i} {label} {simulated} " + " ".join(str(c) for c in cols) + "\n")
    series = ", ".join(f"'{dat}' using 1:{4 + r}:xtic(2) with points pt 7 ps 1.2 title 'real, round {r + 1}'"
                       for r in range(rounds))
    script = (f"set terminal pngcairo size 900,480 noenhanced; set output '{png}'; set ylabel 'mean TTFT, s';"
              f"set logscale y; set xtics rotate by -30; set offsets 0.5, 0.5, 0, 0; set key top left;"
              f"set title 'Mean TTFT per run: the real cluster in each round, and the simulator';"
              f"plot {series}, '{dat}' using 1:3 with points pt 5 ps 1.6 lc rgb 'black' title 'simulator'")
    subprocess.run([gp, "-e", script], check=True)
    print(f"plot: {png}")


if __name__ == "__main__":
    sys.exit(main())

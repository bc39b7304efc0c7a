#!/usr/bin/python3
"""Oracle for the C++ pre-tokenizer: Python's `regex` with the release pattern, as three
sequential isolating splits, compared piece for piece with ds41_pretokenize on seeded random
strings that mix every character class across the whole Unicode range.

  pretokenize_oracle.py --binary build/tokenizer/ds41_pretokenize [--count N] [--seed S]
Exit status 0 when every string splits identically.
"""
import argparse
import json
import random
import subprocess
import sys

import regex

SPLITS = [
    regex.compile(r"\p{N}{1,3}"),
    regex.compile(r"[一-龥぀-ゟ゠-ヿ]+"),
    regex.compile(r"[!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+"
                  r"| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"),
]


def isolate(pattern, piece):
    """Hugging Face Split with behavior Isolated: matches and the gaps between them."""
    out, last = [], 0
    for m in pattern.finditer(piece):
        if m.start() > last:
            out.append(piece[last:m.start()])
        out.append(m.group())
        last = m.end()
    if last < len(piece):
        out.append(piece[last:])
    return out


def pretokenize(text):
    pieces = [text] if text else []
    for pattern in SPLITS:
        pieces = [p for piece in pieces for p in isolate(pattern, piece)]
    return pieces


def build_pools():
    """Codepoints grouped by the classes the pattern distinguishes (surrogates excluded)."""
    every = "".join(chr(cp) for cp in range(0x110000) if not 0xD800 <= cp <= 0xDFFF)
    pools = {"cjk": regex.findall(r"[一-龥぀-ゟ゠-ヿ]", every)}
    taken = set()
    for k, pattern in (("L", r"\p{L}"), ("M", r"\p{M}"), ("N", r"\p{N}"), ("P", r"\p{P}"),
                       ("S", r"\p{S}"), ("Z", r"\s")):
        pools[k] = [ch for ch in regex.findall(pattern, every) if ch not in taken]
        taken.update(pools[k])
    pools["C"] = [ch for ch in every if ch not in taken]
    return pools


ASCII_HEAVY = "aZ09 \t\r\n!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"


def random_string(rng, pools):
    n = rng.randint(0, 24)
    out = []
    for _ in range(n):
        r = rng.random()
        if r < 0.35:
            out.append(rng.choice(ASCII_HEAVY))
        elif r < 0.45:
            out.append(rng.choice(" \r\n\u00a0\u3000\u2028\t\x0b\x0c\x85"))
        else:
            pool = pools[rng.choice(list(pools))]
            out.append(rng.choice(pool))
        if rng.random() < 0.15 and out:  # Runs exercise greedy quantifiers.
            out.append(out[-1] * rng.randint(1, 5))
    return "".join(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--count", type=int, default=20000)
    ap.add_argument("--seed", type=int, default=4141)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    pools = build_pools()
    texts = [random_string(rng, pools) for _ in range(args.count)]
    # Fixed cases first: the lookahead, optional-prefix and newline-run edges.
    texts[:0] = ["a  b", "a \n\n b", "  ", " ", "x ", "1234567", "foo.Bar", " !!\n\n", "\u0301a",
                 " \u0301", "日本語テキストabc", "\r\n\r\n  x", "a\u00a0\u00a0b"]
    proc = subprocess.run([args.binary], input=json.dumps(texts).encode(), capture_output=True,
                          check=False)
    if proc.returncode != 0:
        sys.exit(f"{args.binary} failed: {proc.stderr.decode(errors='replace')}")
    got = json.loads(proc.stdout)
    if len(got) != len(texts):
        sys.exit(f"expected {len(texts)} results, got {len(got)}")
    bad = 0
    for text, pieces in zip(texts, got):
        want = pretokenize(text)
        if pieces != want:
            bad += 1
            if bad <= 10:
                print(f"MISMATCH {text!r}\n  c++:    {pieces!r}\n  oracle: {want!r}")
    print(f"{len(texts) - bad}/{len(texts)} strings match")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()

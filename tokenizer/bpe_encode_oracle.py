#!/usr/bin/python3
"""Oracle for Tokenizer::Encode: trains a tokenizer.json with ds41_train_bpe, then checks the C++
token ids against an independent Python byte-level BPE (GPT-2 style rank merging over the
pre-tokenizer of pretokenize_oracle.py), with control tokens allowed and not.

  bpe_encode_oracle.py --bin-dir build/tokenizer [--count N] [--seed S]
"""
import argparse
import json
import os
import random
import subprocess
import sys
import tempfile

import regex

sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pretokenize_oracle import build_pools, pretokenize, random_string  # noqa: E402


def byte_alphabet():
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    mapping, extra = {}, 0
    for b in range(256):
        if b in keep:
            mapping[b] = chr(b)
        else:
            mapping[b] = chr(256 + extra)
            extra += 1
    return mapping


class Reference:
    def __init__(self, tokenizer_json):
        model = tokenizer_json["model"]
        self.vocab = model["vocab"]
        self.added = {a["content"]: a["id"] for a in tokenizer_json["added_tokens"]}
        self.ranks = {}
        for i, m in enumerate(model["merges"]):
            pair = tuple(m.split(" ")) if isinstance(m, str) else tuple(m)
            # Documented contract: merges touching a control token are ignored.
            if pair[0] in self.added or pair[1] in self.added or pair[0] + pair[1] in self.added:
                continue
            self.ranks.setdefault(pair, i)
        alternatives = sorted(self.added, key=len, reverse=True)
        self.control_re = regex.compile("|".join(regex.escape(a) for a in alternatives))
        self.alphabet = byte_alphabet()

    def bpe(self, piece):
        word = [self.alphabet[b] for b in piece.encode("utf-8")]
        while len(word) > 1:
            pairs = [(self.ranks.get((word[i], word[i + 1]), None), i) for i in range(len(word) - 1)]
            ranked = [r for r, _ in pairs if r is not None]
            if not ranked:
                break
            best = min(ranked)
            a, b = next((word[i], word[i + 1]) for r, i in pairs if r == best)
            merged, i = [], 0
            while i < len(word):
                if i + 1 < len(word) and word[i] == a and word[i + 1] == b:
                    merged.append(a + b)
                    i += 2
                else:
                    merged.append(word[i])
                    i += 1
            word = merged
        return [self.vocab[s] for s in word]

    def encode(self, text, allow_control):
        chunks = []
        if allow_control:
            last = 0
            for m in self.control_re.finditer(text):
                chunks.append((text[last:m.start()], None))
                chunks.append(("", self.added[m.group()]))
                last = m.end()
            chunks.append((text[last:], None))
        else:
            chunks.append((text, None))
        ids = []
        for plain, control in chunks:
            if control is not None:
                ids.append(control)
            for piece in pretokenize(plain):
                ids.extend(self.bpe(piece))
        return ids


CONTROLS = ["<｜tool▁call▁begin｜>", "<think>", "</think>"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin-dir", required=True)
    ap.add_argument("--count", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=4142)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    pools = build_pools()
    words = ["the", " the", "token", "izer", " serve", "Hello", " world", "東京", "данные", "1234",
             "\n\n", "    ", "def", "(self)", "<think>"]
    corpus = ["".join(rng.choice(words) for _ in range(rng.randint(1, 30))) for _ in range(4000)]
    corpus += [random_string(rng, pools) for _ in range(2000)]
    texts = [random_string(rng, pools) for _ in range(args.count)]
    texts += [rng.choice(corpus) + rng.choice(CONTROLS + ["<｜begin▁of▁sentence｜>"]) + rng.choice(corpus)
              for _ in range(args.count // 3)]
    with tempfile.TemporaryDirectory() as tmp:
        corpus_path = os.path.join(tmp, "corpus.txt")
        with open(corpus_path, "w", encoding="utf-8", newline="") as f:
            # One text per line for ds41_train_bpe, which splits on \n.
            f.write("\n".join(t.replace("\n", " ") for t in corpus))
        tok_path = os.path.join(tmp, "tokenizer.json")
        train = [os.path.join(args.bin_dir, "ds41_train_bpe"), "2000", tok_path, corpus_path]
        subprocess.run(train, check=True, capture_output=True)
        # ds41_train_bpe adds no control tokens beyond the fixed three, so append ours at the end.
        # "<think>" is also in the corpus, so a learned "<think>" token (if any) becomes a control
        # id and the merge producing it must be ignored by both sides.
        with open(tok_path, encoding="utf-8") as f:
            tj = json.load(f)
        next_id = max(tj["model"]["vocab"].values()) + 1
        for c in CONTROLS:
            tj["added_tokens"].append({"id": next_id, "content": c, "special": True})
            tj["model"]["vocab"][c] = next_id
            next_id += 1
        with open(tok_path, "w", encoding="utf-8") as f:
            json.dump(tj, f, ensure_ascii=False)
        ref = Reference(tj)
        bad = 0
        for mode in ("plain", "control"):
            proc = subprocess.run([os.path.join(args.bin_dir, "ds41_tokenize"), tok_path, mode],
                                  input=json.dumps(texts).encode(), capture_output=True, check=False)
            if proc.returncode != 0:
                sys.exit(f"ds41_tokenize failed: {proc.stderr.decode(errors='replace')}")
            got = json.loads(proc.stdout)
            for text, ids in zip(texts, got):
                want = ref.encode(text, mode == "control")
                if ids != want:
                    bad += 1
                    if bad <= 5:
                        print(f"MISMATCH ({mode}) {text!r}\n  c++: {ids}\n  ref: {want}")
        print(f"{2 * len(texts) - bad}/{2 * len(texts)} encodings match")
        sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()

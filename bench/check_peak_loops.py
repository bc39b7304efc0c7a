#!/usr/bin/env python3
"""The peak loops of bench/machine_limits run the instructions they are counted for.

  check_peak_loops.py LIBRARY.a

Disassembles the library (objdump) and, for each peak loop, finds its inner loop (from the first
counted instruction to the first jump back) and checks: the counted instruction appears once per
chain, nothing is loaded from or stored to memory, and little else runs. A value test cannot see a
compiler that merges chains, hoists the products or spills the accumulators: this can.
"""
import re
import subprocess
import sys

# (function symbol pattern, counted instruction, count per loop iteration, other instructions allowed)
LOOPS = [
    (r"N_AVX37FmaLoop", r"vfmadd\w+ps", 12, 4),
    (r"N_AVX27FmaLoop", r"vfmadd\w+ps", 12, 4),
    (r"Bf16DotLoop", r"vdpbf16ps", 12, 4),
    (r"Int8Zmm", r"vpdpbusd", 12, 4),
    (r"Int8AvxVnni", r"(\{vex\} )?vpdpbusd", 12, 4),
    (r"Int8Avx2", r"vpmaddubsw", 8, 8 * 2 + 4),  # each with its vpmaddwd and vpaddd
    (r"AmxBf16Loop", r"tdpbf16ps", 4, 4),
    (r"AmxInt8Loop", r"tdpbssd", 4, 4),
]


def functions(lib):
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", lib], check=True, capture_output=True, text=True).stdout
    funcs, name = {}, None
    for line in out.splitlines():
        m = re.match(r"^[0-9a-f]+ <(.+)>:$", line)
        if m:
            name = m.group(1)
            funcs[name] = []
        elif name and re.match(r"^\s+[0-9a-f]+:\s", line):
            funcs[name].append(line.split(":", 1)[1].strip())
    return funcs


def inner_loop(body, counted):
    first = next((i for i, ins in enumerate(body) if re.match(counted, ins)), None)
    if first is None:
        return None
    for j in range(first, len(body)):
        if re.match(r"j\w+\s", body[j]):
            return body[first:j + 1]
    return None


def main():
    funcs = functions(sys.argv[1])
    failures = 0
    for pattern, counted, per_iter, others in LOOPS:
        names = [n for n in funcs if re.search(pattern, n) and "ForTest" not in n and "Dispatch" not in n]
        if not names:
            print(f"FAIL {pattern}: not in the library")
            failures += 1
            continue
        for name in names:
            loop = inner_loop(funcs[name], counted)
            if loop is None:
                print(f"FAIL {name}: no loop with {counted}")
                failures += 1
                continue
            n = sum(1 for ins in loop if re.match(counted, ins))
            memory = [ins for ins in loop if "(" in ins and not ins.startswith("nop")]
            rest = len(loop) - n
            ok = n == per_iter and not memory and rest <= others
            print(f"{'ok  ' if ok else 'FAIL'} {name}: {n} x {counted} (want {per_iter}), {rest} other, "
                  f"{len(memory)} memory operands{': ' + memory[0] if memory else ''}")
            failures += 0 if ok else 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

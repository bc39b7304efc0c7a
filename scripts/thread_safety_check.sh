#!/usr/bin/env bash
# Clang's thread-safety analysis over the project's own sources: every DS41_GUARDED_BY member is
# touched, and every DS41_REQUIRES function called, with its ds41::Mutex held (util/mutex.h,
# util/thread_annotations.h). GCC ignores the annotations; this is where they are checked.
#
# Configures a clang build directory (default ./build-thread-safety) once, generates the protobuf
# headers there, and compiles each translation unit of compile_commands.json with -fsyntax-only
# (no code generated, nothing linked), in parallel. Only thread-safety findings are enabled, and they
# are errors; clang's other warnings are off (the GCC build keeps the project's warnings clean).
# A translation unit that includes neither util/thread_annotations.h nor a header that does (the
# project's quoted includes, followed) holds no annotation and cannot have a finding: it is skipped
# unless --all.
#
#   scripts/thread_safety_check.sh [--build-dir DIR] [--jobs N] [--all]
#   scripts/thread_safety_check.sh --self-test   the check must be able to fail: a planted unguarded
#                                                write must be reported, its locked twin must pass
# Exit status: 0 clean, 1 findings (printed, each with its file and line) or a unit that clang could
# not compile (or a failed self-test), 2 usage.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bdir="$root/build-thread-safety"
jobs=$(nproc)
all=0
self_test=0
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) bdir=$(realpath -m "$2"); shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --all) all=1; shift ;;
    --self-test) self_test=1; shift ;;
    *) echo "usage: $0 [--build-dir DIR] [--jobs N] [--all] | --self-test" >&2; exit 2 ;;
  esac
done
# What each unit is compiled with, on top of its own command: only thread-safety findings, as errors.
tsa_flags=(-fsyntax-only -Wno-everything -Wthread-safety -Werror=thread-safety)

# The build's packages (cmake, ninja, protoc, the libraries' headers) and clang, installed as the
# build installs its own when missing.
"$root/scripts/setup.sh" clang

if [ "$self_test" = 1 ]; then
  # A counter whose write takes its lock, or (no argument) does not.
  unit() {
    printf '#include "util/mutex.h"\nnamespace ds41 {\nclass Counter {\n public:\n'
    printf '  void Add() { %s n_ += 1; }\n\n private:\n  Mutex mu_;\n' "${1:-}"
    printf '  int n_ DS41_GUARDED_BY(mu_) = 0;\n};\n}  // namespace ds41\n'
  }
  if ! out=$(unit 'MutexLock l(&mu_);' | clang++ -std=c++20 -I"$root" "${tsa_flags[@]}" -x c++ - 2>&1); then
    echo "$out"; echo "thread-safety self-test: FAILED (the locked write was refused)"; exit 1
  fi
  if out=$(unit | clang++ -std=c++20 -I"$root" "${tsa_flags[@]}" -x c++ - 2>&1); then
    echo "thread-safety self-test: FAILED (the unguarded write passed)"; exit 1
  fi
  if ! grep -q "writing variable 'n_' requires holding mutex 'mu_'" <<< "$out"; then
    echo "$out"; echo "thread-safety self-test: FAILED (not refused for the missing lock)"; exit 1
  fi
  echo "thread-safety self-test: passed (the unguarded write was reported, its locked twin passed)"
  exit 0
fi

start=$(date +%s)
if [ ! -f "$bdir/build.ninja" ]; then
  mkdir -p "$bdir"
  cmake -S "$root" -B "$bdir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
    > "$bdir/configure.log" 2>&1 || { cat "$bdir/configure.log"; exit 1; }
fi
# Generated headers (protobuf, gRPC) that the sources include; ninja re-runs cmake first when a
# CMakeLists.txt changed, which refreshes compile_commands.json.
mapfile -t generated < <(ninja -C "$bdir" -t targets all |
  awk -F': ' '$2 == "CUSTOM_COMMAND" && $1 ~ /\.h$/ && $1 !~ /^\// {print $1}')
if [ ${#generated[@]} -gt 0 ]; then
  ninja -C "$bdir" "${generated[@]}" > "$bdir/generate.log" 2>&1 || { cat "$bdir/generate.log"; exit 1; }
fi

python3 - "$root" "$bdir" "$jobs" "$all" "$start" "${tsa_flags[@]}" <<'EOF'
import concurrent.futures, json, os, re, shlex, subprocess, sys, time

root, bdir, jobs, check_all, start = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1", int(sys.argv[5])
FLAGS = sys.argv[6:]
ANNOTATIONS = os.path.join(root, "util", "thread_annotations.h")

units = []
for e in json.load(open(os.path.join(bdir, "compile_commands.json"))):
    f = os.path.normpath(os.path.join(e["directory"], e["file"]))
    if f.startswith(root + os.sep) and not f.startswith(bdir + os.sep):
        units.append((f, e))

# The project's quoted includes, followed from every unit: the files that reach the annotations.
includes_re = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)
graph, todo = {}, [f for f, _ in units]
while todo:
    path = todo.pop()
    if path in graph:
        continue
    graph[path] = []
    try:
        text = open(path, errors="replace").read()
    except OSError:
        continue
    for inc in includes_re.findall(text):
        for base in (os.path.dirname(path), root):  # either may be the one the compiler takes
            p = os.path.normpath(os.path.join(base, inc))
            if os.path.isfile(p):
                graph[path].append(p)
                todo.append(p)
reaching, grew = {ANNOTATIONS}, True
while grew:
    grew = False
    for path, incs in graph.items():
        if path not in reaching and any(i in reaching for i in incs):
            reaching.add(path)
            grew = True

checked = [(f, e) for f, e in units if check_all or f in reaching]

def command(e):
    args = shlex.split(e["command"]) if "command" in e else list(e["arguments"])
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
        elif a == "-o":
            skip = True
        elif a != "-c":
            out.append(a)
    return out + FLAGS

def run(item):
    f, e = item
    p = subprocess.run(command(e), cwd=e["directory"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return f, p.returncode, p.stdout

failed = []
with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
    for f, rc, out in pool.map(run, checked):
        if rc != 0:
            failed.append(os.path.relpath(f, root))
            sys.stdout.write(out)
            sys.stdout.flush()

took = int(time.time()) - start
print(f"thread-safety check: {len(checked)} of {len(units)} translation units analysed"
      f"{'' if check_all else ' (the rest include no annotations)'}, {len(failed)} failed, {took} s")
for f in failed:
    print(f"  {f}")
sys.exit(1 if failed else 0)
EOF

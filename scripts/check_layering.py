#!/usr/bin/python3
"""Checks the project's layering against the target graph CMake itself computed.

The graph comes from the CMake File API (codemodel-v2 reply under BUILD/.cmake/api/v1/reply),
which the top-level CMakeLists.txt requests on every configure; nothing here parses CMakeLists.

Per target: its folder (the top-level folder of the CMakeLists.txt that defines it), its sources,
and its link closure. In CMake 3.25 (codemodel 2.4) a target's `dependencies` lists every project
target it depends on to build; for targets built from target_link_libraries that already is the
transitive link closure (CMake follows the link interface), and an executable's
link.commandFragments name the same archives. The closure used here is the transitive closure of
both (dependencies that come from add_dependencies, order only, are left out).

Check A, declared dependencies: every quoted `#include "dir/file.h"` in a target's sources, and in
the project headers they include (followed transitively, generated protobuf headers included),
resolves to a file owned by the target or by a target in its link closure. A file `d/f.h` is owned
by the targets listing it as a source or compiling `d/f.cc`; else by the library targets that
compile sources in directory `d/` (util/check.h belongs to ds41_util); else by any target that does.
`<name>.pb.h` and `<name>.grpc.pb.h` belong to the target generated from `<name>.proto`, and
`<name>.pb.h` includes the `.pb.h` of every `import` of `<name>.proto`. Includes that resolve to no
file of the project (system and third-party headers, <...> includes) are ignored.

Check B, role folders: encoder_node, decoder_node, cache_service and router never depend on one
another: no file in one of them includes a file of another (directly, or through headers of other
folders that its targets reach), and no target defined in one links, transitively, a target
defined in another. Targets of tests/ and bench/ may depend on anything.

The first configure of a fresh build directory writes no reply: CMake reads the File API queries
when it starts, before CMakeLists.txt writes the query (cmake_file_api() needs CMake 3.27). So when
the reply is missing, or older than a CMakeLists.txt or *.cmake file of the source tree, this
script re-runs `cmake -S SOURCE -B BUILD` once (with the build's own cache) and reads the new reply;
--no-reconfigure turns that off.

Usage:
  check_layering.py [--build-dir build]           the checks; exit 1 and the list when violated
  check_layering.py [--build-dir build] --graph   the folder graph as text, one line per folder
  check_layering.py [--build-dir build] --graph-dot   the same graph in Graphviz dot
      (edges: the transitive reduction of the libraries' link graph; --unreduced: every link)
  check_layering.py --self-test [--cmake cmake] [--generator Ninja]
                   configures synthetic trees with planted violations: they must be found and a
                   clean tree must pass
Exit codes: 0 clean, 1 violations (or a failed self-test), 2 no usable codemodel.
"""
import argparse
import collections
import glob
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROLE_FOLDERS = ("encoder_node", "decoder_node", "cache_service", "router")
# Check C: what serves the store and the front door never links the engine's kernels; they read
# the model's config and fingerprint from ds41_engine_config.
ENGINE_TARGET = "ds41_engine"
ENGINE_FREE_FOLDERS = ("router", "cache_service", "cache_client", "cache_data", "node_client")
ENGINE_FREE_TARGETS = ("ds41_unit",)
# Only targets and files of these folders are held to check B: tests/, bench/ and the shared
# folders may depend on anything (check A still applies to every target).
LIBRARY_TYPES = {"STATIC_LIBRARY", "SHARED_LIBRARY", "MODULE_LIBRARY", "OBJECT_LIBRARY",
                 "INTERFACE_LIBRARY"}
COMPILED_EXTS = (".cc", ".cpp", ".cxx", ".c")
SCANNED_EXTS = COMPILED_EXTS + (".h", ".hh", ".hpp", ".hxx", ".inc", ".ipp")
# Commands whose target dependencies are link dependencies (add_dependencies is order only).
ORDER_ONLY_COMMANDS = {"add_dependencies"}

INCLUDE_RE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"([^"\n]+)"', re.M)
PROTO_IMPORT_RE = re.compile(r'^\s*import\s+(?:public\s+|weak\s+)?"([^"]+)"\s*;', re.M)


class Error(Exception):
    pass


# ---------------------------------------------------------------------------------------------
# The codemodel

class Target:
    def __init__(self, tid, name, kind, folder, sources, generated, direct_deps):
        self.id = tid
        self.name = name
        self.type = kind
        self.folder = folder          # top-level folder of the defining CMakeLists.txt
        self.sources = sources        # source-relative paths of files in the source tree
        self.generated = generated    # source-relative (or absolute) paths of generated files
        self.direct_deps = direct_deps  # target ids
        self.closure = set()          # target names, transitive

    @property
    def is_library(self):
        return self.type in LIBRARY_TYPES


def read_cache(build_dir):
    values = {}
    path = os.path.join(build_dir, "CMakeCache.txt")
    if not os.path.exists(path):
        return values
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = re.match(r"^([A-Za-z0-9_.\-]+):[A-Z]+=(.*)$", line.rstrip("\n"))
            if m:
                values[m.group(1)] = m.group(2)
    return values


def reply_index(build_dir):
    """The current reply index: the one with the largest name (File API docs)."""
    found = sorted(glob.glob(os.path.join(build_dir, ".cmake", "api", "v1", "reply", "index-*.json")))
    return found[-1] if found else None


def newest_cmake_input(source_dir):
    newest, newest_path = 0.0, None
    for root, dirs, files in os.walk(source_dir):
        # Skip build trees (they hold CMakeCache.txt), hidden and vendored folders.
        dirs[:] = [d for d in dirs if not d.startswith(".") and d != "node_modules"
                   and not os.path.exists(os.path.join(root, d, "CMakeCache.txt"))]
        for name in files:
            if name == "CMakeLists.txt" or name.endswith(".cmake"):
                p = os.path.join(root, name)
                t = os.path.getmtime(p)
                if t > newest:
                    newest, newest_path = t, p
    return newest, newest_path


def ensure_reply(build_dir, cmake, reconfigure, log):
    """Returns the reply index, re-running CMake once when it is missing or stale."""
    cache = read_cache(build_dir)
    if not cache:
        raise Error(f"{build_dir} is not a configured CMake build directory (no CMakeCache.txt)")
    source_dir = cache.get("CMAKE_HOME_DIRECTORY")
    index = reply_index(build_dir)
    reason = None
    if index is None:
        reason = "no File API reply yet (a first configure writes none)"
    elif source_dir and os.path.isdir(source_dir):
        newest, path = newest_cmake_input(source_dir)
        if newest > os.path.getmtime(index):
            reason = f"the reply is older than {os.path.relpath(path, source_dir)}"
    if reason and reconfigure:
        query = os.path.join(build_dir, ".cmake", "api", "v1", "query", "codemodel-v2")
        if not os.path.exists(query):  # a tree whose CMakeLists.txt does not ask for it
            os.makedirs(os.path.dirname(query), exist_ok=True)
            open(query, "w").close()
        cmake = cmake or cache.get("CMAKE_COMMAND") or "cmake"
        log(f"check_layering: {reason}; re-running {os.path.basename(cmake)} on {build_dir}")
        args = [cmake, "-B", build_dir] + (["-S", source_dir] if source_dir else [])
        run = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if run.returncode != 0:
            raise Error(f"{' '.join(args)} failed:\n{run.stdout}")
        index = reply_index(build_dir)
    elif reason:
        log(f"check_layering: warning: {reason} (--no-reconfigure)")
    if index is None:
        raise Error(f"no codemodel-v2 reply in {build_dir}/.cmake/api/v1/reply: does the top-level "
                    "CMakeLists.txt write .cmake/api/v1/query/codemodel-v2?")
    return index


def load_codemodel(build_dir, cmake=None, reconfigure=True, log=None):
    log = log or (lambda msg: print(msg, file=sys.stderr))
    build_dir = os.path.abspath(build_dir)
    index_path = ensure_reply(build_dir, cmake, reconfigure, log)
    reply_dir = os.path.dirname(index_path)
    with open(index_path) as f:
        index = json.load(f)
    entry = index.get("reply", {}).get("codemodel-v2")
    if not entry or "jsonFile" not in entry:
        raise Error(f"{index_path} has no codemodel-v2 reply: {entry}")
    with open(os.path.join(reply_dir, entry["jsonFile"])) as f:
        codemodel = json.load(f)
    source_dir = codemodel["paths"]["source"]
    configs = codemodel["configurations"]
    if not configs:
        raise Error("the codemodel has no configuration")
    # Single-config generators have one; the graph does not differ between configurations here.
    config = configs[0]

    def rel(path):
        full = os.path.normpath(os.path.join(source_dir, path))
        r = os.path.relpath(full, source_dir)
        return full if r.startswith("..") else r.replace(os.sep, "/")

    targets, artifacts = {}, {}
    for ref in config["targets"]:
        with open(os.path.join(reply_dir, ref["jsonFile"])) as f:
            t = json.load(f)
        top = t["paths"]["source"].replace("\\", "/").split("/")[0]
        sources, generated = [], []
        for s in t.get("sources", []):
            (generated if s.get("isGenerated") else sources).append(rel(s["path"]))
        graph = t.get("backtraceGraph", {"nodes": [], "commands": []})
        deps = set()
        for d in t.get("dependencies", []):
            command = None
            if "backtrace" in d:
                node = graph["nodes"][d["backtrace"]]
                if "command" in node:
                    command = graph["commands"][node["command"]]
            if command not in ORDER_ONLY_COMMANDS:
                deps.add(d["id"])
        link_fragments = [frag["fragment"] for frag in t.get("link", {}).get("commandFragments", [])
                          if frag.get("role") == "libraries"]
        targets[t["id"]] = Target(t["id"], t["name"], t["type"], top if top else ".", sources,
                                  generated, deps)
        targets[t["id"]].link_fragments = link_fragments
        for a in t.get("artifacts", []):
            artifacts[os.path.normpath(os.path.join(codemodel["paths"]["build"], a["path"]))] = t["id"]
    # The link line of executables and shared libraries: archives of project targets.
    for t in targets.values():
        for frag in t.link_fragments:
            path = os.path.normpath(os.path.join(codemodel["paths"]["build"], frag))
            if path in artifacts:
                t.direct_deps.add(artifacts[path])
    by_id = targets
    targets = {t.name: t for t in by_id.values()}
    for t in targets.values():
        t.direct_deps = {by_id[i].name for i in t.direct_deps if i in by_id}
    for t in targets.values():
        seen, stack = set(), list(t.direct_deps)
        while stack:
            d = stack.pop()
            if d in seen or d == t.name:
                continue
            seen.add(d)
            stack.extend(targets[d].direct_deps)
        t.closure = seen
    return Model(source_dir, targets)


# ---------------------------------------------------------------------------------------------
# Files, includes and owners

class Model:
    def __init__(self, source_dir, targets):
        self.source_dir = source_dir
        self.targets = targets
        self._includes = {}
        # generated header name -> (display name, owner targets)
        self.generated = {}
        self.proto_files = {}  # generated header name -> the .proto it comes from
        listed = collections.defaultdict(set)
        compiled = collections.defaultdict(set)
        lib_dirs = collections.defaultdict(set)
        any_dirs = collections.defaultdict(set)
        for t in targets.values():
            for s in t.sources:
                listed[s].add(t.name)
                if s.endswith(COMPILED_EXTS):
                    compiled[s].add(t.name)
                    (lib_dirs if t.is_library else any_dirs)[posix_dirname(s)].add(t.name)
                elif s.endswith(".proto"):
                    stem = os.path.basename(s)[:-len(".proto")]
                    for header in (stem + ".pb.h", stem + ".grpc.pb.h"):
                        self.generated.setdefault(header, set()).add(t.name)
                        self.proto_files[header] = s
            for g in t.generated:
                if g.endswith((".h", ".hh", ".hpp")):
                    self.generated.setdefault(os.path.basename(g), set()).add(t.name)
        self.listed, self.compiled, self.lib_dirs, self.any_dirs = listed, compiled, lib_dirs, any_dirs

    def exists(self, rel):
        return os.path.isfile(os.path.join(self.source_dir, rel))

    def folder_of(self, path):
        """Top-level folder of a source-tree file; generated headers: their owners' folder."""
        if path in self.generated:
            folders = {self.targets[o].folder for o in self.generated[path]}
            return sorted(folders)[0]
        return path.split("/")[0] if "/" in path else "."

    def includes(self, path):
        """Quoted includes of a file, resolved: [(include text, resolved path or None)]."""
        if path in self._includes:
            return self._includes[path]
        result = []
        if path in self.generated:
            # A generated header's includes: <name>.grpc.pb.h includes <name>.pb.h, which includes
            # the .pb.h of every import of <name>.proto.
            texts = []
            if path.endswith(".grpc.pb.h"):
                texts.append(path[:-len(".grpc.pb.h")] + ".pb.h")
            elif path.endswith(".pb.h") and path in self.proto_files:
                proto = read_text(os.path.join(self.source_dir, self.proto_files[path]))
                texts += [os.path.basename(i)[:-len(".proto")] + ".pb.h"
                          for i in PROTO_IMPORT_RE.findall(proto)]
            result = [(text, text if text in self.generated else None) for text in texts]
        else:
            text = read_text(os.path.join(self.source_dir, path))
            for inc in INCLUDE_RE.findall(text):
                result.append((inc, self.resolve(path, inc)))
        self._includes[path] = result
        return result

    def resolve(self, includer, inc):
        # The quoted form searches the includer's folder first, then the include path (the source
        # root, and the generated protobuf headers' folder).
        for candidate in (posix_join(posix_dirname(includer), inc), os.path.normpath(inc)):
            candidate = candidate.replace(os.sep, "/")
            if not candidate.startswith("../") and self.exists(candidate):
                return candidate
        if inc in self.generated:
            return inc
        base = os.path.basename(inc)
        if base.endswith(".pb.h") and base in self.generated:
            return base
        return None

    def owners(self, path):
        if path in self.generated:
            return self.generated[path]
        # Targets listing the file, or compiling it or its .cc; else the folder's libraries; else
        # any target compiling sources in the folder.
        found = set(self.listed.get(path, set()))
        base = os.path.basename(path)
        stem = path[:len(path) - len(base)] + (base.rsplit(".", 1)[0] if "." in base else base)
        for ext in COMPILED_EXTS:
            found |= self.compiled.get(stem + ext, set())
        if found:
            return found
        d = posix_dirname(path)
        return self.lib_dirs.get(d) or self.any_dirs.get(d) or set()


def posix_dirname(path):
    return path.rsplit("/", 1)[0] if "/" in path else ""


def posix_join(a, b):
    return os.path.normpath(os.path.join(a, b)).replace(os.sep, "/") if a else os.path.normpath(b)


def read_text(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def role_of(folder):
    return folder if folder in ROLE_FOLDERS else None


# ---------------------------------------------------------------------------------------------
# The checks

def check(model):
    """Returns (undeclared includes, role violations, engine links), each a sorted list of messages."""
    undeclared, roles, engine = set(), set(), set()
    targets = model.targets
    for t in targets.values():
        allowed = {t.name} | t.closure
        role = role_of(t.folder)
        start = [s for s in t.sources if s.endswith(SCANNED_EXTS) and model.exists(s)]
        start += [os.path.basename(g) for g in t.generated if os.path.basename(g) in model.generated]
        seen, queue = set(start), collections.deque(start)
        while queue:
            f = queue.popleft()
            for inc, header in model.includes(f):
                if header is None:
                    continue
                owners = model.owners(header)
                if not owners:
                    undeclared.add(f"{t.name}: {f} includes {header}, which no target owns")
                elif not owners & allowed:
                    undeclared.add(f"{t.name}: {f} includes {header} (owned by "
                                   f"{', '.join(sorted(owners))}) without depending on it")
                other = role_of(model.folder_of(header))
                # Includes made by role-folder files are reported once per file, below.
                if role and other and other != role and not role_of(model.folder_of(f)):
                    roles.add(f"{t.name} ({role}): {f} includes {header} of role folder {other} "
                              "(role folders must not depend on one another)")
                if header not in seen:
                    seen.add(header)
                    queue.append(header)
    # Every file of a role folder, whether or not a target compiles it.
    for role in ROLE_FOLDERS:
        base = os.path.join(model.source_dir, role)
        for root, dirs, files in os.walk(base):
            dirs[:] = [d for d in dirs if not d.startswith(".")]
            for name in files:
                if not name.endswith(SCANNED_EXTS):
                    continue
                f = os.path.relpath(os.path.join(root, name), model.source_dir).replace(os.sep, "/")
                for inc, header in model.includes(f):
                    other = header and role_of(model.folder_of(header))
                    if other and other != role:
                        roles.add(f"{f} includes {header}: role folder {role} must not depend on "
                                  f"role folder {other}")
    # Links.
    reduced = reduced_graph(targets)
    for t in targets.values():
        role = role_of(t.folder)
        if not role:
            continue
        for d in sorted(t.closure):
            other = role_of(targets[d].folder)
            if other and other != role:
                path = " -> ".join(link_path(reduced, t.name, d))
                roles.add(f"{t.name} ({role}) links {d} ({other}) via {path}: role folders must "
                          "not depend on one another")
    for t in targets.values():
        if t.name.endswith("_test"):
            continue  # a test may build a checkpoint with the engine
        if (t.folder in ENGINE_FREE_FOLDERS or t.name in ENGINE_FREE_TARGETS) and ENGINE_TARGET in t.closure:
            path = " -> ".join(link_path(reduced, t.name, ENGINE_TARGET))
            engine.add(f"{t.name} ({t.folder}) links {ENGINE_TARGET} via {path}")
    return sorted(undeclared), sorted(roles), sorted(engine)


def reduced_graph(targets, names=None):
    """The transitive reduction of the link graph (over `names`, default all targets)."""
    names = set(targets) if names is None else set(names)
    reduced = {}
    for n in names:
        deps = targets[n].closure & names
        reduced[n] = {d for d in deps
                      if not any(d in targets[e].closure for e in deps if e != d and e != n)}
    return reduced


def link_path(reduced, start, goal):
    prev, queue = {start: None}, collections.deque([start])
    while queue:
        n = queue.popleft()
        if n == goal:
            break
        for d in sorted(reduced.get(n, ())):
            if d not in prev:
                prev[d] = n
                queue.append(d)
    if goal not in prev:
        return [start, goal]
    path, n = [], goal
    while n is not None:
        path.append(n)
        n = prev[n]
    return path[::-1]


# ---------------------------------------------------------------------------------------------
# The folder graph

def folder_graph(model, reduce=True):
    """folder -> set of folders, from the libraries' link graph: its transitive reduction (each
    edge a link no other link of the library implies), or with reduce=False the whole closure."""
    libs = {n for n, t in model.targets.items() if t.is_library}
    reduced = (reduced_graph(model.targets, libs) if reduce
               else {n: model.targets[n].closure & libs for n in libs})
    graph = {}
    for n in sorted(libs):
        folder = model.targets[n].folder
        graph.setdefault(folder, set())
        for d in reduced[n]:
            other = model.targets[d].folder
            if other != folder:
                graph[folder].add(other)
    return graph


def graph_note(reduce):
    return ("folder -> folders it links: the library targets' link graph as CMake reports it (File "
            "API codemodel-v2), " + ("transitively reduced" if reduce else "every transitive link")
            + ", between folders")


def format_graph(graph, reduce=True):
    lines = [f"# {graph_note(reduce)}"]
    for folder in sorted(graph):
        deps = ", ".join(sorted(graph[folder])) or "(none)"
        lines.append(f"{folder} -> {deps}")
    return "\n".join(lines) + "\n"


def format_dot(graph, reduce=True):
    lines = [f"// {graph_note(reduce)}", "// role folders are shaded; an edge between two of them is red",
             "digraph ds41_layering {", "  rankdir=BT;", "  node [shape=box, fontname=\"Helvetica\"];"]
    for folder in sorted(graph):
        style = ", style=filled, fillcolor=\"#dde8f6\"" if role_of(folder) else ""
        lines.append(f"  \"{folder}\" [label=\"{folder}/\"{style}];")
    for folder in sorted(graph):
        for dep in sorted(graph[folder]):
            red = " [color=red]" if role_of(folder) and role_of(dep) else ""
            lines.append(f"  \"{folder}\" -> \"{dep}\"{red};")
    lines.append("}")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------

def run_check(build_dir, cmake=None, reconfigure=True, out=sys.stdout, err=sys.stderr, mode="check",
              reduce=True):
    try:
        model = load_codemodel(build_dir, cmake, reconfigure, log=lambda m: print(m, file=err))
    except (Error, OSError, ValueError, KeyError) as e:
        print(f"check_layering: {e}", file=err)
        return 2
    if mode == "graph":
        out.write(format_graph(folder_graph(model, reduce), reduce))
        return 0
    if mode == "dot":
        out.write(format_dot(folder_graph(model, reduce), reduce))
        return 0
    undeclared, roles, engine = check(model)
    if not undeclared and not roles and not engine:
        print(f"check_layering: {len(model.targets)} targets, no violations", file=out)
        return 0
    print(f"check_layering: {len(undeclared) + len(roles) + len(engine)} violation(s)", file=out)
    if undeclared:
        print(f"\nA. includes of headers whose owner is not a dependency ({len(undeclared)}):", file=out)
        for v in undeclared:
            print(f"  {v}", file=out)
    if roles:
        print(f"\nB. role folders ({', '.join(ROLE_FOLDERS)}) depending on one another "
              f"({len(roles)}):", file=out)
        for v in roles:
            print(f"  {v}", file=out)
    if engine:
        print(f"\nC. targets that need only the model's config and fingerprint (ds41_engine_config) linking "
              f"{ENGINE_TARGET} ({len(engine)}):", file=out)
        for v in engine:
            print(f"  {v}", file=out)
    return 1


# ---------------------------------------------------------------------------------------------
# Self-test: synthetic CMake projects, configured for real, one with planted violations.

def synthetic_tree(planted):
    """{path: text} of a small project shaped like this one."""
    def lib(name, sources, deps):
        return f"syn_library({name} SOURCES {' '.join(sources)} DEPS {' '.join(deps)})\n"

    files = {
        "CMakeLists.txt": (
            "cmake_minimum_required(VERSION 3.20)\n"
            "project(layering_selftest LANGUAGES CXX)\n"
            "file(WRITE \"${CMAKE_BINARY_DIR}/.cmake/api/v1/query/codemodel-v2\" \"\")\n"
            "function(syn_library name)\n"
            "  cmake_parse_arguments(A \"\" \"\" \"SOURCES;DEPS\" ${ARGN})\n"
            "  add_library(${name} STATIC ${A_SOURCES})\n"
            "  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR})\n"
            "  target_link_libraries(${name} PUBLIC ${A_DEPS})\n"
            "endfunction()\n"
            "foreach(d proto util unit http engine cache_data encoder_node decoder_node router tests)\n"
            "  add_subdirectory(${d})\n"
            "endforeach()\n"),
        # Two protos; node.proto imports common.proto, so node.pb.h includes common.pb.h.
        "proto/CMakeLists.txt": (
            "function(syn_proto name stem)\n"
            "  set(out ${CMAKE_CURRENT_BINARY_DIR}/${stem}.pb.h ${CMAKE_CURRENT_BINARY_DIR}/${stem}.pb.cc)\n"
            "  add_custom_command(OUTPUT ${out} COMMAND ${CMAKE_COMMAND} -E touch ${out}\n"
            "    DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/${stem}.proto)\n"
            "  add_library(${name} STATIC ${stem}.proto ${out})\n"
            "  target_include_directories(${name} PUBLIC ${CMAKE_CURRENT_BINARY_DIR})\n"
            "  target_link_libraries(${name} PUBLIC ${ARGN})\n"
            "endfunction()\n"
            "syn_proto(syn_proto_common common)\n"
            + ("syn_proto(syn_proto_node node)\n" if planted
               else "syn_proto(syn_proto_node node syn_proto_common)\n")),
        "proto/common.proto": 'syntax = "proto3";\npackage syn;\nmessage Common { int32 x = 1; }\n',
        "proto/node.proto": ('syntax = "proto3";\npackage syn;\nimport "common.proto";\n'
                             "message Node { Common c = 1; }\n"),
        "util/CMakeLists.txt": lib("syn_util", ["status.cc"], []),
        "util/status.h": "#pragma once\n#include \"util/check.h\"\n",
        "util/status.cc": "#include \"util/status.h\"\n#include <string>\n",
        "util/check.h": "#pragma once\n",  # header-only: owned by the folder's library
        "unit/CMakeLists.txt": lib("syn_unit", ["unit_key.cc"], ["syn_util"]),
        "unit/unit_key.h": "#pragma once\n#include \"util/status.h\"\n",
        "unit/unit_key.cc": "#include \"unit/unit_key.h\"\n",
        "http/CMakeLists.txt": lib("syn_http", ["http_server.cc"], ["syn_util"]),
        "http/http_types.h": "#pragma once\n#include \"util/check.h\"\n",  # header-only
        "http/http_server.cc": "#include \"http/http_types.h\"\n",
        "engine/CMakeLists.txt": lib("ds41_engine", ["engine.cc"], ["syn_util"]),
        "engine/engine.h": "#pragma once\n#include \"util/status.h\"\n",
        "engine/engine.cc": "#include \"engine/engine.h\"\n#include \"util/check.h\"\n",
        # Planted: wire.cc includes unit/ and (through wire.h) http/ without depending on them.
        "cache_data/CMakeLists.txt": lib("syn_cache_wire", ["wire.cc"],
                                         ["syn_util"] if planted else ["syn_util", "syn_unit", "syn_http"]),
        "cache_data/wire.h": "#pragma once\n#include \"http/http_types.h\"\n",
        "cache_data/wire.cc": ("#include \"cache_data/wire.h\"\n  #  include \"unit/unit_key.h\"\n"
                               "#include <vector>\n#include \"util/check.h\"\n"),
        "encoder_node/CMakeLists.txt": (lib("syn_encoder", ["encoder.cc"], ["ds41_engine", "syn_proto_node"])
                                        + "add_executable(syn_encoder_node main.cc)\n"
                                        "target_link_libraries(syn_encoder_node PRIVATE syn_encoder)\n"),
        "encoder_node/encoder.h": "#pragma once\n#include \"engine/engine.h\"\n",
        "encoder_node/encoder.cc": "#include \"encoder_node/encoder.h\"\n#include \"node.pb.h\"\n",
        "encoder_node/main.cc": "#include \"encoder.h\"\nint main() {}\n",
        # Planted: the decoder links the encoder and includes its header.
        "decoder_node/CMakeLists.txt": lib("syn_decoder", ["decoder.cc"],
                                           ["syn_encoder"] if planted else ["ds41_engine"]),
        "decoder_node/decoder.cc": ("#include \"engine/engine.h\"\n"
                                    + ("#include \"encoder_node/encoder.h\"\n"
                                       "#include \"engine/engine_debug.h\"\n" if planted else "")),
        # Planted: a header of a non-role folder that brings in a role folder's header.
        "engine/engine_debug.h": ("#pragma once\n"
                                  + ("#include \"encoder_node/encoder.h\"\n" if planted else "")),
        # Planted: the router includes a generated header without linking its proto library, and
        # links the engine (check C).
        "router/CMakeLists.txt": lib("syn_router", ["router_core.cc"],
                                     ["syn_util", "ds41_engine"] if planted else ["syn_util", "syn_proto_node"]),
        "router/router_core.cc": ("#include \"node.pb.h\"\n#include \"util/status.h\"\n"
                                  + ("#include \"../encoder_node/encoder.h\"\n" if planted else "")),
        # Tests may depend on anything, role folders included.
        "tests/CMakeLists.txt": ("add_executable(syn_nodes_test nodes_test.cc)\n"
                                 "target_link_libraries(syn_nodes_test PRIVATE syn_decoder syn_encoder "
                                 "syn_router)\n"),
        "tests/nodes_test.cc": ("#include \"encoder_node/encoder.h\"\n#include \"router/router_core.h\"\n"
                                "int main() {}\n"),
        "router/router_core.h": "#pragma once\n",
    }
    return files


SELF_TEST_EXPECTED_VIOLATIONS = [
    "syn_cache_wire: cache_data/wire.cc includes unit/unit_key.h (owned by syn_unit) without "
    "depending on it",
    "syn_cache_wire: cache_data/wire.h includes http/http_types.h (owned by syn_http) without "
    "depending on it",
    "syn_router: router/router_core.cc includes node.pb.h (owned by syn_proto_node) without "
    "depending on it",
    "syn_proto_node: node.pb.h includes common.pb.h (owned by syn_proto_common) without depending on it",
    "syn_encoder: node.pb.h includes common.pb.h (owned by syn_proto_common) without depending on it",
    "syn_router: node.pb.h includes common.pb.h (owned by syn_proto_common) without depending on it",
    "decoder_node/decoder.cc includes encoder_node/encoder.h: role folder decoder_node must not "
    "depend on role folder encoder_node",
    "syn_decoder (decoder_node): engine/engine_debug.h includes encoder_node/encoder.h of role folder "
    "encoder_node (role folders must not depend on one another)",
    # A relative include is resolved from the including file's folder.
    "router/router_core.cc includes encoder_node/encoder.h: role folder router must not depend on "
    "role folder encoder_node",
    "syn_router: router/router_core.cc includes encoder_node/encoder.h (owned by syn_encoder) without "
    "depending on it",
    "syn_router (router) links ds41_engine via syn_router -> ds41_engine",
    "syn_decoder (decoder_node) links syn_encoder (encoder_node) via syn_decoder -> syn_encoder: "
    "role folders must not depend on one another",
]

SELF_TEST_EXPECTED_GRAPH = """\
cache_data -> http, unit
decoder_node -> engine
encoder_node -> engine, proto
engine -> util
http -> util
proto -> (none)
router -> proto, util
unit -> util
util -> (none)
"""


def self_test(cmake, generator, cxx):
    cmake = cmake or shutil.which("cmake")
    if not cmake:
        print("check_layering --self-test: no cmake", file=sys.stderr)
        return 1
    failures = []
    with tempfile.TemporaryDirectory(prefix="check_layering_") as tmp:
        results = {}
        for planted in (True, False):
            name = "planted" if planted else "clean"
            src, build = os.path.join(tmp, name), os.path.join(tmp, name + "-build")
            for path, text in synthetic_tree(planted).items():
                full = os.path.join(src, path)
                os.makedirs(os.path.dirname(full), exist_ok=True)
                with open(full, "w") as f:
                    f.write(text)
            args = [cmake, "-S", src, "-B", build]
            if generator:
                args += ["-G", generator]
            if cxx:
                args += [f"-DCMAKE_CXX_COMPILER={cxx}"]
            run = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            if run.returncode != 0:
                print(run.stdout, file=sys.stderr)
                return 1
            first_reply = reply_index(build) is not None
            out, err = io.StringIO(), io.StringIO()
            code = run_check(build, cmake, reconfigure=True, out=out, err=err)
            graph_out = io.StringIO()
            run_check(build, cmake, reconfigure=False, out=graph_out, err=err, mode="graph")
            results[name] = (code, out.getvalue(), err.getvalue(), graph_out.getvalue())
            print(f"--- {name} tree (first configure wrote a reply: {first_reply})")
            print(err.getvalue() + out.getvalue(), end="")
            if not first_reply and "re-running" not in err.getvalue():
                failures.append(f"{name}: the missing reply did not make the check re-run cmake")

        code, out, err, graph = results["planted"]
        if code != 1:
            failures.append(f"planted tree: exit code {code}, expected 1")
        lines = {line.strip() for line in out.splitlines()}
        for expected in SELF_TEST_EXPECTED_VIOLATIONS:
            if expected not in lines:
                failures.append(f"planted tree: not reported: {expected}")
        for line in lines:
            if line.startswith("syn_nodes_test") and "role" in line:
                failures.append(f"planted tree: tests/ may depend on anything, yet: {line}")
        reported = [line for line in lines if line and not line.startswith(("check_layering", "A.", "B.", "C."))]
        if len(reported) != len(SELF_TEST_EXPECTED_VIOLATIONS):
            extra = sorted(set(reported) - set(SELF_TEST_EXPECTED_VIOLATIONS))
            failures.append(f"planted tree: {len(reported)} reports, expected "
                            f"{len(SELF_TEST_EXPECTED_VIOLATIONS)}; unexpected: {extra}")
        if "decoder_node -> encoder_node" not in graph:
            failures.append("planted tree: the graph lacks decoder_node -> encoder_node")

        code, out, err, graph = results["clean"]
        if code != 0:
            failures.append(f"clean tree: exit code {code}, expected 0")
        body = "".join(line + "\n" for line in graph.splitlines() if not line.startswith("#"))
        if body != SELF_TEST_EXPECTED_GRAPH:
            failures.append(f"clean tree: graph\n{body}expected\n{SELF_TEST_EXPECTED_GRAPH}")
    for f in failures:
        print(f"SELF-TEST FAILURE: {f}")
    print("check_layering --self-test: " + ("FAILED" if failures else "ok"))
    return 1 if failures else 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build-dir", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                            "..", "build"))
    parser.add_argument("--cmake", help="cmake to re-run (default: the build's CMAKE_COMMAND)")
    parser.add_argument("--no-reconfigure", action="store_true",
                        help="never re-run cmake, even when the reply is missing or stale")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--graph", action="store_true", help="print the folder graph as text")
    mode.add_argument("--graph-dot", action="store_true", help="print the folder graph as Graphviz dot")
    mode.add_argument("--self-test", action="store_true", help="check the checker on synthetic trees")
    parser.add_argument("--unreduced", action="store_true",
                        help="--graph/--graph-dot: every transitive link, not the reduction")
    parser.add_argument("--generator", help="--self-test: CMake generator")
    parser.add_argument("--cxx", help="--self-test: C++ compiler")
    args = parser.parse_args(argv)
    if args.self_test:
        return self_test(args.cmake, args.generator, args.cxx)
    kind = "graph" if args.graph else "dot" if args.graph_dot else "check"
    return run_check(os.path.normpath(args.build_dir), args.cmake, not args.no_reconfigure, mode=kind,
                     reduce=not args.unreduced)


if __name__ == "__main__":
    sys.exit(main())

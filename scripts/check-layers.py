#!/usr/bin/env python3
"""Checks the workspace's layering (docs/design.md, "Layers"):

1. No import circle between the source files of any crate: a file's imports are read from its
   `use crate::…`, `use super::…` and `crate::a::b` paths (unit-test modules excluded), each
   mapped to the file that defines the module; a circle is printed as the files in it.
2. Crates depend only on lower layers (from `cargo metadata`): keylatch-core on no other
   keylatch crate and on no Redis or ZooKeeper client library; store layers on the core; the
   primitives on the core and their store layer; the facade and the tools above them.
3. No source file of a crate (`crates/*/*/src`) has more than 500 lines.

Exit status 0 when all three hold, 1 otherwise. Usage: scripts/check-layers.py [--quiet]
"""
import json
import os
import re
import pathlib
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Each keylatch crate's layer; a crate may depend only on crates of a lower layer.
LAYERS = {
    "keylatch-core": 0,
    "keylatch-redis": 1,
    "keylatch-zookeeper": 1,
    "keylatch-postgres": 1,
    "keylatch-reentrant": 2,
    "keylatch-fair": 2,
    "keylatch-rwlock": 2,
    "keylatch-semaphore": 2,
    "keylatch-queue": 2,
    "keylatch-latch": 2,
    "keylatch-redlock": 3,
    "keylatch": 4,
    "keylatch-testkit": 4,
    "keylatch-cli": 5,
    "keylatch-chaos": 5,
    "keylatch-tests": 6,
}
# Client libraries of a store: the core must not pull any of them in, directly or not.
STORE_LIBRARIES = (
    "redis", "deadpool-redis", "zookeeper-client", "tokio-postgres", "deadpool-postgres",
)


def module_file(src, parts):
    """The file defining the longest prefix of `parts` (a.rs, a/mod.rs, a/b.rs …)."""
    for n in range(len(parts), 0, -1):
        base = os.path.join(src, *parts[:n])
        for candidate in (base + ".rs", os.path.join(base, "mod.rs")):
            if os.path.isfile(candidate):
                return candidate
    return None


def module_path(src, path):
    parts = os.path.relpath(path, src)[:-3].split(os.sep)
    return parts[:-1] if parts[-1] in ("mod", "lib", "main") else parts


def imports(src, path):
    """The files of this crate that `path` imports."""
    me = module_path(src, path)
    text = open(path, encoding="utf-8").read()
    text = re.split(r"#\[cfg\(test\)\]\s*mod tests", text)[0]
    found = set()
    for match in re.finditer(r"\b(crate|super)((?:::\w+)+)", text):
        parts = match.group(2).strip(":").split("::")
        if match.group(1) == "super":
            parts = me[:-1] + parts
        target = module_file(src, parts)
        if target and target != path and not target.endswith(("lib.rs", "main.rs")):
            found.add(target)
    # `use crate::{a::X, b::Y}` lists.
    for match in re.finditer(r"use crate::\{([^;]*)\};", text, re.S):
        for item in re.findall(r"(\w+)::", match.group(1)):
            target = module_file(src, [item])
            if target and target != path:
                found.add(target)
    return found


def circles(src):
    files = [os.path.join(d, f) for d, _, fs in os.walk(src) for f in fs if f.endswith(".rs")]
    edges = {f: imports(src, f) for f in files}
    # Tarjan's strongly connected components: each of more than one file is a circle.
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    sys.setrecursionlimit(10000)
    for f in sorted(files):
        if f not in index:
            visit(f)
    return out


# The most lines a source file of a crate may have.
MAX_LINES = 500


def main():
    quiet = "--quiet" in sys.argv
    problems = []
    metadata = json.loads(
        subprocess.run(
            ["cargo", "metadata", "--format-version", "1", "--locked"],
            cwd=ROOT, check=True, capture_output=True, text=True,
        ).stdout
    )
    members = {p["id"]: p for p in metadata["packages"] if p["id"] in metadata["workspace_members"]}
    for package in members.values():
        name = package["name"]
        src = os.path.join(os.path.dirname(package["manifest_path"]), "src")
        if os.path.isdir(src):
            for circle in circles(src):
                problems.append("import circle: " + " ".join(os.path.relpath(f, ROOT) for f in circle))
        if name not in LAYERS:
            problems.append(f"{name}: no layer assigned in scripts/check-layers.py")
            continue
        for dep in package["dependencies"]:
            if dep["kind"] == "dev":
                continue
            if dep["name"] in LAYERS and LAYERS[dep["name"]] >= LAYERS[name]:
                problems.append(f"{name} depends on {dep['name']}, which is not a lower layer")
    # The core's whole normal dependency tree, through the resolved graph.
    nodes = {n["id"]: n for n in metadata["resolve"]["nodes"]}
    names = {p["id"]: p["name"] for p in metadata["packages"]}
    core = next(i for i, p in members.items() if p["name"] == "keylatch-core")
    seen, todo = set(), [core]
    while todo:
        node = todo.pop()
        if node in seen:
            continue
        seen.add(node)
        for dep in nodes[node]["deps"]:
            if any(k["kind"] in (None, "normal") for k in dep["dep_kinds"]):
                todo.append(dep["pkg"])
    pulled = sorted({names[i] for i in seen} & set(STORE_LIBRARIES))
    if pulled:
        problems.append("keylatch-core depends on a store's client library: " + ", ".join(pulled))
    # Every source file of a crate stays under the size a reader takes in at once.
    for path in sorted(pathlib.Path("crates").glob("*/*/src/**/*.rs")):
        lines = sum(1 for _ in path.open(encoding="utf-8"))
        if lines > MAX_LINES:
            problems.append(f"{path} has {lines} lines (at most {MAX_LINES})")
    for problem in problems:
        print(problem)
    if not quiet or problems:
        print(f"{len(problems)} layering problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Checks the claims of README.md and docs/*.md that can be checked mechanically against the
code, so that the docs drift less. Standard library only; needs no build.

- The crate list: every `crates/<name>` in README's "Workspace" block is a workspace member,
  and every member under crates/ is listed there.
- The docs list: every docs/*.md file is named in README.md.
- Flags: every `--flag` given to the `keylatch` command or to `keylatch-chaos` in a command
  line of the docs (a code block's or code span's `keylatch …` / `keylatch-chaos …`, up to
  ` -- `, a pipe or a comment) is a long flag (or alias) of that program's clap definitions,
  read from its source. A code span that is a flag alone (`--wait`, `--lease 30s`) must be a
  flag of one of the two programs, of a script under scripts/ (read from their `case`
  patterns), or of a tool in OTHER_FLAGS.
- Exit codes: every "exit N" / "exits N" / "exit code N" / "exits with N" in the docs is a
  code the programs use: an `EX_*` constant of crates/tools/keylatch-cli/src/failure.rs, a code
  `run` passes through or takes from a signal (OTHER_CODES), or a literal
  `ExitCode::from(N)` of keylatch-chaos.

Exits 1 with one line per failure, `file:line: what is wrong`, naming the doc line.

    python3 scripts/check-docs.py [--root DIR]
"""

import argparse
import glob
import os
import re
import sys

# Flags of other tools that the docs show in code spans of their own (cargo, redis-cli's and
# ZooKeeper's settings are not flags). A flag here is not checked against any source.
OTHER_FLAGS = {
    # cargo and the test harness
    "--all", "--all-targets", "--workspace", "--features", "--no-default-features", "--test",
    "--bench", "--lib", "--doc", "--release", "--locked", "--no-run", "--nocapture",
    "--test-threads", "--ignored", "--include-ignored", "--open", "--no-deps", "--check",
    "--dry-run", "--path", "--bin", "--example", "--package", "--target-dir", "--exact",
    # redis-server / redis-cli / redis-benchmark, named beside ours
    "--port", "--appendonly", "--save", "--requirepass", "--cluster", "--tls-port",
    "--enable-debug-command", "--loglevel", "--sentinel",
    # common
    "--help", "--version",
}

# Exit codes `keylatch run` uses besides the EX_* constants: the command's own (0, 1 and any
# other code it exits with), 126/127 when it cannot be run, 130/143 when interrupted.
OTHER_CODES = {0, 1, 126, 127, 130, 143}

EXIT_RE = re.compile(r"\bexit(?:s|ed|ing)?(?: with| code| status)?(?: code)? \(?(\d{1,3})\b", re.I)
FLAG_RE = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
SPAN_RE = re.compile(r"`([^`\n]+)`")


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def rust_files(crate_dir):
    return sorted(glob.glob(os.path.join(crate_dir, "src", "**", "*.rs"), recursive=True))


def clap_flags(crate_dir):
    """The long flags and aliases of the clap derive definitions under `crate_dir`/src."""
    flags = set()
    for path in rust_files(crate_dir):
        text = read(path)
        for m in re.finditer(r"#\[(?:arg|clap)\((.*?)\)\]\s*(?:///[^\n]*\n\s*|#\[[^\n]*\]\s*)*"
                             r"(?:pub(?:\([^)]*\))?\s+)?([a-z_][a-z0-9_]*)\s*:", text, re.S):
            attrs, field = m.group(1), m.group(2)
            named = re.search(r'\blong\s*=\s*"([^"]+)"', attrs)
            if named:
                flags.add("--" + named.group(1))
            elif re.search(r"\blong\b", attrs):
                flags.add("--" + field.replace("_", "-"))
            else:
                continue
            for alias in re.findall(r'\b(?:visible_)?alias(?:es)?\s*=\s*\[?"([^"\]]+)"', attrs):
                flags.add("--" + alias)
    return flags | {"--help", "--version"}


def script_flags(root):
    """Flags the scripts under scripts/ take: their `case` patterns (`--quick)`, `--a|--b)`)."""
    flags = set()
    for path in glob.glob(os.path.join(root, "scripts", "*.sh")):
        for line in read(path).splitlines():
            m = re.match(r"\s*((?:--[a-z0-9-]+(?:=\*)?\|?)+)\)", line)
            if m:
                flags.update(f.rstrip("=*") for f in m.group(1).split("|") if f)
    return flags


def exit_codes(root):
    """code → where it comes from, for every code the programs use."""
    codes = {}
    failure = read(os.path.join(root, "crates/tools/keylatch-cli/src/failure.rs"))
    for name, value in re.findall(r"pub const (EX_[A-Z_]+): u8 = (\d+);", failure):
        codes[int(value)] = name
    if not codes:
        sys.exit("check-docs: no EX_* constant found in crates/tools/keylatch-cli/src/failure.rs")
    for path in rust_files(os.path.join(root, "crates/tools/keylatch-chaos")):
        for value in re.findall(r"ExitCode::from\((\d+)\)", read(path)):
            codes.setdefault(int(value), "keylatch-chaos")
    for value in OTHER_CODES:
        codes.setdefault(value, "the command's own / signals")
    return codes


def workspace_crates(root):
    manifest = read(os.path.join(root, "Cargo.toml"))
    members = re.search(r"members\s*=\s*\[(.*?)\]", manifest, re.S)
    return {m[len("crates/"):] for m in re.findall(r'"([^"]+)"', members.group(1))
            if m.startswith("crates/")}


def doc_files(root):
    return [os.path.join(root, "README.md")] + sorted(glob.glob(os.path.join(root, "docs", "*.md")))


def command_segments(line):
    """(program, text) for each `keylatch …` or `keylatch-chaos …` command on a line: the
    text up to ` -- ` (what follows is the command `run` runs), a pipe, `;`, `&&` or `#`."""
    for m in re.finditer(r"(?<![\w/.-])(keylatch-chaos|keylatch)(?= )", line):
        rest = line[m.end():]
        rest = re.split(r" -- | \| |;|&&| #|`", rest, maxsplit=1)[0]
        yield m.group(1), rest


def check(root):
    failures = []
    rel = lambda p: os.path.relpath(p, root)
    readme_path = os.path.join(root, "README.md")
    readme = read(readme_path)

    # The crate list.
    members = workspace_crates(root)
    block = re.search(r"## Workspace\n.*?```text\n(.*?)```", readme, re.S)
    if not block:
        failures.append("README.md: no \"## Workspace\" block listing the crates")
    else:
        start = readme[: block.start(1)].count("\n") + 1
        listed = {}
        for i, line in enumerate(block.group(1).splitlines()):
            m = re.match(r"crates/([\w/-]+)", line)
            if m:
                listed[m.group(1)] = start + i
        for name, line in sorted(listed.items()):
            if name not in members:
                failures.append(f"README.md:{line}: crates/{name} is listed but is no workspace "
                                f"member (Cargo.toml)")
        for name in sorted(members - set(listed)):
            failures.append(f"README.md:{start}: the workspace member crates/{name} is missing "
                            f"from the Workspace list")

    # The docs list.
    for path in sorted(glob.glob(os.path.join(root, "docs", "*.md"))):
        name = "docs/" + os.path.basename(path)
        if name not in readme:
            failures.append(f"README.md: {name} is not named in README (Documentation)")

    # Flags and exit codes.
    cli = clap_flags(os.path.join(root, "crates/tools/keylatch-cli"))
    chaos = clap_flags(os.path.join(root, "crates/tools/keylatch-chaos"))
    known = {"keylatch": cli, "keylatch-chaos": chaos}
    alone_ok = cli | chaos | script_flags(root) | OTHER_FLAGS
    codes = exit_codes(root)
    for path in doc_files(root):
        in_code = False
        for n, line in enumerate(read(path).splitlines(), 1):
            where = f"{rel(path)}:{n}"
            if line.lstrip().startswith("```"):
                in_code = not in_code
                continue
            texts = [line] if in_code else SPAN_RE.findall(line)
            for text in texts:
                for program, segment in command_segments(text):
                    for flag in FLAG_RE.findall(segment):
                        if flag not in known[program]:
                            failures.append(f"{where}: `{program}` has no flag {flag} "
                                            f"(not in its clap definitions): {line.strip()}")
            if not in_code:
                for span in SPAN_RE.findall(line):
                    m = re.fullmatch(r"(--[a-z][a-z0-9-]*)(?:[ =][^`]*)?", span.strip())
                    if m and m.group(1) not in alone_ok:
                        failures.append(f"{where}: {m.group(1)} is a flag of neither keylatch, "
                                        f"keylatch-chaos nor a script: {line.strip()}")
                for m in EXIT_RE.finditer(line):
                    code = int(m.group(1))
                    if code not in codes:
                        failures.append(f"{where}: exit code {code} is none the code uses "
                                        f"(failure.rs EX_*: "
                                        f"{', '.join(f'{v} {k}' for k, v in sorted(codes.items()) if str(v).startswith('EX_'))}): "
                                        f"{line.strip()}")
    return failures


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    root = ap.parse_args().root
    failures = check(root)
    for failure in failures:
        print(f"check-docs: {failure}", file=sys.stderr)
    if failures:
        print(f"check-docs: {len(failures)} claim(s) of the docs do not match the code",
              file=sys.stderr)
        sys.exit(1)
    print(f"check-docs: README.md and docs/*.md match the code (crates, docs list, CLI flags, "
          f"exit codes)")


if __name__ == "__main__":
    main()

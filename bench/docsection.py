"""What the bench reports share: reading a results directory and rewriting one marked section
of a report (docs/benchmarks.md, bench/results/peers.md). Standard library only."""

import argparse
import json
import os
import sys


def args(img=False):
    """The renderers' command line: --results (a results directory) and --doc (the doc to
    rewrite), and --img (where plots go) when `img`."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--results", required=True)
    ap.add_argument("--doc", required=True)
    if img:
        ap.add_argument("--img", required=True)
    return ap.parse_args()


def load(results_dir, extras=("meta.json",)):
    """Every record of the *.jsonl files in `results_dir`, and the named JSON files that exist
    there, keyed by name without `.json`."""
    records = []
    for name in sorted(os.listdir(results_dir)):
        if name.endswith(".jsonl"):
            with open(os.path.join(results_dir, name)) as f:
                records += [json.loads(line) for line in f if line.strip()]
    extra = {}
    for name in extras:
        path = os.path.join(results_dir, name)
        if os.path.exists(path):
            with open(path) as f:
                extra[name[: -len(".json")]] = json.load(f)
    return records, extra


def replace(path, name, section, heading=None):
    """Writes `section` between `<!-- name:start -->` and `<!-- name:end -->` in the file at
    `path`. Without the markers: appends them under `heading` if one is given, else exits with
    an error."""
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    with open(path) as f:
        doc = f.read()
    if start in doc and end in doc:
        head, rest = doc.split(start, 1)
        _, tail = rest.split(end, 1)
    elif heading is not None:
        head, tail = doc.rstrip("\n") + "\n\n" + heading + "\n\n", "\n"
    else:
        sys.exit(f"{path} lacks the {start} / {end} markers")
    with open(path, "w") as f:
        f.write(head + start + "\n" + section.rstrip() + "\n" + end + tail)

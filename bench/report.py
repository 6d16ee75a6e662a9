"""Turns the raw results of scripts/bench.sh (bench/results/*.jsonl and *.json) into tables
on stdout, plots under docs/img/, and the section of docs/benchmarks.md between
<!-- peers:start --> and <!-- peers:end -->.

    python bench/report.py --results bench/results --doc docs/benchmarks.md --img docs/img
"""

import argparse
import json
import os
import sys

import analysis
import plots
import render


def load(results_dir):
    records = []
    for name in sorted(os.listdir(results_dir)):
        if name.endswith(".jsonl"):
            with open(os.path.join(results_dir, name)) as f:
                records += [json.loads(line) for line in f if line.strip()]
    extra = {}
    for name in ("meta.json", "redis_benchmark.json"):
        path = os.path.join(results_dir, name)
        if os.path.exists(path):
            with open(path) as f:
                extra[name[:-5]] = json.load(f)
    return records, extra


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--results", required=True)
    ap.add_argument("--doc", required=True)
    ap.add_argument("--img", required=True)
    args = ap.parse_args()
    records, extra = load(args.results)
    if not records:
        sys.exit("report: no results found")
    a = analysis.analyse(records, extra.get("redis_benchmark", {}))
    print(render.console(a))
    os.makedirs(args.img, exist_ok=True)
    images = plots.draw(a, args.img)
    rel_img = os.path.relpath(args.img, os.path.dirname(os.path.abspath(args.doc)))
    section = render.markdown(a, extra.get("meta", {}), {k: f"{rel_img}/{v}" for k, v in images.items()})
    with open(args.doc) as f:
        doc = f.read()
    start, end = "<!-- peers:start -->", "<!-- peers:end -->"
    if start not in doc or end not in doc:
        sys.exit(f"report: {args.doc} lacks the {start} / {end} markers")
    head, rest = doc.split(start, 1)
    _, tail = rest.split(end, 1)
    with open(args.doc, "w") as f:
        f.write(head + start + "\n" + section.rstrip() + "\n" + end + tail)
    print(f"report: wrote {args.doc} (peers section) and {len(images)} plots under {args.img}")


if __name__ == "__main__":
    main()

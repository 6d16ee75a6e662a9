"""Turns the raw results of scripts/bench.sh (bench/results/*.jsonl and *.json) into tables
on stdout, plots under docs/img/, and the section of bench/results/peers.md between
<!-- peers:start --> and <!-- peers:end -->.

    python bench/report.py --results bench/results --doc bench/results/peers.md --img docs/img
"""

import os
import sys

import analysis
import docsection
import plots
import render


def main():
    args = docsection.args(img=True)
    records, extra = docsection.load(args.results, ("meta.json", "redis_benchmark.json"))
    if not records:
        sys.exit("report: no results found")
    a = analysis.analyse(records, extra.get("redis_benchmark", {}))
    print(render.console(a))
    os.makedirs(args.img, exist_ok=True)
    images = plots.draw(a, args.img)
    rel_img = os.path.relpath(args.img, os.path.dirname(os.path.abspath(args.doc)))
    section = render.markdown(a, extra.get("meta", {}), {k: f"{rel_img}/{v}" for k, v in images.items()})
    docsection.replace(args.doc, "peers", section)
    print(f"report: wrote {args.doc} (peers section) and {len(images)} plots under {args.img}")


if __name__ == "__main__":
    main()

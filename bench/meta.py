"""What every bench step records about its run in its meta.json: the date, the machine's cpus
and load average at the start and end, and the Redis and rustc versions. Standard library
only; the steps in scripts/bench.sh import it and add their own fields."""

import json
import os
import subprocess
import time
import tomllib


def out(*cmd):
    """The trimmed stdout of `cmd`, or "?" when it cannot run."""
    try:
        return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip()
    except Exception:
        return "?"


def common(load_start, load_end, **extra):
    """The fields every step records, with `extra` added."""
    meta = {
        "date": time.strftime("%Y-%m-%d"),
        "cpus": os.cpu_count(),
        "load": {"start": load_start, "end": load_end},
        "redis": "Redis " + out("redis-server", "--version").split("v=")[-1].split()[0],
        "rustc": out("rustc", "--version").rsplit(" (", 1)[0],
    }
    meta.update(extra)
    return meta


def cargo_versions(lock_path, names):
    """The versions Cargo.lock at `lock_path` resolved the packages `names` to."""
    with open(lock_path, "rb") as f:
        return {p["name"]: p["version"] for p in tomllib.load(f)["package"] if p["name"] in names}


def write(path, meta):
    with open(path, "w") as f:
        json.dump(meta, f)

"""Shared helpers: the CLI binary the package is compared with, and small grids."""

import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def cli():
    """Runs the `tlbkit` binary `cargo test` built (TLBKIT_BIN; scripts/test sets it)."""
    path = Path(os.environ.get("TLBKIT_BIN", REPO / "target" / "debug" / "tlbkit"))
    assert path.exists(), f"{path} is missing: run cargo build (or scripts/test) first"

    def run(*args, check=True):
        p = subprocess.run([str(path), *args], capture_output=True, text=True, timeout=600)
        if check:
            assert p.returncode in (0, 3), p.stderr
        return p

    return run


# 2 CPU counts x 2 policies x 3 procs x 2 seeds = 24 small runs.
SMALL_GRID = """
machines  = ["cortex-a72"]
cpus      = [1, 2]
policies  = ["arm64-noasid", "arm64-freebsd-asid"]
workloads = ["lat_ctx"]
seeds     = { first = 1, count = 2 }

[set]
jitter = 0.02

[set.lat_ctx]
procs  = [2, 4, 6]
rounds = 20
"""

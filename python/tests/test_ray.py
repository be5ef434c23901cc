"""The Ray backend on a real local cluster: a head node and a worker node
started here with `ray start` (one CPU each, so two worker processes), on
127.0.0.1 only, torn down with `ray stop --force` whatever happens.

A 216-run sweep through Ray gives the bytes of the same sweep on host threads,
and a driver killed halfway loses and repeats nothing when run again."""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

import tlbkit

# 1 machine x 3 CPU counts x 3 policies x 4 procs x 2 rounds x 3 seeds = 216 tiny runs.
GRID = """
machines  = ["cortex-a72"]
cpus      = [1, 2, 4]
policies  = ["arm64-noasid", "arm64-freebsd-asid", "arm64-linux"]
workloads = ["lat_ctx"]
seeds     = { first = 1, count = 3 }

[set]
jitter = 0.02

[set.lat_ctx]
procs   = [2, 3, 5, 8]
rounds  = [5, 10]
size_kb = 0
"""
RUNS = 216
RAY_TIMEOUT = 180


def ray_cli():
    path = shutil.which("ray") or str(Path(sys.executable).with_name("ray"))
    assert Path(path).exists(), "the ray command is missing: pip install -r python/requirements-dev.txt"
    return path


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ray(*args, env):
    p = subprocess.run([ray_cli(), *args], capture_output=True, text=True, timeout=RAY_TIMEOUT, env=env)
    assert p.returncode == 0, f"ray {' '.join(args)} failed:\n{p.stdout}\n{p.stderr}"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """The address of a two-node Ray cluster on 127.0.0.1."""
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0"}
    port = free_port()
    address = f"127.0.0.1:{port}"
    try:
        ray("start", "--head", f"--port={port}", "--node-ip-address=127.0.0.1", "--num-cpus=1",
            "--include-dashboard=false", "--disable-usage-stats", env=env)
        ray("start", f"--address={address}", "--node-ip-address=127.0.0.1", "--num-cpus=1", env=env)
        yield address, env
    finally:
        subprocess.run([ray_cli(), "stop", "--force"], capture_output=True, timeout=RAY_TIMEOUT, env=env)


def driver(grid, results, address):
    """A sweep through Ray in a process of its own (the driver the test kills)."""
    return [sys.executable, "-m", "tlbkit", "sweep", str(grid), "--results", str(results), "--ray", address]


def complete_lines(path):
    text = path.read_bytes() if path.exists() else b""
    return text[: text.rfind(b"\n") + 1].splitlines(keepends=True)


def test_a_ray_sweep_is_the_local_sweep_and_survives_its_driver_killed(cluster, tmp_path):
    address, env = cluster
    grid = tmp_path / "grid.toml"
    grid.write_text(GRID)
    local = tmp_path / "local.jsonl"
    expected = tlbkit.sweep(grid, jobs=2, results=local, progress=False)
    assert len(expected) == RUNS

    # The whole sweep on the cluster, without interruption.
    whole = tmp_path / "ray-whole.jsonl"
    p = subprocess.run(driver(grid, whole, address), capture_output=True, text=True, timeout=600, env=env)
    assert p.returncode == 0, p.stderr
    assert whole.read_bytes() == local.read_bytes()
    assert f"{RUNS} runs; 0 already in" in p.stderr and f"{RUNS} run now" in p.stderr

    # Killed halfway (SIGKILL: no clean-up of any kind), then run again.
    cut = tmp_path / "ray-cut.jsonl"
    child = subprocess.Popen(driver(grid, cut, address), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             env=env)
    deadline = time.monotonic() + 300
    while len(complete_lines(cut)) < RUNS // 3 and child.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert child.poll() is None, "the sweep ended before it could be killed"
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=30)
    before = complete_lines(cut)
    assert RUNS // 3 <= len(before) < RUNS, len(before)
    assert len(set(before)) == len(before), "a line repeated before the kill"

    p = subprocess.run(driver(grid, cut, address), capture_output=True, text=True, timeout=600, env=env)
    assert p.returncode == 0, p.stderr
    # The second driver ran exactly the runs the file lacked.
    assert f"{len(before)} already in" in p.stderr and f"{RUNS - len(before)} run now" in p.stderr, p.stderr
    after = cut.read_bytes().splitlines(keepends=True)
    assert len(after) == RUNS and len(set(after)) == RUNS, "a run lost or repeated"
    assert set(before) <= set(after), "a line written before the kill was lost"
    assert cut.read_bytes() == local.read_bytes()


def test_a_ray_sweep_from_python_returns_the_frame(cluster, tmp_path):
    address, _ = cluster
    grid = tmp_path / "grid.toml"
    grid.write_text(GRID.replace("count = 3", "count = 1"))
    local = tlbkit.sweep(grid, results=tmp_path / "local.jsonl", progress=False)
    import ray

    ray.init(address=address, include_dashboard=False, log_to_driver=False)
    try:
        # Two nodes of one CPU each: two worker processes run the tasks.
        assert len([n for n in ray.nodes() if n["Alive"]]) == 2
        assert ray.cluster_resources()["CPU"] == 2
        # The sweep uses the connection this driver already has.
        df = tlbkit.sweep(grid, results=tmp_path / "ray.jsonl", executor="ray", address=address, progress=False)
    finally:
        ray.shutdown()
    assert df.equals(local) and len(df) == RUNS // 3
    assert (tmp_path / "ray.jsonl").read_bytes() == (tmp_path / "local.jsonl").read_bytes()


# Exhaustive checks among Ray actors, the visited set sharded among them, at
# the standard bounds (those of `tlbkit bench check`: 2 CPUs, 3 address spaces
# of one page, 6 operations, each policy's own ASIDs) of the two real policies
# whose searches are the quickest (0.24 and 1.1 million states; `tlbkit bench
# sharded` measures the larger searches).
STANDARD = dict(cpus=2, mms=3, pages=1, ops=6, mode="exhaustive")
POLICIES = ["arm64-noasid", "x86-linux-410"]


@pytest.fixture(scope="module")
def on_one_machine():
    """Each policy's check on this machine, two worker threads."""
    return {p: tlbkit.check(p, jobs=2, **STANDARD) for p in POLICIES}


def test_a_check_among_ray_actors_reaches_the_states_of_one_machine(cluster, on_one_machine):
    address, _ = cluster
    for policy in POLICIES:
        local = on_one_machine[policy]
        distributed = tlbkit.check(policy, executor="ray", address=address, **STANDARD)
        assert distributed.verdict == local.verdict == "no violation", policy
        assert distributed.report["states"] == local.report["states"], policy
        assert distributed.report["complete"] and local.report["complete"], policy


def test_a_check_on_ray_finds_the_violation_and_its_counterexample(cluster):
    """The node that finds the violation hands back its execution, which
    the package or the binary (its --ray, with no --ray-search) shrinks:
    the violation one machine finds, whose token replays it."""
    address, env = cluster
    zoo = "zoo/linux-arm64-a8ffaaa060b8"
    local = tlbkit.check(zoo, mode="exhaustive", jobs=1)
    distributed = tlbkit.check(zoo, mode="exhaustive", executor="ray", address=address)
    assert distributed.verdict == "violation"
    assert distributed.counterexample.property == local.counterexample.property
    assert tlbkit.replay(distributed.counterexample.token).counterexample.property == local.counterexample.property
    tlbkit_bin = os.environ.get("TLBKIT_BIN", "tlbkit")
    run = subprocess.run([tlbkit_bin, "check", "--policy", zoo, "--mode", "exhaustive", "--format", "json",
                          "--ray", address], capture_output=True, text=True, timeout=600,
                         env={**env, "TLBKIT_PYTHON": sys.executable})
    assert run.returncode == 3, run.stderr
    import json

    assert json.loads(run.stdout)["counterexample"]["property"] == local.counterexample.property


def test_a_sharded_check_on_ray_reaches_one_machines_states_and_finds_the_violation(cluster, on_one_machine):
    """The visited set sharded among the two nodes' actors, their claims and
    answers carried by the driver: the states and verdict of one machine
    (arm64-noasid, whose visited set does not depend on the search's
    order), and a violation found by a node's worker, whose token replays it,
    through the package and through the binary's --ray-search sharded."""
    address, env = cluster
    local = on_one_machine["arm64-noasid"]
    sharded = tlbkit.check("arm64-noasid", executor="ray", address=address, ray_search="sharded", **STANDARD)
    assert sharded.verdict == local.verdict == "no violation"
    assert sharded.report["states"] == local.report["states"]
    assert sharded.report["complete"] and sharded.report["workers"] == 2, sharded.report
    zoo = "zoo/linux-arm64-a8ffaaa060b8"
    one = tlbkit.check(zoo, mode="exhaustive", jobs=1)
    found = tlbkit.check(zoo, mode="exhaustive", executor="ray", address=address, ray_search="sharded")
    assert found.verdict == "violation"
    assert found.counterexample.property == one.counterexample.property
    assert tlbkit.replay(found.counterexample.token).counterexample.property == one.counterexample.property
    tlbkit_bin = os.environ.get("TLBKIT_BIN", "tlbkit")
    run = subprocess.run([tlbkit_bin, "check", "--policy", zoo, "--mode", "exhaustive", "--format", "json",
                          "--ray", address, "--ray-search", "sharded"], capture_output=True, text=True, timeout=600,
                         env={**env, "TLBKIT_PYTHON": sys.executable})
    assert run.returncode == 3, run.stderr
    import json

    assert json.loads(run.stdout)["counterexample"]["property"] == one.counterexample.property


def shard_pids():
    """The processes of the sharded search's actors."""
    pids = []
    for d in Path("/proc").iterdir():
        try:
            if d.name.isdigit() and (d / "cmdline").read_bytes().startswith(b"ray::_Shard"):
                pids.append(int(d.name))
        except OSError:
            pass
    return pids


def sharded_check_killed(address, env, more, ready, kill=lambda run, pids: os.kill(pids[0], signal.SIGKILL)):
    """Runs the binary's sharded check of x86-linux-410 at the standard
    bounds with the flags ``more``, and kills one actor's process (SIGKILL;
    or what ``kill`` does) once both run and ``ready()`` says so; returns
    ``(killed, the process, its stdout, its stderr)``."""
    tlbkit_bin = os.environ.get("TLBKIT_BIN", "tlbkit")
    args = [tlbkit_bin, "check", "--policy", "x86-linux-410", "--cpus", "2", "--mms", "3", "--pages", "1",
            "--ops", "6", "--mode", "exhaustive", "--format", "json", "--ray", address, "--ray-search", "sharded",
            *more]
    run = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           env={**env, "TLBKIT_PYTHON": sys.executable})
    killed = 0
    deadline = time.monotonic() + 300
    while run.poll() is None and time.monotonic() < deadline and not killed:
        pids = shard_pids()
        if len(pids) == 2 and ready():
            kill(run, pids)
            killed += 1
        time.sleep(0.05)
    out, err = run.communicate(timeout=300)
    return killed, run, out, err


def has_deltas(directory):
    """Whether a snapshot directory holds a node's deltas (not yet replaced
    by whole parts)."""
    try:
        return any(f.stat().st_size > 0 for f in directory.glob("*.deltas"))
    except OSError:
        return False


def test_a_sharded_check_that_loses_a_node_stops_and_says_so(cluster):
    """Without snapshots, a node's actor killed mid-search (SIGKILL) takes
    its part of the visited set with it: the binary's --ray-search sharded
    ends with an error naming the loss and how a snapshot would have saved
    the work, neither hanging nor reporting a verdict, and no actor outlives
    it."""
    address, env = cluster
    killed, run, out, err = sharded_check_killed(address, env, [], ready=lambda: time.sleep(1.0) or True)
    assert killed, "no actor was running to kill: the search is too small"
    assert run.returncode == 2, (run.returncode, out)
    assert "was lost" in err and "--checkpoint DIR" in err, err
    assert out == ""
    time.sleep(2)
    assert not shard_pids(), "the sharded search's actors outlived the check"


def test_a_sharded_check_that_loses_a_node_before_its_first_snapshot_starts_again(cluster, on_one_machine,
                                                                                    tmp_path):
    """With snapshots due only after ten minutes, a node's actor killed
    (SIGKILL) a second in: the driver ends the other actor and starts the
    search again by itself, and it ends with one machine's verdict and
    states."""
    address, env = cluster
    snapshots = ["--checkpoint", str(tmp_path / "snap"), "--checkpoint-every", "600"]
    killed, run, out, err = sharded_check_killed(address, env, snapshots, ready=lambda: time.sleep(1.0) or True)
    assert killed, "no actor was running to kill: the search is too small"
    assert run.returncode == 0, (run.returncode, out, err)
    assert "was lost; going on from its start" in err, err
    local, b = on_one_machine["x86-linux-410"].report, json.loads(out)
    assert (b["states"], b["complete"], b["counterexample"]) == (local["states"], True, None)
    time.sleep(2)
    assert not shard_pids(), "the sharded search's actors outlived the check"


def test_a_sharded_check_killed_goes_on_from_its_snapshot_and_resumes_on_another_number_of_nodes(
        cluster, on_one_machine, tmp_path):
    """Snapshots every half second; a node's actor killed (SIGKILL) once a
    delta is written (the snapshot then on disk is a whole part with deltas
    after it, or, if the kill came before its file named it, the one
    before): the driver goes on from that snapshot by itself, saying so,
    and the binary ends with one machine's verdict and states. The last
    snapshot it left (whole parts, or whole parts and deltas after them),
    resumed by hand on one node of the two (then on two
    nodes from a snapshot taken by the resumed search), ends the same."""
    from tlbkit import _native, _ray

    address, env = cluster
    saved = tmp_path / "snap"
    snapshots = ["--checkpoint", str(saved), "--checkpoint-every", "0.5"]
    killed, run, out, err = sharded_check_killed(address, env, snapshots, ready=lambda: has_deltas(saved))
    assert killed, "no delta was written before the search ended: the search is too small"
    assert run.returncode == 0, (run.returncode, out, err)
    assert "was lost; going on from its snapshot" in err, err
    local = on_one_machine["x86-linux-410"].report
    b = json.loads(out)
    assert (b["states"], b["complete"], b["counterexample"]) == (local["states"], True, None)
    token, generation, parts = _native.shards_read_snapshot(str(saved))
    assert parts == 2 and generation >= 1, (generation, parts)
    # Resumed on one node, saving again; that snapshot resumed on both.
    report = json.loads(_ray.check(token, address=address, search="sharded", checkpoint=str(saved), resume=True,
                                   nodes=1, every_s=0.5))
    assert (report["states"], report["complete"], report["counterexample"]) == (local["states"], True, None)
    # The snapshot that search left: a later one of its single node's, or
    # (where it ended within half a second) the one it started from.
    later, again = _native.shards_read_snapshot(str(saved))[1:]
    assert (later, again) == (generation, 2) or (later > generation and again == 1), (generation, later, again)
    report = json.loads(_ray.check(token, address=address, search="sharded", checkpoint=str(saved), resume=True))
    assert (report["states"], report["complete"], report["workers"]) == (local["states"], True, 2), report
    time.sleep(2)
    assert not shard_pids(), "the sharded search's actors outlived the check"


def test_a_sharded_check_sent_sigterm_saves_itself_and_stops(cluster, on_one_machine, tmp_path):
    """SIGTERM to the binary of a sharded check taking snapshots (none due
    yet): the driver takes one, stops every node and the binary exits 2
    saying how to go on; resumed through the binary, the search ends with one
    machine's states."""
    address, env = cluster
    saved = tmp_path / "snap"
    snapshots = ["--checkpoint", str(saved), "--checkpoint-every", "600"]
    killed, run, out, err = sharded_check_killed(address, env, snapshots, ready=lambda: time.sleep(1.0) or True,
                                                 kill=lambda run, pids: run.send_signal(signal.SIGTERM))
    assert killed and run.returncode == 2, (run.returncode, out, err)
    assert "interrupted after" in err and f"--resume {saved}" in err, err
    time.sleep(2)
    assert not shard_pids(), "the sharded search's actors outlived the check"
    tlbkit_bin = os.environ.get("TLBKIT_BIN", "tlbkit")
    resumed = subprocess.run([tlbkit_bin, "check", "--resume", str(saved), "--format", "json", "--ray", address,
                              "--ray-search", "sharded"], capture_output=True, text=True, timeout=600,
                             env={**env, "TLBKIT_PYTHON": sys.executable})
    assert resumed.returncode == 0, resumed.stderr
    assert f"{saved} holds its last snapshot before the end" in resumed.stderr, resumed.stderr
    report = json.loads(resumed.stdout)
    assert (report["states"], report["complete"]) == (on_one_machine["x86-linux-410"].report["states"], True)

"""The Ray backends of ``tlbkit.sweep`` and ``tlbkit.check``.

Sweeps: each pending point of the grid is one
Ray task that runs it through the extension module and returns its results
line; the driver records each line in the sweep's results file as its task
completes (``tlbkit_lab::sweep::Session``, the code ``tlbkit sweep`` uses), so
killing the driver loses only the runs in flight and a second sweep runs only
what the file lacks. Once complete, the file is put in grid order: the same
bytes as a sweep on host threads.
"""

from __future__ import annotations

from typing import Optional


def _run_point(point: str):
    """A Ray task: one encoded point in, ``(ok, line or why)`` out."""
    from tlbkit import _native

    return _native.run_point(point)


def run(session, bar, address: Optional[str] = None, in_flight: Optional[int] = None) -> None:
    """Runs ``session``'s pending points as Ray tasks on the cluster at
    ``address`` (None: a running cluster named by ``RAY_ADDRESS``, else a new
    local one), at most ``in_flight`` at once (default: twice the cluster's CPUs)."""
    try:
        import ray
    except ImportError:
        raise ImportError("executor='ray' needs Ray: pip install './python[ray]' (or 'ray>=2.40')") from None
    pending = session.pending()
    if not pending:
        return
    started_here = not ray.is_initialized()
    if started_here:
        ray.init(address=address, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        task = ray.remote(num_cpus=1, max_retries=3)(_run_point)
        window = in_flight or max(2, 2 * int(ray.cluster_resources().get("CPU", 1)))
        flying = {}
        next_point = 0
        while next_point < len(pending) or flying:
            while next_point < len(pending) and len(flying) < window:
                flying[task.remote(pending[next_point])] = next_point
                next_point += 1
            # A timeout, so that Ctrl-C reaches the driver while it waits.
            ready, _ = ray.wait(list(flying), num_returns=1, timeout=0.5)
            for ref in ready:
                i = flying.pop(ref)
                ok, payload = ray.get(ref)
                session.record(i, ok, payload)
                bar.update()
    finally:
        if started_here:
            ray.shutdown()


def _round_task(token: str, part: bytes, budget: int):
    """A Ray task of a distributed check: one part of a round's frontier in,
    ``(part to merge, violation found)`` out."""
    from tlbkit import _native

    return _native.check_round_run(token, part, budget, 1)


def check(token: str, address: Optional[str] = None, tasks: Optional[int] = None, budget: Optional[int] = None,
          state_out: Optional[str] = None) -> str:
    """Runs the exhaustive check ``token`` names in rounds of Ray tasks
    (``tlbkit_check::run::rounds``): each round splits the frontier into
    ``tasks`` parts (default: the cluster's CPUs), runs each for at most
    ``budget`` executions (default: 20,000, or a task's share of every
    execution so far when that is more, so that the rounds grow with the
    search and each round's visited set is shipped to its tasks a few dozen
    times at most) with the states visited so far, and merges what
    they hand back, until nothing is left. Returns the report (JSON). A task
    that finds a violation ends the rounds, the round's other tasks cancelled:
    the check then runs on this machine for its counterexample. ``state_out``: where to write the final
    state for the ``tlbkit`` binary (which makes the report itself)."""
    try:
        import ray
    except ImportError:
        raise ImportError("executor='ray' needs Ray: pip install './python[ray]' (or 'ray>=2.40')") from None
    from tlbkit import _native

    started_here = not ray.is_initialized()
    if started_here:
        ray.init(address=address, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        # A task lost with its worker is run again: a part is a pure function of its input.
        task = ray.remote(num_cpus=1, max_retries=5)(_round_task)
        tasks = tasks or max(1, int(ray.cluster_resources().get("CPU", 1)))
        state = _native.check_round_start(token)
        while True:
            frontier, _states = _native.check_round_progress(state)
            if frontier == 0:
                if state_out is not None:
                    with open(state_out, "wb") as f:
                        f.write(state)
                return _native.check_round_report(token, state, tasks)
            parts = _native.check_round_split(state, tasks)
            done = _native.check_round_executions(state)
            each = budget or max(20000, done // max(1, len(parts)))
            refs = [task.remote(token, p, each) for p in parts]
            outs = {}
            while len(outs) < len(refs):
                # A timeout, so that Ctrl-C reaches the driver while it waits.
                ready, _ = ray.wait([r for r in refs if r not in outs], num_returns=1, timeout=0.5)
                for ref in ready:
                    outs[ref] = ray.get(ref)
                if any(found for _, found in outs.values()):
                    # A violation: the other tasks of the round stop, and the
                    # counterexample is found on this machine.
                    for r in refs:
                        if r not in outs:
                            ray.cancel(r, force=True)
                    return _native.check_token_json(token)
            state = _native.check_round_merge(state, [outs[r][0] for r in refs])
    finally:
        if started_here:
            ray.shutdown()

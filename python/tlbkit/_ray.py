"""The Ray backend of ``tlbkit.sweep``: each pending point of the grid is one
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

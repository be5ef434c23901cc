"""The Ray backends of ``tlbkit.sweep`` and ``tlbkit.check``.

Sweeps: each pending point of the grid is one
Ray task that runs it through the extension module and returns its results
line; the driver records each line in the sweep's results file as its task
completes (``tlbkit_lab::sweep::Session``, the code ``tlbkit sweep`` uses), so
killing the driver loses only the runs in flight and a second sweep runs only
what the file lacks. Once complete, the file is put in grid order: the same
bytes as a sweep on host threads.

Exhaustive checks (``check`` below): the visited set sharded among Ray
actors, one per node, each owning part of it, running its own workers and
sending its messages (claims of states another node owns, its answers,
subtrees given to a node whose workers wait) straight to the others over
TCP, this driver polling them, giving work to nodes that wait and seeing
the end.
"""

from __future__ import annotations

import sys
from typing import NamedTuple, Optional


def _ray():
    """Imports Ray, or says how to install it: ``(ray, RayActorError,
    NodeAffinitySchedulingStrategy)``."""
    try:
        import ray
        from ray.exceptions import RayActorError
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
    except ImportError:
        raise ImportError("executor='ray' needs Ray: pip install './python[ray]' (or 'ray>=2.40')") from None
    return ray, RayActorError, NodeAffinitySchedulingStrategy


def _connect(ray, address: Optional[str]) -> bool:
    """Connects to the cluster at ``address`` unless this process already is;
    returns whether it connected here (and so must shut down)."""
    if ray.is_initialized():
        return False
    ray.init(address=address, include_dashboard=False, log_to_driver=False, configure_logging=False)
    return True


def _run_point(point: str):
    """A Ray task: one encoded point in, ``(ok, line or why)`` out."""
    from tlbkit import _native

    return _native.run_point(point)


def run(session, bar, address: Optional[str] = None, in_flight: Optional[int] = None) -> None:
    """Runs ``session``'s pending points as Ray tasks on the cluster at
    ``address`` (None: a running cluster named by ``RAY_ADDRESS``, else a new
    local one), at most ``in_flight`` at once (default: twice the cluster's CPUs)."""
    ray, _, _ = _ray()
    pending = session.pending()
    if not pending:
        return
    started_here = _connect(ray, address)
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


def _nodes(ray) -> dict:
    """The cluster's live nodes that have CPUs: node id to CPUs."""
    nodes = {}
    for n in ray.nodes():
        cpus = int(n.get("Resources", {}).get("CPU", 0))
        if n.get("Alive") and cpus >= 1:
            nodes[n["NodeID"]] = cpus
    return nodes


class _Shard:
    """A Ray actor of a sharded check, one per node: that node's part of the
    visited set and its worker threads, one per CPU of the node
    (``tlbkit_check::run::shards::Shard``), which run from its start: a new
    search, or the one a snapshot's ``parts`` saved.

    Its messages go straight to the other nodes over TCP
    (``tlbkit_check::run::courier``): ``address`` is where it listens,
    ``connect`` joins it to the others and starts the courier's threads,
    which carry the messages from then on; the driver only polls ``status``
    and gives ``order``s."""

    def __init__(self, token: str, me: int, nodes: int, jobs: int, deltas: bool, parts: list):
        import ray

        from tlbkit import _native

        self.me = me
        # ``parts``: references to the snapshot's parts (in a list, so that
        # Ray hands them over unread), fetched one at a time as the node
        # takes each in: it holds one part at a time, not the snapshot.
        fetch = (lambda i: ray.get(parts[i])) if parts else None
        self.shard = _native.CheckShard(token, me, nodes, jobs, len(parts), fetch, deltas)
        self.courier = _native.CheckCourier(ray.util.get_node_ip_address())

    def address(self) -> str:
        return self.courier.address

    def connect(self, peers: list, pause_s: float) -> None:
        self.courier.start(self.shard, self.me, peers, pause_s)

    def order(self, give: int, to: int, wanted: bool, hold: bool) -> None:
        self.courier.order(give, to, wanted, hold)

    def status(self) -> Optional[tuple]:
        return self.courier.status()

    def save(self, delta: bool) -> bytes:
        return self.shard.save(delta)

    def finish(self):
        self.courier.close()
        self.shard.finish()

    def stop(self):
        self.courier.close()
        self.shard.stop()

    def totals(self) -> bytes:
        return self.shard.totals()


class _Status(NamedTuple):
    """A node's ``status`` (``CheckCourier.status``): messages it sent and
    took in, then where its last pump left it."""

    sent: int
    received: int
    open: int
    queued: int
    hungry: int
    stopped: bool
    executions: int
    states: int
    settled: bool
    bytes: int


class Stopped(RuntimeError):
    """A sharded check that saved itself and stopped before its end (a node's
    part of the visited set passed ``max_memory``, or SIGINT or SIGTERM came
    while it took snapshots): its snapshot resumes it."""


def _get(ray, refs):
    """``ray.get`` with a timeout, so that Ctrl-C reaches the driver while it waits."""
    while True:
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0.5)
        if len(ready) == len(refs):
            return ray.get(refs)


def check(token: str, address: Optional[str] = None, state_out: Optional[str] = None,
          search: str = "sharded", pause_s: float = 0.0005, **saving) -> str:
    """Runs the exhaustive check ``token`` names on the Ray cluster at
    ``address``: ``check_sharded`` (with ``saving``'s keywords:
    ``checkpoint``, ``every_s``, ``max_memory``, ``resume``, ``nodes``).
    ``search`` is ``"sharded"``, the only search now (the rounds, where each
    node kept a whole copy of the visited set, are gone). Returns the report
    (JSON)."""
    if search != "sharded":
        raise ValueError(f"search {search!r}: the only search is 'sharded' (the rounds, where each node kept a whole "
                         "copy of the visited set, are gone)")
    return check_sharded(token, address=address, state_out=state_out, pause_s=pause_s, **saving)


def check_sharded(token: str, address: Optional[str] = None, state_out: Optional[str] = None,
                  pause_s: float = 0.0005, checkpoint: Optional[str] = None, every_s: float = 60.0,
                  max_memory: Optional[int] = None, resume: bool = False, nodes: Optional[int] = None) -> str:
    """Runs the exhaustive check ``token`` names with its visited set sharded
    among Ray actors, one per node of the cluster (the first ``nodes`` of
    them, if given) with a worker thread per CPU of its node, each owning
    the states whose fingerprints fall in its part. Returns the report (JSON).

    Each actor connects to every other over TCP (on its node's address and
    a port the system picks: the nodes must reach each other on such ports,
    as Ray's own workers do) and sends its messages there, pumping its node
    after each arrival and at most ``pause_s`` apart; none passes through
    the driver. The driver polls every node's counts: a node whose workers
    wait with nothing queued is given half of the fullest queue, and while
    any waits every node's workers keep part of their subtrees in their
    queue. The search is over when two polls in a row find no work open
    anywhere and every message sent taken in (``_Carrier.run``); it stops
    at the first violation a node's worker finds, whose execution the
    report runs again and shrinks (never searched for again).

    With ``checkpoint`` (a directory), a snapshot of the whole search every
    ``every_s`` seconds: the nodes are held until two polls in a row find
    every one settled (its workers at rest, no claim unanswered) and nothing on
    its way; each
    node's part is written there as it made it, then the file naming them
    (``tlbkit_check::run::shards``). A node whose part of the visited set
    passes ``max_memory`` bytes makes the driver take a snapshot and stop
    (``Stopped``), and so do SIGINT and SIGTERM. ``resume=True`` goes on
    from the snapshot in ``checkpoint``, on any number of nodes.

    A node lost (its actor's process killed) loses its
    part of the visited set. With ``checkpoint``, the driver ends the other
    actors and goes on by itself from the last snapshot (or from the start,
    before the first), on the nodes the cluster has then: the loss costs the
    work since that snapshot. It gives up, saying how to resume by hand,
    after ``_LOSSES`` losses with no snapshot taken between them. Without
    ``checkpoint`` it raises at the first loss.
    ``state_out``: where to write the nodes' totals, from which the
    ``tlbkit`` binary makes the report itself."""
    from tlbkit import _native

    if (resume or max_memory is not None) and checkpoint is None:
        raise ValueError("resume and max_memory need the snapshot's directory: give checkpoint")
    if not every_s > 0:
        raise ValueError(f"every_s={every_s}: give seconds above 0")
    ray, RayActorError, NodeAffinitySchedulingStrategy = _ray()
    generation, parts = 0, 0
    if resume:
        saved, generation, parts = _native.shards_read_snapshot(checkpoint)
        if saved != token:
            raise ValueError(f"{checkpoint} holds a snapshot of another check: resume it with its own token")
    started_here = _connect(ray, address)
    Shard = ray.remote(max_restarts=0, max_task_retries=0)(_Shard)
    actors = []
    try:
        saving = _Saving(checkpoint, token, generation, every_s, max_memory) if checkpoint is not None else None
        losses, lost_at = 0, None
        while True:
            actors = _start_shards(ray, Shard, NodeAffinitySchedulingStrategy, token, nodes, checkpoint, generation,
                                   parts)
            carrier = _Carrier(ray, actors, pause_s)
            try:
                with _Signals(saving is not None) as signals:
                    totals = carrier.run(saving, signals)
                break
            except RayActorError:
                for a in actors:
                    ray.kill(a)
                actors = []
                if saving is None:
                    raise RuntimeError("a node of the sharded check was lost, and its part of the visited set with "
                                       "it: run the check again (with --checkpoint DIR a lost node costs only the "
                                       "work since the last snapshot)") from None
                on_disk = saving.generation_on_disk()
                losses, lost_at = (losses + 1 if lost_at == on_disk else 1), on_disk
                if losses >= _LOSSES:
                    raise RuntimeError(f"a node of the sharded check was lost {losses} times with no snapshot "
                                       f"between: {saving.resume_hint()}") from None
                generation, parts = saving.restart()
                where = f"its snapshot {generation} in {checkpoint}" if generation else "its start (no snapshot yet)"
                print(f"tlbkit: a node of the sharded check was lost; going on from {where}", file=sys.stderr,
                      flush=True)
        report, saved = _native.check_shards_report(token, totals)
        if state_out is not None:
            with open(state_out, "wb") as f:
                f.write(saved)
        return report
    finally:
        for a in actors:
            ray.kill(a)
        if started_here:
            ray.shutdown()


# Losses of a node a sharded check goes on from, with no snapshot taken
# between them, before it gives up.
_LOSSES = 3


def _start_shards(ray, Shard, NodeAffinitySchedulingStrategy, token: str, nodes: Optional[int],
                  checkpoint: Optional[str], generation: int, parts: int) -> list:
    """An actor on each node the cluster has now with a CPU (the first
    ``nodes`` of them, if given), holding its part of the snapshot
    ``generation`` of ``checkpoint`` (of ``parts`` parts; none: a new
    search)."""
    from tlbkit import _native

    cluster = sorted(_nodes(ray).items())
    if not cluster:
        raise ValueError("the Ray cluster has no node with a CPU")
    if nodes is not None:
        if not 1 <= nodes <= len(cluster):
            raise ValueError(f"nodes={nodes}: the cluster has {len(cluster)} nodes with CPUs")
        cluster = cluster[:nodes]
    k = len(cluster)
    saved_parts = [ray.put(_native.shards_read_part(checkpoint, token, generation, i)) for i in range(parts)]
    actors = []
    for me, (node, cpus) in enumerate(cluster):
        on_node = NodeAffinitySchedulingStrategy(node, soft=False)
        actors.append(Shard.options(num_cpus=cpus, scheduling_strategy=on_node).remote(
            token, me, k, cpus, checkpoint is not None, saved_parts))
    return actors


class _Saving:
    """Where and how often a sharded check takes its snapshots, and the last
    one taken."""

    def __init__(self, directory: str, token: str, generation: int, every_s: float, max_memory: Optional[int]):
        import time

        self.directory, self.token, self.generation = directory, token, generation
        self.every_s, self.max_memory = every_s, max_memory
        self.last = time.monotonic()
        self.taken = generation > 0
        # The generation whose whole parts this run's deltas follow (None:
        # the next snapshot is whole), their bytes and the deltas' since.
        self.base, self.whole_bytes, self.delta_bytes = None, 0, 0

    def due(self, pumped) -> bool:
        import time

        return time.monotonic() - self.last >= self.every_s or self.over(pumped)

    def over(self, pumped) -> bool:
        return self.max_memory is not None and any(p.bytes > self.max_memory for p in pumped)

    def take(self, ray, actors) -> None:
        """Writes every node's part (the nodes held and settled), then the
        file that names them. The first snapshot of a run is whole, and so is
        one whose deltas would take more than the whole parts they follow;
        the others are deltas: each node's states added or narrowed since
        the snapshot before, appended to its whole part's deltas."""
        import time

        from tlbkit import _native

        self.generation += 1
        whole = self.base is None or self.delta_bytes > self.whole_bytes
        if whole:
            self.base, self.whole_bytes, self.delta_bytes = self.generation, 0, 0
        for i, a in enumerate(actors):
            part = _get(ray, [a.save.remote(not whole)])[0]
            if whole:
                _native.shards_write_part(self.directory, self.generation, i, part)
                self.whole_bytes += len(part)
            else:
                self.delta_bytes += len(part)
                _native.shards_append_delta(self.directory, self.base, self.generation, i, part)
        _native.shards_write_snapshot(self.directory, self.token, self.generation, self.base, len(actors))
        self.last, self.taken = time.monotonic(), True

    def generation_on_disk(self) -> int:
        """The generation of the last snapshot whole on disk (0: none)."""
        from tlbkit import _native

        if not self.taken:
            return 0
        return _native.shards_read_snapshot(self.directory)[1]

    def restart(self) -> tuple:
        """After a node was lost: ``(generation, parts)`` of the snapshot to
        go on from (``(0, 0)``: none, start again); the clock of the next
        one started afresh, and that one whole."""
        import time

        from tlbkit import _native

        self.last, self.base = time.monotonic(), None
        if not self.taken:
            self.generation = 0
            return 0, 0
        token, self.generation, parts = _native.shards_read_snapshot(self.directory)
        if token != self.token:
            raise RuntimeError(f"{self.directory} now holds a snapshot of another check")
        return self.generation, parts

    def resume_hint(self) -> str:
        if not self.taken:
            return "no snapshot was taken yet: run the check again"
        return (f"{self.directory} holds the search as its last snapshot left it: go on with "
                f"tlbkit check --resume {self.directory} --ray ADDRESS")


class _Signals:
    """While a sharded check takes snapshots (``on``), SIGINT and SIGTERM ask
    its driver to take one and stop, instead of ending it at once: ``caught``
    says whether one came. (Only the main thread may set handlers; elsewhere
    the signals keep theirs.)"""

    def __init__(self, on: bool):
        self.on, self.caught, self.kept = on, False, {}

    def __enter__(self):
        import signal
        import threading

        if self.on and threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self.kept[sig] = signal.signal(sig, self._catch)
        return self

    def _catch(self, signum, frame):
        self.caught = True

    def __exit__(self, *exc):
        import signal

        for sig, handler in self.kept.items():
            signal.signal(sig, handler)
        return False


# How often the driver of a sharded check polls its nodes (each poll is a
# Ray call to every node; messages never wait for it).
_POLL_S = 0.01


class _Carrier:
    """The driver's side of a sharded check: the actors joined to each other
    (their messages then go straight between them, each node pumped at most
    ``pause_s`` apart), work given to nodes that wait, snapshots taken, and
    the end seen, from the nodes' ``status`` polled every ``_POLL_S``."""

    def __init__(self, ray, actors, pause_s: float):
        self.ray, self.actors, self.pause_s = ray, actors, pause_s

    def run(self, saving: Optional[_Saving], signals: _Signals):
        """Carries until the search is over (or stopped at a violation);
        returns every node's totals. Raises ``Stopped`` after the snapshot
        taken because a node passed its memory cap, or a signal came.

        The end, a snapshot's moment and which node gives work to which are
        the rule of ``tlbkit_check::run::courier::Watch`` (``ShardsWatch``):
        two polls in a row with no work open anywhere (or every node held
        and settled), the same counts of messages at each node, and as many
        taken in as sent in all."""
        import time

        from tlbkit import _native

        ray, actors, k = self.ray, self.actors, len(self.actors)
        peers = _get(ray, [a.address.remote() for a in actors])
        try:
            _get(ray, [a.connect.remote(peers, self.pause_s) for a in actors])
        except Exception:
            # A node lost while they joined fails the others' connections:
            # its loss (RayActorError) is what the caller goes on from.
            _get(ray, [a.address.remote() for a in actors])
            raise

        def give(orders):
            _get(ray, [actors[i].order.remote(*o) for i, *o in orders])

        watch, stopping = _native.ShardsWatch(), False
        while True:
            now = _get(ray, [a.status.remote() for a in actors])
            if any(s is None for s in now):
                time.sleep(_POLL_S)
                continue
            now = [_Status(*s) for s in now]
            what, orders = watch.next(now)
            if what == "stop":
                _get(ray, [a.stop.remote() for a in actors])
                break
            if what == "finish":
                _get(ray, [a.finish.remote() for a in actors])
                break
            if what == "settled":
                saving.take(ray, actors)
                give(watch.release(k))
                if stopping:
                    _get(ray, [a.stop.remote() for a in actors])
                    raise Stopped(self._why(saving, now, signals.caught))
            elif saving is not None and not watch.holding and (saving.due(now) or signals.caught):
                stopping = saving.over(now) or signals.caught
                give(watch.hold(k))
            else:
                give(orders)
            time.sleep(_POLL_S)
        return _get(ray, [a.totals.remote() for a in actors])

    @staticmethod
    def _why(saving: _Saving, pumped, signalled: bool) -> str:
        """Why a search that took its last snapshot stopped, and how to go on."""
        states = sum(p.states for p in pumped)
        go_on = f"tlbkit check --resume {saving.directory} --ray ADDRESS"
        if signalled:
            return f"interrupted after {states} states: the search is saved in {saving.directory}; go on with {go_on}"
        most = max(range(len(pumped)), key=lambda i: pumped[i].bytes)
        return (f"node {most}'s part of the visited set takes {pumped[most].bytes >> 20} MiB, past the cap of "
                f"{saving.max_memory >> 20} MiB, after {states} states: the search is saved in {saving.directory}; "
                f"go on with more nodes or a higher cap: {go_on} --max-memory SIZE")

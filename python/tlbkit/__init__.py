"""tlbkit from Python: runs, checks, ministat comparisons and resumable sweeps.

Every function calls the Rust library that the ``tlbkit`` command calls (the
extension module ``tlbkit._native``), not the command: ``run`` gives the
figures of ``tlbkit run --format json``, ``sweep`` writes the results file of
``tlbkit sweep`` byte for byte, and bad input raises ``ValueError`` with the
message the command prints, a parameter named by its keyword (``results=``,
``jobs=0``) where the command names its flag. Simulations run with the GIL
released; Ctrl-C raises ``KeyboardInterrupt``.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

from . import _native

__all__ = [
    "RunResult",
    "Comparison",
    "CheckResult",
    "Counterexample",
    "Known",
    "Step",
    "run",
    "list_policies",
    "list_machines",
    "list_workloads",
    "list_metrics",
    "compare",
    "check",
    "replay",
    "sweep",
    "to_long",
]


def _sets(params: Optional[Mapping[str, Any]]) -> List[str]:
    """``--set key=value`` pairs of a params dict, spelled as the CLI takes them."""
    out = []
    for k, v in (params or {}).items():
        if isinstance(v, bool):
            raise ValueError(f"params={{{k!r}: {v}}}: give on or off, or a number, not a Python bool")
        out.append(f"{k}={v}")
    return out


def _whole(command: str, low: int, high: int, **values: Any) -> None:
    """Raises for a keyword of ``command`` that is not a whole number from
    ``low`` to ``high`` (what the native side can hold), naming it, where the
    conversion would raise without its name; within those, the native side
    says what range the option itself has."""
    for name, v in values.items():
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, int):
            raise TypeError(f"{name}={v!r}: give a whole number")
        if v < low:
            raise ValueError(f"{name}={v}: give a whole number, 0 or more")
        if v > high:
            raise ValueError(f"{name}={v}: too large for any {command} (help(tlbkit.{command}) gives its bounds)")


@dataclass(frozen=True)
class RunResult:
    """One run: the fields of ``tlbkit run --format json``."""

    machine: str
    cpus: int
    policy: str
    workload: str
    seed: int
    params: Dict[str, Any]
    result: Dict[str, float]
    metrics: Dict[str, Any]
    violations: List[Dict[str, Any]]
    violations_total: int
    violations_by_property: Dict[str, int]
    replay: str
    _doc: Dict[str, Any] = field(repr=False, compare=False)

    def to_dict(self) -> Dict[str, Any]:
        """The document ``tlbkit run --format json`` prints, as a dict."""
        return json.loads(json.dumps(self._doc))


def run(
    machine: str,
    policy: str,
    workload: str,
    cpus: int = 1,
    params: Optional[Mapping[str, Any]] = None,
    seed: int = 1,
    strict: bool = False,
) -> RunResult:
    """Runs ``workload`` under ``policy`` on ``machine``: ``tlbkit run`` with
    ``--set key=value`` for each of ``params``."""
    cpus, seed = int(cpus), int(seed)
    _whole("run", -(2**63), 2**63 - 1, cpus=cpus)
    _whole("run", 0, 2**64 - 1, seed=seed)
    doc = json.loads(
        _native.run_json(machine, cpus, policy, workload, _sets(params), seed, bool(strict))
    )
    # The document leaves out violations_by_property when there are none.
    fields = {k: doc.get(k, {}) for k in RunResult.__dataclass_fields__ if k != "_doc"}
    return RunResult(**fields, _doc=doc)


def list_policies() -> List[Dict[str, str]]:
    """Every policy: ``name``, ``arch``, ``description`` (``tlbkit list policies``)."""
    return json.loads(_native.catalog("policies"))


def list_machines() -> List[Dict[str, Any]]:
    """Every machine preset with its cores, TLBs and costs (``tlbkit list machines``)."""
    return json.loads(_native.catalog("machines"))["machines"]


def list_workloads() -> List[Dict[str, Any]]:
    """Every workload with its results and parameters (``key``, ``default``,
    ``min``, ``max``, ``meaning``), as ``tlbkit list workloads`` gives them."""
    return json.loads(_native.catalog("workloads"))["workloads"]


def list_metrics() -> List[Dict[str, str]]:
    """Every figure a run reports: ``name``, ``kind``, ``unit``, ``meaning``."""
    return json.loads(_native.catalog("metrics"))


@dataclass(frozen=True)
class Summary:
    """One set's figures, as ministat prints them."""

    n: int
    min: float
    max: float
    median: float
    avg: float
    stddev: float


@dataclass(frozen=True)
class Comparison:
    """ministat's comparison of set b against set a at 95% confidence.

    Where either set is one value repeated (``deterministic``: one sample,
    as a simulation that every seed runs alike gives), no interval follows:
    ``proven``, ``half_width``, ``relative_half_width_pct`` and
    ``pooled_stddev`` are ``None`` and only the difference is given."""

    a: Summary
    b: Summary
    confidence: float
    deterministic: bool
    proven: Optional[bool]
    difference: float
    half_width: Optional[float]
    relative_pct: float
    relative_half_width_pct: Optional[float]
    pooled_stddev: Optional[float]
    table: str

    def __str__(self) -> str:
        return self.table


def compare(samples_a: Sequence[float], samples_b: Sequence[float]) -> Comparison:
    """ministat over two sets of samples: b's mean against a's, Student's t;
    the difference alone where either set is one value repeated."""
    d = json.loads(_native.compare_json([float(x) for x in samples_a], [float(x) for x in samples_b]))
    d["a"], d["b"] = Summary(**d["a"]), Summary(**d["b"])
    return Comparison(**d)


@dataclass(frozen=True)
class Step:
    """One step of a counterexample: what one CPU did."""

    n: int
    who: str
    events: List[str]


@dataclass(frozen=True)
class Known:
    """Something recorded that a violation may be: ``kind`` is ``finding``
    (a hazard of upstream code in the findings catalogue) or ``zoo`` (the
    historic bug a ``zoo/`` policy re-introduces)."""

    kind: str
    id: str
    summary: str


@dataclass(frozen=True)
class Counterexample:
    """A violation and the schedule that reaches it; ``known`` is what is
    already recorded that it may be (empty for anything new)."""

    property: str
    cpu: int
    detail: str
    steps: List[Step]
    token: str
    summary: List[str]
    view: List[Step]
    known: List[Known] = field(default_factory=list)


@dataclass(frozen=True)
class CheckResult:
    """What a check (or a replay) found: ``report`` is ``tlbkit check --format
    json``'s document."""

    verdict: str
    counterexample: Optional[Counterexample]
    report: Dict[str, Any]

    @property
    def token(self) -> Optional[str]:
        """The replay token of the counterexample, if there is one."""
        return self.counterexample.token if self.counterexample else None

    @property
    def violations(self) -> List[Counterexample]:
        """Each class of violation a check with ``all_violations=True`` found,
        in the order first found (its first execution, shrunk); empty
        otherwise."""
        return [_counterexample(v["counterexample"]) for v in self.report.get("violations", [])]


def _counterexample(cx: Dict[str, Any]) -> Counterexample:
    return Counterexample(
        **{
            **cx,
            "steps": [Step(**s) for s in cx["steps"]],
            "view": [Step(**s) for s in cx["view"]],
            "known": [Known(**k) for k in cx.get("known", [])],
        }
    )


def _check_result(text: str) -> CheckResult:
    r = json.loads(text)
    cx = r.get("counterexample")
    if cx is not None:
        cx = _counterexample(cx)
        verdict = "violation"
    else:
        verdict = "no violation" if r.get("complete") else "no violation (search stopped early)"
    return CheckResult(verdict=verdict, counterexample=cx, report=r)


def check(
    policy: str,
    cpus: Optional[int] = None,
    mms: Optional[int] = None,
    asids: Optional[int] = None,
    ops: Optional[int] = None,
    mode: Optional[str] = None,
    *,
    pages: Optional[int] = None,
    iterations: Optional[int] = None,
    seed: int = 1,
    memory: Optional[str] = None,
    menu: Optional[str] = None,
    teardown: Optional[str] = None,
    quick: bool = False,
    deep: bool = False,
    jobs: Optional[int] = None,
    executor: Optional[str] = None,
    address: Optional[str] = None,
    ray_search: str = "sharded",
    all_violations: bool = False,
    base: Optional[str] = None,
    checkpoint: Optional[str] = None,
    checkpoint_every: float = 60.0,
    max_memory: Optional[int] = None,
    resume: bool = False,
) -> CheckResult:
    """``tlbkit check``: explores interleavings of ``policy`` on a small machine.
    Arguments left None take the CLI's defaults for the policy.

    ``executor``: None (this machine, ``jobs`` worker threads) or ``"ray"``:
    an exhaustive search of one shape (``mode="exhaustive"`` or
    ``deep=True``) among Ray actors, one per node of the cluster at
    ``address`` (None: ``RAY_ADDRESS``, else a new local cluster), each with a
    worker thread per CPU of its node. Each state is owned by one actor,
    which alone holds it; a worker that reaches another's state claims it
    from its owner and goes on, the owner's answer narrowing what it
    explores there, so each node holds only its part of the visited set; a
    node lost costs the search since its last snapshot, from which the
    driver goes on by itself (``checkpoint`` takes them; ``tlbkit check
    --resume DIR`` goes on from one on any number of nodes); without
    ``checkpoint`` the check stops at the loss. The verdict is the search's
    on one machine, and so are the states where the policy's visited set
    does not depend on the order of the search (the guide's "Searches that
    outgrow one run" names a policy where it does). ``ray_search`` is
    ``"sharded"``, the only search now (kept so that calls that name it
    still run).

    With ``executor="ray"``: ``checkpoint`` (a directory) takes a
    snapshot of the whole search every ``checkpoint_every`` seconds; a node
    whose part of the visited set passes ``max_memory`` bytes, or SIGINT or
    SIGTERM, makes it take one and stop (``RuntimeError``, saying how to go
    on); ``resume=True`` goes on from the snapshot in ``checkpoint`` (of this
    same check) on any number of nodes (``tlbkit check --checkpoint``,
    ``--resume``).

    ``all_violations``: go on past every violation (``tlbkit check
    --all-violations``, on one thread); ``report["violations"]`` lists each
    class found with its count and counterexample, and ``violations`` gives
    them as ``Counterexample`` objects.

    ``base``: for a C policy (``policy="c:FILE"``), what its changed lines
    are counted against (``"@REV"``, the same files at a git revision, or
    ``"c:OTHER.c"``; ``tlbkit check --base``): ``report["code"]`` then says,
    per file, which lines with code the change touched and whether any
    execution reached them (a check of a C policy gives ``report["code"]``,
    the lines it reached, with or without a base)."""
    if executor not in (None, "local", "ray"):
        raise ValueError(f"executor {executor!r}: give None (this machine) or 'ray'")
    _whole("check", -(2**63), 2**63 - 1, cpus=cpus)
    _whole("check", 0, 2**32 - 1, asids=asids)
    _whole("check", 0, 2**64 - 1, mms=mms, pages=pages, ops=ops, seed=seed, iterations=iterations, jobs=jobs)
    if all_violations and executor == "ray":
        raise ValueError("all_violations searches on this machine, on one thread: leave executor out")
    what = dict(
        policy=policy,
        quick=quick,
        deep=deep,
        cpus=cpus,
        mms=mms,
        pages=pages,
        asids=asids,
        ops=ops,
        mode=mode,
        seed=seed,
        memory=memory,
        menu=menu,
        teardown=teardown,
    )
    if executor == "ray":
        if base is not None:
            raise ValueError("base is counted on this machine's check: leave executor out")
        token = _native.check_spec_token(what)
        from tlbkit import _ray

        saving = {}
        if not checkpoint_every > 0:
            raise ValueError(f"checkpoint_every={checkpoint_every}: give seconds above 0")
        if checkpoint is not None or resume or max_memory is not None:
            saving = dict(checkpoint=checkpoint, every_s=checkpoint_every, max_memory=max_memory, resume=resume)
        return _check_result(_ray.check(token, address=address, search=ray_search, **saving))
    if checkpoint is not None or resume or max_memory is not None:
        raise ValueError("checkpoint, resume and max_memory: only with executor='ray' "
                         "(a check on this machine saves itself with tlbkit check --checkpoint DIR)")
    return _check_result(_native.check_json(what, iterations, jobs, all_violations, base))


def replay(token: str) -> CheckResult:
    """``tlbkit replay``: runs a counterexample again from its token."""
    return _check_result(_native.replay_json(token))


class _Progress:
    """Runs done out of the grid's total on stderr: a line redrawn on a
    terminal, else a line at every tenth of the grid."""

    def __init__(self, total: int, already: int, enabled: bool):
        self.total, self.done, self.enabled = total, already, enabled and total > 0
        self.tty = self.enabled and sys.stderr.isatty()
        self.shown = -1

    def update(self, ran_now: int = 1, absolute: Optional[int] = None) -> None:
        self.done = absolute if absolute is not None else self.done + ran_now
        if not self.enabled:
            return
        if self.tty:
            print(f"\rtlbkit sweep: {self.done}/{self.total} runs", end="", file=sys.stderr, flush=True)
        elif self.done * 10 // self.total != self.shown:
            self.shown = self.done * 10 // self.total
            print(f"tlbkit sweep: {self.done}/{self.total} runs", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.tty:
            print(file=sys.stderr)


def _grid_text(grid: Union[str, os.PathLike, Mapping[str, Any]]):
    """The TOML text of a grid and the name messages give it."""
    if isinstance(grid, Mapping):
        return _native.grid_toml(json.dumps(dict(grid))), "grid"
    path = Path(grid)
    try:
        return path.read_text(), str(path)
    except OSError as e:
        raise ValueError(f"cannot read {path}: {e.strerror}") from None


def sweep(
    grid: Union[str, os.PathLike, Mapping[str, Any]],
    jobs: Optional[int] = None,
    results: Union[str, os.PathLike, None] = None,
    executor: Optional[str] = None,
    progress: bool = True,
    address: Optional[str] = None,
    form: str = "wide",
):
    """Runs every point of a grid that the results file does not record yet and
    returns the grid's results as a pandas DataFrame (one row per run, in grid
    order; every coordinate, parameter and figure a column).

    A column whose values are all integers (``cpus``, ``seed``, a workload's
    integer parameters, the counters) has pandas' nullable ``Int64`` type,
    ``<NA>`` in the rows of workloads that lack it; text columns
    (``machine``, ``policy``, ``workload``, ``command``) have pandas'
    ``string`` type.
    ``df.attrs["units"]`` gives each figure's unit and
    ``df.attrs["descriptions"]`` every column's meaning (from
    ``list_metrics()``, ``list_workloads()`` and the machine parameters). ``form="long"`` returns the
    tidy form instead (``to_long``): one row per run and figure.

    ``grid`` is an experiment file (TOML, as ``tlbkit sweep`` takes) or a dict
    of the same keys. ``results`` is the JSONL results file (default: the
    file's ``results``, else its name with ``.jsonl``); it is the CLI's file,
    appended to as runs finish, resumed from, and put in grid order once
    complete. A dict with neither ``results=`` nor a ``results`` key runs into
    a temporary file, removed once the frame is read (nothing to resume).
    ``executor``: None (host threads, ``jobs`` of them) or ``"ray"``
    (Ray tasks on the cluster at ``address``, or a local one; ``jobs`` caps the
    tasks in flight).
    """
    import pandas as pd

    if form not in ("wide", "long"):
        raise ValueError(f"form={form!r}: give 'wide' (a row per run) or 'long' (a row per run and figure)")
    if executor not in (None, "local", "ray"):
        raise ValueError(f"executor {executor!r}: give None (host threads) or 'ray'")
    _whole("sweep", -(2**63), 2**64 - 1, jobs=jobs)
    if jobs is not None and jobs < 1:
        raise ValueError(f"jobs={jobs}: give at least one thread")
    text, origin = _grid_text(grid)
    if origin == "grid" and results is None and "results" not in grid:
        import tempfile

        with tempfile.TemporaryDirectory(prefix="tlbkit-sweep-") as tmp:
            return sweep(grid, jobs, os.path.join(tmp, "results.jsonl"), executor, progress, address, form)
    session = _native.SweepSession(text, origin, None if results is None else os.fspath(results))
    keys = session.keys()
    total, already, torn = session.start()
    if torn:
        print(
            f"tlbkit sweep: dropped the torn last line ({torn} bytes) of the results file; its run is made again",
            file=sys.stderr,
        )
    bar = _Progress(total, already, progress)
    try:
        if executor is None or executor == "local":
            session.run_local(jobs or os.cpu_count() or 1, lambda n: bar.update(absolute=already + n))
        elif executor == "ray":
            from . import _ray

            _ray.run(session, bar, address=address, in_flight=jobs)
    finally:
        bar.close()
    report = json.loads(session.finish())
    if progress:
        print(report["summary"], file=sys.stderr)
    if report["failure"]:
        raise ValueError(report["failure"])
    if report["violating"]:
        print(
            f"tlbkit: {len(report['violating'])} run(s) of the grid found violations; "
            f"replay the first with: {report['violating'][0]}",
            file=sys.stderr,
        )
    df = _frame(_grid_rows(report["results"], keys))
    return to_long(df) if form == "long" else df


# The columns every results line has, with what they mean.
_COORDINATES = {
    "machine": "the machine preset (tlbkit list machines)",
    "cpus": "CPUs simulated",
    "policy": "the policy (tlbkit list policies)",
    "workload": "the workload (tlbkit list workloads)",
    "seed": "the run's random seed (--seed)",
    "command": "the tlbkit run command that reproduces the row",
    "violations": "stale translations the run's oracle saw (0 for a correct policy)",
}


def _frame(rows: List[Dict[str, Any]]):
    """The wide frame of results lines: integer columns nullable ``Int64``,
    text columns ``string``; units and a description of every column in
    ``attrs``."""
    import pandas as pd

    df = pd.DataFrame(rows)
    for col in df.columns:
        present = [v for v in (r.get(col) for r in rows) if v is not None]
        if present and all(isinstance(v, int) and not isinstance(v, bool) for v in present):
            df[col] = df[col].astype("Int64")
        elif present and all(isinstance(v, str) for v in present):
            # Not `category`: a groupby over categories makes a group of
            # every combination (an x86 policy on an arm64 machine) unless
            # told observed=True.
            df[col] = df[col].astype("string")
    metrics = {m["name"]: m for m in list_metrics()}
    params: Dict[str, List[str]] = {}
    for w in list_workloads():
        for p in w["parameters"]:
            params.setdefault(p["key"], []).append(f"{w['name']}: {p['meaning']}")
    switches = {p["key"]: p["meaning"] for p in json.loads(_native.catalog("machines"))["parameters"]}
    units: Dict[str, str] = {}
    descriptions: Dict[str, str] = {}
    for col in df.columns:
        if col in metrics:
            units[col] = metrics[col]["unit"]
            descriptions[col] = metrics[col]["meaning"]
        elif col in _COORDINATES:
            descriptions[col] = _COORDINATES[col]
        elif col in params:
            descriptions[col] = "workload parameter (--set " + col + "): " + "; ".join(params[col])
        elif col in switches:
            descriptions[col] = "machine or kernel parameter (--set " + col + "): " + switches[col]
        else:
            descriptions[col] = "a figure or setting of the results file that tlbkit's catalogues do not describe"
    df.attrs["units"] = units
    df.attrs["descriptions"] = descriptions
    return df


def to_long(df):
    """The tidy form of a ``sweep`` frame: one row per run and figure, with the
    run's coordinates and parameters, then ``metric``, ``value`` (float) and
    ``unit``; a figure a run does not report has no row. ``attrs`` carry over."""
    units = df.attrs.get("units", {})
    metrics = [c for c in df.columns if c in units]
    ids = [c for c in df.columns if c not in units]
    long = df.reset_index(drop=True).melt(
        id_vars=ids, value_vars=metrics, var_name="metric", value_name="value", ignore_index=False
    )
    # Run by run, each run's figures in the frame's column order.
    long = long.sort_index(kind="stable")
    long = long[long["value"].notna()].copy()
    long["value"] = long["value"].astype("float64")
    long["unit"] = long["metric"].map(units)
    long = long.reset_index(drop=True)
    long.attrs = dict(df.attrs)
    return long


def _grid_rows(path: str, keys: List[str]) -> List[Dict[str, Any]]:
    """The results file's lines of the grid's points, in grid order."""
    by_command = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                row = json.loads(line)
                by_command.setdefault(row["command"], row)
    return [by_command[k] for k in keys if k in by_command]

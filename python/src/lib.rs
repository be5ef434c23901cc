//! `tlbkit._native`: the Rust side of the Python package `tlbkit`, kept thin.
//! Each function calls the library function the CLI calls (`tlbkit_sim::run`,
//! `tlbkit_sim::catalog`, `tlbkit_lab::stats`, `tlbkit_check::options`,
//! `tlbkit_lab::sweep`) and hands its output back as the JSON text the CLI
//! prints, which the Python side (`python/tlbkit/__init__.py`) turns into
//! dicts, dataclasses and DataFrames: one encoding, so the two cannot drift.
//!
//! Errors are raised as `ValueError`. The libraries' typed errors (the
//! simulator's, the lab's, the checker's) are worded here (`Keywords`): the
//! CLI's messages, with each parameter named by the Python keyword that gives
//! it (`cpus=5000`, `params={'procs': 0}`, `results=`, not `--cpus 5000`,
//! `--set procs=0`, `--results`). Simulations and
//! checks run with the GIL released, on a thread of their own, while the
//! calling thread polls for signals: Ctrl-C raises `KeyboardInterrupt` within
//! 50 ms and sets the run's cancellation flag (`tlbkit_sim::cancel`), so an
//! abandoned simulation stops within a few thousand events. A check has no
//! such flag: an interrupted `check` or `replay` finishes on its thread in the
//! background and its result is dropped.

use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;
use tlbkit_check::options::Options;
use tlbkit_lab::compare;
use tlbkit_lab::error::{Library, Names, Param};
use tlbkit_lab::stats::{self, Summary};
use tlbkit_lab::sweep::schema::Sweep;
use tlbkit_lab::sweep::{self, Event, Session};
use tlbkit_sim::run::RunSpec;

/// The checker keeps each execution's allocations in an arena (stable addresses
/// for state hashing), as in the `tlbkit` binary: without it a check prunes
/// less and reports other state counts than the CLI.
#[global_allocator]
static ALLOC: tlbkit_check::arena::CheckAlloc = tlbkit_check::arena::CheckAlloc;

/// How often a thread waiting on a run looks for a signal (Ctrl-C).
const POLL: Duration = Duration::from_millis(50);

/// The stack of a thread running a simulation or a check (the CLI runs them on
/// the main thread, whose stack is the system's 8 MiB; this leaves room).
const STACK: usize = 64 << 20;

fn value_error(e: String) -> PyErr {
    PyValueError::new_err(e)
}

/// The package's wording of tlbkit's errors: a parameter by the keyword of
/// the function that takes it (`results=`, `cpus=5000`), a `--set` key as the
/// entry of `params`; one no Python function takes as the Rust library names
/// it.
struct Keywords;

impl Names for Keywords {
    fn name(&self, p: &Param) -> String {
        match p {
            Param::Set(key) => format!("params['{key}']"),
            Param::Sets => "params=".into(),
            Param::Policies => "policies=".into(),
            Param::Quick => "quick=True".into(),
            Param::Deep => "deep=True".into(),
            Param::Ray => "executor='ray'".into(),
            Param::AllViolations => "all_violations=True".into(),
            Param::Cpus
            | Param::Seed
            | Param::Results
            | Param::Machine
            | Param::Policy
            | Param::Workload
            | Param::Mms
            | Param::Pages
            | Param::Asids
            | Param::Ops
            | Param::Menu
            | Param::Mode
            | Param::Memory
            | Param::Teardown
            | Param::Jobs
            | Param::Base
            | Param::Iterations => format!("{}=", Library.name(p)),
            _ => Library.name(p),
        }
    }

    fn given(&self, p: &Param, value: &str) -> String {
        match p {
            // A number as Python writes it, anything else as a string.
            Param::Set(key) if value.parse::<f64>().is_ok() => format!("params={{'{key}': {value}}}"),
            Param::Set(key) => format!("params={{'{key}': '{value}'}}"),
            p if self.name(p).ends_with('=') => {
                let quoted = matches!(
                    p,
                    Param::Mode | Param::Memory | Param::Menu | Param::Teardown | Param::Policy | Param::Base
                );
                if quoted {
                    format!("{}'{value}'", self.name(p))
                } else {
                    format!("{}{value}", self.name(p))
                }
            }
            _ => Library.given(p, value),
        }
    }
}

/// Returns the `ValueError` of a simulator error, in the package's words.
fn sim_error(e: tlbkit_sim::Error) -> PyErr {
    PyValueError::new_err(e.message(&Keywords))
}

/// Returns the `ValueError` of a checker error, in the package's words.
fn check_error(e: tlbkit_check::Error) -> PyErr {
    PyValueError::new_err(e.message(&Keywords))
}

/// Returns the `ValueError` of a lab error, in the package's words.
fn lab_error(e: tlbkit_lab::Error) -> PyErr {
    PyValueError::new_err(e.message(&Keywords))
}

/// Runs `f` on a thread of its own with the GIL released, checking for
/// signals while it runs: a pending `KeyboardInterrupt` is raised at once.
fn interruptible<T: Send + 'static>(py: Python<'_>, f: impl FnOnce() -> T + Send + 'static) -> PyResult<T> {
    let (tx, rx) = mpsc::channel();
    let cancel = Arc::new(AtomicBool::new(false));
    let flag = cancel.clone();
    std::thread::Builder::new()
        .name("tlbkit-run".into())
        .stack_size(STACK)
        .spawn(move || {
            let r = tlbkit_sim::cancel::with(flag, || std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)));
            let _ = tx.send(r);
        })
        .map_err(|e| PyRuntimeError::new_err(format!("cannot start a thread: {e}")))?;
    // In a mutex only to be shared with the GIL-free closure (a Receiver is not Sync).
    let rx = std::sync::Mutex::new(rx);
    loop {
        match py.detach(|| rx.lock().map_or(Err(mpsc::RecvTimeoutError::Disconnected), |r| r.recv_timeout(POLL))) {
            Ok(Ok(v)) => return Ok(v),
            Ok(Err(_)) => return Err(PyRuntimeError::new_err("the simulator panicked (a bug in tlbkit)")),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if let Err(e) = py.check_signals() {
                    // Relaxed: the flag carries no data (see tlbkit_sim::cancel).
                    cancel.store(true, Ordering::Relaxed);
                    return Err(e);
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => return Err(PyRuntimeError::new_err("the run's thread ended")),
        }
    }
}

/// One run; returns `tlbkit run --format json`'s document.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn run_json(
    py: Python<'_>,
    machine: String,
    cpus: i64,
    policy: String,
    workload: String,
    sets: Vec<String>,
    seed: u64,
    strict: bool,
) -> PyResult<String> {
    // A negative count gets the range message, not PyO3's OverflowError.
    let cpus = usize::try_from(cpus)
        .map_err(|_| sim_error(tlbkit_sim::Error::CpusRange { cpus, max: tlbkit_sim::run::MAX_CPUS }))?;
    let spec = RunSpec { machine, cpus, policy, workload, sets, seed, strict };
    let out = interruptible(py, move || tlbkit_sim::run::run(&spec))?.map_err(sim_error)?;
    serde_json::to_string(&out).map_err(|e| PyRuntimeError::new_err(e.to_string()))
}

/// `tlbkit list KIND --format json`'s document for machines, policies,
/// workloads or metrics.
#[pyfunction]
fn catalog(kind: &str) -> PyResult<String> {
    let doc = match kind {
        "machines" => tlbkit_sim::catalog::machines(),
        "policies" => tlbkit_sim::catalog::policies(),
        "workloads" => tlbkit_sim::catalog::workloads(),
        "metrics" => tlbkit_sim::catalog::metrics(),
        _ => return Err(value_error(format!("unknown kind '{kind}': machines, policies, workloads or metrics"))),
    };
    Ok(doc.to_string())
}

/// ministat's figures for two sets of samples (`b` tested against `a`) and
/// its table: a JSON document.
#[pyfunction]
fn compare_json(a: Vec<f64>, b: Vec<f64>) -> PyResult<String> {
    if a.is_empty() || b.is_empty() {
        return Err(value_error("compare needs samples in both sets".into()));
    }
    if a.len() + b.len() < 3 {
        return Err(value_error(format!(
            "compare needs at least three samples between the two sets (a standard deviation needs two), got {}",
            a.len() + b.len()
        )));
    }
    if let Some(x) = a.iter().chain(&b).find(|x| !x.is_finite()) {
        return Err(value_error(format!("sample {x} is not a finite number")));
    }
    let (sa, sb) = (Summary::of(&a).expect("non-empty"), Summary::of(&b).expect("non-empty"));
    // A set that is one value repeated is one sample: the difference alone, no interval.
    let v = compare::versus(&sb, &sa);
    let w = stats::n_width([sa.n, sb.n]);
    let table = format!(
        "{}\n{}\n{}\n{}",
        stats::vitals_header(w),
        compare::summary_line('x', &sa, w),
        compare::summary_line('+', &sb, w),
        v.text()
    );
    let mut doc = v.to_json();
    let m = doc.as_object_mut().expect("a comparison is an object");
    m.insert("a".into(), sa.to_json());
    m.insert("b".into(), sb.to_json());
    m.insert("confidence".into(), serde_json::json!(stats::CONFIDENCE));
    m.insert("table".into(), serde_json::json!(table));
    Ok(doc.to_string())
}

/// A check of `what`; returns `tlbkit check --format json`'s document.
#[pyfunction]
#[pyo3(signature = (what, iterations, jobs, all_violations=false, base=None))]
fn check_json(
    py: Python<'_>,
    what: CheckWhat,
    iterations: Option<u64>,
    jobs: Option<usize>,
    all_violations: bool,
    base: Option<String>,
) -> PyResult<String> {
    let o = Options { iterations, jobs, all_violations, base, ..what.options()? };
    o.plan().map_err(check_error)?;
    let r = interruptible(py, move || o.run(&mut |_| {}))?.map_err(check_error)?;
    serde_json::to_string(&r).map_err(|e| PyRuntimeError::new_err(e.to_string()))
}

/// Resolves the check `what` to one exhaustive shape; returns the text that
/// names that check to the nodes of a distributed search.
#[pyfunction]
fn check_spec_token(what: CheckWhat) -> PyResult<String> {
    let o = what.options()?;
    let (spec, _) = o.exhaustive_shape(tlbkit_check::error::Param::Ray).map_err(check_error)?;
    use tlbkit_check::run::shards;
    shards::validate(&spec).map_err(check_error)?;
    Ok(shards::spec_token(&spec))
}

/// A node of a sharded check (`tlbkit_check::run::shards::Shard`): its part
/// of the visited set and its workers, which run from its start on threads
/// of their own; what a Ray actor holds. Its messages to the other nodes
/// leave it, and theirs reach it, through its [`CheckCourier`].
#[pyclass(frozen)]
struct CheckShard(Arc<tlbkit_check::run::shards::Shard>);

#[pymethods]
impl CheckShard {
    /// Starts node `me` of `nodes` of the check `token` names, with `jobs`
    /// workers: a new search, or, given `parts` parts of a snapshot and
    /// `fetch`, the search they saved: `fetch(i)` returns part `i` (in node
    /// order, as `shards_read_part` returns it), and each is taken in before
    /// the next is asked for, so the node holds one part at a time. With
    /// `deltas`, it marks what its visits change, so that its snapshots
    /// after the first may be deltas (`save(delta=True)`).
    #[new]
    #[pyo3(signature = (token, me, nodes, jobs, parts=0, fetch=None, deltas=false))]
    fn new(
        token: &str,
        me: usize,
        nodes: usize,
        jobs: usize,
        parts: usize,
        fetch: Option<Bound<'_, PyAny>>,
        deltas: bool,
    ) -> PyResult<Self> {
        use tlbkit_check::run::shards;
        let spec = shards::spec_of(token).map_err(check_error)?;
        let shard = match fetch {
            None if parts > 0 => return Err(PyValueError::new_err(format!("{parts} parts and no fetch to read them"))),
            None => shards::Shard::start(spec, me, nodes, jobs, deltas),
            Some(_) if parts == 0 => return Err(PyValueError::new_err("a fetch of parts and no parts to fetch")),
            Some(fetch) => {
                let mut r = shards::Shard::resuming(spec, me, nodes, jobs, deltas).map_err(check_error)?;
                for i in 0..parts {
                    let part = fetch.call1((i,))?;
                    let bytes = part.cast::<pyo3::types::PyBytes>()?;
                    r.take(bytes.as_bytes()).map_err(check_error)?;
                }
                r.start()
            }
        };
        Ok(CheckShard(Arc::new(shard.map_err(check_error)?)))
    }

    /// Its part of a snapshot (while held and settled), as bytes for
    /// `shards_write_part`; with `delta`, only what changed since its last
    /// save, for `shards_append_delta`.
    #[pyo3(signature = (delta=false))]
    fn save<'py>(&self, py: Python<'py>, delta: bool) -> PyResult<Bound<'py, pyo3::types::PyBytes>> {
        // Made in place in the `bytes` returned: one copy of the part, not two.
        let len = self.0.save_len(delta).map_err(check_error)?;
        let mut failed = None;
        let part = pyo3::types::PyBytes::new_with(py, len, |buf| {
            failed = self.0.save_into(delta, buf).err();
            Ok(())
        })?;
        match failed {
            Some(e) => Err(check_error(e)),
            None => Ok(part),
        }
    }

    /// Ends the search here: every node's work is done.
    fn finish(&self) {
        self.0.finish();
    }

    /// Stops the search here: another node found a violation.
    fn stop(&self) {
        self.0.stop();
    }

    /// Waits for the node's workers (once finished or stopped) and returns
    /// its totals, as bytes `check_shards_report` reads.
    fn totals<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, pyo3::types::PyBytes>> {
        let shard = self.0.clone();
        let t = interruptible(py, move || shard.join())?.map_err(check_error)?;
        Ok(pyo3::types::PyBytes::new(py, &tlbkit_check::run::shards::Totals::save(&[t])))
    }
}

/// A node's connections to the other nodes of a sharded check
/// (`tlbkit_check::run::courier::Courier`): it listens on a port of `host`
/// when made (`address` is what the others connect to); `start` connects
/// to them and carries its node's messages over TCP on threads of its own,
/// while the driver polls `status` and gives `order`s.
#[pyclass(frozen)]
struct CheckCourier(tlbkit_check::run::courier::Courier, String);

#[pymethods]
impl CheckCourier {
    #[new]
    fn new(host: &str) -> PyResult<Self> {
        let (courier, address) = tlbkit_check::run::courier::Courier::listen(host).map_err(check_error)?;
        Ok(CheckCourier(courier, address))
    }

    /// The address the other nodes connect to (`host:port`).
    #[getter]
    fn address(&self) -> String {
        self.1.clone()
    }

    /// Connects to every other node (`peers`: each node's address, this
    /// one's at `me`), accepts theirs, and carries `shard`'s messages, a
    /// pump after each arrival and at most `pause_s` apart.
    fn start(&self, py: Python<'_>, shard: &CheckShard, me: usize, peers: Vec<String>, pause_s: f64) -> PyResult<()> {
        let pause = std::time::Duration::try_from_secs_f64(pause_s)
            .map_err(|_| PyValueError::new_err(format!("pause_s={pause_s}: give seconds of 0 or more")))?;
        let shard = shard.0.clone();
        py.detach(|| self.0.start(shard, me, &peers, pause)).map_err(check_error)
    }

    /// The orders for the node's next pumps (`tlbkit_check::search::Orders`:
    /// give at most `give` queued subtrees to node `to`, once; whether
    /// another node's workers wait; whether to hold for a snapshot).
    fn order(&self, give: usize, to: usize, wanted: bool, hold: bool) {
        self.0.order(tlbkit_check::search::Orders { give, to, wanted, hold });
    }

    /// The last pump's figures: `(sent, received, work open, subtrees
    /// queued, workers waiting, stopped, executions, states owned,
    /// settled, bytes of its visited set)`, or None before the first.
    fn status(&self) -> PyResult<Option<StatusTuple>> {
        Ok(self.0.status().map_err(check_error)?.map(|s| {
            let p = s.pumped;
            (s.sent, s.received, p.open, p.queued, p.hungry, p.stopped, p.executions, p.states, p.settled, p.bytes)
        }))
    }

    /// Stops carrying and closes the connections.
    fn close(&self, py: Python<'_>) {
        py.detach(|| self.0.close());
    }
}

/// A node's status as `CheckCourier.status` gives it.
type StatusTuple = (u64, u64, u64, usize, usize, bool, u64, u64, bool, u64);

/// Orders for node `i` as the driver gives them: `(i, give, to, wanted, hold)`.
type OrderTuple = (usize, usize, usize, bool, bool);

fn order_tuples(orders: Vec<(usize, tlbkit_check::search::Orders)>) -> Vec<OrderTuple> {
    orders.into_iter().map(|(i, o)| (i, o.give, o.to, o.wanted, o.hold)).collect()
}

/// The driver's rule over its polls of a sharded check's nodes
/// (`tlbkit_check::run::courier::Watch`): `next` takes every node's status
/// and says `"stop"`, `"finish"`, `"settled"` (take the snapshot, then
/// `release`) or `"go"`, with the orders to give first; `hold` and
/// `release` return the orders that hold the nodes for a snapshot and let
/// them go on, and `holding` says whether they are held.
#[pyclass]
#[derive(Default)]
struct ShardsWatch(tlbkit_check::run::courier::Watch);

#[pymethods]
impl ShardsWatch {
    #[new]
    fn new() -> Self {
        ShardsWatch::default()
    }

    fn next(&mut self, statuses: Vec<StatusTuple>) -> (&'static str, Vec<OrderTuple>) {
        use tlbkit_check::run::courier::{Next, Status};
        let now = statuses
            .into_iter()
            .map(|(sent, received, open, queued, hungry, stopped, executions, states, settled, bytes)| Status {
                sent,
                received,
                pumped: tlbkit_check::search::Pumped {
                    out: Vec::new(),
                    open,
                    queued,
                    hungry,
                    stopped,
                    executions,
                    states,
                    settled,
                    bytes,
                },
            })
            .collect();
        match self.0.next(now) {
            Next::Stop => ("stop", Vec::new()),
            Next::Finish => ("finish", Vec::new()),
            Next::Settled => ("settled", Vec::new()),
            Next::Go(orders) => ("go", order_tuples(orders)),
        }
    }

    fn hold(&mut self, nodes: usize) -> Vec<OrderTuple> {
        order_tuples(self.0.hold(nodes))
    }

    fn release(&mut self, nodes: usize) -> Vec<OrderTuple> {
        order_tuples(self.0.release(nodes))
    }

    /// Whether the nodes are held for a snapshot and not yet released.
    #[getter]
    fn holding(&self) -> bool {
        self.0.holding()
    }
}

/// The report of a sharded check from its nodes' totals (each
/// `CheckShard.totals()`); with the
/// bytes of the totals together, which `tlbkit check --ray` reads: `(report
/// as JSON, totals)`.
#[pyfunction]
fn check_shards_report<'py>(
    py: Python<'py>,
    token: &str,
    totals: Vec<Vec<u8>>,
) -> PyResult<(String, Bound<'py, pyo3::types::PyBytes>)> {
    use tlbkit_check::run::shards;
    let spec = shards::spec_of(token).map_err(check_error)?;
    let mut all = Vec::new();
    for t in &totals {
        all.extend(shards::Totals::load(t).map_err(check_error)?);
    }
    let saved = shards::Totals::save(&all);
    let r = interruptible(py, move || shards::report(&spec, &all))?.map_err(check_error)?;
    let json = serde_json::to_string(&r).map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
    Ok((json, pyo3::types::PyBytes::new(py, &saved)))
}

/// Writes node `i`'s part (`CheckShard.save()`) of the snapshot of
/// generation `generation` into the directory `dir`.
#[pyfunction]
fn shards_write_part(dir: std::path::PathBuf, generation: u64, i: usize, part: &[u8]) -> PyResult<()> {
    tlbkit_check::run::shards::write_part(&dir, generation, i, part).map_err(check_error)
}

/// Appends node `i`'s delta (`CheckShard.save(delta=True)`) of the
/// snapshot of generation `generation` to the deltas of its whole part of
/// generation `base`; returns the bytes those deltas take now.
#[pyfunction]
fn shards_append_delta(dir: std::path::PathBuf, base: u64, generation: u64, i: usize, part: &[u8]) -> PyResult<u64> {
    tlbkit_check::run::shards::append_delta(&dir, base, generation, i, part).map_err(check_error)
}

/// Declares the snapshot of generation `generation` of the check `token`,
/// its `parts` parts written (whole at generation `base`, deltas after
/// it), the one to resume; removes the files of other bases.
#[pyfunction]
fn shards_write_snapshot(
    dir: std::path::PathBuf,
    token: &str,
    generation: u64,
    base: u64,
    parts: usize,
) -> PyResult<()> {
    tlbkit_check::run::shards::write_snapshot(&dir, token, generation, base, parts).map_err(check_error)
}

/// The snapshot the directory `dir` holds: `(token, generation, parts)`.
#[pyfunction]
fn shards_read_snapshot(dir: std::path::PathBuf) -> PyResult<(String, u64, usize)> {
    let s = tlbkit_check::run::shards::read_snapshot(&dir).map_err(check_error)?;
    Ok((s.token, s.generation, s.parts))
}

/// Node `i`'s part of the snapshot of generation `generation` in `dir`, of
/// the check `token` names: refused unless this build made it for that
/// check, its checksums matching.
#[pyfunction]
fn shards_read_part<'py>(
    py: Python<'py>,
    dir: std::path::PathBuf,
    token: &str,
    generation: u64,
    i: usize,
) -> PyResult<Bound<'py, pyo3::types::PyBytes>> {
    use tlbkit_check::run::shards;
    let spec = shards::spec_of(token).map_err(check_error)?;
    let part = shards::read_part(&dir, generation, i).map_err(check_error)?;
    shards::check_part(&spec, i, &part).map_err(check_error)?;
    Ok(pyo3::types::PyBytes::new(py, &part))
}

/// The keywords of `check` that name the check (not how it runs:
/// `iterations`, `jobs`, `all_violations`, `base`), as the package passes them:
/// a dict.
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
struct CheckWhat {
    policy: String,
    quick: bool,
    deep: bool,
    cpus: Option<i64>,
    mms: Option<usize>,
    pages: Option<usize>,
    asids: Option<u32>,
    ops: Option<usize>,
    mode: Option<String>,
    seed: u64,
    memory: Option<String>,
    menu: Option<String>,
    teardown: Option<String>,
}

impl CheckWhat {
    /// Returns `tlbkit check`'s options for the check.
    fn options(self) -> PyResult<Options> {
        Ok(Options {
            cpus: check_cpus(self.cpus)?,
            policy: self.policy,
            quick: self.quick,
            deep: self.deep,
            mms: self.mms,
            pages: self.pages,
            asids: self.asids,
            ops: self.ops,
            mode: self.mode,
            seed: self.seed,
            memory: self.memory,
            menu: self.menu,
            teardown: self.teardown,
            ..Options::default()
        })
    }
}

/// Returns `cpus=` as a CPU count, or the check's error for a negative one.
fn check_cpus(cpus: Option<i64>) -> PyResult<Option<usize>> {
    cpus.map(|c| usize::try_from(c).map_err(|_| check_error(tlbkit_check::spec::cpus_out_of_range(c)))).transpose()
}

/// Replays a counterexample token; returns `tlbkit replay --format json`'s document.
#[pyfunction]
fn replay_json(py: Python<'_>, token: String) -> PyResult<String> {
    let r = interruptible(py, move || tlbkit_check::replay(&token))?.map_err(check_error)?;
    serde_json::to_string(&r).map_err(|e| PyRuntimeError::new_err(e.to_string()))
}

/// Returns the TOML text of a grid given as JSON (a Python dict), so that a
/// grid from Python is read by the very parser and checks of `tlbkit sweep`.
#[pyfunction]
fn grid_toml(json: &str) -> PyResult<String> {
    let v: toml::Value = serde_json::from_str(json).map_err(|e| value_error(format!("the grid: {e}")))?;
    toml::to_string(&v).map_err(|e| value_error(format!("the grid: {e}")))
}

/// Runs one encoded point of a sweep (`Session.pending`); returns `(True,
/// line)` or `(False, why it failed)`: what a Ray task does.
#[pyfunction]
fn run_point(py: Python<'_>, point: String) -> PyResult<(bool, String)> {
    Ok(match interruptible(py, move || sweep::run_encoded(&point))? {
        Ok(line) => (true, line),
        Err(e) => (false, e.message(&Keywords)),
    })
}

/// A sweep in progress (`tlbkit_lab::sweep::Session`): the grid expanded and
/// checked, its results file open and locked, runs recorded as they come.
#[pyclass(module = "tlbkit._native")]
struct SweepSession {
    inner: Option<Session>,
    file: String,
}

impl SweepSession {
    fn session(&mut self) -> PyResult<&mut Session> {
        self.inner.as_mut().ok_or_else(|| PyRuntimeError::new_err("the sweep is finished"))
    }
}

#[pymethods]
impl SweepSession {
    /// Opens the sweep of the TOML text `text` (named `origin` in messages)
    /// with its results file; `results` None means the file's own default
    /// (relative to `origin`'s folder).
    #[new]
    #[pyo3(signature = (text, origin, results=None))]
    fn new(text: &str, origin: &str, results: Option<PathBuf>) -> PyResult<Self> {
        let s = Sweep::parse(text, origin).map_err(lab_error)?;
        let results = results.unwrap_or_else(|| s.results_path(std::path::Path::new(origin)));
        let inner = Session::open(&s, &results).map_err(lab_error)?;
        Ok(SweepSession { inner: Some(inner), file: origin.to_string() })
    }

    /// `(points in the grid, already recorded, bytes of a torn line dropped)`.
    fn start(&mut self) -> PyResult<(usize, usize, usize)> {
        match self.session()?.start() {
            Event::Start { total, already, torn_bytes } => Ok((total, already, torn_bytes)),
            Event::Ran { .. } => unreachable!("start is a Start event"),
        }
    }

    /// The points to run, encoded for `run_point`, in grid order; `record`
    /// takes their index in this list.
    fn pending(&mut self) -> PyResult<Vec<String>> {
        Ok(self.session()?.pending.iter().map(|p| p.encode()).collect())
    }

    /// The commands of every point of the grid, in grid order.
    fn keys(&mut self) -> PyResult<Vec<String>> {
        Ok(self.session()?.grid.points.iter().map(|p| p.key()).collect())
    }

    /// Records pending point `i`'s outcome: its line (`ok`), or why it failed.
    fn record(&mut self, i: usize, ok: bool, payload: String) -> PyResult<()> {
        let outcome = if ok { Ok(payload) } else { Err(payload) };
        self.session()?.record(i, outcome).map_err(lab_error)
    }

    /// Runs the pending points on `jobs` host threads with the GIL released,
    /// calling `progress(done_now)` after each; Ctrl-C stops starting runs,
    /// waits for the ones in progress (recorded) and raises KeyboardInterrupt.
    fn run_local(&mut self, py: Python<'_>, jobs: usize, progress: Py<PyAny>) -> PyResult<()> {
        let session = self.session()?;
        let mut raised: Option<PyErr> = None;
        let mut done = 0usize;
        let result = py.detach(|| {
            session.run_local(jobs, |ev| {
                if let Event::Ran { .. } = ev {
                    done += 1;
                }
                Python::attach(|py| {
                    let r = py.check_signals().and_then(|()| progress.call1(py, (done,)).map(|_| ()));
                    match r {
                        Ok(()) => ControlFlow::Continue(()),
                        Err(e) => {
                            raised.get_or_insert(e);
                            ControlFlow::Break(())
                        }
                    }
                })
            })
        });
        if let Some(e) = raised {
            return Err(e);
        }
        result.map_err(lab_error)
    }

    /// Ends the sweep (putting a complete results file in grid order); returns
    /// its report as JSON: `summary`, `failure`, `violating` and the counts.
    fn finish(&mut self) -> PyResult<String> {
        let s = self.inner.take().ok_or_else(|| PyRuntimeError::new_err("the sweep is finished"))?;
        let r = s.finish().map_err(lab_error)?;
        Ok(serde_json::json!({
            "summary": r.summary(&self.file),
            "failure": r.failure(),
            "failed": r.failed,
            "violating": r.violating,
            "total": r.total,
            "already": r.already,
            "ran": r.ran,
            "other_arch": r.other_arch,
            "torn_bytes": r.torn_bytes,
            "results": r.results.display().to_string(),
        })
        .to_string())
    }
}

/// The module `tlbkit._native`.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(run_json, m)?)?;
    m.add_function(wrap_pyfunction!(catalog, m)?)?;
    m.add_function(wrap_pyfunction!(compare_json, m)?)?;
    m.add_function(wrap_pyfunction!(check_json, m)?)?;
    m.add_function(wrap_pyfunction!(replay_json, m)?)?;
    m.add_function(wrap_pyfunction!(check_spec_token, m)?)?;
    m.add_function(wrap_pyfunction!(grid_toml, m)?)?;
    m.add_function(wrap_pyfunction!(run_point, m)?)?;
    m.add_class::<SweepSession>()?;
    m.add_class::<CheckShard>()?;
    m.add_class::<CheckCourier>()?;
    m.add_class::<ShardsWatch>()?;
    m.add_function(wrap_pyfunction!(check_shards_report, m)?)?;
    for f in [
        wrap_pyfunction!(shards_write_part, m)?,
        wrap_pyfunction!(shards_append_delta, m)?,
        wrap_pyfunction!(shards_write_snapshot, m)?,
        wrap_pyfunction!(shards_read_snapshot, m)?,
        wrap_pyfunction!(shards_read_part, m)?,
    ] {
        m.add_function(f)?;
    }
    Ok(())
}

//! An exhaustive check sharded among processes: each a node of
//! [`search::ShardNode`] (its part of the visited set and its workers),
//! moved between by a carrier (the Ray driver, `python/tlbkit/_ray.py`);
//! and the report made of the nodes' totals.
//!
//! A violation's counterexample comes from the execution the finding
//! worker ran (its token, run again and shrunk where the report is made),
//! never from a second search.
//!
//! # Snapshots on disk
//!
//! A snapshot of the search (see `search/sharded/node.rs`) is a directory:
//! each node's part, `shard-G-I.part` (generation `G`, node `I`), written
//! by the carrier as the node made it ([`Shard::save`](shards::Shard::save): a save's header, the
//! node's build and the check, then the part), and then `shards.ckpt`, which
//! names the generation, its number of parts and its *base*
//! ([`write_snapshot`](shards::write_snapshot)), and only then are the
//! files of other bases removed. Each file goes through a temporary one and
//! a rename, so a kill at any moment leaves the last whole snapshot: a
//! generation whose `shards.ckpt` was never written is not read.
//!
//! A snapshot after the first of a run may be *deltas*: each node's part
//! holds only the states added or narrowed since the snapshot before, and
//! is appended ([`append_delta`](shards::append_delta)) to
//! `shard-B-I.deltas`, beside the whole part of the base generation `B`
//! (each record names its generation, with a checksum; one cut short by a
//! kill ends the list). [`read_part`](shards::read_part) lays the base's
//! part and its deltas up to the snapshot's generation into one part, so
//! [`Shard::resume`](shards::Shard::resume) takes every part of it, on any
//! number of nodes, as it takes whole ones.

use super::*;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// Returns the text that names the exhaustive check `spec` to the
/// nodes (its replay token's header).
pub fn spec_token(spec: &CheckSpec) -> String {
    encode(spec, &[])
}

/// Returns the exhaustive check [`spec_token`] named.
pub fn spec_of(token: &str) -> Result<CheckSpec, Error> {
    let (spec, _) = decode(token)?;
    Ok(CheckSpec { mode: Mode::Exhaustive, iterations: u64::MAX, ..spec })
}

/// Checks that `spec` is an exhaustive check whose policy builds.
pub fn validate(spec: &CheckSpec) -> Result<(), Error> {
    if spec.mode != Mode::Exhaustive {
        return Err(Error::JobsNotExhaustive { mode: spec.mode.name() });
    }
    shape(spec)?;
    validate_build(spec)
}

/// The replay token of an execution a worker of a distributed check ran
/// (as it ran, not shrunk: where the report is made shrinks it).
fn token_of(spec: &CheckSpec, out: &search::Outcome) -> String {
    encode(spec, &out.choices.iter().map(|c| c.taken).collect::<Vec<_>>())
}

/// The report of a distributed check: its nodes' `stats` and the most of
/// each of their counters `c`, ended by the violation whose token a node
/// returned (`found`: its execution run again here and shrunk, never
/// searched for again) if one did.
fn report_of(
    spec: &CheckSpec,
    stats: Stats,
    c: &[u64],
    workers: usize,
    found: Option<&str>,
) -> Result<CheckReport, Error> {
    let counterexample = match found {
        Some(token) => {
            let (of, choices) = decode(token)?;
            if encode(&of, &[]) != encode(spec, &[]) {
                return Err(Error::BadToken {
                    shown: token.chars().take(120).collect(),
                    why: "it names another check than the distributed one".into(),
                });
            }
            let shape = shape(spec)?;
            Some(with_spec_policy(spec, FromPath { spec, shape: &shape, found: Found::Choices(choices) })?)
        }
        None => None,
    };
    if stats.executions == 0 && counterexample.is_none() {
        return Err(Error::NoExecution);
    }
    if c[0] == 0 && counterexample.is_none() {
        return Err(Error::NothingStarted { menu: crate::ops::OpKind::names(spec.menu), mms: spec.mms });
    }
    let reached = Reached { rollovers: c[1] as u32, initiators: c[2] as u32 };
    let mut r = super::report(spec, spec.mode.name(), stats, reached, counterexample);
    r.explored.workers = workers;
    Ok(r)
}

/// What a node's workers return.
type Ran = Result<(Stats, Option<search::Outcome>), Error>;

/// One node of a sharded check, its workers running on threads of their own.
pub struct Shard {
    spec: CheckSpec,
    /// This build and the check, as its snapshot's parts name them: made
    /// at the first save, since hashing the build reads its whole file
    /// (tens of MB), which a search that never saves should not pay while
    /// its workers run.
    identity: std::sync::OnceLock<String>,
    node: Arc<search::ShardNode>,
    /// The caller's counters (operations started, rollovers, initiators).
    counters: Arc<[AtomicU64; 3]>,
    running: Mutex<Option<JoinHandle<Ran>>>,
    jobs: usize,
}

/// A node resuming from a snapshot ([`Shard::resuming`]).
pub struct Resume {
    spec: CheckSpec,
    node: search::Resuming,
    deltas: bool,
}

impl Resume {
    /// Takes in the snapshot's next part, as its file holds it (parts in
    /// node order): refused unless this build made it for this check.
    pub fn take(&mut self, part: &[u8]) -> Result<(), Error> {
        let body = check_part(&self.spec, self.node.parts(), part)?;
        self.node.take(body).map_err(|why| Error::Save {
            file: "the snapshot".into(),
            problem: crate::error::SaveProblem::Unreadable { why },
        })
    }

    /// Starts the node's workers from what the parts held.
    pub fn start(self) -> Result<Shard, Error> {
        let (node, extra) = self.node.done();
        let counters = std::array::from_fn(|i| extra.get(i).copied().unwrap_or(0));
        Shard::launch(self.spec, node, counters, self.deltas)
    }
}

/// The leading bytes of a sharded check's totals ([`Totals::save`]).
const MAGIC: &[u8] = b"tlbkit-shards 1\n";
/// The numbers of a node's totals as saved.
const FIELDS: usize = 9;

/// What one node of a sharded check explored, counted and found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    /// What its workers explored (`states`: those it owns).
    pub stats: Stats,
    /// The caller's counters: the most operations started, rollovers and
    /// initiating CPUs of one execution.
    pub counters: [u64; 3],
    /// Its workers.
    pub workers: u64,
    /// The token of the violating execution one of its workers ran.
    pub found: Option<String>,
}

impl Totals {
    /// The totals of every node as one file's bytes, for
    /// [`report_from_save`] in another process (`tlbkit check --ray`).
    pub fn save(all: &[Totals]) -> Vec<u8> {
        let mut w = search::saved::Writer::default();
        w.0.extend_from_slice(MAGIC);
        w.u64(all.len() as u64);
        for t in all {
            let s = &t.stats;
            let numbers = [s.executions, s.states, s.pruned, s.max_steps as u64, u64::from(s.complete)];
            numbers.iter().chain(&t.counters).chain([&t.workers]).for_each(|&v| w.u64(v));
            w.str(t.found.as_deref().unwrap_or(""));
        }
        w.0
    }

    /// Reads what [`Totals::save`] wrote.
    pub fn load(bytes: &[u8]) -> Result<Vec<Totals>, Error> {
        let body =
            bytes.strip_prefix(MAGIC).ok_or_else(|| Error::Saved { why: "not a sharded check's totals".into() })?;
        let read = || -> Result<Vec<Totals>, String> {
            let mut r = search::saved::Reader::new(body);
            let n = r.len(FIELDS * 8 + 8)?;
            let mut all = Vec::with_capacity(n);
            for _ in 0..n {
                // In the order `save` writes them (a tuple's are read left to right).
                let (executions, states, pruned, max_steps, complete) =
                    (r.u64()?, r.u64()?, r.u64()?, r.u64()?, r.u64()?);
                let stats = Stats {
                    executions,
                    states,
                    pruned,
                    max_steps: max_steps as usize,
                    complete: complete == 1,
                    visited_bytes: 0,
                };
                let counters = [r.u64()?, r.u64()?, r.u64()?];
                let workers = r.u64()?;
                let found = Some(r.str()?).filter(|f| !f.is_empty());
                all.push(Totals { stats, counters, workers, found });
            }
            if !r.done() {
                return Err("bytes after the last node's totals".into());
            }
            Ok(all)
        };
        read().map_err(|why| Error::Saved { why: format!("a sharded check's totals: {why}") })
    }

    /// Returns whether the file's bytes are [`Totals::save`]'s.
    pub fn is_save(bytes: &[u8]) -> bool {
        bytes.starts_with(MAGIC)
    }
}

impl Shard {
    /// Starts node `me` of `nodes` of the exhaustive check `spec`, with
    /// `jobs` workers.
    /// With `deltas`, the node marks what its visits change, so that its
    /// snapshots after the first may be deltas ([`Shard::save`]).
    pub fn start(spec: CheckSpec, me: usize, nodes: usize, jobs: usize, deltas: bool) -> Result<Shard, Error> {
        validate(&spec)?;
        super::check_jobs(jobs)?;
        let node = search::ShardNode::new(me, nodes, jobs, spec.fingerprints()).map_err(invalid)?;
        Shard::launch(spec, node, [0; 3], deltas)
    }

    /// Starts node `me` of `nodes` of the exhaustive check `spec`, with
    /// `jobs` workers, from the snapshot whose parts (as files hold them,
    /// in node order) are `parts`: any number of them, each made by this
    /// build for this check, or it is refused. `deltas` as for
    /// [`Shard::start`].
    pub fn resume(
        spec: CheckSpec,
        me: usize,
        nodes: usize,
        jobs: usize,
        parts: &[&[u8]],
        deltas: bool,
    ) -> Result<Shard, Error> {
        let mut r = Shard::resuming(spec, me, nodes, jobs, deltas)?;
        parts.iter().try_for_each(|part| r.take(part))?;
        r.start()
    }

    /// [`Shard::resume`] a part at a time ([`Resume::take`]): a node holds
    /// one part of the snapshot at a time, not all of them.
    pub fn resuming(spec: CheckSpec, me: usize, nodes: usize, jobs: usize, deltas: bool) -> Result<Resume, Error> {
        validate(&spec)?;
        super::check_jobs(jobs)?;
        let node = search::ShardNode::resuming(me, nodes, jobs, spec.fingerprints()).map_err(invalid)?;
        Ok(Resume { spec, node, deltas })
    }

    /// Runs `node`'s workers for `spec`, its caller's counters from
    /// `counters`, marking its changes if `deltas`.
    fn launch(spec: CheckSpec, mut node: search::ShardNode, counters: [u64; 3], deltas: bool) -> Result<Shard, Error> {
        let shape = shape(&spec)?;
        if deltas {
            node.record_changes();
        }
        let jobs = node.workers();
        let (node, counters) = (Arc::new(node), Arc::new(counters.map(AtomicU64::new)));
        let (n, c, s) = (node.clone(), counters.clone(), spec.clone());
        let running = std::thread::spawn(move || with_workers(&s, &shape, &c, None, |each| n.run(each, s.iterations)));
        Ok(Shard {
            identity: std::sync::OnceLock::new(),
            spec,
            node,
            counters,
            running: Mutex::new(Some(running)),
            jobs,
        })
    }

    /// Its part of a snapshot, as its file holds it (the node's build and
    /// the check, then [`search::ShardNode::save`]'s part); only while the
    /// carrier holds the nodes and this one is settled. With `delta`, only
    /// what changed since its last save (started with `deltas`), for
    /// [`append_delta`].
    pub fn save(&self, delta: bool) -> Result<Vec<u8>, Error> {
        let mut bytes = vec![0; self.save_len(delta)?];
        self.save_into(delta, &mut bytes)?;
        Ok(bytes)
    }

    /// The bytes [`Shard::save`] would make now.
    pub fn save_len(&self, delta: bool) -> Result<usize, Error> {
        let body = self.node.save_len(&self.extra(), delta).map_err(|why| Error::Saved { why })?;
        usize::try_from(search::saved::encoded_len(self.identity(), body))
            .map_err(|_| Error::Saved { why: "a part larger than this machine's address space".into() })
    }

    /// [`Shard::save`] into `buf`, of [`Shard::save_len`]'s bytes (a
    /// caller's buffer: the part is made once, in place).
    pub fn save_into(&self, delta: bool, buf: &mut [u8]) -> Result<(), Error> {
        let extra = self.extra();
        let mut body = |out: &mut dyn search::saved::Out| self.node.save(&extra, delta, out);
        search::saved::encode_into(self.identity(), buf, &mut body).map_err(|why| Error::Saved { why })
    }

    /// This build and the check (see the field).
    fn identity(&self) -> &str {
        self.identity.get_or_init(|| identity(&self.spec))
    }

    /// The caller's counters now.
    fn extra(&self) -> [u64; 3] {
        self.counters.each_ref().map(|a| a.load(std::sync::atomic::Ordering::Relaxed))
    }

    /// Hands in the other nodes' messages for this one and the carrier's
    /// orders; takes out this node's messages ([`search::ShardNode::pump`]).
    pub fn pump(&self, inbox: &[&[u8]], orders: search::Orders) -> Result<search::Pumped, Error> {
        self.node.pump(inbox, orders).map_err(|why| Error::Saved { why: format!("a node's message: {why}") })
    }

    /// Ends the search here (every node's work is done).
    pub fn finish(&self) {
        self.node.finish();
    }

    /// Stops the search here (another node found a violation).
    pub fn stop(&self) {
        self.node.stop();
    }

    /// Waits for the workers (after [`Shard::finish`] or [`Shard::stop`],
    /// or once they stopped by themselves) and returns the node's totals.
    pub fn join(&self) -> Result<Totals, Error> {
        let handle = self.running.lock().expect("no caller panicked holding it").take();
        let Some(handle) = handle else {
            return Err(Error::Saved { why: "the node's totals were taken already".into() });
        };
        let (stats, found) =
            handle.join().map_err(|_| Error::Saved { why: "a worker of the node panicked".into() })??;
        Ok(Totals {
            stats,
            counters: self.counters.each_ref().map(|a| a.load(std::sync::atomic::Ordering::Relaxed)),
            workers: self.jobs as u64,
            found: found.map(|out| token_of(&self.spec, &out)),
        })
    }
}

/// The report of a sharded check from its nodes' totals: their states and
/// executions added, the caller's counters the most of any node's; with
/// a violation, the first node's that found one, run again here from its
/// token and shrunk.
pub fn report(spec: &CheckSpec, all: &[Totals]) -> Result<CheckReport, Error> {
    let most = |of: fn(&Totals) -> u64| all.iter().map(of).max().unwrap_or(0);
    let stats = Stats {
        executions: all.iter().map(|t| t.stats.executions).sum(),
        states: all.iter().map(|t| t.stats.states).sum(),
        pruned: all.iter().map(|t| t.stats.pruned).sum(),
        max_steps: all.iter().map(|t| t.stats.max_steps).max().unwrap_or(0),
        complete: all.iter().all(|t| t.stats.complete),
        visited_bytes: 0,
    };
    let counters = [most(|t| t.counters[0]), most(|t| t.counters[1]), most(|t| t.counters[2])];
    let workers = all.iter().map(|t| t.workers as usize).sum();
    let found = all.iter().find_map(|t| t.found.as_deref());
    report_of(spec, stats, &counters, workers, found)
}

/// [`report`] from the bytes [`Totals::save`] wrote.
pub fn report_from_save(spec: &CheckSpec, bytes: &[u8]) -> Result<CheckReport, Error> {
    report(spec, &Totals::load(bytes)?)
}

/// The file of a snapshot that names its generation and parts.
pub const SNAPSHOT: &str = "shards.ckpt";

/// The file of node `i`'s part of generation `generation`.
fn part_file(generation: u64, i: usize) -> String {
    format!("shard-{generation}-{i}.part")
}

/// This build and the check `spec`: what a snapshot's files are bound to.
fn identity(spec: &CheckSpec) -> String {
    format!("{} {}", search::saved::module_id(), spec_token(spec))
}

fn invalid(problem: String) -> Error {
    Error::Invalid { param: crate::error::Param::Ray, value: None, problem }
}

/// The body of node `i`'s part `bytes` of a snapshot, if this build made
/// it for the check `spec` and its checksums match; else why it cannot be
/// resumed here.
pub fn check_part<'a>(spec: &CheckSpec, i: usize, bytes: &'a [u8]) -> Result<&'a [u8], Error> {
    let file = std::path::PathBuf::from(format!("node {i}'s part of the snapshot"));
    let refuse = |problem| Error::Save { file: file.display().to_string(), problem };
    let (theirs, body) = search::saved::decode(bytes).map_err(refuse)?;
    search::saved::same_check(&file, &theirs, &identity(spec))?;
    Ok(body)
}

/// A snapshot as `shards.ckpt` names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    /// The check, as [`spec_token`] writes it.
    pub token: String,
    /// Its generation (each snapshot of a search one more).
    pub generation: u64,
    /// Its parts: the nodes that made it.
    pub parts: usize,
    /// The generation whose whole parts it builds on (its own, or one
    /// before it whose deltas lead to it).
    pub base: u64,
}

/// The file of the deltas that follow node `i`'s whole part of generation
/// `base`.
fn deltas_file(base: u64, i: usize) -> String {
    format!("shard-{base}-{i}.deltas")
}

/// Writes node `i`'s part of the snapshot of generation `generation`
/// (`bytes`: what [`Shard::save`] returned) into `dir`.
pub fn write_part(dir: &std::path::Path, generation: u64, i: usize, bytes: &[u8]) -> Result<(), Error> {
    search::saved::write_named(dir, &part_file(generation, i), &[bytes])
}

/// Appends node `i`'s delta of the snapshot of generation `generation`
/// (`bytes`: what [`Shard::save`] returned with `delta`) to the deltas
/// of the whole part of generation `base`, synced; returns the bytes those
/// deltas take now.
pub fn append_delta(dir: &std::path::Path, base: u64, generation: u64, i: usize, bytes: &[u8]) -> Result<u64, Error> {
    if generation <= base {
        return Err(Error::Saved { why: format!("a delta of generation {generation} after its base {base}") });
    }
    use search::saved::Out as _;
    search::saved::append_with(dir, &deltas_file(base, i), base, &mut |out| {
        out.u64(generation);
        out.bytes(bytes);
    })
}

/// Declares the snapshot of generation `generation`, whose `parts` parts
/// are written (whole at generation `base`, and deltas after it up to
/// `generation`), the check `token`'s; removes the files of every other
/// base.
pub fn write_snapshot(
    dir: &std::path::Path,
    token: &str,
    generation: u64,
    base: u64,
    parts: usize,
) -> Result<(), Error> {
    let mut w = search::saved::Writer::default();
    w.u64(generation);
    w.u64(parts as u64);
    w.u64(base);
    let identity = format!("{} {token}", search::saved::module_id());
    search::saved::write_named(dir, SNAPSHOT, &[&search::saved::encode(&identity, &w.0)])?;
    let ours = |name: &str| (0..parts).any(|i| name == part_file(base, i) || name == deltas_file(base, i));
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with("shard-") && (name.ends_with(".part") || name.ends_with(".deltas")) && !ours(&name) {
            let _ = std::fs::remove_file(e.path());
        }
    }
    Ok(())
}

/// Reads the snapshot `dir` holds (what [`write_snapshot`] wrote last).
pub fn read_snapshot(dir: &std::path::Path) -> Result<Snapshot, Error> {
    let path = dir.join(SNAPSHOT);
    let refuse = |problem| Error::Save { file: path.display().to_string(), problem };
    let bytes = std::fs::read(&path).map_err(|e| refuse(crate::error::SaveProblem::Missing { why: e.to_string() }))?;
    let (identity, body) = search::saved::decode(&bytes).map_err(refuse)?;
    let token = identity.split_once(' ').map_or("", |(_, t)| t).to_string();
    let mut r = search::saved::Reader::new(body);
    let read = |r: &mut search::saved::Reader<'_>| -> Result<[u64; 3], String> { Ok([r.u64()?, r.u64()?, r.u64()?]) };
    let unreadable = |why: String| refuse(crate::error::SaveProblem::Unreadable { why });
    let [generation, parts, base] = read(&mut r).map_err(unreadable)?;
    if !r.done() || parts == 0 || parts > search::MAX_NODES as u64 || base > generation {
        return Err(unreadable(format!("{parts} parts of generation {generation} on base {base}")));
    }
    spec_of(&token).map_err(|_| unreadable("it names no check this tlbkit can run".into()))?;
    Ok(Snapshot { token, generation, parts: parts as usize, base })
}

/// Reads node `i`'s part of the snapshot of generation `generation` in
/// `dir` (the one `shards.ckpt` names), as one whole part's file would hold
/// it: its base's whole part, with the deltas up to `generation` laid over
/// it (for [`Shard::resume`]).
pub fn read_part(dir: &std::path::Path, generation: u64, i: usize) -> Result<Vec<u8>, Error> {
    let snapshot = read_snapshot(dir)?;
    let path = dir.join(part_file(snapshot.base, i));
    let refuse = |problem| Error::Save { file: path.display().to_string(), problem };
    if snapshot.generation != generation || i >= snapshot.parts {
        return Err(refuse(crate::error::SaveProblem::Missing {
            why: format!("the directory holds generation {} of {} parts now", snapshot.generation, snapshot.parts),
        }));
    }
    let whole = std::fs::read(&path).map_err(|e| refuse(crate::error::SaveProblem::Missing { why: e.to_string() }))?;
    if snapshot.base == generation {
        return Ok(whole);
    }
    let (identity, base_body) = search::saved::decode(&whole).map_err(refuse)?;
    let records = search::saved::deltas_named(dir, &deltas_file(snapshot.base, i), snapshot.base);
    let mut bodies = vec![base_body];
    for want in snapshot.base + 1..=generation {
        let unreadable = |why: String| refuse(crate::error::SaveProblem::Unreadable { why });
        let Some(record) = records.get((want - snapshot.base - 1) as usize) else {
            return Err(unreadable(format!("its delta of generation {want} is missing or cut short")));
        };
        let mut r = search::saved::Reader::new(record);
        let of = r.u64().map_err(unreadable)?;
        let (theirs, body) = search::saved::decode(&record[8..]).map_err(refuse)?;
        if of != want || theirs != identity {
            return Err(unreadable(format!("its delta of generation {want} is another's (generation {of})")));
        }
        bodies.push(body);
    }
    let merged =
        search::ShardNode::merge(&bodies).map_err(|why| refuse(crate::error::SaveProblem::Unreadable { why }))?;
    Ok(search::saved::encode(&identity, &merged))
}

use super::*;

/// The caller's counters a round keeps: operations started, rollovers,
/// initiating CPUs (the most of one execution).
const COUNTERS: usize = 3;

fn saved(why: String) -> Error {
    Error::Saved { why }
}

/// Returns the text that names the exhaustive check `spec` to the
/// parties (its replay token's header).
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

/// The driver's side: the whole search.
pub struct Rounds {
    spec: CheckSpec,
    search: search::rounds::Driver,
}

impl Rounds {
    /// A check that has not started, once `spec` is known to build.
    pub fn start(spec: CheckSpec) -> Result<Rounds, Error> {
        validate(&spec)?;
        let search = search::rounds::Driver::start(COUNTERS, spec.fingerprints());
        Ok(Rounds { spec, search })
    }

    /// The visited set, for a party that starts now.
    pub fn visited(&self) -> Vec<u8> {
        self.search.visited()
    }

    /// Takes the frontier out, split into at most `parts` parts.
    pub fn split(&self, parts: usize) -> Vec<Vec<u8>> {
        self.search.split(parts)
    }

    /// Merges what a party handed back, or a lost party's part as it was handed out.
    pub fn merge(&self, body: &[u8]) -> Result<(), Error> {
        self.search.merge(body).map_err(saved)
    }

    /// The frontier's subtrees, the states and the executions so far.
    pub fn progress(&self) -> (usize, u64, u64) {
        let (stats, frontier, _) = self.search.stats();
        (frontier, stats.states, stats.executions)
    }

    /// The whole search, for [`round_report`] in another process.
    pub fn save(&self) -> Vec<u8> {
        self.search.save()
    }

    /// The report of the finished check (its frontier empty), `workers` the parties.
    pub fn report(&self, workers: usize) -> Result<CheckReport, Error> {
        let (stats, _, c) = self.search.stats();
        report_of(&self.spec, stats, &c, workers, None)
    }

    /// The report of the check a party ended with a violation, `found`
    /// the token [`Party::run`] returned: the execution it names, run
    /// again here and shrunk as a one-machine search's counterexample is
    /// (never searched for again), with what the search explored so far.
    pub fn report_found(&self, found: &str, workers: usize) -> Result<CheckReport, Error> {
        let (stats, _, c) = self.search.stats();
        report_of(&self.spec, stats, &c, workers, Some(found))
    }
}

/// A party's side: its copy of the visited set, kept between rounds.
pub struct Party {
    spec: CheckSpec,
    shape: Shape,
    search: search::rounds::Replica,
}

impl Party {
    /// A party of the check `spec` that starts from `visited` ([`Rounds::visited`]).
    pub fn new(spec: CheckSpec, visited: &[u8]) -> Result<Party, Error> {
        let shape = shape(&spec)?;
        let search = search::rounds::Replica::new(visited, COUNTERS, spec.fingerprints()).map_err(saved)?;
        Ok(Party { spec, shape, search })
    }

    /// Runs one round with `jobs` workers: takes in `news` (what the
    /// other parties handed back since this party's last round), then
    /// explores `part` for at most `budget` executions. Returns the body
    /// to merge, the replay token of the violating execution a worker
    /// found, if one did (as it ran, not shrunk: the driver shrinks it,
    /// [`Rounds::report_found`]), and the executions run.
    pub fn run(
        &self,
        part: &[u8],
        news: &[&[u8]],
        budget: u64,
        jobs: usize,
    ) -> Result<(Vec<u8>, Option<String>, u64), Error> {
        let counters = [AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)];
        // A party's calls are not counted: its report is the driver's.
        let (body, found, executions) = with_workers(&self.spec, &self.shape, &counters, None, |each| {
            self.search.run(each, jobs, part, news, budget, &counters)
        })?
        .map_err(saved)?;
        Ok((body, found.map(|out| token_of(&self.spec, &out)), executions))
    }
}

/// The replay token of an execution a worker of a distributed check ran
/// (as it ran, not shrunk: where the report is made shrinks it).
pub(super) fn token_of(spec: &CheckSpec, out: &search::Outcome) -> String {
    encode(spec, &out.choices.iter().map(|c| c.taken).collect::<Vec<_>>())
}

/// The report of a distributed check from its save ([`Rounds::save`]):
/// finished, or ended by the violation whose token a party returned
/// (`found`, see [`Rounds::report_found`]).
pub fn round_report(spec: &CheckSpec, state: &[u8], workers: usize, found: Option<&str>) -> Result<CheckReport, Error> {
    let (stats, _, c) = search::rounds::stats(state, COUNTERS, spec.fingerprints()).map_err(saved)?;
    report_of(spec, stats, &c, workers, found)
}

pub(super) fn report_of(
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
    let mut r = report(spec, spec.mode.name(), stats, reached, counterexample);
    r.explored.workers = workers;
    Ok(r)
}

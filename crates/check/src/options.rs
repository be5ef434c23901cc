//! A check request as a person gives it: the policy and only the bounds they
//! chose. With no shape flag it is the policy's portfolio
//! ([`crate::portfolio`]); with one, a single shape whose other bounds come
//! from the policy's defaults (or the `--quick` and `--deep` presets).
//!
//! This is the one way into the checker for a front end: `tlbkit check` and
//! the Python binding's `tlbkit.check` fill an [`Options`], and
//! [`Options::plan`] decides what runs (a portfolio, one shape, a search
//! after a schedule, or a search that saves itself), [`Options::run_plan`]
//! runs it and adds what it reached of a C policy's code, so the two give
//! the same report for the same request. The distributed search
//! (`tlbkit check --ray`, `executor='ray'`) takes its one exhaustive shape
//! from [`Options::exhaustive_shape`]. The functions of [`crate::run`] stay
//! for a Rust caller with a policy of its own ([`run::check_policy`]) and
//! for the tests.

use crate::error::{Error, Param};
use crate::portfolio::{self, Portfolio};
use crate::report::CheckReport;
use crate::run;
use crate::shape::{memory_text, parse_memory, Completion};
use crate::spec::{self, CheckSpec, Depth, Mode};

/// What a check request gives; `None` is "the default".
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// A policy from `tlbkit list`, or a bug-zoo variant `zoo/<id>`.
    pub policy: String,
    /// `--quick`: the small shape with 10,000 PCT schedules.
    pub quick: bool,
    /// `--deep`: the default shape searched exhaustively.
    pub deep: bool,
    /// CPUs.
    pub cpus: Option<usize>,
    /// Address spaces.
    pub mms: Option<usize>,
    /// Pages per address space.
    pub pages: Option<usize>,
    /// The ASID space.
    pub asids: Option<u32>,
    /// Kernel operations in all.
    pub ops: Option<usize>,
    /// `exhaustive`, `random` or `pct`.
    pub mode: Option<String>,
    /// Schedules (random, PCT) or a cap on executions (exhaustive).
    pub iterations: Option<u64>,
    /// Seed of random and PCT modes.
    pub seed: u64,
    /// `sc`, `tso` or `arm`, each perhaps with `+any`
    /// ([`crate::shape::Completion::Any`]).
    pub memory: Option<String>,
    /// Kinds of kernel operation, comma-separated.
    pub menu: Option<String>,
    /// The contiguous block's exit teardown strategy.
    pub teardown: Option<String>,
    /// Worker threads of an exhaustive search.
    pub jobs: Option<usize>,
    /// `--from`: a replay token whose schedule every execution starts with.
    pub from: Option<String>,
    /// `--script`: a script's text (see [`crate::search::Script`]), whose
    /// schedule every execution starts with.
    pub script: Option<String>,
    /// `--all-violations`: the search goes on past every violation and the
    /// report lists each class of them ([`run::Violations::All`]); on one
    /// thread.
    pub all_violations: bool,
    /// `--checkpoint`, `--resume`, `--max-memory`: an exhaustive search of
    /// one shape that saves itself there ([`run::Persist`]); with `resume`,
    /// the saved check, whatever the other options say.
    pub save: Option<run::Persist>,
    /// `--base`: what a C policy's changed lines are counted against (`@REV`
    /// or `c:FILE...`, see [`crate::code::reached`]).
    pub base: Option<String>,
}

/// What a request runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Plan {
    /// One shape, and the worker threads of its exhaustive search (`None`:
    /// one, with progress).
    One(CheckSpec, Option<usize>),
    /// The policy's portfolio: no flag chose a shape.
    Portfolio(Portfolio),
    /// One shape, searched on one thread after a schedule (the choices of
    /// `--from`'s token or of `--script`).
    After(CheckSpec, Vec<u32>),
    /// One exhaustive shape searched by worker threads, saving itself as
    /// [`run::Persist`] says (going on from its save with `resume`).
    Saving(CheckSpec, usize, run::Persist),
}

impl Plan {
    /// Returns the shapes it checks, in order.
    pub fn specs(&self) -> Vec<&CheckSpec> {
        match self {
            Plan::One(spec, _) | Plan::After(spec, _) | Plan::Saving(spec, _, _) => vec![spec],
            Plan::Portfolio(p) => p.members.iter().collect(),
        }
    }
}

impl Options {
    /// Returns whether a flag chose the shape or the search, which makes the
    /// request one shape: `--quick`, `--deep`, `--cpus`, `--mms`, `--pages`,
    /// `--asids`, `--ops`, `--mode`, `--memory`, `--menu`, `--teardown` or
    /// `--jobs`. `--iterations` and `--seed` leave a portfolio one.
    pub fn one_shape(&self) -> bool {
        self.quick
            || self.deep
            || self.cpus.is_some()
            || self.mms.is_some()
            || self.pages.is_some()
            || self.asids.is_some()
            || self.ops.is_some()
            || self.mode.is_some()
            || self.memory.is_some()
            || self.menu.is_some()
            || self.teardown.is_some()
            || self.jobs.is_some()
            || self.from.is_some()
            || self.script.is_some()
    }

    /// Returns what the request runs: with `save`, one exhaustive shape that
    /// saves itself (or, resuming, the saved check); with `--from` or
    /// `--script`, a search after that schedule; otherwise its policy's
    /// portfolio, with `--iterations` schedules in all and `--seed`, unless a
    /// flag chose one shape ([`Options::one_shape`], then
    /// [`Options::resolve`]). A `base` is read here, so that one that cannot
    /// be read (or is given for a Rust policy) fails before the check runs.
    pub fn plan(&self) -> Result<Plan, Error> {
        let plan = self.plan_unchecked()?;
        if let Some(base) = &self.base {
            let policy = plan.specs().first().map_or(self.policy.as_str(), |s| s.policy.as_str());
            if !policy.starts_with(tlbkit_registry::C_PREFIX) {
                if !crate::code::rust_lines_measured() || !base.starts_with('@') {
                    return Err(Error::BaseNotC { base: base.clone(), policy: policy.to_string() });
                }
                crate::code::read_rust_base(base)
                    .map_err(|source| Error::RustCoverage { policy: policy.to_string(), source })?;
            } else {
                crate::code::read_base(policy, base)
                    .map_err(|source| Error::Base { base: base.clone(), source: Box::new(source) })?;
            }
        }
        Ok(plan)
    }

    /// [`Options::plan`] before `base` is read.
    fn plan_unchecked(&self) -> Result<Plan, Error> {
        if let Some(persist) = &self.save {
            let (spec, jobs) = if persist.resume {
                (run::saved_spec(&persist.dir)?, self.jobs)
            } else {
                self.exhaustive_shape(Param::Checkpoint)?
            };
            return Ok(Plan::Saving(spec, jobs.unwrap_or_else(run::default_jobs), persist.clone()));
        }
        if let Some(plan) = self.plan_after() {
            return plan;
        }
        if self.one_shape() {
            let (spec, jobs) = self.resolve()?;
            return Ok(Plan::One(spec, jobs));
        }
        Ok(Plan::Portfolio(portfolio::portfolio(&self.pinned_policy()?, self.iterations, self.seed)))
    }

    /// Returns the policy as the check records it: a C policy's name pinned
    /// to its files' content (`c:context.c#DIGEST`, see [`tlbkit_c::front`]),
    /// so that its tokens and saves never replay or resume over an edited
    /// file; any other name as given.
    fn pinned_policy(&self) -> Result<String, Error> {
        tlbkit_c::front::pin_content(&self.policy)
            .map_err(|source| Error::CPolicy { policy: self.policy.clone(), source: Box::new(source) })
    }

    /// Returns the request as one shape, its bounds not given taken from the
    /// policy's one-shape defaults ([`spec::preset`]), and the worker threads an
    /// exhaustive search uses (`None`: one, with progress), or the CLI's
    /// message for bad input.
    pub fn resolve(&self) -> Result<(CheckSpec, Option<usize>), Error> {
        if self.quick && self.deep {
            return Err(Error::QuickAndDeep);
        }
        let preset = match (self.quick, self.deep) {
            (true, _) => Depth::Quick,
            (_, true) => Depth::Deep,
            _ => Depth::Default,
        };
        let d = if self.teardown.is_some() {
            spec::contpte_defaults(&self.policy, preset)
        } else {
            spec::preset(&self.policy, preset)
        };
        let menu = match &self.menu {
            Some(list) => crate::ops::OpKind::parse(list)?,
            None => d.menu,
        };
        let mode = match self.mode.as_deref() {
            Some("exhaustive") => Mode::Exhaustive,
            Some("random") => Mode::Random,
            Some("pct") => Mode::Pct,
            Some(m) => return Err(Error::invalid(Param::Mode, m, "give exhaustive, random or pct")),
            None => d.mode,
        };
        let (memory, completion) = match self.memory.as_deref() {
            Some(m) => parse_memory(m).ok_or_else(|| {
                Error::invalid(Param::Memory, m, "give sc, tso or arm, each perhaps with +any (as tso+any)")
            })?,
            None => (spec::default_memory(&self.policy), Completion::Latest),
        };
        let teardown = match &self.teardown {
            Some(t) => Some(tlbkit_policy::contpte::Teardown::from_name(t).map_err(|e| Error::Invalid {
                param: Param::Teardown,
                value: None,
                problem: e.to_string(),
            })?),
            None => None,
        };
        let cpus = self.cpus.unwrap_or(d.cpus);
        let spec = CheckSpec {
            asids: self.asids.unwrap_or(spec::default_asids(&self.policy, cpus)),
            policy: self.pinned_policy()?,
            cpus,
            mms: self.mms.unwrap_or(d.mms),
            pages: self.pages.unwrap_or(d.pages),
            ops: self.ops.unwrap_or(d.ops),
            mode,
            iterations: self.iterations.unwrap_or(match (mode, d.mode) {
                (Mode::Exhaustive, _) => u64::MAX,
                // --deep --mode pct: the default run's budget.
                (_, Mode::Exhaustive) => spec::default_spec(&self.policy).iterations,
                _ => d.iterations,
            }),
            seed: self.seed,
            menu,
            memory,
            teardown,
            completion,
        };
        let jobs = match (self.jobs, spec.mode) {
            (Some(jobs), _) => Some(jobs),
            // Every violation is searched for on one thread.
            (None, _) if self.all_violations => None,
            (None, Mode::Exhaustive) => Some(run::default_jobs()).filter(|&j| j > 1),
            (None, _) => None,
        };
        Ok((spec, jobs))
    }

    /// Returns the plan of a check after a schedule: `--from`'s token fixes the
    /// machine (a flag given beside it must agree with it) and `--ops` must be
    /// given; `--script` runs on the machine the flags give. Either searches
    /// exhaustively unless `--mode` says otherwise, on one thread.
    fn plan_after(&self) -> Option<Result<Plan, Error>> {
        if self.from.is_none() && self.script.is_none() {
            return None;
        }
        Some(self.plan_after_schedule())
    }

    fn plan_after_schedule(&self) -> Result<Plan, Error> {
        if self.jobs.is_some_and(|j| j != 1) {
            return Err(Error::Invalid {
                param: Param::Jobs,
                value: None,
                problem: "a check after a schedule runs on one thread: leave it out".into(),
            });
        }
        let mode = match self.mode.as_deref() {
            None => Mode::Exhaustive,
            Some(_) => self.resolve()?.0.mode,
        };
        let iterations = self.iterations.unwrap_or(match mode {
            Mode::Exhaustive => u64::MAX,
            _ => spec::default_spec(&self.policy).iterations,
        });
        match (&self.from, &self.script) {
            (Some(_), Some(_)) => Err(Error::Invalid {
                param: Param::Script,
                value: None,
                problem: "give a schedule one way: a token (from) or a script, not both".into(),
            }),
            (Some(token), None) => {
                let (t, choices) = crate::token::decode(token)?;
                if tlbkit_c::front::unpinned(&t.policy) != tlbkit_c::front::unpinned(&self.policy) {
                    return Err(Error::Invalid {
                        param: Param::From,
                        value: None,
                        problem: format!("the token's schedule is of {}, not {}", t.policy, self.policy),
                    });
                }
                let ops = self.ops.ok_or_else(|| Error::Invalid {
                    param: Param::Ops,
                    value: None,
                    problem: format!(
                        "give the operations in all, more than the token's schedule starts (its check had {})",
                        t.ops
                    ),
                })?;
                let given = self.resolve()?.0;
                let clash = |param: Param, flag: bool, ours: String, theirs: String| {
                    if flag && ours != theirs {
                        return Err(Error::invalid(
                            param,
                            ours,
                            format!("the token's schedule was made with {theirs}"),
                        ));
                    }
                    Ok(())
                };
                clash(Param::Cpus, self.cpus.is_some(), given.cpus.to_string(), t.cpus.to_string())?;
                clash(Param::Mms, self.mms.is_some(), given.mms.to_string(), t.mms.to_string())?;
                clash(Param::Pages, self.pages.is_some(), given.pages.to_string(), t.pages.to_string())?;
                clash(Param::Asids, self.asids.is_some(), given.asids.to_string(), t.asids.to_string())?;
                clash(
                    Param::Memory,
                    self.memory.is_some(),
                    memory_text(given.memory, given.completion).into(),
                    memory_text(t.memory, t.completion).into(),
                )?;
                clash(
                    Param::Menu,
                    self.menu.is_some(),
                    crate::ops::OpKind::names(given.menu),
                    crate::ops::OpKind::names(t.menu),
                )?;
                let spec = CheckSpec { ops, mode, iterations, seed: self.seed, ..t };
                Ok(Plan::After(spec, choices))
            }
            (None, script) => {
                let spec = CheckSpec { mode, iterations, ..self.resolve()?.0 };
                let choices = run::script_schedule(&spec, script.as_deref().unwrap_or_default())?;
                Ok(Plan::After(spec, choices))
            }
        }
    }

    /// Returns the request as one exhaustive search of one shape, and its
    /// worker threads, or why it is not one: what `asked` for it
    /// (`--checkpoint`, `--ray`) runs nothing else, and stops at its first
    /// violation (every violation is searched for on one thread, without
    /// saving); the distributed search reports no code coverage (a `base`
    /// is this machine's check's).
    pub fn exhaustive_shape(&self, asked: Param) -> Result<(CheckSpec, Option<usize>), Error> {
        let (spec, jobs) = self.resolve()?;
        if self.from.is_some() || self.script.is_some() || spec.mode != Mode::Exhaustive {
            return Err(Error::NotOneExhaustive { asked });
        }
        let refuse = |with: Param, why: &str| Error::Invalid { param: with, value: None, problem: why.into() };
        if self.all_violations {
            return Err(refuse(Param::AllViolations, "a saved or distributed search stops at its first violation: leave it out (every violation is searched for on one thread)"));
        }
        if asked == Param::Ray && self.base.is_some() {
            return Err(refuse(
                Param::Base,
                "the coverage of a change is counted by a check on one machine: leave it out of a distributed one",
            ));
        }
        Ok((spec, jobs))
    }

    /// Resolves and runs the check ([`Options::plan`], [`Options::run_plan`]);
    /// `progress` hears the executions so far of a single-threaded search.
    pub fn run(&self, progress: &mut dyn FnMut(u64)) -> Result<CheckReport, Error> {
        self.run_plan(&self.plan()?, progress)
    }

    /// Runs what [`Options::plan`] returned, stopping at the first violation
    /// or, with `all_violations`, going on past every one (on one thread: a
    /// plan with worker threads is refused); then, for a C policy, adds what
    /// the check reached of its files and of the lines changed since `base`
    /// ([`CheckReport::code`]; not for a resumed search, whose earlier part
    /// ran in another process). `progress` hears the executions so far of a
    /// single-threaded search.
    pub fn run_plan(&self, plan: &Plan, progress: &mut dyn FnMut(u64)) -> Result<CheckReport, Error> {
        let found = if self.all_violations { run::Violations::All } else { run::Violations::First };
        let resumed = matches!(plan, Plan::Saving(_, _, p) if p.resume);
        let policy = plan.specs().first().map_or(self.policy.as_str(), |s| s.policy.as_str()).to_string();
        let rust = match policy.starts_with(tlbkit_registry::C_PREFIX) || resumed {
            true => None,
            false => crate::code::RustCoverage::start()
                .map_err(|source| Error::RustCoverage { policy: policy.clone(), source })?,
        };
        let mut r = match (plan, found) {
            (Plan::One(spec, Some(jobs)), run::Violations::First) => run::check_exhaustive_jobs(spec, *jobs)?,
            (Plan::One(_, Some(j)), run::Violations::All) if *j > 1 => return Err(Error::AllViolationsJobs),
            (Plan::One(spec, _), _) => run::check_violations(spec, found, progress)?,
            (Plan::Portfolio(p), _) => run::check_portfolio_violations(p, found, progress)?,
            (Plan::After(spec, schedule), _) => run::check_after_violations(spec, schedule, found, progress)?,
            (Plan::Saving(spec, jobs, persist), _) => run::check_exhaustive_saving(spec, *jobs, persist)?,
        };
        if let Some(cov) = rust {
            r.code = cov.reached(self.base.as_deref()).map_err(|source| Error::RustCoverage { policy, source })?;
        } else if policy.starts_with(tlbkit_registry::C_PREFIX) && !resumed {
            r.code = crate::code::reached(&policy, self.base.as_deref())
                .map_err(|source| Error::Coverage { policy, source: Box::new(source) })?;
        }
        Ok(r)
    }
}

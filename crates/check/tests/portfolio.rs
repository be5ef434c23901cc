//! The default run is a portfolio: shapes of one to three CPUs under the
//! architecture's memory model, with swarm menus; a shape flag makes it one
//! shape; its report names the shape that found a violation, whose token
//! replays it. (Every zoo entry found by its portfolio at the full budget:
//! `full.rs`, `every_zoo_entry_with_its_defaults`.)

use tlbkit_check::ops::OpKind;
use tlbkit_check::options::{Options, Plan};
use tlbkit_check::portfolio::{arch_memory, kinds_implemented, portfolio};
use tlbkit_check::shape::Memory;
use tlbkit_check::token::decode;
use tlbkit_check::{replay, Mode};

fn options(policy: &str) -> Options {
    Options { policy: policy.to_string(), seed: 1, ..Options::default() }
}

#[test]
fn the_default_run_is_a_portfolio_under_the_architectures_memory() {
    for p in tlbkit_registry::POLICIES {
        let Plan::Portfolio(folio) = options(p.name).plan().unwrap() else {
            panic!("{}: no flag, yet one shape", p.name);
        };
        assert_eq!(folio, portfolio(p.name, None, 1), "{}", p.name);
        let m = &folio.members;
        // x86 runs under TSO; arm64 under TSO, then the arm mode, every shape
        // once under each.
        let models = arch_memory(p.name);
        let arm64 = p.arch == tlbkit_registry::Arch::Arm64;
        assert_eq!(models, if arm64 { &[Memory::Tso, Memory::Arm][..] } else { &[Memory::Tso][..] }, "{}", p.name);
        assert!(m.iter().all(|s| models.contains(&s.memory) && s.mode == Mode::Pct), "{}", p.name);
        let under = |mm: Memory| m.iter().filter(|s| s.memory == mm).count();
        if arm64 {
            assert_eq!(under(Memory::Tso), under(Memory::Arm), "{}", p.name);
            assert!(m.iter().position(|s| s.memory == Memory::Arm) == Some(under(Memory::Tso)), "{}", p.name);
        }
        let m: Vec<_> = m.iter().filter(|s| s.memory == Memory::Tso).cloned().collect();
        let m = &m;
        // A spread: one CPU with many operations each, three with fewer.
        let cpus: Vec<usize> = m.iter().map(|s| s.cpus).collect();
        assert!(cpus.contains(&1) && cpus.contains(&2) && cpus.contains(&3), "{}: {cpus:?}", p.name);
        assert!(m.iter().filter(|s| s.cpus == 1).all(|s| s.ops >= 8), "{}", p.name);
        // Swarm menus: switch always, only kinds the policy implements, some
        // left out, and one shape with every kind.
        let kinds = kinds_implemented(p.name);
        assert_eq!(kinds & OpKind::Write.bit(), 0, "{}", p.name);
        for s in m {
            assert!(s.menu & OpKind::Switch.bit() != 0 && s.menu & !kinds == 0, "{}: {:x}", p.name, s.menu);
        }
        assert_eq!(m.iter().filter(|s| s.menu == kinds).count(), 1, "{}", p.name);
        let menus: std::collections::BTreeSet<u32> = m.iter().map(|s| s.menu).collect();
        assert!(menus.len() >= 5, "{}: {} menus", p.name, menus.len());
        // Small shapes are cheaper per schedule: they get more of them.
        let one = m.iter().find(|s| s.cpus == 1).unwrap().iterations;
        assert!(m.iter().filter(|s| s.cpus == 3).all(|s| s.iterations < one), "{}", p.name);
        let total: u64 = folio.members.iter().map(|s| s.iterations).sum();
        assert!((150_000..=450_000).contains(&total), "{}: {total} schedules", p.name);
    }
    // x86 policies keep their own TSO too, and the seed draws the menus.
    assert_eq!(arch_memory("x86-linux-pcid"), [Memory::Tso]);
    assert_ne!(portfolio("arm64-linux", None, 1), portfolio("arm64-linux", None, 2));
    // A zoo entry gets its base policy's portfolio.
    let zoo = portfolio("zoo/linux-x86-8f1d56f64f8d", None, 1);
    let base = portfolio("x86-linux-pcid", None, 1);
    let shapes = |f: &tlbkit_check::portfolio::Portfolio| {
        f.members.iter().map(|s| (s.cpus, s.mms, s.pages, s.ops, s.menu, s.iterations)).collect::<Vec<_>>()
    };
    assert_eq!(shapes(&zoo), shapes(&base));
}

#[test]
fn an_explicit_shape_flag_means_one_shape() {
    let one = |o: Options| match o.plan().unwrap() {
        Plan::One(spec, _) => spec,
        other => panic!("{o:?}: {other:?}"),
    };
    let s = one(Options { cpus: Some(3), ..options("arm64-linux") });
    // The rest of the shape is the family's, under sequential consistency, as before.
    let d = tlbkit_check::spec::default_spec("arm64-linux");
    assert_eq!((s.cpus, s.mms, s.ops, s.memory, s.menu), (3, d.mms, d.ops, Memory::Sc, d.menu));
    assert_eq!(one(Options { memory: Some("tso".into()), ..options("x86-linux-pcid") }).memory, Memory::Tso);
    assert_eq!(one(Options { ops: Some(4), ..options("x86-linux-pcid") }).ops, 4);
    assert_eq!(one(Options { menu: Some("switch".into()), ..options("x86-linux-pcid") }).menu, 1);
    assert_eq!(one(Options { deep: true, ..options("arm64-linux") }).mode, Mode::Exhaustive);
    assert_eq!(one(Options { quick: true, ..options("arm64-linux") }).ops, 6);
    // --iterations and --seed keep the portfolio: the schedules in all.
    let Plan::Portfolio(f) = Options { iterations: Some(9_000), seed: 7, ..options("arm64-linux") }.plan().unwrap()
    else {
        panic!("--iterations alone made one shape");
    };
    let total: u64 = f.members.iter().map(|s| s.iterations).sum();
    assert!((8_990..=9_010).contains(&total), "{total}");
    assert!(f.members.iter().all(|s| s.seed == 7));
}

#[test]
fn the_report_names_the_shape_that_found_a_violation() {
    let o = Options { iterations: Some(3_000), ..options("zoo/linux-x86-8f1d56f64f8d") };
    let r = o.run(&mut |_| {}).unwrap();
    let cx = r.counterexample.as_ref().expect("the portfolio finds the bug");
    let found: Vec<usize> = (0..r.portfolio.len()).filter(|&i| r.portfolio[i].found).collect();
    assert_eq!(found.len(), 1, "{:?}", r.portfolio);
    let (k, shape) = (found[0], &r.portfolio[found[0]]);
    // The shapes before it ran to their share, those after did not run.
    assert!(r.portfolio[..k].iter().all(|s| s.schedules > 0 && !s.found));
    assert!(r.portfolio[k + 1..].iter().all(|s| s.schedules == 0));
    // The report's shape is that shape's, and so is the token's.
    assert_eq!(
        (r.bounds.cpus, r.bounds.mms, r.bounds.pages, r.bounds.ops, r.bounds.memory, &r.bounds.menu),
        (
            shape.bounds.cpus,
            shape.bounds.mms,
            shape.bounds.pages,
            shape.bounds.ops,
            shape.bounds.memory,
            &shape.bounds.menu
        )
    );
    assert_eq!(r.explored.executions, shape.schedules);
    let (spec, _) = decode(&cx.token).unwrap();
    assert_eq!(
        (spec.cpus, spec.mms, spec.pages, spec.ops, spec.memory.name()),
        (shape.bounds.cpus, shape.bounds.mms, shape.bounds.pages, shape.bounds.ops, shape.bounds.memory)
    );
    assert_eq!(OpKind::names(spec.menu), shape.bounds.menu);
    let again = replay(&cx.token).unwrap().counterexample.unwrap();
    assert_eq!((again.trace(), again.property), (cx.trace(), cx.property));
    // The text says which shape, with its menu; JSON lists the shapes.
    let text = r.to_text();
    let line = format!(
        "found by shape {}: {} CPUs, {} address spaces of {} page, {} ASIDs, {} operations ({}), tso memory, pct mode",
        k + 1,
        shape.bounds.cpus,
        shape.bounds.mms,
        shape.bounds.pages,
        shape.bounds.asids,
        shape.bounds.ops,
        shape.bounds.menu
    );
    assert!(text.contains(&line), "{text}");
    assert!(text.contains("schedules, VIOLATION") && text.contains("not run"), "{text}");
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["portfolio"][k]["found"], true);
    assert_eq!(json["portfolio"].as_array().unwrap().len(), r.portfolio.len());
    // The same seed gives the same report.
    assert_eq!(o.run(&mut |_| {}).unwrap().to_text(), text);
}

#[test]
fn a_passing_portfolio_lists_its_shapes_and_their_schedules() {
    let r = Options { iterations: Some(180), ..options("x86-linux-pcid") }.run(&mut |_| {}).unwrap();
    assert!(r.counterexample.is_none() && r.explored.complete);
    assert_eq!(r.portfolio.len(), 9);
    assert_eq!(r.explored.executions, r.portfolio.iter().map(|s| s.schedules).sum::<u64>());
    let text = r.to_text();
    assert!(text.starts_with("check x86-linux-pcid: a portfolio of 9 shapes, tso memory, pct mode\n"), "{text}");
    for (i, s) in r.portfolio.iter().enumerate() {
        assert!(text.contains(&format!("  {}. {} CPU", i + 1, s.bounds.cpus)), "{text}");
        assert!(
            text.contains(&format!("({}), {}: {} schedules\n", s.bounds.menu, s.bounds.memory, s.schedules)),
            "{text}"
        );
    }
    assert!(text.contains(&format!("explored: {} schedules over every shape", r.explored.executions)), "{text}");
    // A one-shape check's JSON has no portfolio.
    let one = Options { cpus: Some(2), iterations: Some(10), ..options("x86-linux-pcid") }.run(&mut |_| {}).unwrap();
    assert!(serde_json::to_value(&one).unwrap().get("portfolio").is_none());
}

#[test]
fn a_zoo_entry_only_its_own_shape_finds_ends_its_portfolio_with_it() {
    let f = portfolio("zoo/arm64-activecpu-no-switch-dsb", None, 1);
    let base = portfolio("arm64-linux-activecpu", None, 1);
    assert_eq!(f.members.len(), base.members.len() + 1);
    assert_eq!(f.members.last(), Some(&tlbkit_check::spec::default_spec("zoo/arm64-activecpu-no-switch-dsb")));
}

#[test]
fn a_saving_request_plans_one_exhaustive_shape_and_refuses_anything_else() {
    use tlbkit_check::error::{Error, Param};
    use tlbkit_check::run::Persist;
    let persist = Persist {
        dir: std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("tlbkit-plan-test-never-written"),
        every: std::time::Duration::from_secs(60),
        max_memory: None,
        resume: false,
    };
    let saving = Options {
        cpus: Some(2),
        mode: Some("exhaustive".into()),
        jobs: Some(3),
        save: Some(persist.clone()),
        ..options("arm64-noasid")
    };
    match saving.plan().unwrap() {
        Plan::Saving(spec, jobs, p) => {
            assert_eq!((spec.cpus, spec.mode, jobs), (2, Mode::Exhaustive, 3));
            assert_eq!(p, persist);
        }
        other => panic!("a saving request planned {other:?}"),
    }
    // Sampling is not a search that can be saved; neither is a portfolio.
    for o in [
        Options { mode: Some("pct".into()), ..saving.clone() },
        Options { save: Some(persist.clone()), ..options("arm64-noasid") },
    ] {
        let e = o.plan().unwrap_err();
        assert!(matches!(e, Error::NotOneExhaustive { asked: Param::Checkpoint }), "{e}");
        assert!(e.to_string().starts_with("checkpoint runs an exhaustive search of one shape"), "{e}");
    }
    // A Rust policy's base needs a build that measures its lines (this
    // test's is not one), and says how to make one.
    let e = Options { base: Some("@HEAD".into()), ..options("arm64-noasid") }.plan().unwrap_err();
    assert!(matches!(e, Error::BaseNotC { .. }), "{e}");
    assert!(e.to_string().contains("cargo build --profile coverage"), "{e}");
    // A saved or distributed search stops at its first violation, and the
    // distributed one counts no coverage.
    let every = Options { all_violations: true, ..saving.clone() };
    assert!(matches!(every.plan().unwrap_err(), Error::Invalid { param: Param::AllViolations, .. }));
    let shape = Options { save: None, ..saving.clone() };
    assert!(shape.exhaustive_shape(Param::Ray).is_ok());
    let based = Options { base: Some("@HEAD".into()), ..shape };
    assert!(matches!(based.exhaustive_shape(Param::Ray).unwrap_err(), Error::Invalid { param: Param::Base, .. }));
}

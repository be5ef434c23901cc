use super::*;

const ENTRY: &str = r#"
id = "T1"
title = "a curve"
part = "history"
benchmark = "loop"
machine = "a machine"
published = "1: 100 -> 100; 2: 150 -> 180; 4: 160 -> 300"
source = "a list post"

[numbers]
before = { "1" = 100, "2" = 150, "4" = 160 }
after = { "1" = 100, "2" = 180, "4" = 300 }
single = [10, 20, 30]

[runs.old]
machine = "milan"
cpus = "{x}"
policy = "x86-linux-613"
workload = "will_it_scale_tlb_flush2"
sets = ["tasks={x}"]

[runs.new]
machine = "milan"
cpus = "{x}"
policy = "x86-linux-invlpgb"
workload = "will_it_scale_tlb_flush2"
sets = ["tasks={x}"]

[[figure]]
kind = "ratio"
x = [1, 2, 4]
sim = "new.ops_per_s / old.ops_per_s"
ref = "after / before"

[[figure]]
kind = "trend"
label = "ratio trend"
x = [1, 2, 4]
sim = "new.ops_per_s / old.ops_per_s"
ref = "after / before"

[[figure]]
kind = "knee"
label = "knee of the 'after' curve"
x = [1, 2, 4]
sim = "new.ops_per_s"
ref = "after"

[[figure]]
kind = "abs"
label = "one thread"
sim = "old.ops_per_s"
ref = "mean(single)"
x = [1]
"#;

fn corpus(text: &str) -> Result<Corpus, String> {
    Corpus::from_files([("t.toml".to_string(), text.to_string())])
}

fn results(pairs: &[(&str, f64)]) -> Results {
    let mut r = Results::new();
    add_results(&mut r, 1, pairs);
    r
}

/// Adds to `r` the runs of seed `seed` that `pairs` give (`policy@tasks`, ops/s).
fn add_results(r: &mut Results, seed: u64, pairs: &[(&str, f64)]) {
    for (x, policy, v) in pairs.iter().flat_map(|(k, v)| {
        let (policy, x) = k.split_once('@').unwrap();
        Some((x.parse::<usize>().unwrap(), policy, *v))
    }) {
        let spec = RunSpec {
            machine: "milan".into(),
            cpus: x,
            policy: policy.into(),
            workload: "will_it_scale_tlb_flush2".into(),
            sets: vec![format!("tasks={x}")],
            seed,
            strict: false,
        };
        r.insert(spec.command(), Ok(BTreeMap::from([("ops_per_s".to_string(), v)])));
    }
}

/// The runs of entry `t1` at seed 1: ratios 1.0, 1.0 and 2.5 at 1, 2 and 4 tasks.
fn t1_results() -> Results {
    results(&[
        ("x86-linux-613@1", 100.0),
        ("x86-linux-invlpgb@1", 100.0),
        ("x86-linux-613@2", 150.0),
        ("x86-linux-invlpgb@2", 150.0),
        ("x86-linux-613@4", 160.0),
        ("x86-linux-invlpgb@4", 400.0),
    ])
}

/// [`t1_results`] with every run lasting 1 ms and `set` giving each, by its
/// CPUs, more of its metrics.
fn t1_results_with(e: &[&Entry], set: impl Fn(usize, &mut BTreeMap<String, f64>)) -> Results {
    let mut r = t1_results();
    for s in plan(e, 1).unwrap() {
        if let Some(Ok(m)) = r.get_mut(&s.command()) {
            m.insert("sim_time_ns".into(), 1e6);
            set(s.cpus, m);
        }
    }
    r
}

#[test]
fn the_shipped_corpus_loads_and_every_entry_is_judged_or_says_why_not() {
    let c = Corpus::shipped().unwrap();
    assert!(!c.entries.is_empty());
    for e in &c.entries {
        assert!(
            !e.figures.is_empty() || !e.not_expressible.is_empty() || e.excluded.is_some(),
            "{} has nothing to judge",
            e.id
        );
    }
    let all: Vec<&Entry> = c.entries.iter().collect();
    assert!(!plan(&all, 1).unwrap().is_empty());
}

#[test]
fn a_curve_is_planned_once_per_point_and_judged_by_the_rules() {
    let c = corpus(ENTRY).unwrap();
    let e = c.select(Some("t1")).unwrap();
    let specs = plan(&e, 1).unwrap();
    assert_eq!(specs.len(), 6, "two runs at three points, each once");
    assert_eq!(specs[0].cpus, 1);
    assert_eq!(specs[0].sets, ["tasks=1"]);
    let r = t1_results();
    let j = &judge_all(&e, &r, 1)[0];
    let verdicts: Vec<Option<Verdict>> = j.rows.iter().take(3).map(|r| r.verdict).collect();
    // 1.0 vs 1.0; 1.0 vs 1.2 (no change against a rise); 2.5 vs 1.875 (the same way, but
    // |ln 2.5 - ln 1.875| = 0.29 > 0.35 * ln 1.875 = 0.22).
    assert_eq!(verdicts, [Some(Verdict::InBand), Some(Verdict::WrongDirection), Some(Verdict::DirectionOnly)]);
    assert_eq!(j.rows[3].shape_right, Some(false), "{}", j.rows[3].detail);
    assert!(j.rows[3].detail.starts_with("1->2 sim flat"), "{}", j.rows[3].detail);
    assert_eq!(j.rows[4].detail, "sim peaks/flattens at x=4, ref at x=4");
    assert_eq!(j.rows[5].factor, Some(5.0));
    let report = Report::new(judge_all(&e, &r, 1), 1, 6, 0);
    assert_eq!(report.total.counted.in_band, 1);
    assert_eq!(report.total.counted.direction_only, 1);
    assert_eq!(report.total.counted.wrong_direction, 1);
    assert!(!report.passed());
    let text = report.render();
    assert!(text.contains("ratios: in band 1/3, direction-only 1, wrong direction 1, errors 0"), "{text}");
    assert!(text.ends_with("FAIL\n"));
    assert!(text.contains("\nT1   a curve\n"), "{text}");
    let long = corpus(&ENTRY.replace("id = \"T1\"", "id = \"activecpu\"")).unwrap();
    let e = long.select(None).unwrap();
    let text = Report::new(judge_all(&e, &r, 1), 1, 6, 0).render();
    assert!(text.contains("\nactivecpu a curve\n"), "an id longer than the column keeps a space: {text}");
}

#[test]
fn a_failed_or_missing_run_is_an_error_row_not_a_verdict() {
    let c = corpus(ENTRY).unwrap();
    let e = c.select(None).unwrap();
    let mut r = results(&[("x86-linux-613@1", 100.0)]);
    // The first run the first row reads fails; the second row's was never run.
    let failed = plan(&e, 1).unwrap()[0].command();
    r.insert(failed.clone(), Err("the machine has 64 CPUs".into()));
    let j = &judge_all(&e, &r, 1)[0];
    let e0 = j.rows[0].error.as_deref().unwrap();
    assert!(e0.contains(&failed) && e0.contains("64 CPUs"), "{e0}");
    assert!(j.rows[1].error.as_deref().unwrap().contains("was not run"));
    // Every row but the absolute one, whose run is there.
    assert_eq!(Report::new(judge_all(&e, &r, 1), 1, 0, 0).total.counted.errors, 5);
}

#[test]
fn mistakes_in_a_corpus_file_are_refused_with_the_file_and_the_fix() {
    let bad = |from: &str, to: &str| corpus(&ENTRY.replacen(from, to, 1)).unwrap_err();
    let e = bad("sim = \"new.ops_per_s / old", "sim = \"newer.ops_per_s / old");
    assert!(e.starts_with("t.toml: entry T1:") && e.contains("run 'newer'") && e.contains("runs: new, old"), "{e}");
    let e = bad("ref = \"after / before\"", "ref = \"after / befor\"");
    assert!(e.contains("'befor', which is not in [numbers]"), "{e}");
    let e = bad("kind = \"trend\"", "kind = \"trends\"");
    assert!(e.contains("t.toml") && e.contains("trends"), "{e}");
    let e = bad("cpus = \"{x}\"", "cpus = 0");
    assert!(e.contains("cpus must be a positive number"), "{e}");
    let e = bad("sim = \"new.ops_per_s\"", "sim = \"new.ops_per_s *\"");
    assert!(e.contains("expected a number"), "{e}");
    let e = bad("title =", "titel =");
    assert!(e.contains("titel"), "{e}");
    let two =
        Corpus::from_files([("a.toml".to_string(), ENTRY.to_string()), ("b.toml".to_string(), ENTRY.to_string())])
            .unwrap_err();
    assert!(two.contains("'T1' is in both a.toml and b.toml"), "{two}");
    let c = corpus(ENTRY).unwrap();
    assert!(c.select(Some("H99")).unwrap_err().contains("the entries are: T1"));
}

#[test]
fn a_simulated_figure_is_the_mean_of_its_runs_over_the_seeds() {
    let c = corpus(ENTRY).unwrap();
    let e = c.select(Some("t1")).unwrap();
    let specs = plan(&e, 2).unwrap();
    assert_eq!(specs.len(), 12, "two runs at three points, each with seeds 1 and 2");
    assert_eq!((specs[0].seed, specs[1].seed), (1, 2));
    // Seed 1 as in the test above; seed 2 gives invlpgb at 4 tasks 200, not 400.
    let mut r = t1_results();
    for s in &specs {
        if s.seed == 2 {
            let one = RunSpec { seed: 1, ..s.clone() };
            let mut m = r[&one.command()].clone().unwrap();
            if s.policy == "x86-linux-invlpgb" && s.cpus == 4 {
                m.insert("ops_per_s".into(), 200.0);
            }
            r.insert(s.command(), Ok(m));
        }
    }
    let j = &judge_all(&e, &r, 2)[0];
    // (400 + 200) / 2 = 300 against 160: 1.875, the published ratio.
    let at4 = j.rows.iter().find(|row| row.x == Some(4.0)).unwrap();
    assert!((at4.sim.unwrap() - 1.875).abs() < 1e-12, "{at4:?}");
    assert_eq!(at4.verdict, Some(Verdict::InBand));
    // A seed that was not run is an error naming its command.
    r.retain(|k, _| !k.ends_with("--seed 2") || !k.contains("invlpgb"));
    let j = &judge_all(&e, &r, 2)[0];
    assert!(
        j.rows[0].error.as_deref().is_some_and(|e| e.contains("--seed 2") && e.contains("was not run")),
        "{:?}",
        j.rows[0]
    );
}

#[test]
fn a_row_whose_runs_used_an_estimated_cost_names_it_and_the_entry_says_where_it_comes_from() {
    let c = corpus(ENTRY).unwrap();
    let e = c.select(Some("t1")).unwrap();
    // Every run switched contexts, and milan's switch_path is an estimate;
    // only at 2 tasks do the switches take 1% of the CPU time (n CPUs for 1 ms
    // at 2.45 GHz are n x 2.45 M cycles: 16 switches of 3,200 cycles on 2 are
    // 1.04%, 7.5 per CPU elsewhere 0.98%).
    let r = t1_results_with(&e, |cpus, m| {
        m.insert("context_switches".into(), if cpus == 2 { 16.0 } else { 7.5 * cpus as f64 });
    });
    let j = &judge_all(&e, &r, 1)[0];
    let named: Vec<&[String]> = j.rows.iter().take(3).map(|r| r.estimates.as_slice()).collect();
    assert_eq!(named[0], [] as [String; 0]);
    assert_eq!(named[1], ["milan: switch_path".to_string()]);
    assert_eq!(named[2], [] as [String; 0]);
    assert_eq!(j.rows[3].estimates, ["milan: switch_path"], "the curve's row, over all its points");
    assert_eq!(j.estimates.len(), 1);
    assert!(
        j.estimates[0].starts_with("milan: switch_path: ") && j.estimates[0].contains("lat_ctx"),
        "{:?}",
        j.estimates
    );
    let report = Report::new(judge_all(&e, &r, 1), 1, 6, 0);
    // The ratio at 2 tasks and the two curves over every point; not the other ratios.
    assert_eq!(report.on_estimates, (3, 6));
    let text = report.render();
    assert!(text.contains("rests on estimates: milan: switch_path"), "{text}");
    assert!(text.contains("in an estimated cost (named under each row): 3 of 6"), "{text}");
}

#[test]
fn a_row_whose_runs_spent_1_percent_in_a_kernel_estimate_names_it() {
    let c = corpus(ENTRY).unwrap();
    let e = c.select(Some("t1")).unwrap();
    // 1 ms on n CPUs at 2.45 GHz is n x 2.45 M cycles: 50,000 cycles of zone
    // lock holds on 1 CPU are 2.04%, on 2 1.02%, on 4 0.51%.
    let r = t1_results_with(&e, |_, m| {
        m.insert("zone_page_cycles".into(), 50_000.0);
    });
    let j = &judge_all(&e, &r, 1)[0];
    let zone = ["kernel: zone-lock hold per page (60 cycles)".to_string()];
    assert_eq!(j.rows[0].estimates, zone);
    assert_eq!(j.rows[1].estimates, zone);
    assert_eq!(j.rows[2].estimates, [] as [String; 0]);
    assert!(
        j.estimates.iter().any(|w| w.starts_with("kernel: zone-lock hold per page (60 cycles): ")),
        "{:?}",
        j.estimates
    );
}

#[test]
fn a_point_where_no_figure_gives_one_is_refused_before_any_run() {
    // The absolute figure without its points reads runs whose sets use {x}
    // (found by the validation_corpus fuzz target: the command kept "{x}").
    assert_eq!(ENTRY.matches("x = [1]\n").count(), 1);
    let e = corpus(&ENTRY.replace("x = [1]\n", "")).expect_err("refused");
    assert!(e.contains("whose cpus or sets use {x}, but has no points"), "{e}");
    let e =
        corpus(&ENTRY.replacen("policy = \"x86-linux-613\"", "policy = \"x86-linux-{x}\"", 1)).expect_err("refused");
    assert!(e.contains("policy 'x86-linux-{x}' holds {x}"), "{e}");
}

#[test]
fn a_row_whose_seeds_differ_gives_each_seeds_figure_and_says_when_they_split_on_direction() {
    let c = corpus(ENTRY).unwrap();
    let e = c.select(Some("t1")).unwrap();
    // Seed 1 as `t1_results`; seed 2 makes the new policy slower at 2 tasks
    // (ratio 0.9 there) and changes nothing at 1 task.
    let mut r = t1_results();
    add_results(
        &mut r,
        2,
        &[
            ("x86-linux-613@1", 100.0),
            ("x86-linux-invlpgb@1", 100.0),
            ("x86-linux-613@2", 150.0),
            ("x86-linux-invlpgb@2", 135.0),
            ("x86-linux-613@4", 160.0),
            ("x86-linux-invlpgb@4", 480.0),
        ],
    );
    let j = &judge_all(&e, &r, 2)[0];
    assert_eq!(j.rows[0].seeds, None, "the same figure from both seeds");
    assert_eq!(j.rows[1].seeds, Some((0.9, 1.0)));
    assert_eq!(j.rows[2].seeds, Some((2.5, 3.0)));
    // The mean of the seeds' metrics, as before: (400 + 480) / 2 over 160.
    assert_eq!(j.rows[2].sim, Some(2.75));
    let text = Report::new(judge_all(&e, &r, 2), 2, 12, 0).render();
    assert!(text.contains("seeds alone: 2.500 to 3.000\n"), "{text}");
    assert!(!text.contains("seeds alone: 0.9000 to 1.000; the seeds disagree"), "0.9 to 1.0 never rises: {text}");
    // A split across 1 is named: seed 1 now gains at 2 tasks.
    add_results(&mut r, 1, &[("x86-linux-invlpgb@2", 165.0)]);
    let text = Report::new(judge_all(&e, &r, 2), 2, 12, 0).render();
    assert!(text.contains("seeds alone: 0.9000 to 1.100; the seeds disagree on its direction\n"), "{text}");
}

#[test]
fn a_run_that_asks_for_more_seeds_is_the_mean_of_them_all_and_its_rows_spread_covers_them() {
    let text = ENTRY.replacen(
        "policy = \"x86-linux-invlpgb\"\nworkload = \"will_it_scale_tlb_flush2\"\nsets = [\"tasks={x}\"]\n",
        "policy = \"x86-linux-invlpgb\"\nworkload = \"will_it_scale_tlb_flush2\"\nsets = [\"tasks={x}\"]\nseeds = 3\n",
        1,
    );
    let c = corpus(&text).unwrap();
    let e = c.select(Some("t1")).unwrap();
    let specs = plan(&e, 1).unwrap();
    assert_eq!(specs.len(), 3 + 3 * 3, "the old run once a point, the new one with seeds 1 to 3");
    assert_eq!(plan(&e, 4).unwrap().len(), 2 * 3 * 4, "--seeds above a run's own count wins");
    // Seed 1 as `t1_results`; the new policy at 4 tasks gives 200 and 300 at
    // seeds 2 and 3, the same as seed 1 elsewhere.
    let mut r = t1_results();
    for seed in [2, 3] {
        let at4 = if seed == 2 { 200.0 } else { 300.0 };
        add_results(
            &mut r,
            seed,
            &[("x86-linux-invlpgb@1", 100.0), ("x86-linux-invlpgb@2", 150.0), ("x86-linux-invlpgb@4", at4)],
        );
    }
    let j = &judge_all(&e, &r, 1)[0];
    // (400 + 200 + 300) / 3 = 300 against the old run's one seed, 160.
    assert_eq!(j.rows[2].sim, Some(1.875));
    assert_eq!(j.rows[0].seeds, None);
    // Each seed of the new run against the old run's mean: 2.5, 1.25, 1.875.
    assert_eq!(j.rows[2].seeds, Some((1.25, 2.5)));
    // A count past the bound is refused with the fix.
    let text = text.replacen("seeds = 3", "seeds = 0", 1);
    let err = corpus(&text).unwrap_err();
    assert!(err.contains("run 'new': seeds = 0; give 1 to 100"), "{err}");
}

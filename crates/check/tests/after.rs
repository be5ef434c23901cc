//! Checks after a schedule (`tlbkit check --script FILE`, `--from TOKEN`):
//! the search starts where the script's operations leave the machine, its
//! counterexample's token replays the script too, a token's schedule is the
//! script's, and bad input is refused with what to change.

use tlbkit_check::options::{Options, Plan};
use tlbkit_check::token::encode;
use tlbkit_check::{replay, CheckReport};

/// FreeBSD arm64's allocator on 2 CPUs, 3 processes of 1 page, 4 ASIDs.
fn freebsd(ops: usize) -> Options {
    Options {
        policy: "arm64-freebsd-asid".into(),
        cpus: Some(2),
        mms: Some(3),
        pages: Some(1),
        asids: Some(4),
        ops: Some(ops),
        menu: Some("switch,idle".into()),
        seed: 1,
        ..Options::default()
    }
}

/// The script that runs mm1 on cpu0 and mm2 on cpu1: the two allocatable
/// ASIDs are taken.
const BOTH_TAKEN: &str = "# two processes, one on each CPU\ncpu0 switch mm1\ncpu1 switch mm2\n";

fn run(o: &Options) -> CheckReport {
    o.run(&mut |_| {}).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn a_search_after_a_script_starts_where_the_script_leaves_the_machine() {
    let o = Options { script: Some(BOTH_TAKEN.into()), ..freebsd(5) };
    let Plan::After(spec, schedule) = o.plan().unwrap() else { panic!("a check after a schedule") };
    let r = run(&o);
    let after = r.after.as_ref().expect("the report names the schedule");
    assert_eq!(after.ops, 2);
    assert_eq!(after.token, encode(&spec, &schedule));
    assert!(r.to_text().contains(&format!("after: the 2 operations of {}", after.token)), "{}", r.to_text());
    // Window 1 of the reset finding, three operations after the script.
    let cx = r.counterexample.expect("the reset's alias");
    assert_eq!(cx.property, "no_asid_alias", "{}", cx.detail);
    let ops: Vec<String> = cx
        .steps
        .iter()
        .flat_map(|s| s.events.iter().map(move |e| (s.who.clone(), e)))
        .filter_map(|(who, e)| e.strip_prefix("op: ").map(|op| format!("{} {op}", who.split(' ').next().unwrap())))
        .collect();
    assert_eq!(ops[..2], ["cpu0 switch to a thread of mm1", "cpu1 switch to a thread of mm2"], "{}", cx.trace());
    // The token holds the script's schedule, and replays alone.
    let again = replay(&cx.token).unwrap().counterexample.expect("the replay violates again");
    assert_eq!(again.trace(), cx.trace());
    // --from the script's token searches the same.
    let from = run(&Options { from: Some(after.token.clone()), ..freebsd(5) });
    assert_eq!(from.counterexample.map(|c| c.token), Some(cx.token));
    assert_eq!((from.explored.executions, from.explored.states), (r.explored.executions, r.explored.states));
}

#[test]
fn an_exhaustive_search_after_a_script_covers_every_continuation() {
    // The fix of the reset finding passes every continuation of the script
    // that the faithful policy fails one operation after.
    let after = |policy: &str| run(&Options { policy: policy.into(), script: Some(BOTH_TAKEN.into()), ..freebsd(5) });
    let fixed = after("arm64-freebsd-asid-fix-reserved-ttbr0");
    assert!(fixed.explored.complete && fixed.counterexample.is_none(), "{:?}", fixed.counterexample.map(|c| c.detail));
    assert!(fixed.explored.executions > 2, "both CPUs' choices are explored: {}", fixed.explored.executions);
    let faithful = run(&Options { script: Some(BOTH_TAKEN.into()), ..freebsd(3) });
    assert_eq!(faithful.counterexample.map(|c| c.property), Some("no_asid_alias"));
}

#[test]
fn bad_scripts_and_schedules_are_refused_with_what_to_change() {
    let err = |o: Options| o.plan().map(|_| ()).unwrap_err().to_string();
    let e = err(Options { script: Some("cpu0 switch mm1\ncpu0 switch mm1\n".into()), ..freebsd(5) });
    assert_eq!(e, "script: line 2: cpu0 cannot start 'switch mm1' there; it may start: switch mm2, idle");
    let e = err(Options { script: Some("cpu0 switch mm9\n".into()), ..freebsd(5) });
    assert_eq!(e, "script: line 1 ('cpu0 switch mm9'): 'mm9' is not an address space: give mm1 to mm3");
    let e = err(Options { script: Some(BOTH_TAKEN.into()), ..freebsd(2) });
    assert_eq!(e, "ops 2: the script has 2 operations and a check after it needs more: give at least 3");
    let token = run(&Options { script: Some(BOTH_TAKEN.into()), ..freebsd(3) }).after.unwrap().token;
    let e = err(Options { from: Some(token.clone()), ..freebsd(5) }.without_shape());
    assert!(e.starts_with("ops: give the operations in all"), "{e}");
    let e = err(Options { from: Some(token.clone()), policy: "arm64-linux".into(), ..freebsd(5) });
    assert_eq!(e, "from: the token's schedule is of arm64-freebsd-asid, not arm64-linux");
    let e = err(Options { from: Some(token.clone()), mms: Some(4), ..freebsd(5) });
    assert_eq!(e, "mms 4: the token's schedule was made with 3");
    let e = err(Options { from: Some(token), script: Some(BOTH_TAKEN.into()), ..freebsd(5) });
    assert!(e.contains("not both"), "{e}");
    // A schedule longer than the operations allow.
    let long = run(&Options { script: Some(BOTH_TAKEN.into()), ..freebsd(3) }).after.unwrap().token;
    let r = Options { from: Some(long), ..freebsd(1) }.without_shape_but_ops(1).run(&mut |_| {});
    let e = r.map(|_| ()).unwrap_err().to_string();
    assert_eq!(e, "ops 1: the schedule starts 2 operations and a check after it needs more: give at least 3");
}

/// `--from` with only the flags a user gives beside a token.
trait FromOnly {
    fn without_shape(self) -> Options;
    fn without_shape_but_ops(self, ops: usize) -> Options;
}

impl FromOnly for Options {
    fn without_shape(self) -> Options {
        Options { policy: self.policy, from: self.from, seed: 1, ..Options::default() }
    }
    fn without_shape_but_ops(self, ops: usize) -> Options {
        Options { ops: Some(ops), ..self.without_shape() }
    }
}

//! x86 Linux's full-flush ceiling (`--set flush_ceiling=N`) and page-table
//! isolation (`--set pti=on`) through `flush_range`: the switch point moves
//! with the ceiling, PTI adds an `INVPCID` per page where the machine has it
//! and one deferred user-PCID flush where it does not, and a run at the
//! kernel's defaults is the run without the switches.

use crate::common::{loose_spec, run_clean, spec};
use tlbkit_sim::run::{run, RunOutput, RunSpec};

/// Runs `flush_range` of `pages` pages on `machine` under `policy` with `sets`,
/// on 4 CPUs (three spinners), strictly.
fn flush_range(machine: &str, policy: &str, pages: u32, sets: &[&str]) -> RunOutput {
    let sets = [format!("pages={pages}"), "iters=4".to_string()].into_iter().chain(sets.iter().map(|s| s.to_string()));
    run_clean(&RunSpec { seed: 3, ..spec(machine, 4, policy, "flush_range", sets) })
}

#[test]
fn the_kernel_default_ceiling_is_the_run_without_the_switch() {
    for policy in ["x86-linux-pcid", "x86-linux-613"] {
        let plain = flush_range("ivb3320m", policy, 8, &[]);
        let at_33 = flush_range("ivb3320m", policy, 8, &["flush_ceiling=33"]);
        assert_eq!(plain.result, at_33.result, "{policy}");
        assert_eq!(plain.metrics.full_flushes, at_33.metrics.full_flushes, "{policy}");
        // Only the given ceiling is shown with the parameters.
        assert!(!plain.params.contains_key("flush_ceiling"));
        assert_eq!(at_33.params["flush_ceiling"], 33);
    }
}

#[test]
fn flush_ceiling_moves_the_switch_to_full_flushes() {
    for policy in ["x86-linux-pcid", "x86-linux-613", "x86-linux-410"] {
        // 8 pages: by page at ceilings 8 and 64, whole at 7 and 0.
        let by_page = flush_range("hsw48", policy, 8, &["flush_ceiling=8"]);
        let high = flush_range("hsw48", policy, 8, &["flush_ceiling=64"]);
        let whole = flush_range("hsw48", policy, 8, &["flush_ceiling=7"]);
        let zero = flush_range("hsw48", policy, 8, &["flush_ceiling=0"]);
        assert_eq!(by_page.result, high.result, "{policy}");
        assert!(whole.metrics.full_flushes > by_page.metrics.full_flushes, "{policy}");
        assert!(by_page.metrics.local_invalidations > whole.metrics.local_invalidations, "{policy}");
        assert!(zero.metrics.full_flushes >= whole.metrics.full_flushes, "{policy}");
        assert_eq!(whole.result["cycles_per_call"], zero.result["cycles_per_call"], "{policy}");
    }
}

#[test]
fn pti_issues_invpcid_per_page_or_defers_without_it() {
    // hsw48 has INVPCID: one more local invalidation per page on every CPU that flushes.
    let off = flush_range("hsw48", "x86-linux-pcid", 4, &[]);
    let on = flush_range("hsw48", "x86-linux-pcid", 4, &["pti=on"]);
    assert_eq!(on.params["pti"], "on");
    // 4 pages, 2 calls, 4 timed iterations and one untimed, on the caller and 3 spinners' CPUs.
    assert!(on.metrics.local_invalidations >= off.metrics.local_invalidations + 4 * 2 * 5 * 4);
    assert!(on.result["cycles_per_call"] > off.result["cycles_per_call"]);
    // ivb3320m has none: the user PCID is flushed whole once per flush (a CR3 write
    // without NOFLUSH), no INVPCID.
    let off = flush_range("ivb3320m", "x86-linux-pcid", 4, &[]);
    let on = flush_range("ivb3320m", "x86-linux-pcid", 4, &["pti=on"]);
    assert_eq!(
        on.metrics.local_invalidations - off.metrics.local_invalidations,
        on.metrics.full_flushes - off.metrics.full_flushes
    );
    assert!(on.metrics.full_flushes > off.metrics.full_flushes);
}

#[test]
fn pti_and_the_ceiling_are_refused_where_the_kernel_has_neither() {
    for (policy, set) in
        [("x86-linux-nopcid", "pti=on"), ("x86-freebsd-gen", "flush_ceiling=8"), ("x86-latr", "pti=on")]
    {
        assert!(run(&loose_spec("hsw48", 2, policy, "flush_range", &[set])).is_err(), "{policy} took {set}");
    }
    let spec = loose_spec("hsw48", 2, "x86-linux-pcid", "flush_range", &["flush_ceiling=4097"]);
    assert!(run(&spec).is_err(), "a ceiling above 4096 was taken");
}

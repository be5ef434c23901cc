//! Micro-benchmarks of the simulator's hot paths (`cargo bench -p tlbkit-sim`):
//!
//! - `tlb_lookup/l1_hit`: a lookup that hits the L1 (48 held 4 KB entries, as an
//!   Altra core's L1 data TLB), looked up in turn;
//! - `tlb_lookup/l2_hit_sweep`: a sweep of 256 pages through a 48-entry L1 and a
//!   1280-entry, 5-way L2, the pattern of `tlbkit bench`'s workload: every
//!   lookup misses the L1, hits the L2 and evicts the L1's least recently used
//!   entry;
//! - `tlb_sweep/pages_256`: the same 256 pages as one run of the fast path a
//!   touch of consecutive pages takes (`Tlb::sweep`, its L1 copies settled at
//!   the end), per page, to compare with the lookups one by one above;
//! - `context_switch`: one simulated context switch of `pingpong` (two address
//!   spaces on one CPU waking each other through pipes) on a Cortex-A72 under
//!   `arm64-freebsd-asid`, with everything a switch costs the simulator: the
//!   scheduler, the policy's `switch_mm`, the pipe system calls around it. A
//!   run of `n` switches is timed whole (setup included, a small share at the
//!   iteration counts criterion picks) and divided by the switches it made.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::hint::black_box;
use std::time::{Duration, Instant};
use tlbkit_sim::run::{run, RunSpec};
use tlbkit_sim::tlb::{SweepRule, Tlb, TlbEntry};

/// A 4 KB entry for `va` under ASID 1.
fn entry(va: u64) -> TlbEntry {
    TlbEntry { tag: va >> 12, pfn: va >> 12, asid: 1, ..Default::default() }
}

fn tlb_lookup(c: &mut Criterion) {
    let mut g = c.benchmark_group("tlb_lookup");
    g.throughput(Throughput::Elements(1));
    let mut t = Tlb::new(48, 1280, 5, 64);
    for p in 0..48u64 {
        t.fill(entry(0x4000_0000 + p * 4096), false);
    }
    let mut p = 0u64;
    g.bench_function("l1_hit", |b| {
        b.iter(|| {
            p = (p + 1) % 48;
            black_box(t.lookup(black_box(0x4000_0000 + p * 4096), 1))
        })
    });
    let mut t = Tlb::new(48, 1280, 5, 64);
    for p in 0..256u64 {
        t.fill(entry(0x4000_0000 + p * 4096), true);
    }
    g.bench_function("l2_hit_sweep", |b| {
        b.iter(|| {
            p = (p + 1) % 256;
            black_box(t.lookup(black_box(0x4000_0000 + p * 4096), 1))
        })
    });
    g.finish();
    let mut g = c.benchmark_group("tlb_sweep");
    g.throughput(Throughput::Elements(256));
    let rule = SweepRule { asid: 1, uid: 0, min_ver: 0, write: false };
    g.bench_function("pages_256", |b| {
        b.iter(|| {
            let done = t.sweep(black_box(0x4000_0000), 256, &rule, |_| {});
            t.settle();
            black_box(done)
        })
    });
    g.finish();
}

/// `pingpong` with `rounds` rounds and no pages touched.
fn pingpong(rounds: u64) -> RunSpec {
    RunSpec {
        machine: "cortex-a72".into(),
        cpus: 1,
        policy: "arm64-freebsd-asid".into(),
        workload: "pingpong".into(),
        sets: vec!["pages=0".into(), format!("rounds={rounds}")],
        seed: 1,
        strict: false,
    }
}

fn context_switch(c: &mut Criterion) {
    let mut g = c.benchmark_group("context_switch");
    g.throughput(Throughput::Elements(1));
    g.bench_function("pingpong", |b| {
        b.iter_custom(|iters| {
            // Each round is about two switches.
            let start = Instant::now();
            let out = run(&pingpong(iters.div_ceil(2).clamp(2, 10_000_000))).expect("pingpong runs");
            let took = start.elapsed();
            let switches = out.metrics.context_switches.max(1);
            Duration::from_secs_f64(took.as_secs_f64() * iters as f64 / switches as f64)
        })
    });
    g.finish();
}

criterion_group!(benches, tlb_lookup, context_switch);
criterion_main!(benches);

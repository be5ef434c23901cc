//! The microbenchmarks of `tlbkit calibrate` that need no kernel, run on the
//! machine model itself: the cache-line and lock models every kernel path
//! uses ([`crate::coherence`], [`crate::locks`]) and the zeroing rate the
//! kernel's page writes are charged ([`crate::sim::zeroing_gbs`]). The others
//! run as programs (`crate::workload::microbench`).
//!
//! Each mirrors its host microbenchmark (the `tlbkit-host` crate):
//! - **`line_pingpong`**: two CPUs pass a counter back and forth, each waiting
//!   for the other's write and then writing. In the model a pass is an
//!   atomic by the waiting CPU as soon as the other's is done: the line moves
//!   to it, one transfer at the CPUs' distance, which completes the write.
//! - **`atomic_hit`**: one CPU adds to a counter alone in its line, each add
//!   after the last. In the model the first add brings the line from
//!   memory (not timed) and each of the rest is an atomic that hits.
//! - **`lock_handoff`**: two CPUs take a FIFO spinlock in turn and, holding
//!   it, increment a counter on another line. In the model each acquisition is
//!   a hold of the queued spinlock asked for as soon as the CPU released its
//!   last one, so the lock alternates; the work inside is the counter's line
//!   coming from the other CPU and the increment.

use crate::coherence::KLine;
use crate::locks::SpinLock;
use crate::machine::Machine;
use crate::preset::Preset;
use crate::tlb::Tlb;

/// Returns a machine of `preset` with CPUs `0..=max(a, b)`.
fn machine(preset: &Preset, a: usize, b: usize) -> Machine {
    let g = preset.tlb;
    let n = a.max(b) + 1;
    let cpus = (0..n).map(|_| Tlb::new(g.l1d_entries, g.l2_entries, g.l2_ways, g.pwc_entries));
    Machine::new(preset.costs, cpus.collect(), preset.cores_per_socket)
        .with_ccx(preset.cores_per_ccx)
        .with_clock(preset.freq_ghz)
}

/// Returns the model's nanoseconds per pass of a counter between CPUs `a`
/// and `b`, over `passes` passes.
pub fn line_pingpong_ns(preset: &Preset, a: usize, b: usize, passes: u64) -> f64 {
    let mut m = machine(preset, a, b);
    let line = KLine::MemcgCounter(0);
    // The line starts at `a`, which wrote the counter's first value.
    let mut t = m.katomic(a, 0, line);
    let start = t;
    for i in 0..passes {
        let cpu = if i % 2 == 0 { b } else { a };
        t = m.katomic(cpu, t, line);
    }
    (t - start) as f64 / preset.freq_ghz / passes.max(1) as f64
}

/// Returns the model's nanoseconds per atomic add of CPU 0 to a counter
/// alone in its line, over `adds` adds after the first.
pub fn atomic_hit_ns(preset: &Preset, adds: u64) -> f64 {
    let mut m = machine(preset, 0, 0);
    let line = KLine::MemcgCounter(0);
    let start = m.katomic(0, 0, line);
    let mut t = start;
    for _ in 0..adds {
        t = m.katomic(0, t, line);
    }
    (t - start) as f64 / preset.freq_ghz / adds.max(1) as f64
}

/// Returns the model's nanoseconds per acquisition of a spinlock that CPUs
/// `a` and `b` take in turn, `acquisitions` times in all.
pub fn lock_handoff_ns(preset: &Preset, a: usize, b: usize, acquisitions: u64) -> f64 {
    let mut m = machine(preset, a, b);
    let mut lock = SpinLock::default();
    // The counter inside: its line comes from the other CPU, then the increment.
    let work = m.transfer_cost(a, b) + preset.costs.mem_access;
    let mut asks = [0u64; 2];
    let mut end = 0;
    for i in 0..acquisitions {
        let k = (i % 2) as usize;
        let cpu = if k == 0 { a } else { b };
        let done = lock.hold(&mut m, cpu, asks[k], work);
        asks[k] = done;
        end = end.max(done);
    }
    end as f64 / preset.freq_ghz / acquisitions.max(1) as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::preset;

    #[test]
    fn a_pass_costs_one_transfer_and_crossing_a_ccx_costs_more() {
        let p = preset::named("milan");
        let c = p.costs;
        let near = line_pingpong_ns(&p, 0, 1, 100);
        let want = c.lines.cacheline_transfer as f64 / p.freq_ghz;
        assert!((near - want).abs() < 1e-9, "{near} against {want}");
        let far = line_pingpong_ns(&p, 0, 8, 100);
        let want = (c.lines.cacheline_transfer + c.lines.cacheline_cross_ccx) as f64 / p.freq_ghz;
        assert!((far - want).abs() < 1e-9, "{far} against {want}");
    }

    #[test]
    fn an_add_to_a_line_the_cpu_holds_costs_the_presets_atomic_hit() {
        for name in ["skx8170", "milan", "altra"] {
            let p = preset::named(name);
            let ns = atomic_hit_ns(&p, 1000);
            let want = p.costs.lines.atomic_hit as f64 / p.freq_ghz;
            assert!((ns - want).abs() < 1e-9, "{name}: {ns} against {want}");
        }
    }

    #[test]
    fn a_handoff_costs_the_lock_words_transfer_and_the_counters() {
        let p = preset::named("milan");
        let c = p.costs;
        let ns = lock_handoff_ns(&p, 0, 1, 1000);
        let per = (2 * c.lines.cacheline_transfer + c.mem_access) as f64 / p.freq_ghz;
        // The first acquisition finds the lock free (no handoff).
        assert!((ns - per).abs() < per * 0.01, "{ns} against {per}");
    }
}

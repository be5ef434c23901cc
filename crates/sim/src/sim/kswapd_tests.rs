//! The nodes' watermarks and `kswapd` (`sim/kswapd.rs`): the kernel's
//! formulas, `kswapd` woken below low and asleep above high, and direct
//! reclaim only below min, each on a reader of a file larger than memory.

use super::memcg::MAX_RECLAIM_RETRIES;
use super::*;
use crate::preset;
use tlbkit_policy::asid::LinuxArm64;

/// Maps file 0 shared and read-only and reads it once, one page an
/// operation (each fault reads one 64 KB folio into the page cache).
struct Reader {
    pages: u64,
    done: u64,
    va: Option<u64>,
}

impl Program for Reader {
    fn next(&mut self, ret: u64) -> Op {
        let Some(va) = self.va else {
            self.va = Some(0);
            return Op::Sys(Sys::MmapFile { file: 0, pages: self.pages, write: false, private: false });
        };
        let va = if va == 0 { *self.va.insert(ret) } else { va };
        if self.done == self.pages {
            return Op::Exit;
        }
        self.done += 1;
        Op::Touch { va: va + (self.done - 1) * 4096, pages: 1, write: false }
    }
}

/// Returns `ncpus` CPUs of an Ampere Altra whose memory is 1,024 pages on
/// one node, the page cache on its LRU, and a reader of 4,096 pages.
fn reader(ncpus: usize) -> Sim {
    let cfg = SimConfig { max_mms: 8, max_events: 1_000_000, ..SimConfig::quiet(preset::named("altra"), ncpus, 1) };
    let mut sim = Sim::new(cfg, LinuxArm64::new(ncpus, 16, 16, false).unwrap());
    sim.set_machine_memory(1024);
    sim.set_file_charge();
    sim.spawn(Box::new(Reader { pages: 4096, done: 0, va: None })).unwrap();
    sim
}

#[test]
fn watermarks_are_the_kernels() {
    // 64 MB on one node: min_free_kbytes = sqrt(65536 * 16) = 1024 KB = 256
    // pages; the step is min / 4 = 64 (0.1% of 16384 pages is 16).
    assert_eq!(watermarks(&[16384], true), vec![Watermarks { min: 256, low: 320, high: 384 }]);
    // Four nodes share min in proportion to their pages.
    let four = watermarks(&[4096; 4], true);
    assert!(four.iter().all(|w| *w == Watermarks { min: 64, low: 80, high: 96 }), "{four:?}");
    // 64 GB: min_free_kbytes = sqrt(67108864 * 16) = 32768 KB = 8192 pages;
    // watermark_scale_factor's 0.1% (16777 pages) is the step, not min / 4.
    let big = 16 << 20;
    assert_eq!(watermarks(&[big], true), vec![Watermarks { min: 8192, low: 8192 + 16777, high: 8192 + 2 * 16777 }]);
    // Before v4.6: min / 4 and min / 2.
    assert_eq!(watermarks(&[big], false), vec![Watermarks { min: 8192, low: 10240, high: 12288 }]);
    // Clamped: at least 128 KB, at most 256 MB.
    assert_eq!(watermarks(&[64], true)[0].min, 32);
    assert_eq!(watermarks(&[1 << 32], true)[0].min, 262_144 / 4);
}

#[test]
fn kswapd_wakes_below_low_and_sleeps_above_high() {
    let mut sim = reader(2);
    let w = sim.mem.nodes[0].wmark;
    assert_eq!(w, Watermarks { min: 64, low: 80, high: 96 });
    let (mut asleep, mut wakes, mut sleeps) = (true, 0, 0);
    while sim.step() {
        let n = &sim.mem.nodes[0];
        if asleep && !n.asleep {
            wakes += 1;
            // Woken by an allocation that failed the low watermark, which it
            // then made (above min): free pages are below low.
            assert!(n.free() < w.low, "woken with {} pages free", n.free());
        }
        if !asleep && n.asleep {
            sleeps += 1;
            assert!(n.free() > w.high, "asleep with {} pages free", n.free());
        }
        asleep = n.asleep;
    }
    assert!(sim.error.is_none(), "{:?}", sim.error);
    let rs = sim.reclaim_stats();
    assert!(wakes >= 10 && sleeps >= 10, "{wakes} wake-ups, {sleeps} sleeps");
    assert_eq!(rs.kswapd_wakes, wakes);
    assert!(rs.kswapd_passes > 0 && rs.file_pages >= 4096 - 1024, "{rs:?}");
}

#[test]
fn a_fault_below_min_reclaims_directly() {
    let mut sim = reader(2);
    let w = sim.mem.nodes[0].wmark;
    // kswapd has given up (kswapd_failures): nothing wakes it.
    sim.mem.nodes[0].failures = MAX_RECLAIM_RETRIES;
    loop {
        let free = sim.mem.nodes[0].free();
        assert!(sim.step(), "no direct reclaim");
        if sim.reclaim_stats().direct_reclaims > 0 {
            // The step's one fault (a folio of 16 pages) found the node
            // unable to take it above min.
            assert!(free < w.min + 16, "a direct reclaim with {free} pages free");
            break;
        }
        assert!(free >= w.min, "{free} pages free and no direct reclaim");
    }
    let rs = sim.reclaim_stats();
    assert_eq!((rs.kswapd_wakes, rs.kswapd_passes), (0, 0));
}

#[test]
fn kswapd_sleeps_from_the_start_and_wakes_only_under_pressure() {
    let mut sim = reader(2);
    let kswapd = sim.mem.nodes[0].kswapd;
    assert_eq!(sim.scheduler.thread(kswapd).state(), State::Blocked);
    assert_eq!(sim.scheduler.thread(kswapd).mm(), MmId::KERNEL);
    // Until the reader has filled memory to low, nothing wakes it.
    while sim.mem.nodes[0].free() >= 96 {
        assert!(sim.step());
        assert!(sim.mem.nodes[0].asleep);
    }
}

//! Private file mappings (`MAP_PRIVATE`, [`Sys::MmapFile`] with `private`): a
//! read maps the page cache's page read-only, a write copies it to a page of
//! the mapping's own (`do_cow_fault`, or `wp_page_copy` over a page a read
//! mapped, which flushes the old translation), and `MADV_DONTNEED` frees the
//! copy, not the cached page.

use super::*;
use crate::preset;
use tlbkit_policy::asid::LinuxX86;

/// One step of a [`Script`], given the mapping's address.
type Step = fn(u64) -> Op;

/// Maps two pages of file 1 privately, runs its steps on them, then waits on
/// a pipe nobody writes (its CPU goes idle with them mapped).
struct Script {
    steps: Vec<Step>,
    next: usize,
    va: u64,
}

impl Program for Script {
    fn next(&mut self, ret: u64) -> Op {
        self.next += 1;
        let k = self.steps.len();
        match self.next {
            1 => Op::Sys(Sys::MmapFile { file: 1, pages: 2, write: true, private: true }),
            i if i <= k + 1 => {
                if i == 2 {
                    self.va = ret;
                }
                self.steps[i - 2](self.va)
            }
            i if i == k + 2 => Op::Sys(Sys::Pipe),
            i if i == k + 3 => Op::Sys(Sys::PipeRead(ret as u32)),
            _ => Op::Exit,
        }
    }
}

fn write0(va: u64) -> Op {
    Op::Touch { va, pages: 1, write: true }
}

fn read0(va: u64) -> Op {
    Op::Touch { va, pages: 1, write: false }
}

fn read1(va: u64) -> Op {
    Op::Touch { va: va + 4096, pages: 1, write: false }
}

fn write1(va: u64) -> Op {
    Op::Touch { va: va + 4096, pages: 1, write: true }
}

/// What a run left after writing page 0 and reading page 1, then writing
/// page 1 if `write_read` and `MADV_DONTNEED`ing page 0 if `zap`.
fn run(write_read: bool, zap: bool) -> ([Option<Pte>; 2], [Option<u64>; 2], usize, u64) {
    let mut steps: Vec<Step> = vec![write0, read1];
    if write_read {
        steps.push(write1);
    }
    if zap {
        steps.push(|va| Op::Sys(Sys::Madvise { va, pages: 1 }));
    }
    run_script(steps)
}

/// What a [`Script`] of `steps` left: each page's PTE (if present), the file's
/// cached frames, the frames in use and the invalidations issued.
fn run_script(steps: Vec<Step>) -> ([Option<Pte>; 2], [Option<u64>; 2], usize, u64) {
    let cfg = SimConfig { max_mms: 4, max_events: 10_000, ..SimConfig::quiet(preset::named("skylake"), 1, 1) };
    let mut sim = Sim::new(cfg, LinuxX86::new(1, 4, true));
    sim.spawn(Box::new(Script { steps, next: 0, va: 0 })).unwrap();
    while !sim.is_lazy(0) {
        assert!(sim.step(), "cpu0 never went idle from the process");
    }
    assert!(sim.error.is_none() && sim.oracle.violations.is_empty(), "{:?} {:?}", sim.error, sim.oracle.violations);
    let Root::Mm(mm) = sim.m.cpus[0].root else { panic!("cpu0 is lazy, so a user root is loaded") };
    let root = sim.kern.mm(mm).root();
    let vma = *sim.kern.mm(mm).vmas().iter().find(|v| v.file == Some(1)).unwrap();
    assert!(vma.cow);
    let pte = |i: u64| sim.pt.walk(root, vma.start + i * 4096).map(|w| sim.pt.pte(w.pte)).filter(|p| p.valid());
    let c = sim.m.counters;
    (
        [pte(0), pte(1)],
        [sim.page_cache_frame(1, 0), sim.page_cache_frame(1, 1)],
        sim.frames.in_use(),
        c.local_invalidations + c.broadcast_invalidations,
    )
}

#[test]
fn a_private_file_mapping_reads_the_cache_and_writes_a_copy_of_its_own() {
    let (ptes, cache, frames, flushes) = run(false, false);
    let [Some(written), Some(read)] = ptes else { panic!("both pages mapped: {ptes:?}") };
    let [Some(cached0), Some(cached1)] = cache else { panic!("both pages cached: {cache:?}") };
    // The write copied page 0: the PTE maps a page of its own, writable and dirty.
    assert!(written.pfn != cached0 && written.writable() && written.flags & P_DIRTY != 0, "{written:?}");
    // The read mapped the cached page itself, read-only.
    assert!(read.pfn == cached1 && !read.writable(), "{read:?}");
    // A write over the read copies it too, and flushes the read's translation.
    let (ptes, cache, copied, after) = run(true, false);
    let read_then_written = ptes[1].unwrap();
    assert!(read_then_written.pfn != cache[1].unwrap() && read_then_written.writable(), "{read_then_written:?}");
    assert_eq!(copied, frames + 1, "one more frame: the second copy");
    assert!(after > flushes, "the copy flushed the read-only translation");
    // MADV_DONTNEED frees the copy and keeps the cached page.
    let (ptes, cache, zapped, _) = run(false, true);
    assert!(ptes[0].is_none() && cache[0] == Some(cached0), "{ptes:?} {cache:?}");
    assert_eq!(zapped, frames - 1, "the copy is freed, the cached page stays");
}

#[test]
fn a_zapped_pte_is_none_again_so_a_neighbours_fault_around_maps_it() {
    // Both pages read (cached, mapped), both zapped: a read of page 0 maps
    // page 1 too by fault-around, as `pte_clear` left its PTE none.
    let both = |va| Op::Touch { va, pages: 2, write: false };
    let (ptes, cache, _, _) = run_script(vec![both, |va| Op::Sys(Sys::Madvise { va, pages: 2 }), read0]);
    let [Some(p0), Some(p1)] = ptes else { panic!("fault-around mapped page 1 again: {ptes:?}") };
    assert_eq!((Some(p0.pfn), Some(p1.pfn)), (cache[0], cache[1]));
    assert!(!p1.writable(), "{p1:?}");
}

//! A file server whose buffer mappings are invalidated on every CPU (origin 003).
//!
//! What the origin measured: "a basic file server workload" on a Westmere of two
//! sockets of four cores (8 CPUs) running FreeBSD, where `smp_tlb_shootdown` became about 50% faster with
//! per-CPU completion flags, and the share of IPI-handler time spent actually
//! invalidating (`invlrng_single_page`) rose from 31% to 71%. The invalidations
//! that reach every CPU in such a load are of the kernel map: the buffer cache
//! maps file pages into buffer KVA with `pmap_qenter` and unmaps them with
//! `pmap_qremove`, whose `pmap_invalidate_range(kernel_pmap, ...)` is a ranged
//! shootdown of all CPUs, since `kernel_pmap` is active everywhere (the review
//! names ZFS loads as the heavy case).
//!
//! The model: a server process with one thread per CPU (the first creates the
//! others with `clone`; each lands on an idle CPU). Each thread maps a user
//! buffer of `user_pages`, then runs `ops` requests; a request is a system call
//! that maps `pages` buffer pages into the kernel map, copies each, unmaps them
//! and invalidates the range on every CPU ([`Sys::KernelMapCycle`]), followed by
//! a little user work: reading its buffer and `user_cycles` of computation.
//!
//! Results: `us_per_op`, microseconds per request averaged over the threads
//! (each thread's time from its first request to its last, divided by `ops`);
//! `shootdown_us`, the mean latency of a shootdown from issue to done as the
//! policy reports its phases (`shootdown_cycles / shootdowns`; 0 when the policy
//! reports none, as broadcast-TLBI policies do); `invalidating_share`, the
//! fraction of IPI-handler time spent in TLB invalidation (0 without IPIs).
//! Host time grows with `cpus * ops * pages` times the sockets a broadcast
//! reaches (it visits only the TLBs that may hold its page, see
//! `crate::holders`), and memory with `cpus * ops` (the oracle keeps every
//! obligation). At `--cpus 4096` on `altra` the default `ops=2000` is practical.
//! On the project's 2-core AMD EPYC development machine (shared with other
//! work), a release build took 126 s and 1085 MiB at most with `arm64-linux`,
//! 134 s and 1091 MiB with `arm64-linux-skipbcast`, and 152 s and 1085 MiB with
//! `arm64-freebsd-asid` (`/usr/bin/time`; the guide's "Simulator speed at scale" has the commands).
//! `arm64-noasid` is not practical there: it broadcasts `TLBI VMALLE1IS` at every
//! switch, and each one empties all 4096 TLBs.

use super::{mark_sum, params, Params, WorkloadDef};
use crate::error::Error;
use crate::program::{Op, Program, Sys, KMAP_SLOT_PAGES};
use crate::sim::Sim;
use std::collections::BTreeMap;

params! {
    PARAMS;
    OPS: Count("ops", 2000, 1..=10_000_000)
        "requests per thread";
    PAGES: Count("pages", 8, 1..=KMAP_SLOT_PAGES)
        "4 KB pages a request maps into the kernel (8: a 32 KB UFS block)";
    USER_PAGES: Count("user_pages", 4, 0..=4096)
        "4 KB pages of user buffer read per request";
    USER_CYCLES: Count("user_cycles", 2000, 0..=1_000_000_000)
        "cycles of user computation per request";
}

/// The workload's registration.
pub const DEF: WorkloadDef = WorkloadDef::new(
    "fileserver",
    "file server: per-CPU threads mapping, copying and unmapping buffer pages in the kernel map, \
     invalidated on every CPU (origin 003)",
    PARAMS,
    &["us_per_op", "shootdown_us", "invalidating_share"],
    |p, _, sim, _| setup(p, sim),
    |p, main, _| result(p, main),
    |_, _, _| 8,
)
.origin("003");

/// What every server thread does.
#[derive(Clone, Copy)]
struct Request {
    ops: u64,
    pages: u64,
    user_pages: u64,
    user_cycles: u64,
}

/// One server thread; the first one also creates the others.
struct Server {
    req: Request,
    /// Threads still to create (the first thread only).
    to_clone: usize,
    step: u32,
    buf: u64,
    i: u64,
    /// The part of the current request returned last: 1, its system call; 2,
    /// its buffer read; 3, its computation, or none is under way.
    part: u8,
}

impl Server {
    fn new(req: Request, to_clone: usize) -> Self {
        Server { req, to_clone, step: 0, buf: 0, i: 0, part: 3 }
    }
}

impl Program for Server {
    fn next(&mut self, ret: u64) -> Op {
        if self.to_clone > 0 {
            self.to_clone -= 1;
            return Op::Sys(Sys::Clone(Box::new(Server::new(self.req, 0))));
        }
        let r = self.req;
        // The rest of the current request: the buffer read and the computation,
        // each where the request has one.
        while self.part < 3 {
            self.part += 1;
            match self.part {
                2 if r.user_pages > 0 => return Op::Touch { va: self.buf, pages: r.user_pages, write: false },
                3 if r.user_cycles > 0 => return Op::Compute(r.user_cycles),
                _ => {}
            }
        }
        self.step += 1;
        match self.step {
            1 if r.user_pages > 0 => return Op::Sys(Sys::Mmap { pages: r.user_pages, write: true }),
            2 if r.user_pages > 0 => {
                self.buf = ret;
                return Op::Touch { va: self.buf, pages: r.user_pages, write: true };
            }
            1 | 2 => return Op::Compute(0),
            3 => return Op::Mark("start"),
            _ => {}
        }
        if self.i == r.ops {
            self.i += 1;
            return Op::Mark("end");
        }
        if self.i > r.ops {
            return Op::Exit;
        }
        self.i += 1;
        self.part = 1;
        Op::Sys(Sys::KernelMapCycle { pages: r.pages })
    }
}

/// Starts the server: one thread per CPU.
pub fn setup(p: &Params, sim: &mut Sim) -> Result<(), Error> {
    let req =
        Request { ops: OPS.of(p), pages: PAGES.of(p), user_pages: USER_PAGES.of(p), user_cycles: USER_CYCLES.of(p) };
    sim.spawn(Box::new(Server::new(req, sim.cfg.ncpus - 1)))?;
    Ok(())
}

/// Returns `us_per_op`, `shootdown_us` and `invalidating_share`.
pub fn result(p: &Params, sim: &Sim) -> Result<BTreeMap<String, f64>, Error> {
    let (n, ends) = mark_sum(sim, "end");
    let (m, starts) = mark_sum(sim, "start");
    if n == 0 || n != m {
        return Err(super::unmeasured(DEF.name, format!("{n} of {m} server threads finished; no timing was recorded")));
    }
    let us = |cycles: f64| cycles / sim.ghz() / 1000.0;
    let h = sim.counters();
    let mut r = BTreeMap::new();
    r.insert("us_per_op".to_string(), us((ends - starts) as f64 / n as f64 / OPS.of(p) as f64));
    let shootdown = if h.shootdowns == 0 { 0.0 } else { us(h.shootdown_cycles as f64 / h.shootdowns as f64) };
    r.insert("shootdown_us".to_string(), shootdown);
    let share =
        if h.ipi_handler_cycles == 0 { 0.0 } else { h.ipi_invalidating_cycles as f64 / h.ipi_handler_cycles as f64 };
    r.insert("invalidating_share".to_string(), share);
    Ok(r)
}

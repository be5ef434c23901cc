//! An Apache-like static-file server: LATR's macrobenchmark (Kumar et al.,
//! ASPLOS 2018), the workload where every request `mmap`s the file it serves
//! and `munmap`s it after sending, so that every request is a shootdown of
//! the server process's mm.
//!
//! What one request does, from the source of Apache httpd 2.4 (branch 2.4.x)
//! with apr 1.7 and apr-util 1.6, in its stock configuration:
//! - `server/core.c` `default_handler` opens the file and puts it in a FILE
//!   bucket; `EnableMMAP` is on and `EnableSendfile` off by default
//!   (`docs/conf/httpd.conf.in`: "Defaults: EnableMMAP On, EnableSendfile Off"),
//!   so the core output filter reads the bucket, and apr-util's
//!   `file_bucket_read` turns it into an MMAP bucket: apr's `apr_mmap_create`,
//!   `mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0)` (files of 1 byte to
//!   4 MiB; larger ones in 4 MiB pieces).
//! - `writev` of the header and the mapping reads the file's pages through the
//!   mapping from the worker's context (read faults of page-cache pages).
//! - Deleting the bucket after the write (`mmap_bucket_destroy`,
//!   `apr_mmap_delete`) `munmap`s it: the PTEs go and the flush reaches every
//!   other CPU of the process's `mm_cpumask` (v4.10: lazy ones too).
//! - The event MPM's compiled defaults (`server/mpm/event/mpm_default.h`): 3
//!   child processes (`StartServers`) of 25 worker threads (`ThreadsPerChild`).
//!
//! The model: `procs` server processes of `threads` workers, and a closed-loop
//! client with `concurrency` requests outstanding (ApacheBench's `-c`), spread
//! over the processes: each process has a connection queue (a pipe) holding
//! its share; a worker takes a request from it (sleeping while it is empty),
//! maps the file, reads every page of it, does the request's other work (the
//! network stack, parsing, logging: `request_us` of computation), unmaps the
//! file, touches its request pool and puts the client's next request back in
//! the queue. The client sends `requests` requests in all, to whichever process's
//! worker takes each next. The file is the stock
//! configuration's `index.html` by default (45 bytes: one page).
//!
//! What it leaves out: the network and the client machine (their work is in
//! `request_us`, an estimate: a Haswell-class core serves small static files
//! with Apache at the order of ten to twenty thousand requests a second with
//! connection set-up, 50 to 100 us each; 50 is taken); the listener thread
//! (its hand-off is the queue); `mmap_lock` contention between a worker's
//! `mmap`/`munmap` and other workers' faults beyond what the simulated kernel
//! serialises. The LATR paper's own client, file set and core counts could not
//! be read here (only its abstract), so the defaults are httpd's.
//!
//! Results: `requests_per_s` (requests served per second after the first tenth,
//! the warm-up that fills the page cache and the TLBs) and `us_per_request`
//! (the mean service time of a request by one worker, `mmap` to the next
//! request's start excluded).

use super::{params, Params, WorkloadDef};
use crate::error::Error;
use crate::program::{Op, Program, Sys};
use crate::sim::Sim;
use std::cell::Cell;
use std::collections::BTreeMap;
use std::rc::Rc;

params! {
    PARAMS;
    PROCS: Count("procs", 3, 1..=64)
        "server processes (httpd StartServers)";
    THREADS: Count("threads", 25, 1..=256)
        "worker threads per process (httpd ThreadsPerChild)";
    CONCURRENCY: Count("concurrency", 0, 0..=65536)
        "requests outstanding (ab -c), spread over the processes (0: one per CPU)";
    FILE_PAGES: Count("file_pages", 1, 1..=1024)
        "4 KB pages of the file served (1: httpd's stock index.html)";
    REQUEST_US: Real("request_us", 50.0, 0.0..=100_000.0)
        "a request's work besides mmap, reading the file and munmap (network, parsing, logging), us";
    REQUESTS: Count("requests", 6000, 10..=10_000_000)
        "requests in all (ab -n), served by whichever process takes each";
}

/// The workload's registration.
pub const DEF: WorkloadDef = WorkloadDef::new(
    "apache_like",
    "an Apache-like static-file server (LATR's macrobenchmark): worker threads mmap, read and munmap \
     the file of every request, a closed-loop client",
    PARAMS,
    &["requests_per_s", "us_per_request"],
    |p, _, sim, _| setup(p, sim),
    |_, main, _| result(main),
    |p, _, _| max_mms(p),
);

/// Pages of a worker's request pool (apr pool, buckets, log buffer), touched
/// every request.
const POOL_PAGES: u64 = 4;

/// What every worker of every process shares: the client's requests not yet
/// started (ApacheBench's `-n` count).
struct Server {
    left: Cell<u64>,
}

/// One worker thread.
struct Worker {
    server: Rc<Server>,
    queue: u32,
    file: u32,
    pages: u64,
    work: u64,
    pool: u64,
    step: u8,
    va: u64,
}

impl Program for Worker {
    fn next(&mut self, ret: u64) -> Op {
        self.step += 1;
        match self.step {
            1 => Op::Sys(Sys::Mmap { pages: POOL_PAGES, write: true }),
            2 => {
                // The pool's address, from the mmap of step 1 (later rounds
                // come back here from step 9, with the pool kept).
                if self.pool == 0 {
                    self.pool = ret;
                }
                Op::Sys(Sys::PipeRead(self.queue))
            }
            3 => {
                let left = self.server.left.get();
                if left == 0 {
                    // The run is over: pass the request on so that the next
                    // sleeping worker wakes and sees it too, then exit.
                    self.step = 10;
                    return Op::Sys(Sys::PipeWrite(self.queue));
                }
                self.server.left.set(left - 1);
                Op::Mark("request_start")
            }
            4 => Op::Sys(Sys::MmapFile { file: self.file, pages: self.pages, write: false, private: false }),
            5 => {
                self.va = ret;
                Op::Touch { va: ret, pages: self.pages, write: false }
            }
            6 => Op::Compute(self.work),
            7 => Op::Sys(Sys::Munmap { va: self.va, pages: self.pages }),
            8 => Op::Touch { va: self.pool, pages: POOL_PAGES, write: true },
            9 => Op::Mark("request_done"),
            10 => {
                // The client's next request goes into the queue; back to it.
                self.step = 1;
                Op::Sys(Sys::PipeWrite(self.queue))
            }
            _ => Op::Exit,
        }
    }
}

/// A server process's first thread: it opens the queue, posts its share of
/// the client's requests, starts the workers and exits.
struct Main {
    server: Rc<Server>,
    threads: u64,
    conc: u64,
    file: u32,
    pages: u64,
    work: u64,
    queue: u32,
    step: u64,
}

impl Program for Main {
    fn next(&mut self, ret: u64) -> Op {
        self.step += 1;
        let s = self.step;
        if s == 1 {
            return Op::Sys(Sys::Pipe);
        }
        if s == 2 {
            self.queue = ret as u32;
        }
        if s <= 1 + self.conc {
            return Op::Sys(Sys::PipeWrite(self.queue));
        }
        if s <= 1 + self.conc + self.threads {
            let w = Worker {
                server: self.server.clone(),
                queue: self.queue,
                file: self.file,
                pages: self.pages,
                work: self.work,
                pool: 0,
                step: 0,
                va: 0,
            };
            return Op::Sys(Sys::Clone(Box::new(w)));
        }
        Op::Exit
    }
}

/// Starts the server processes.
pub fn setup(p: &Params, sim: &mut Sim) -> Result<(), Error> {
    let procs = PROCS.of(p);
    let conc = CONCURRENCY.or_cpus(p, sim.cfg.ncpus);
    let work = (REQUEST_US.of(p) * 1e3 * sim.ghz()) as u64;
    let server = Rc::new(Server { left: Cell::new(REQUESTS.of(p)) });
    for i in 0..procs {
        // The client's connections spread evenly, the first processes taking the rest.
        let share = conc / procs + u64::from(i < conc % procs);
        let m = Main {
            server: server.clone(),
            threads: THREADS.of(p),
            conc: share.max(1),
            file: 0,
            pages: FILE_PAGES.of(p),
            work,
            queue: 0,
            step: 0,
        };
        sim.spawn(Box::new(m))?;
    }
    Ok(())
}

/// Returns the address spaces the workload needs.
pub fn max_mms(p: &Params) -> usize {
    PROCS.usize(p) + 8
}

/// Returns `requests_per_s` after the warm-up and `us_per_request`.
pub fn result(sim: &Sim) -> Result<BTreeMap<String, f64>, Error> {
    let (starts, mut done) = (super::mark_times(sim, "request_start"), super::mark_times(sim, "request_done"));
    if done.len() < 10 {
        return Err(super::unmeasured(DEF.name, format!("only {} request(s) were served; raise requests", done.len())));
    }
    done.sort_unstable();
    let k = done.len() / 10;
    let window = (done[done.len() - 1] - done[k]) as f64 / sim.ghz() / 1e9;
    let mut r = BTreeMap::new();
    r.insert("requests_per_s".to_string(), (done.len() - 1 - k) as f64 / window);
    // Every request started is served (a worker finishes the one it took), so
    // the sum of the ends less the sum of the starts is the sum of the service times.
    if starts.len() != done.len() {
        return Err(super::unmeasured(DEF.name, format!("{} request(s) started, {} served", starts.len(), done.len())));
    }
    let service = (done.iter().sum::<u64>() - starts.iter().sum::<u64>()) as f64;
    r.insert("us_per_request".to_string(), service / done.len() as f64 / sim.ghz() / 1e3);
    Ok(r)
}

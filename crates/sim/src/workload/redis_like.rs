//! A redis-like in-memory store: one thread serves requests from an event
//! loop, the server forks a child to save the data set in the background every
//! so often, and the values it overwrites or deletes are freed to jemalloc and
//! reused. The workload of Ryan Roberts' arm64 `active_cpu` thread (2025): a
//! process that is multi-threaded but runs on one CPU, whose copy-on-write
//! faults after each fork flush one page of its own address space.
//!
//! Source: github.com/redis/redis at `4f8cdc2a1ea5` (October 2024): `server.c`
//! (`serverCron`, `redisFork`, `dismissMemoryInChild`, `dismissClientMemory`,
//! `dismissMemory`), `rdb.c` (`rdbSaveBackground`, `rdbSaveDb`,
//! `backgroundSaveDoneHandlerDisk`), `db.c` (`lookupKey`), `object.c`
//! (`dismissObject`), `networking.c` (the reusable query buffer, the 16 KB reply
//! buffer), `zmalloc.c` (`zmadvise_dontneed`), `config.c` (defaults), and its
//! vendored jemalloc 5.3.0 (`arena.c`, `pac.c`, `decay.c`, `tcache.c`,
//! `background_thread.c`, `smoothstep.h`).
//!
//! What the server does, and how it is modelled:
//! - **Threads.** The main thread runs the event loop. `bioInit` starts three
//!   background I/O threads (close-file, AOF fsync, lazy free) and
//!   `jemalloc-bg-thread yes` (the default) starts jemalloc's background thread:
//!   four more threads of the server's address space, started at boot, that
//!   mostly sleep. Here the bio threads sleep on a pipe each until shutdown (a
//!   string value is always freed at once, `lazyfree-lazy-server-del` is off and
//!   a string's free effort is under `LAZYFREE_THRESHOLD`); jemalloc's thread
//!   sleeps on its pipe and wakes to purge (below).
//! - **Requests**, as `redis-benchmark -c clients -n requests -r keys -d value
//!   -t set,get` sends them (its defaults: 50 clients, 100000 requests per test,
//!   3-byte values; `-t set,get` runs as many SETs as GETs): the server always has
//!   a client's next request ready, and serves them one after another, each
//!   client in turn; a request is a GET, SET or DEL of a random key
//!   (`write_pct` of them writes, `del_pct` of the writes DELs; redis-benchmark
//!   runs its SETs then its GETs, the model interleaves them). Each one:
//!   `read()` writes the command into the reusable query buffer
//!   (`thread_reusable_qb`, 20 KB: the whole value for a SET, one page
//!   otherwise); the key's dict entry and object header are read (and the
//!   object's LRU clock written, unless a child exists: `lookupKey` skips it "as
//!   this will trigger a copy on write madness"); a GET reads the value and copies
//!   it into the client's 16 KB reply buffer (`c->buf`, `PROTO_REPLY_CHUNK_BYTES`);
//!   a SET allocates a new value, writes it, updates the dict entry and frees the
//!   old value; a DEL frees the value; a write's reply (`+OK`, `:1`) goes into the
//!   first page of `c->buf`; every request writes a page of the stack and of the
//!   server's globals (its statistics). The request's own work (`epoll_wait`,
//!   `read`, `write`, parsing, the command table, the event loop) is `request_us`
//!   of computation, an estimate: redis-benchmark's documented usage and
//!   published runs of it (`-c 50`/`-c 100`, small values, no pipelining) serve
//!   of the order of 120 to 150 thousand SETs or GETs a second on one server
//!   thread, about 8 µs each; the copies of a value in and out (two per page of
//!   a value) are costed at the machine's own `page_copy`.
//! - **Memory.** Values are strings of `value_pages` pages (4: `-d 16000`, whose
//!   16 KB sds is jemalloc's 16 KiB size class, one page-aligned extent); the
//!   dict, object headers and keys take 80 bytes a key (a 32-byte dict entry, a
//!   16-byte object, a 24-byte key sds, an 8-byte bucket), packed in key order.
//!   At boot the server loads every key (as from its RDB file at startup), then
//!   serves.
//! - **jemalloc.** A freed value goes to the thread cache (`tcache_max` 32 KiB,
//!   20 slots for a large size class); the cache's most recently freed value
//!   serves the next allocation. A free into a full cache first flushes its
//!   oldest half to the arena's dirty extents. An allocation takes the cache's
//!   last, else the lowest-addressed dirty extent, else the lowest retained
//!   (purged or never used) one, whose pages fault in afresh. Dirty pages
//!   decay: `dirty_decay_ms` (10000 by default), `muzzy_decay_ms` 0, so a
//!   decayed extent is purged with `madvise(MADV_DONTNEED)` and retained. The
//!   decay is jemalloc's: 200 epochs of `decay_ms / 200`, a backlog of new dirty
//!   pages per epoch and the `smootherstep` curve (`decay.c`, `smoothstep.h`)
//!   giving how many may stay dirty; purges evict the least recently dirtied
//!   extent, merged with its dirty neighbours, until that many remain
//!   (`pac_decay_to_limit`). Purging is the background thread's
//!   (`PAC_PURGE_ALWAYS`; application threads never purge while it runs): it
//!   sleeps indefinitely while nothing is dirty, is woken by the first dirty
//!   extent, sleeps `decay_ms` while 1024 pages or fewer are dirty, sooner (the
//!   binary search of `decay_ns_until_purge`) with more, never under 100 ms, and
//!   is woken early when more than 1024 pages would be purged before its wake-up
//!   (`arena_maybe_do_deferred_work`). With redis-benchmark's SETs and GETs
//!   alone, each SET's new value takes the extent the previous SET freed (the
//!   thread cache), and nothing is ever dirty or purged: that is jemalloc's
//!   behaviour; DELs (`del_pct`) free more than is reused, and then it purges.
//! - **Saves.** `serverCron` runs `hz` times a second (10). With no child, it
//!   starts a background save (`rdbSaveBackground`) when a save point is met:
//!   at least `save_changes` writes since the last save and more than `save_ms`
//!   since it. With a child, it only checks whether the child finished
//!   (`checkChildrenDone`, a `waitpid`); when it has, the writes counted before
//!   the fork are subtracted and the save time is now. redis's built-in save
//!   points are `3600 1 300 100 60 10000` (seconds, changes). A default run (200000
//!   requests, about 1.7 s of the server's time) would never reach the shortest
//!   of them, 60 s; the simulated default is that save point shrunk 240 times,
//!   250 ms and 42 changes (10000 / 240), so that a run has three or four
//!   saves, each starting at a tick of the cron; under this load the other two
//!   never come first. `save_ms=0` is `save ""` (no saves).
//! - **The fork** (`redisFork`): `fork()` timed as `latest_fork_usec` reports it:
//!   the kernel copies the PTEs, write-protects the parent's writable anonymous
//!   pages and flushes the parent's whole address space once. Afterwards the
//!   parent's first write to each page still shared with the child is a
//!   copy-on-write fault, a copy and a `flush_tlb_page` of the server's address
//!   space (the simulated kernel's copy-on-write); a page the child has given up
//!   meanwhile is made writable in place, without a copy or a flush.
//! - **The child** (`rdbSave`, one thread): `dismissMemoryInChild` first
//!   `madvise(MADV_DONTNEED)`s every client's reply buffer (its query buffer is
//!   the reusable one, not a client's, between commands); then for every key, in
//!   dict order: the entry is read, the value read and serialised (LZF,
//!   `rdbcompression yes`) into the `rio` buffer (a page of the child's globals,
//!   written), and `dismissObject` `madvise(MADV_DONTNEED)`s the value's pages
//!   (`zmadvise_dontneed`: every string of a page or more). Serialising costs
//!   `rdb_us_per_page` a page, an estimate from LZF's speed: lz4's README
//!   (lzbench on the Silesia corpus) measures LZF 3.6 compressing at 175 MB/s
//!   on a 1.9 GHz Core i5-4300U and 365 MB/s on a 4.5 GHz Core i7-3930K, about
//!   250 MB/s at the 3 GHz of the modelled servers: 16 µs for 4 KB. The child
//!   then exits (`exit_mmap`: its whole address space torn down and flushed).
//! - The default keys (2000, a 32 MB data set) make a save last about half the
//!   time between saves (2000 values of 4 pages at 16 µs a page, 0.13 s), so that
//!   the server spends part of a run with a child and part without.
//!
//! What stays different, and what the simulated kernel lacks:
//! - **No clock.** A simulated program cannot read the time (there is no
//!   `clock_gettime`), so the server's timers (the cron's ticks, the save
//!   period, jemalloc's decay epochs and its background thread's sleeps) run on
//!   the server's own account of its time: the computation its requests were
//!   costed at (`request_us` and the copies), without the faults, TLB misses
//!   and flushes they took. Under every policy the cron runs at the same
//!   requests; only a child, which runs in simulated time, may finish after a
//!   tick under one policy and before it under another, and so move the next
//!   save by a tick. A timed wake-up of jemalloc's thread is a
//!   pipe write by the main thread at the first request past it (in Linux, the
//!   timer's interrupt wakes it); the cron's `waitpid` is a pipe read.
//! - No disk: the child's `write()`s of the RDB file are in its per-page cost,
//!   its `fflush`, `fsync` and `rename` take no time (the child would sleep in
//!   `fsync`), and the child reports nothing back over the child-info pipe.
//! - At shutdown the server waits for a running save to finish (redis kills it)
//!   and makes no final save; neither is in the measurement.
//! - jemalloc's thread-cache garbage collection (which returns cached values
//!   unused since its last pass to the arena), the random jitter of its decay
//!   deadlines and the application threads' decay ticks (every 1000 arena
//!   events; here at each flush to the arena) are not modelled; values above
//!   16 KB would have their GET replies continued in reply blocks allocated and
//!   freed per reply, which are not modelled (GETs copy at most the 16 KB of
//!   `c->buf`); values of 32 KB and more take redis's big-argument path, which
//!   is not modelled (hence at most 7 pages).
//! - The other clients of the event loop (a replica, the cluster bus), active
//!   expiry, the incremental rehash and `clientsCron` are not modelled; nor are
//!   transparent huge pages (redis disables them for itself, `disable-thp yes`).
//!
//! Results: `requests_per_s` (requests served per second, from the first to the
//! last: redis-benchmark's figure), `fork_us` (the parent's `fork()` call,
//! averaged over the saves: `latest_fork_usec`) and `saves` (the forks).

use super::{params, OpQueue, Params, WorkloadDef};
use crate::error::Error;
use crate::program::{Op, Program, Sys, DATA_VA, STACK_PAGES, STACK_VA};
use crate::sim::Sim;
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, VecDeque};
use std::rc::Rc;

mod jemalloc;
use jemalloc::Jemalloc;

params! {
    PARAMS;
    KEYS: Count("keys", 2000, 1..=1_000_000)
        "keys, all loaded at boot (redis-benchmark -r)";
    VALUE_PAGES: Count("value_pages", 4, 1..=7)
        "4 KB pages of each value's allocation (4: -d 16000, jemalloc's 16 KiB class)";
    CLIENTS: Count("clients", 50, 1..=10_000)
        "connections (redis-benchmark -c)";
    REQUESTS: Count("requests", 200_000, 1..=100_000_000)
        "requests in all (redis-benchmark -t set,get -n 100000: as many SETs as GETs)";
    WRITE_PCT: Count("write_pct", 50, 0..=100)
        "percent of requests that are writes (SET or DEL), the rest GETs";
    DEL_PCT: Count("del_pct", 0, 0..=100)
        "percent of writes that are DELs";
    REQUEST_US: Real("request_us", 8.0, 0.0..=100_000.0)
        "a request's work besides its memory and the value's copies (event loop, syscalls, parsing), us";
    RDB_US_PER_PAGE: Real("rdb_us_per_page", 16.0, 0.0..=100_000.0)
        "the child's LZF compression and write() of a 4 KB page of a value, us";
    HZ: Real("hz", 10.0, 1.0..=500.0)
        "serverCron runs a second (redis hz)";
    SAVE_MS: Real("save_ms", 250.0, 0.0..=3_600_000.0)
        "save point: fork a save when more than this many ms passed since the last (0: never)";
    SAVE_CHANGES: Count("save_changes", 42, 0..=1_000_000_000_000)
        "save point: and at least this many writes were made since";
    DECAY_MS: Real("decay_ms", 10_000.0, 1.0..=3_600_000.0)
        "jemalloc dirty_decay_ms: how long freed, dirty pages take to be purged";
}

/// The workload's registration.
pub const DEF: WorkloadDef = WorkloadDef::new(
    "redis_like",
    "a redis-like store: one thread serves GETs and SETs from 50 clients, serverCron forks a child \
     that saves every key and madvises each away, jemalloc reuses and purges freed values",
    PARAMS,
    &["requests_per_s", "fork_us", "saves"],
    |p, _, sim, _| setup(p, sim),
    |p, main, _| result(p, main),
    |p, _, _| max_mms(p),
);

/// Pages of a client's reply buffer (`PROTO_REPLY_CHUNK_BYTES`, 16 KB).
const CBUF_PAGES: u64 = 4;
/// Bytes of a key's dict entry, object header, key string and bucket.
const META_BYTES_PER_KEY: u64 = 80;
/// redis's background I/O threads (`BIO_NUM_OPS`).
const BIO_THREADS: usize = 3;
/// The background thread's shortest sleep (`BACKGROUND_THREAD_MIN_INTERVAL_NS`), ms.
const BG_MIN_INTERVAL_MS: f64 = 100.0;
/// Extents of the value arena beyond two per key: far more than are ever in use
/// at once (a value per key, one more while a SET holds the old and the new, and
/// the freed ones not yet reused or purged), so that an allocation that finds
/// nothing cached or dirty always finds a retained extent.
const EXTRA_SLOTS: u64 = 32;

/// Returns the extents of the value arena of `keys` keys.
fn arena_slots(keys: u64) -> u64 {
    2 * keys + EXTRA_SLOTS
}

/// What every thread of the server (and its children) shares.
struct Shared {
    /// The server's time, cycles: what its requests were costed at.
    clock: Cell<u64>,
    jm: RefCell<Jemalloc>,
    /// The value arena's address.
    arena: Cell<u64>,
    shutdown: Cell<bool>,
    /// Whether the running save's child has finished.
    child_done: Cell<bool>,
}

impl Shared {
    fn value_va(&self, slot: u32) -> u64 {
        self.arena.get() + slot as u64 * self.jm.borrow().pages * 4096
    }
}

/// The run's parameters, in pages and cycles.
#[derive(Clone, Copy)]
struct Cfg {
    keys: u64,
    pages: u64,
    clients: u64,
    requests: u64,
    write_pct: u64,
    del_pct: u64,
    request: u64,
    page_copy: u64,
    rdb_per_page: u64,
    cron: u64,
    save: u64,
    save_changes: u64,
    seed: u64,
}

/// Where the server's memory is.
#[derive(Clone, Copy, Default)]
struct Layout {
    meta: u64,
    cbuf: u64,
    qb: u64,
}

impl Layout {
    fn meta_va(&self, key: u64) -> u64 {
        self.meta + key * META_BYTES_PER_KEY / 4096 * 4096
    }
    fn cbuf_va(&self, client: u64) -> u64 {
        self.cbuf + client * CBUF_PAGES * 4096
    }
}

/// Pages of the dict and object headers of `keys` keys.
fn meta_pages(keys: u64) -> u64 {
    (keys * META_BYTES_PER_KEY).div_ceil(4096)
}

/// A top stack page and a page of globals, written every request (and by the child per key).
const STACK_TOP: u64 = STACK_VA + (STACK_PAGES - 1) * 4096;

/// The main thread: boot, the event loop and the cron, shutdown.
struct Main {
    sh: Rc<Shared>,
    cfg: Cfg,
    boot: u32,
    /// The bio threads' pipes, jemalloc's thread's pipe and the child's.
    pipes: [u32; BIO_THREADS + 2],
    lay: Layout,
    queue: OpQueue,
    rng: u64,
    served: u64,
    /// Each key's extent, if it exists.
    keyspace: Vec<Option<u32>>,
    dirty: u64,
    dirty_before: u64,
    lastsave: u64,
    next_cron: u64,
    child: bool,
    finished: bool,
}

impl Main {
    fn bg_pipe(&self) -> u32 {
        self.pipes[BIO_THREADS]
    }
    fn done_pipe(&self) -> u32 {
        self.pipes[BIO_THREADS + 1]
    }

    /// splitmix64: the benchmark's random keys and commands.
    fn random(&mut self) -> u64 {
        self.rng = self.rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn boot(&mut self, ret: u64) -> Op {
        self.boot += 1;
        let c = self.cfg;
        let n = self.pipes.len() as u32;
        match self.boot {
            // The pipes.
            b if b <= n => {
                if b > 1 {
                    self.pipes[b as usize - 2] = ret as u32;
                }
                Op::Sys(Sys::Pipe)
            }
            // bioInit's threads, then jemalloc's.
            b if b <= n + BIO_THREADS as u32 => {
                if b == n + 1 {
                    self.pipes[n as usize - 1] = ret as u32;
                }
                let bio = Sleeper { sh: self.sh.clone(), pipe: self.pipes[(b - n - 1) as usize], started: false };
                Op::Sys(Sys::Clone(Box::new(bio)))
            }
            b if b == n + BIO_THREADS as u32 + 1 => {
                let bg = Background {
                    sh: self.sh.clone(),
                    pipe: self.bg_pipe(),
                    state: BgState::Start,
                    runs: VecDeque::new(),
                };
                Op::Sys(Sys::Clone(Box::new(bg)))
            }
            // The dict, the value arena, the clients' reply buffers, the query buffer.
            b if b == n + 5 => Op::Sys(Sys::Mmap { pages: meta_pages(c.keys), write: true }),
            b if b == n + 6 => {
                self.lay.meta = ret;
                Op::Sys(Sys::Mmap { pages: arena_slots(c.keys) * c.pages, write: true })
            }
            b if b == n + 7 => {
                self.sh.arena.set(ret);
                Op::Sys(Sys::Mmap { pages: c.clients * CBUF_PAGES, write: true })
            }
            b if b == n + 8 => {
                self.lay.cbuf = ret;
                Op::Sys(Sys::Mmap { pages: c.pages + 1, write: true })
            }
            // rdbLoad: every key's entry and value.
            b if b == n + 9 => {
                self.lay.qb = ret;
                Op::Touch { va: self.lay.meta, pages: meta_pages(c.keys), write: true }
            }
            b if b == n + 10 => Op::Touch { va: self.sh.arena.get(), pages: c.keys * c.pages, write: true },
            _ => {
                self.boot = u32::MAX;
                Op::Mark("serve_start")
            }
        }
    }

    /// serverCron: reap a finished save, or start one when the save point is met.
    fn cron(&mut self) {
        let now = self.sh.clock.get();
        if self.child {
            if self.sh.child_done.get() {
                self.sh.child_done.set(false);
                self.child = false;
                self.dirty -= self.dirty_before;
                self.lastsave = now;
                self.queue.push(Op::Sys(Sys::PipeRead(self.done_pipe())));
            }
        } else if self.cfg.save > 0 && self.dirty >= self.cfg.save_changes && now - self.lastsave > self.cfg.save {
            self.dirty_before = self.dirty;
            self.child = true;
            let values: Vec<(u64, u64)> = (0..self.cfg.keys)
                .filter_map(|k| self.keyspace[k as usize].map(|s| (self.lay.meta_va(k), self.sh.value_va(s))))
                .collect();
            let child = Child {
                sh: self.sh.clone(),
                cfg: self.cfg,
                lay: self.lay,
                done: self.done_pipe(),
                values,
                next: 0,
                part: 0,
                end: 0,
            };
            self.queue.push(Op::Mark("fork_start"));
            self.queue.push(Op::Sys(Sys::Fork(Box::new(child))));
            self.queue.push(Op::Mark("fork_end"));
        }
    }

    /// Queues one request's operations.
    fn request(&mut self) {
        let c = self.cfg;
        let client = self.served % c.clients;
        self.served += 1;
        let (r, k) = (self.random(), self.random() % c.keys);
        let write = r % 100 < c.write_pct;
        let del = write && (r / 100) % 100 < c.del_pct;
        let old = self.keyspace[k as usize];
        let (meta, cbuf, pages) = (self.lay.meta_va(k), self.lay.cbuf_va(client), c.pages);
        let q = &mut self.queue;
        let mut copies = 0;
        // read(): the command into the query buffer.
        q.push(Op::Touch { va: self.lay.qb, pages: if write && !del { pages } else { 1 }, write: true });
        if !write {
            // lookupKey updates the LRU clock only while no child exists.
            q.push(Op::Touch { va: meta, pages: 1, write: !self.child });
            match old {
                Some(s) => {
                    q.push(Op::Touch { va: self.sh.value_va(s), pages, write: false });
                    q.push(Op::Touch { va: cbuf, pages: pages.min(CBUF_PAGES), write: true });
                    copies = 2 * pages;
                }
                None => q.push(Op::Touch { va: cbuf, pages: 1, write: true }),
            }
        } else if !del {
            // createStringObject, then dbSetValue / dbAdd, then the old value's free.
            let s = self.sh.jm.borrow_mut().alloc();
            q.push(Op::Touch { va: self.sh.value_va(s), pages, write: true });
            q.push(Op::Touch { va: meta, pages: 1, write: true });
            if let Some(o) = old {
                self.sh.jm.borrow_mut().free(o, self.sh.clock.get());
            }
            self.keyspace[k as usize] = Some(s);
            q.push(Op::Touch { va: cbuf, pages: 1, write: true });
            self.dirty += 1;
            copies = 2 * pages;
        } else {
            q.push(Op::Touch { va: meta, pages: 1, write: true });
            if let Some(o) = old {
                self.sh.jm.borrow_mut().free(o, self.sh.clock.get());
                self.keyspace[k as usize] = None;
                self.dirty += 1;
            }
            q.push(Op::Touch { va: cbuf, pages: 1, write: true });
        }
        q.push(Op::Touch { va: STACK_TOP, pages: 1, write: true });
        q.push(Op::Touch { va: DATA_VA, pages: 1, write: true });
        let work = c.request + copies * c.page_copy;
        q.push(Op::Compute(work));
        self.sh.clock.set(self.sh.clock.get() + work);
    }

    /// Queues the next operations of the event loop (or of shutdown).
    fn plan(&mut self) {
        if self.served == self.cfg.requests {
            self.finished = true;
            self.queue.push(Op::Mark("serve_end"));
            if self.child {
                // Shutdown waits for the running save (redis would kill it).
                self.queue.push(Op::Sys(Sys::PipeRead(self.done_pipe())));
            }
            self.sh.shutdown.set(true);
            for &p in &self.pipes[..=BIO_THREADS] {
                self.queue.push(Op::Sys(Sys::PipeWrite(p)));
            }
            self.queue.push(Op::Exit);
            return;
        }
        let now = self.sh.clock.get();
        if now >= self.next_cron {
            self.next_cron = (now / self.cfg.cron + 1) * self.cfg.cron;
            self.cron();
        }
        self.request();
        if self.sh.jm.borrow_mut().bg_due(self.sh.clock.get()) {
            self.queue.push(Op::Sys(Sys::PipeWrite(self.bg_pipe())));
        }
    }
}

impl Program for Main {
    fn next(&mut self, ret: u64) -> Op {
        if self.boot != u32::MAX {
            return self.boot(ret);
        }
        if self.queue.is_empty() && !self.finished {
            self.plan();
        }
        self.queue.pop().unwrap_or(Op::Exit)
    }
}

/// A bio thread: sleeps on its job pipe until shutdown.
struct Sleeper {
    sh: Rc<Shared>,
    pipe: u32,
    started: bool,
}

impl Program for Sleeper {
    fn next(&mut self, _: u64) -> Op {
        if self.started && self.sh.shutdown.get() {
            return Op::Exit;
        }
        self.started = true;
        Op::Sys(Sys::PipeRead(self.pipe))
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum BgState {
    Start,
    Asleep,
    Purging((u32, u32)),
}

/// jemalloc's background thread.
struct Background {
    sh: Rc<Shared>,
    pipe: u32,
    state: BgState,
    runs: VecDeque<(u32, u32)>,
}

impl Program for Background {
    fn next(&mut self, _: u64) -> Op {
        match self.state {
            BgState::Asleep => {
                if self.sh.shutdown.get() {
                    return Op::Exit;
                }
                let now = self.sh.clock.get();
                self.runs = self.sh.jm.borrow_mut().bg_work(now).into();
            }
            BgState::Purging(run) => self.sh.jm.borrow_mut().purged(run),
            BgState::Start => {}
        }
        if let Some(run) = self.runs.pop_front() {
            self.state = BgState::Purging(run);
            let pages = self.sh.jm.borrow().pages;
            return Op::Sys(Sys::Madvise { va: self.sh.value_va(run.0), pages: run.1 as u64 * pages });
        }
        self.state = BgState::Asleep;
        self.sh.jm.borrow_mut().bg_asleep = true;
        Op::Sys(Sys::PipeRead(self.pipe))
    }
}

/// The save's child: `rdbSave` of the keys as they were at the fork.
struct Child {
    sh: Rc<Shared>,
    cfg: Cfg,
    lay: Layout,
    done: u32,
    /// Each saved key's entry and value.
    values: Vec<(u64, u64)>,
    /// Clients dismissed, then keys saved.
    next: u64,
    part: u8,
    end: u8,
}

impl Program for Child {
    fn next(&mut self, _: u64) -> Op {
        let c = self.cfg;
        // dismissMemoryInChild: every client's reply buffer.
        if self.next < c.clients {
            self.next += 1;
            return Op::Sys(Sys::Madvise { va: self.lay.cbuf_va(self.next - 1), pages: CBUF_PAGES });
        }
        let i = (self.next - c.clients) as usize;
        if let Some(&(meta, value)) = self.values.get(i) {
            self.part += 1;
            return match self.part {
                1 => Op::Touch { va: meta, pages: 1, write: false },
                2 => Op::Touch { va: value, pages: c.pages, write: false },
                3 => Op::Compute(c.rdb_per_page * c.pages),
                4 => Op::Touch { va: DATA_VA, pages: 1, write: true },
                _ => {
                    // dismissObject.
                    self.part = 0;
                    self.next += 1;
                    Op::Sys(Sys::Madvise { va: value, pages: c.pages })
                }
            };
        }
        self.end += 1;
        match self.end {
            1 => Op::Sys(Sys::PipeWrite(self.done)),
            2 => {
                self.sh.child_done.set(true);
                Op::Mark("child_exit")
            }
            _ => Op::Exit,
        }
    }
}

/// Boots the server.
pub fn setup(p: &Params, sim: &mut Sim) -> Result<(), Error> {
    let ghz = sim.ghz();
    let cycles = |us: f64| (us * 1e3 * ghz) as u64;
    let cfg = Cfg {
        keys: KEYS.of(p),
        pages: VALUE_PAGES.of(p),
        clients: CLIENTS.of(p),
        requests: REQUESTS.of(p),
        write_pct: WRITE_PCT.of(p),
        del_pct: DEL_PCT.of(p),
        request: cycles(REQUEST_US.of(p)),
        page_copy: sim.cfg.preset.costs.kernel.page_copy,
        rdb_per_page: cycles(RDB_US_PER_PAGE.of(p)),
        cron: cycles(1e6 / HZ.of(p)).max(1),
        save: cycles(SAVE_MS.of(p) * 1e3),
        save_changes: SAVE_CHANGES.of(p),
        seed: sim.cfg.seed,
    };
    let jm = Jemalloc::new(
        cfg.pages,
        cfg.keys,
        arena_slots(cfg.keys),
        cycles(DECAY_MS.of(p) * 1e3),
        cycles(BG_MIN_INTERVAL_MS * 1e3),
    );
    let sh = Rc::new(Shared {
        clock: Cell::new(0),
        jm: RefCell::new(jm),
        arena: Cell::new(0),
        shutdown: Cell::new(false),
        child_done: Cell::new(false),
    });
    let main = Main {
        sh,
        cfg,
        boot: 0,
        pipes: [0; BIO_THREADS + 2],
        lay: Layout::default(),
        queue: OpQueue::default(),
        rng: cfg.seed,
        served: 0,
        keyspace: (0..cfg.keys as u32).map(Some).collect(),
        dirty: 0,
        dirty_before: 0,
        lastsave: 0,
        next_cron: cfg.cron,
        child: false,
        finished: false,
    };
    sim.spawn(Box::new(main))?;
    Ok(())
}

/// Returns the address spaces the run needs: the server and one child at a time.
pub fn max_mms(_: &Params) -> usize {
    10
}

/// Returns `requests_per_s`, `fork_us` and `saves`.
pub fn result(p: &Params, sim: &Sim) -> Result<BTreeMap<String, f64>, Error> {
    let (start, end) = (super::mark_times(sim, "serve_start"), super::mark_times(sim, "serve_end"));
    let (Some(&start), Some(&end)) = (start.first(), end.first()) else {
        return Err(super::unmeasured(DEF.name, "the server did not serve its requests"));
    };
    let (fs, fe) = (super::mark_times(sim, "fork_start"), super::mark_times(sim, "fork_end"));
    if fs.len() != fe.len() {
        return Err(super::unmeasured(DEF.name, format!("{} fork(s) started, {} returned", fs.len(), fe.len())));
    }
    let g = sim.ghz();
    let mut r = BTreeMap::new();
    r.insert("requests_per_s".to_string(), REQUESTS.of(p) as f64 / ((end - start) as f64 / g / 1e9));
    let fork: u64 = fe.iter().zip(&fs).map(|(e, s)| e - s).sum();
    r.insert("fork_us".to_string(), if fs.is_empty() { 0.0 } else { fork as f64 / fs.len() as f64 / g / 1e3 });
    r.insert("saves".to_string(), fs.len() as f64);
    Ok(r)
}

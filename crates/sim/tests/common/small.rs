//! The strict matrix's small parameters of every workload, shared by
//! `strict_matrix.rs` (which runs them under every policy) and `stress.rs`
//! (which shows that none of the origins' workloads among them catches a range
//! flush that stays on the calling CPU, while `stress` does).

/// Each workload with small parameters, and what they are chosen to reach.
pub const SMALL: &[(&str, &[&str])] = &[
    // 300 processes alive at once: more than 8-bit ASIDs hold (every arm64 ASID
    // policy rolls over) and than x86 Linux's 6 PCID slots; 300 exits at the end.
    ("lat_ctx", &["procs=300", "rounds=3", "size_kb=4"]),
    // Two address spaces waking each other, with pages that survive the switch
    // only where the tag keeps them.
    ("pingpong", &["pages=16", "rounds=200"]),
    // mprotect down and up of a written buffer, flushed each time, in a process
    // whose second thread sleeps; 40 pages is past x86 Linux's 33-page ceiling,
    // so its flushes are whole-PCID ones.
    ("mprotect_threaded", &["iters=40", "pages=40"]),
    // madvise(DONTNEED) zaps and faults of fresh zero pages, one copy per CPU.
    ("tcmalloc_frag", &["allocs=80", "touch_pages=3"]),
    // 320 fork + exec + exit of short sorts: Linux's never-freed 8-bit ASIDs roll
    // over; copy-on-write faults and teardown flushes of a process that migrates.
    ("sort_compute", &["loops=64", "runs=5", "heap_pages=4", "compute_us=5"]),
    // Kernel-map invalidations that reach every CPU: broadcasts on arm64, IPI
    // shootdowns with each completion protocol on x86.
    ("fileserver", &["ops=16", "pages=4", "user_pages=2"]),
    // fork, execve, heap growth, munmap of the heap and exit in more slots than
    // the largest machine has CPUs.
    (
        "buildkernel",
        &[
            "jobs=40",
            "units=3",
            "compute_ms=1",
            "slices=4",
            "text_pages=64",
            "text_ws=16",
            "heap_pages=64",
            "heap_ws=32",
        ],
    ),
    // make forking two compilers per CPU that execve, write a heap and a shared
    // file mapping, and exit: exit teardowns while other CPUs still run.
    ("exit_teardown", &["jobs=2", "heap_pages=64", "file_pages=32", "dirty_pages=16", "compute_us=20"]),
    // A traced program: two threads that map, unmap, protect and advise while
    // waiting for each other, and a forked child.
    ("trace", &[concat!("file=", env!("CARGO_MANIFEST_DIR"), "/tests/data/tiny.trace")]),
    // Threads of two processes on every CPU racing munmap, MAP_FIXED, mprotect,
    // madvise, fork and exit over shared pages: range, page, mm and kernel flushes
    // while other CPUs run the mm (its defaults; tests/stress.rs shows it catches
    // a range flush that stays local, which no other workload here does).
    ("stress", &[]),
    // One bound thread per CPU writing, madvising (a one-page flush of every
    // CPU running the mm) and reading pages, then unmapping them all.
    ("will_it_scale_tlb_flush2", &["laps=1", "pages=16"]),
    // Groups of processes passing messages through bounded pipes: switches
    // between many address spaces, senders blocking on full pipes.
    ("hackbench", &["groups=2", "fds=4", "loops=10", "pipe_msgs=8"]),
    // Threads on every core writing a mapping's pages, one thread unmapping it.
    ("munmap_latency", &["pages=4", "iters=5"]),
    // Two server processes whose workers mmap, read and munmap a two-page file
    // per request on many CPUs: a shootdown (LATR: a saved state) per request.
    ("apache_like", &["procs=2", "threads=4", "requests=80", "file_pages=2"]),
    // A process per CPU mapping a shared file, faulting two pages of it and
    // unmapping it, each its own address space.
    ("lat_mmap", &["size_kb=320", "procs=0", "iters=3"]),
    // Two instances, each with 2 to 8 forked children mprotecting (one page, then
    // all) and madvising shared file pages that every process of the instance
    // maps: flushes of many address spaces sharing frames.
    ("stress_ng_tlb_shootdown", &["workers=2", "ops=20", "pages=16"]),
    // One process paging out 1 MB it wrote, twice: reclaim's deferred flushes,
    // completed before the frames are freed, under every policy.
    ("madvise_bench", &["size_mb=1", "iters=2"]),
    // One server thread (and four sleeping ones) with a child forked every 30
    // ms of its 300 ms (10 saves) that dismisses every value; DELs overflow
    // jemalloc's cache and its background thread purges: COW faults, madvises
    // in both address spaces, the children's exits.
    (
        "redis_like",
        &[
            "keys=64",
            "value_pages=2",
            "clients=3",
            "requests=300",
            "request_us=1000",
            "del_pct=90",
            "hz=100",
            "save_ms=15",
            "save_changes=1",
            "decay_ms=20",
        ],
    ),
    // One process forking a child that exits at once, waking it only after its
    // teardown, four times: forks' write-protect flushes, exits' flushes.
    ("lat_proc", &["iters=3"]),
    // A thread per CPU keeping one process's address space live while its main
    // thread protects 65 pages read-only and back: range flushes (by range
    // operations with tlbi_range=on) of an mm running everywhere.
    ("flush_range", &["pages=65", "iters=2"]),
    // A kernel module's direct range flushes of 65 mapped pages, no PTE
    // changed: past x86 Linux's 33-page ceiling (a full flush), and on arm64
    // 65 TLBIs, or a range operation and one TLBI with tlbi_range=on.
    ("flush_call", &["pages=65", "calls=2"]),
    // calibrate's shootdown: a thread on CPU 1 reading a page that the one on
    // CPU 0 makes read-only and writable again (a remote flush each time).
    ("microbench", &["bench=8", "ops=20"]),
    // One thread per CPU writing 1.5 MB in all past a 1 MB limit: 128 pages
    // reclaimed by the faults, 32 at a time, each folio's batch flush sent to
    // the CPUs of the other threads.
    ("swap_w_seq_mt", &["mem_mb=1", "swap_mb=1"]),
    // One bound thread per CPU writing, madvising and reading pages of a
    // private mapping, unmapping it every 8 pages: tlb_flush2's loop.
    ("will_it_scale_tlb_flush1", &["iters=16", "pages=8"]),
    // One forked process per CPU, bound, doing the same to a shared mapping of
    // its own file: dirty file PTEs zapped, no flush reaching another CPU.
    ("will_it_scale_tlb_flush3", &["mode=1", "iters=16", "pages=8"]),
    // A forked process per CPU and its forked partner on the same CPU passing
    // a byte through pipes: a switch between address spaces at every turn.
    ("will_it_scale_context_switch1", &["mode=1", "laps=10"]),
    // One worker accessing 1 MB at random while a migrator moves it to a
    // memory-only node and back: each page unmapped, flushed (per page or per
    // batch, as the kernel does), copied and mapped again under accesses.
    ("pmbench_migrate", &["mapsize_mb=1", "setsize_mb=1", "passes=2", "cpuless_node=1"]),
    // 256 KB written, read by three other threads and paged out, twice:
    // reclaim's deferred flushes reaching running readers.
    ("swap_pageout", &["size_kb=256", "iters=2"]),
    // One thread per CPU writing its share of 1 MB of one mapping: a fault a
    // page, under mmap_lock or the VMA's lock by the kernel.
    ("pft", &["mem_mb=1"]),
    // One thread per CPU zapping and refaulting a page of its own: a one-page
    // flush of every CPU running the mm per iteration.
    ("madvise_dontneed_loop", &["iters=5"]),
    // A process per CPU reading a file of its own, 2 MB in all, past a 1 MB
    // limit on the page cache: mapped file folios reclaimed through the rmap,
    // one batch flush per pass to the readers' CPUs.
    ("lru_file_mmap_read", &["mem_mb=1", "file_mb=2"]),
];

use super::entry::F_SIZE;
use super::lazy::ParkedReads;
use super::runs::{RUNS, RUN_MAX};
use super::summary::{asid_count_bucket, ASID_COUNT_BUCKETS};
use super::*;

fn entry(va: u64, asid: u16, flags: u8) -> TlbEntry {
    let mut e = TlbEntry { pfn: 7, asid, flags, ..Default::default() };
    e.tag = va >> e.shift();
    e
}

#[test]
fn asid_tags_separate_address_spaces_and_global_matches_all() {
    let mut t = Tlb::new(4, 16, 4, 4);
    t.fill(entry(0x1000, 3, 0), false);
    assert!(t.lookup(0x1000, 3).is_some());
    assert!(t.lookup(0x1000, 4).is_none());
    t.fill(entry(0x5000, 3, F_GLOBAL), false);
    assert!(t.lookup(0x5000, 9).is_some());
}

#[test]
fn huge_entry_covers_its_block() {
    let mut t = Tlb::new(4, 16, 4, 4);
    t.fill(entry(0x20_0000, 1, F_HUGE), false);
    assert!(t.lookup(0x3f_f000, 1).is_some());
    assert!(t.lookup(0x40_0000, 1).is_none());
}

#[test]
fn invalidate_by_asid_keeps_globals_and_other_asids() {
    let mut t = Tlb::new(4, 16, 4, 4);
    t.fill(entry(0x1000, 1, 0), false);
    t.fill(entry(0x2000, 2, 0), false);
    t.fill(entry(0x3000, 1, F_GLOBAL), false);
    // Each fill lands in the L1 and the L2.
    assert_eq!(t.invalidate(Inval::Asid(1)), 2);
    assert!(t.lookup(0x1000, 1).is_none());
    assert!(t.lookup(0x2000, 2).is_some());
    assert!(t.lookup(0x3000, 1).is_some());
}

#[test]
fn invalidate_by_va_finds_page_and_block_entries_in_their_sets() {
    let mut t = Tlb::new(1, 64, 4, 4);
    // A 2 MB block, two 4 KB pages (one inside the block's range), all in the L2.
    t.fill(entry(0x4020_0000, 1, F_HUGE), true);
    t.fill(entry(0x4020_3000, 1, 0), true);
    t.fill(entry(0x4020_4000, 1, 0), true);
    assert_eq!(t.invalidate(Inval::VaAll { va: 0x4020_3000 }), 2);
    assert!(t.lookup(0x4020_3000, 1).is_none());
    assert!(t.lookup(0x4020_4000, 1).is_some());
    assert_eq!(t.invalidate(Inval::Va { asid: 1, va: 0x4020_4000 }), 2, "the L2 entry and its L1 copy");
}

#[test]
fn asid_filter_skips_only_what_cannot_be_held() {
    let mut t = Tlb::new(4, 16, 4, 4);
    t.fill(entry(0x1000, 1, 0), false);
    t.pwc_fill(0x1000, 1, false, TableRef::default(), 0);
    // ASID 7 was never filled; 4097 shares ASID 1's filter bit but not its entries.
    assert_eq!(t.invalidate(Inval::Asid(7)), 0);
    assert_eq!(t.invalidate(Inval::Asid(4097)), 0);
    assert!(t.lookup(0x1000, 1).is_some());
    assert!(t.pwc_lookup(0x1000, 1, false));
    assert_eq!(t.invalidate(Inval::Va { asid: 1, va: 0x1000 }), 2);
    assert!(!t.pwc_lookup(0x1000, 1, false));
    t.fill(entry(0x2000, 2, 0), false);
    assert_eq!(t.invalidate(Inval::All), 2);
    assert!(!t.may_hold(2));
}

/// Recounts valid entries per block bucket from scratch.
fn recount(t: &Tlb) -> Vec<u16> {
    let mut c = vec![0; BLOCK_BUCKETS];
    t.clone().for_each(|e| c[block_bucket(e.block())] += 1);
    for p in t.pwc.entries.iter().filter(|p| p.valid) {
        c[block_bucket(p.key)] += 1;
    }
    c
}

#[test]
fn block_counts_follow_fills_evictions_and_invalidations() {
    // A small TLB, so that fills evict from every level.
    let mut t = Tlb::new(2, 8, 2, 2);
    let vas = [0x1000, 0x2000, 0x20_3000, 0x40_0000, 0x4000_0000, 0x7fff_0000_1000];
    for (i, &va) in vas.iter().enumerate() {
        let flags = if i == 3 {
            F_HUGE
        } else if i == 4 {
            F_GLOBAL
        } else {
            0
        };
        t.fill(entry(va, (i % 2) as u16, flags), i == 2);
        t.pwc_fill(va, (i % 2) as u16, flags & F_GLOBAL != 0, TableRef::default(), 0);
        let _ = t.lookup(vas[0], 0);
        assert_eq!(t.summary.blocks.to_vec(), recount(&t), "after filling {va:#x}");
    }
    assert!(t.may_hold_block(0x7fff_0000_1000) && !t.may_hold_block(0x6000_0000_0000));
    for op in [Inval::Va { asid: 1, va: 0x2000 }, Inval::VaAll { va: 0x4000_0000 }, Inval::Asid(0), Inval::All] {
        t.invalidate(op);
        assert_eq!(t.summary.blocks.to_vec(), recount(&t), "after {op:?}");
    }
    assert!(!t.may_hold_block(0x7fff_0000_1000));
}

/// The exact per-ASID counts, recounted from every level's valid entries.
fn recount_asids(t: &Tlb) -> Vec<u16> {
    let mut c = vec![0; ASID_COUNT_BUCKETS];
    t.clone().for_each(|e| {
        if !e.global() {
            c[asid_count_bucket(e.asid as u32)] += 1;
        }
    });
    for p in t.pwc.entries.iter().filter(|p| p.valid && !p.global) {
        c[asid_count_bucket(p.asid as u32)] += 1;
    }
    c
}

#[test]
fn asid_counts_are_exact_and_an_uncounted_asid_is_not_scanned() {
    // A small TLB, so that fills evict from every level; ASIDs 0, 1 and
    // 1 + ASID_COUNT_BUCKETS (which shares ASID 1's bucket).
    let mut t = Tlb::new(2, 8, 2, 2);
    let asids = [0u16, 1, (1 + ASID_COUNT_BUCKETS) as u16];
    for i in 0..24u64 {
        let asid = asids[(i % 3) as usize];
        let flags = match i % 5 {
            3 => F_HUGE,
            4 => F_GLOBAL,
            _ => 0,
        };
        let va = 0x1000 * (i + 1) + ((i % 4) << 21);
        t.fill(entry(va, asid, flags), i % 7 == 2);
        t.pwc_fill(va, asid, flags & F_GLOBAL != 0, TableRef::default(), 0);
        let _ = t.lookup(0x1000, 0);
        assert_eq!(t.summary.asid_counts.to_vec(), recount_asids(&t), "after fill {i}");
    }
    let ops = [
        Inval::Va { asid: 1, va: 0x2000 },
        Inval::VaAll { va: 0x5000 },
        Inval::Asid(1),
        Inval::Asid(1),
        Inval::AllNonGlobal,
        Inval::Asid(0),
        Inval::All,
    ];
    for op in ops {
        let held = recount_asids(&t);
        let n = t.invalidate(op);
        assert_eq!(t.summary.asid_counts.to_vec(), recount_asids(&t), "after {op:?}");
        if let Inval::Asid(a) = op {
            // Nothing of `a` is left, and its bucket kept only the other ASID's.
            let mut left = 0;
            t.for_each(|e| left += (!e.global() && e.asid == a) as usize);
            assert_eq!(left, 0, "{op:?}");
            let b = asid_count_bucket(a as u32);
            assert!(n as u16 <= held[b]);
        }
    }
    assert!(t.summary.asid_counts.iter().all(|&c| c == 0));
    // With the counts at zero, an invalidation by ASID removes nothing.
    assert_eq!(t.invalidate(Inval::Asid(0)), 0);
}

#[test]
fn a_64k_entry_covers_its_block_and_any_page_invalidation_removes_it() {
    let mut t = Tlb::new(4, 64, 4, 4);
    assert!(!t.may_hold_cont());
    t.fill(entry(0x4001_0000, 1, F_CONT), true);
    assert!(t.may_hold_cont());
    assert!(t.lookup(0x4001_f000, 1).is_some(), "the block's last page, through the L2");
    assert!(t.lookup(0x4002_0000, 1).is_none());
    assert!(t.lookup(0x4001_3000, 2).is_none(), "another ASID");
    assert_eq!(t.cont_entries(0x4001_5000, 1).count(), 2, "the L2 entry and its L1 copy");
    assert_eq!(t.invalidate(Inval::Va { asid: 1, va: 0x4001_9000 }), 2);
    assert!(t.lookup(0x4001_0000, 1).is_none());
    t.fill(entry(0x4001_0000, 1, F_CONT), false);
    assert_eq!(t.invalidate(Inval::Asid(1)), 2);
    t.fill(entry(0x4001_0000, 1, F_CONT), false);
    assert_eq!(t.summary.blocks.to_vec(), recount(&t));
    assert_eq!(t.invalidate(Inval::All), 2);
    assert!(!t.may_hold_cont());
}

#[test]
fn a_64k_entry_and_a_4k_entry_of_one_page_overlap() {
    let mut t = Tlb::new(4, 64, 4, 4);
    let small = entry(0x4001_3000, 1, 0);
    let big = entry(0x4001_0000, 1, F_CONT);
    assert!(t.overlap(&big).is_none());
    t.fill(small, true);
    assert_eq!(t.overlap(&big).map(|e| e.tag), Some(small.tag), "a 4 KB entry inside, in the L2");
    t.fill(big, false);
    assert_eq!(t.overlap(&small).map(|e| e.tag), Some(big.tag));
    assert!(t.overlap(&entry(0x4002_0000, 1, 0)).is_none());
    assert!(t.overlap(&entry(0x4001_4000, 2, 0)).is_none(), "another ASID");
}

#[test]
fn the_dirty_state_of_a_64k_entry_is_recorded_in_every_copy() {
    let mut t = Tlb::new(4, 64, 4, 4);
    t.fill(entry(0x4001_0000, 1, F_CONT | F_WRITE), false);
    assert!(t.cont_entries(0x4001_0000, 1).all(|e| e.flags & F_DIRTY == 0));
    t.set_cont_dirty(0x4001_8000, 1);
    assert!(t.cont_entries(0x4001_0000, 1).all(|e| e.flags & F_DIRTY != 0));
}

#[test]
fn a_walk_cache_fill_takes_the_first_empty_slot_else_the_least_recently_used() {
    let mut t = Tlb::new(4, 8, 2, 4);
    let block = |i: u64| i << SHIFT_2M;
    for i in 0..4 {
        t.pwc_fill(block(i), 1, false, TableRef::default(), 0);
    }
    assert!(t.pwc_lookup(block(0), 1, false), "block 0 is now the most recently used");
    t.invalidate(Inval::Va { asid: 1, va: block(2) });
    assert!(!t.pwc_lookup(block(2), 1, false));
    t.pwc_fill(block(4), 1, false, TableRef::default(), 0);
    let held = |t: &mut Tlb| (0..6).filter(|&i| t.pwc_lookup(block(i), 1, false)).collect::<Vec<_>>();
    assert_eq!(held(&mut t), vec![0, 1, 3, 4], "the empty slot is refilled before anything is evicted");
    // The lookups just made ran 0, 1, 3, 4 in that order: 0 is the least recent.
    t.pwc_fill(block(5), 1, false, TableRef::default(), 0);
    assert_eq!(held(&mut t), vec![1, 3, 4, 5]);
    assert!(!t.pwc_lookup(block(1), 2, false), "another ASID's descriptor is not this one's");
}

/// Everything a lookup, a fill or an invalidation can tell apart, after the
/// copies a clone of `t` owes are settled (`t` itself keeps them owed).
fn state(t: &Tlb) -> String {
    let mut t = t.clone();
    let l1 = t.l1.settled(&t.l2, &mut t.summary);
    for k in 0..RUNS {
        if t.runs.table.run[k].len > 0 {
            t.runs.dissolve(k, &mut t.l2.stamps);
        }
    }
    let valid = |e: &TlbEntry| if e.valid { format!("{e:?}") } else { "-".into() };
    let mut order = Vec::new();
    let mut s = l1.slots.order.lru();
    while s != l1.slots.order.end as usize {
        order.push(s);
        s = l1.slots.order.next[s] as usize;
    }
    format!(
        "l1 {:?}\nkeys {:?} free {:x} order {:?} asids {:?}\nindex {:?}\nl2 {:?}\n{:?} {:?} {:?}\nblocks {:?}\ncounts {:?} clock {}",
        l1.entries.iter().map(valid).collect::<Vec<_>>(),
        l1.slots.keys,
        l1.slots.free,
        order,
        l1.asids,
        l1.slots.index.to_vec(),
        t.l2.entries.iter().map(valid).collect::<Vec<_>>(),
        t.l2.keys,
        t.l2.stamps,
        t.l2.asids,
        t.summary.blocks.to_vec(),
        t.summary.asid_counts.to_vec(),
        t.clock
    )
}

#[test]
fn a_sweep_leaves_the_tlb_as_lookups_one_by_one_do() {
    use rand_chacha::ChaCha8Rng;
    use rand_core::{Rng, SeedableRng};
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let mut swept_pages = 0;
    let mut full_settles = 0;
    let mut runs_taken = 0;
    for round in 0..300 {
        // Small L1s and L2s, so that runs outgrow them, with free slots left.
        let l1 = [2, 3, 5, 8, 48][round % 5];
        // Every L2 geometry the sweep has a path for: the ways it knows (4,
        // 8) and others, sets a power of two or not.
        let ways = [1, 2, 4, 8][round % 4];
        let mut a = Tlb::new(l1, ways * [8, 12, 32][round % 3], ways, 4);
        let mut b = a.clone();
        let asids = [1u16, 2];
        let base = 0x4000_0000u64 + ((rng.next_u64() % 2) << 21) - 0x8000;
        let mut ops = Vec::new();
        for step in 0..120 {
            let mut asid = asids[(rng.next_u64() % 2) as usize];
            let page = base + (rng.next_u64() % 40) * 4096;
            let op = rng.next_u64() % 11;
            match op {
                0..=2 => {
                    // Fills of a run of pages, mostly 4 KB, a few global or 2 MB.
                    let flags = match rng.next_u64() % 12 {
                        0 => F_GLOBAL,
                        1 => F_HUGE,
                        _ => 0,
                    };
                    let spec = rng.next_u64() % 2 == 0;
                    for i in 0..1 + rng.next_u64() % 12 {
                        let mut e = TlbEntry { pfn: step, asid, flags, mm_uid: 1, ..Default::default() };
                        e.tag = (page + i * 4096) >> e.shift();
                        a.fill(e, spec);
                        b.fill(e, spec);
                    }
                }
                3 => {
                    let r = a.lookup(page, asid);
                    assert_eq!(r, b.lookup(page, asid), "round {round} step {step}: lookup of {page:#x}");
                }
                9 | 10 if a.l1.owes() => {
                    // The run's next page, as the general path takes it
                    // after a sweep stopped there: a lookup, then on a
                    // miss the walk's fill (of another ASID's now and then).
                    let next = a.l1.deferred().next_page << 12;
                    let owner = if rng.next_u64() % 8 == 0 {
                        asids[0] + asids[1] - a.l1.deferred().asid
                    } else {
                        a.l1.deferred().asid
                    };
                    // Op 10 fills with no lookup first (as nothing in the
                    // simulator does, but a fill must not rely on it).
                    let r = (op == 9).then(|| a.lookup_entry(next, owner));
                    if let Some(r) = r {
                        assert_eq!(
                            r.map(|(h, e)| (h, e.tag)),
                            b.lookup_entry(next, owner).map(|(h, e)| (h, e.tag)),
                            "round {round} step {step}: lookup of the run's next page {next:#x}"
                        );
                    }
                    if r.is_none_or(|r| r.is_none()) {
                        let flags = if rng.next_u64() % 10 == 0 { F_GLOBAL } else { 0 };
                        let e = TlbEntry {
                            tag: next >> 12,
                            pfn: step,
                            asid: owner,
                            flags,
                            mm_uid: 1,
                            ..Default::default()
                        };
                        let spec = rng.next_u64() % 4 == 0;
                        a.fill(e, spec);
                        b.fill(e, spec);
                    }
                }
                4 => {
                    let inval = [Inval::Va { asid, va: page }, Inval::Asid(asid), Inval::VaAll { va: page }];
                    let i = inval[(rng.next_u64() % 3) as usize];
                    assert_eq!(a.invalidate(i), b.invalidate(i), "round {round} step {step}: {i:?}");
                }
                _ => {
                    // A run from `page`, the page after the run owed (a
                    // continuation, as a touch's next chunk is), or a page
                    // just below a parked run's pending copies (so that it
                    // meets them while it checks the L1).
                    let live = a.runs.table.run.iter().filter(|r| r.len > 0).count();
                    let mut pages = 1 + rng.next_u64() % 24;
                    let va = match rng.next_u64() % 6 {
                        0 | 1 if a.l1.owes() => a.l1.deferred().next_page << 12,
                        // The first page of a run swept before (under
                        // either ASID), mostly with as many pages as it
                        // has or a few more.
                        4 | 5 if live > 0 => {
                            let k = (rng.next_u64() as usize) % live;
                            let r = a.runs.table.run.iter().filter(|r| r.len > 0).nth(k).copied().unwrap_or_default();
                            if rng.next_u64() % 4 != 0 {
                                pages = r.len as u64 + rng.next_u64() % 4;
                                asid = r.asid;
                            }
                            r.first << 12
                        }
                        2 if a.l1.parked().mask != 0 => {
                            a.l1.parked().page.saturating_sub(rng.next_u64() % (l1 as u64 + 1)) << 12
                        }
                        _ => page,
                    };
                    let rule = SweepRule { asid, uid: 1, min_ver: 0, write: false };
                    let owed = a.l1.deferred().n;
                    let before = a.runs.table.run.map(|r| (r.len, r.first, r.base));
                    let done = a.sweep(va, pages, &rule, |_| {});
                    swept_pages += done;
                    // A run kept with a new base was taken whole.
                    runs_taken += (0..RUNS)
                        .filter(|&k| {
                            let r = a.runs.table.run[k];
                            r.len > 0 && (r.len, r.first) == (before[k].0, before[k].1) && r.base != before[k].2
                        })
                        .count();
                    if owed + (done as usize) >= l1 && done > 0 {
                        full_settles += 1;
                    }
                    for i in 0..done {
                        let hit = b.lookup_entry(va + i * 4096, asid);
                        assert!(
                            matches!(hit, Some((Hit::L2(_), e)) if e.flags & F_SIZE == 0),
                            "round {round} step {step}: page {i} of the run swept but {hit:?} one by one"
                        );
                    }
                    if done < pages {
                        // The page it stopped at is one the general path must
                        // take, or one the L1 held when the run began (a copy
                        // of the run may have evicted it since).
                        let next = va + done * 4096;
                        let mut c = b.clone();
                        let hit = c.lookup_entry(next, asid);
                        // Held or pending, as the sweep's check of one page sees it.
                        let held = a.l1.clear_pages(next >> 12, 1, asid) == 0;
                        assert!(
                            held || !matches!(hit, Some((Hit::L2(_), e)) if e.flags & F_SIZE == 0),
                            "round {round} step {step}: stopped at {next:#x}, which one by one is {hit:?}"
                        );
                    }
                }
            }
            ops.push(op);
            assert_eq!(state(&a), state(&b), "round {round} step {step} (ops {ops:?})");
        }
    }
    // The differential test reached what it is for.
    assert!(swept_pages > 10_000, "only {swept_pages} pages swept");
    assert!(full_settles > 1_000, "only {full_settles} runs outgrew the L1");
    assert!(runs_taken > 500, "only {runs_taken} runs taken whole");
}

/// Sweeps of the same chunks again and again, as a loop over a buffer makes
/// them, with now and then a fill, a lookup or an invalidation among their
/// pages' sets and a sweep of other pages (which evicts the L1): a TLB that
/// takes runs whole ends every step as one whose lookups go one by one.
#[test]
fn runs_taken_whole_leave_the_tlb_as_lookups_one_by_one_do() {
    use rand_chacha::ChaCha8Rng;
    use rand_core::{Rng, SeedableRng};
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let mut taken = 0;
    for round in 0..24 {
        let ways = [2, 4, 5, 8][round % 4];
        let sets = [16, 64, 256][round % 3];
        let l1 = [8, 48][round % 2];
        let mut a = Tlb::new(l1, ways * sets, ways, 4);
        let mut b = a.clone();
        let (buf, other) = (0x10_0000_0000u64 >> 12, 0x20_0000_0000u64 >> 12);
        let chunk = 1 + rng.next_u64() % sets.min(RUN_MAX) as u64;
        let chunks = 1 + rng.next_u64() % 4;
        let fill = |a: &mut Tlb, b: &mut Tlb, page: u64, asid: u16, global: bool| {
            let flags = if global { F_GLOBAL } else { 0 };
            let e = TlbEntry { tag: page, pfn: page, asid, flags, mm_uid: 1, ver: 3, ..Default::default() };
            a.fill(e, false);
            b.fill(e, false);
        };
        for page in buf..buf + chunk * chunks {
            fill(&mut a, &mut b, page, 1, false);
        }
        for step in 0..60 {
            // The loop over the buffer, chunk by chunk, a page missed now and then.
            for c in 0..chunks {
                let first = buf + c * chunk;
                let uid = if step % 5 == 4 { 2 } else { 1 };
                let rule = SweepRule { asid: 1, uid, min_ver: [0, 3, 4][step % 3], write: false };
                let mut page = first;
                while page < first + chunk {
                    let before = a.runs.table.run.map(|r| (r.len, r.first, r.base));
                    let done = a.sweep(page << 12, first + chunk - page, &rule, |_| {});
                    taken += (0..RUNS)
                        .filter(|&k| {
                            let r = a.runs.table.run[k];
                            r.len > 0 && (r.len, r.first) == (before[k].0, before[k].1) && r.base != before[k].2
                        })
                        .count();
                    for i in 0..done {
                        let hit = b.lookup_entry((page + i) << 12, 1);
                        assert!(
                            matches!(hit, Some((Hit::L2(_), e)) if e.ver >= rule.min_ver && e.mm_uid == rule.uid),
                            "round {round} step {step}: page {i} swept under {rule:?} but {hit:?} one by one"
                        );
                    }
                    page += done;
                    if page < first + chunk {
                        // The general path: a lookup, a fill on a miss.
                        let hit = a.lookup_entry(page << 12, 1).map(|(h, _)| h);
                        assert_eq!(hit, b.lookup_entry(page << 12, 1).map(|(h, _)| h), "round {round} step {step}");
                        if hit.is_none() {
                            fill(&mut a, &mut b, page, 1, false);
                        }
                        page += 1;
                    }
                    assert_eq!(state(&a), state(&b), "round {round} step {step} chunk {c}");
                }
            }
            // Something else in the buffer's sets.
            let page = buf + rng.next_u64() % (chunk * chunks);
            match rng.next_u64() % 8 {
                0 => fill(&mut a, &mut b, page + sets as u64 * (1 + rng.next_u64() % 3), 2, false),
                1 => fill(&mut a, &mut b, page, 2, rng.next_u64() % 2 == 0),
                2 => fill(&mut a, &mut b, page, 1, false),
                3 => assert_eq!(a.lookup(page << 12, 1), b.lookup(page << 12, 1)),
                4 => assert_eq!(
                    a.invalidate(Inval::Va { asid: 1, va: page << 12 }),
                    b.invalidate(Inval::Va { asid: 1, va: page << 12 })
                ),
                5 if step % 7 == 0 => assert_eq!(a.invalidate(Inval::Asid(1)), b.invalidate(Inval::Asid(1))),
                _ => {
                    // Another process's pages, which evict the L1.
                    for p in other..other + l1 as u64 + 2 {
                        if a.lookup(p << 12, 3).is_none() {
                            assert!(b.lookup(p << 12, 3).is_none());
                            fill(&mut a, &mut b, p, 3, false);
                        } else {
                            assert!(b.lookup(p << 12, 3).is_some());
                        }
                    }
                }
            }
            assert_eq!(state(&a), state(&b), "round {round} step {step}");
        }
    }
    assert!(taken > 200, "only {taken} runs taken whole");
}

#[test]
fn l1_evicts_least_recently_used_and_l2_refills_it() {
    let mut t = Tlb::new(2, 16, 4, 4);
    for va in [0x1000, 0x2000, 0x3000] {
        t.fill(entry(va, 1, 0), false);
    }
    assert!(matches!(t.lookup(0x1000, 1), Some(Hit::L2(_))));
    assert!(matches!(t.lookup(0x1000, 1), Some(Hit::L1(_))));
}

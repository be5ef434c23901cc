//! The findings catalogue: hazards the checker finds in code that is still
//! upstream, beside the zoo of bugs that were fixed.
//!
//! A zoo bug is re-introduced by a switch into code that is otherwise correct; a
//! finding is in the faithful policy itself (the one the simulator runs by its
//! registry name), and each of its windows has the `tlbkit check` command that
//! finds it, the replay token of the counterexample that command prints, and the
//! kernel source it comes from. The checker's tests assert that each command finds
//! its window (not that the window is skipped) and that the token replays it;
//! `tlbkit list` shows the catalogue in its own section.
//!
//! What a finding does not claim: it has not been shown on hardware, and it rests
//! on the checker's rule that a CPU may walk the tables in TTBR0 speculatively at
//! any moment (see `docs/findings/freebsd-arm64-asid-reset.md`) and, for the
//! barrier windows, on its memory model (`--memory tso` or `arm`: see
//! `docs/findings/arm64-barrier-windows.md`). A finding may also be in a posted
//! patch the simulator models (its policy's docs name the posting), or in a
//! posted research kernel: the `latr-artifact-*` windows are in LATR's
//! artifact (`sslab-gatech/latr`), not upstream Linux
//! (`docs/findings/latr-artifact.md`).

/// One window of a finding, as `tlbkit list` and the tests see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Finding {
    /// The name `tlbkit list` shows, e.g. `freebsd-arm64-asid-reset-self`.
    pub id: &'static str,
    /// The registry name of the faithful policy the hazard is in.
    pub policy: &'static str,
    /// One line for `tlbkit list`.
    pub summary: &'static str,
    /// The property its counterexample breaks (`tlbkit list properties`).
    pub property: &'static str,
    /// The window in kernel terms: which CPU is where when the hazard opens.
    pub window: &'static str,
    /// The kernel file, functions and revision read.
    pub source: &'static str,
    /// The arguments of the `tlbkit check` command that finds this window.
    pub check_args: &'static [&'static str],
    /// The replay token that command prints (`tlbkit replay TOKEN`).
    pub token: &'static str,
    /// The fix candidates (registry names) that the checker passes at the
    /// bounds of the findings report.
    pub fixed_by: &'static [&'static str],
}

impl Finding {
    /// Returns the command line that finds this window, as a user types it.
    pub fn command(&self) -> alloc::string::String {
        let mut s = alloc::string::String::from("tlbkit check");
        for a in self.check_args {
            s.push(' ');
            s.push_str(a);
        }
        s
    }
}

/// A `tlbkit check` that searches every schedule within bounds
/// (`--mode exhaustive`): the command of each window found that way.
struct Exhaustive {
    /// `--policy`.
    policy: &'static str,
    /// `--cpus`.
    cpus: &'static str,
    /// `--mms`.
    mms: &'static str,
    /// `--pages`.
    pages: &'static str,
    /// `--ops`.
    ops: &'static str,
    /// `--menu`: the operations the search may choose.
    menu: &'static str,
    /// `--memory`: `sc`, `tso` or `arm`.
    memory: &'static str,
}

impl Exhaustive {
    /// Returns the command's arguments: these bounds with `--mode exhaustive`.
    const fn args(self) -> [&'static str; 16] {
        [
            "--policy",
            self.policy,
            "--cpus",
            self.cpus,
            "--mms",
            self.mms,
            "--pages",
            self.pages,
            "--ops",
            self.ops,
            "--menu",
            self.menu,
            "--mode",
            "exhaustive",
            "--memory",
            self.memory,
        ]
    }
}

/// Where FreeBSD's code is, for both windows.
const FREEBSD_SOURCE: &str = "FreeBSD sys/arm64/arm64/pmap.c: pmap_reset_asid_set, pmap_alloc_asid, \
                              pmap_activate_int (r354286; unchanged in freebsd-src 6631b589)";

/// Every finding window.
pub const FINDINGS: &[Finding] = &[
    Finding {
        id: "freebsd-arm64-asid-reset-self",
        policy: "arm64-freebsd-asid",
        summary: "the CPU that resets the ASID set skips itself: its TTBR0's ASID is released while a speculative \
                  walk refills under it",
        property: "no_asid_alias",
        window: "CPU A in pmap_activate_int has stored pc_curpmap = the next pmap and, in pmap_alloc_asid, finds the \
                 set full: pmap_reset_asid_set flushes every TLB and re-reserves the other CPUs' curpmap ASIDs, \
                 skipping curcpu; A's TTBR0 still holds its previous pmap with an ASID nobody reserved, a speculative \
                 walk refills that pmap's entry under it, and the ASID goes to another pmap that A then runs",
        source: FREEBSD_SOURCE,
        check_args: &["--policy", "arm64-freebsd-asid"],
        token: "t5~arm64-freebsd-asid~2~5~2~4~12~sc~3ff~-~0az4.13001z4.6001z19.3z14.4z20.3~bd009fb0",
        fixed_by: &["arm64-freebsd-asid-fix-reserved-ttbr0", "arm64-freebsd-asid-fix-self"],
    },
    Finding {
        id: "freebsd-arm64-asid-reset-curpmap",
        policy: "arm64-freebsd-asid",
        summary: "another CPU has stored pc_curpmap but not written TTBR0: the reset reserves the new pmap's ASID, \
                  not the one in TTBR0",
        property: "no_asid_alias",
        window: "CPU B in pmap_activate_int between PCPU_SET(curpmap, next) and set_ttbr0 (or running its old pmap \
                 when the flush is issued and storing curpmap before the loop reads it) while CPU A runs \
                 pmap_reset_asid_set: the loop reserves and restamps the ASID of B's pc_curpmap, the next pmap, but \
                 B's TTBR0 still holds the previous pmap's ASID, unreserved; B refills under it after the flush, \
                 the ASID goes to another pmap, and B runs that pmap with the refilled entry. Found with window 1 \
                 closed (on arm64-freebsd-asid the checker reduces every such schedule to the shallower window 1)",
        source: FREEBSD_SOURCE,
        check_args: &["--policy", "arm64-freebsd-asid-fix-self"],
        token: "t5~arm64-freebsd-asid-fix-self~2~5~2~4~12~sc~3ff~-~04z21.1z6.3z4.19z6.5001z4.5001z4.2z14.6z7.1~32c60c36",
        fixed_by: &["arm64-freebsd-asid-fix-reserved-ttbr0"],
    },
    Finding {
        id: "linux-arm64-asid-publish",
        policy: "arm64-linux",
        summary: "a new context.id is still in the switching CPU's store buffer as it walks under the new ASID",
        property: "no_stale_use",
        window: "CPU A gives mm a new ASID in check_and_switch_context (atomic64_set of mm->context.id under \
                 cpu_asid_lock) and writes TTBR0 with it: nothing between the store and the TTBR0 write is a DSB, \
                 so A's walks may fill the TLB under the new ASID while the store is still invisible to others. \
                 CPU B clears a PTE of mm, issues DSB ISHST and reads context.id (5e10f9887ed8's order): it reads \
                 the old id and invalidates the old ASID (or ASID 0 for an mm that never ran, e.g. a fork's \
                 child); A keeps the entry after the flush returns and the page is freed. The arm mode only: \
                 under TSO the root write drains the buffer. The slow path's cpumask_test_and_clear_cpu is a \
                 plain read on a clear bit from v4.19 to v5.19 (the generic bitops), as modelled; from v6.0 \
                 (415d83249709) a fully ordered atomic, which the arm mode takes as a drain (a DMB, which does \
                 not order later walks in the architecture: open there)",
        source: "Linux arch/arm64/mm/context.c check_and_switch_context and arch/arm64/include/asm/tlbflush.h \
                 __flush_tlb_range_nosync / arch_tlbbatch_add_pending (v6.16; unchanged since 5e10f9887ed8), \
                 include/asm-generic/bitops/atomic.h (v4.19 to v5.19); shown in the kernel's own C: tlbkit check \
                 --c 5e10f9887ed8's context.c and headers --bitops v4.19",
        check_args: &Exhaustive {
            policy: "arm64-linux",
            cpus: "2",
            mms: "2",
            pages: "1",
            ops: "3",
            menu: "switch,reclaim,munmap,idle",
            memory: "arm",
        }
        .args(),
        token: "t5~arm64-linux~2~2~1~4~3~arm~17~-~z19.1z16.13~bd411875",
        fixed_by: &[],
    },
    Finding {
        id: "arm64-skipbcast-early-mask-read",
        policy: "arm64-linux-skipbcast",
        summary: "origin 001 reads mm_cpumask before its PTE clear is visible: a CPU that ran the mm is never flushed",
        property: "no_stale_use",
        window: "CPU B clears a PTE (a relaxed xchg) and, in tlb_flush_check, finds every CPU already marked in \
                 mm_cpumask, so it stores nothing, while the clear is still in its store buffer. CPU A switches in \
                 (takes its stale mark and flushes), walks the still-valid PTE, goes idle (nr_active_mm back to \
                 0). B's smp_mb drains the clear and re-reads nr_active_mm: 0, no flush. A's mark is gone, so its \
                 next switch-in does not flush either. Found under TSO (arm64 lets the load pass the relaxed \
                 xchg's store too)",
        source: "origin 001: \"arm64: tlb: skip tlbi broadcast\" v2 patch 3/3 (Andrea Arcangeli, 2020-02-23), \
                 tlb_flush_check called from flush_tlb_page_nosync after ptep_get_and_clear",
        check_args: &Exhaustive {
            policy: "arm64-linux-skipbcast",
            cpus: "2",
            mms: "1",
            pages: "2",
            ops: "5",
            menu: "switch,reclaim,idle",
            memory: "tso",
        }
        .args(),
        token: "t5~arm64-linux-skipbcast~2~1~2~4~5~tso~13~-~z19.11z12.1z3.1z17.1~a0e48acd",
        fixed_by: &[],
    },
    Finding {
        id: "arm64-tlbmode-mask-clear-reorder",
        policy: "arm64-linux-tlbmode",
        summary: "the mask clear and the new context.id are plain stores: the id can be seen first and the clear wipe a CPU's new bit",
        property: "no_stale_held",
        window: "CPU B gives mm a fresh ASID number in new_context (under cpu_asid_lock): it clears mm_cpumask \
                 (nothing can be cached under a fresh number) and then stores mm->context.id, two plain stores \
                 with no barrier between them. Armv8 may make the id store visible first. CPU A switching to mm \
                 reads the new id on the fast path (no lock), sets its bit in mm_cpumask and writes TTBR0; B's \
                 clear then becomes visible and removes A's bit. A walks and caches an entry under the new ASID; \
                 B's next flush of mm finds only itself in the mask and flushes locally (TLB_LOCAL), so A keeps \
                 the entry after the page is freed. The arm mode only: under TSO the two stores leave in order. \
                 The fix is a DMB ISHST (smp_wmb) between the clear and the id store, or the id stored with \
                 release semantics",
        source: "Christoph Lameter, \"ARM64: Base TLB functions\" (gentwo.org linux.git 0dd557529479, \
                 December 2023, not merged), where the mask is cleared as in Takao Indoh's and QI Fuli's \
                 \"arm64: mm: Restore mm_cpumask\" (2019): in new_context, before check_and_switch_context's \
                 atomic64_set of mm->context.id. Neither diff could be read: the clear's place is this crate's \
                 reading of the two commit messages (crates/policy/src/asid/linux_arm64_tlbmode.rs)",
        check_args: &Exhaustive {
            policy: "arm64-linux-tlbmode",
            cpus: "2",
            mms: "2",
            pages: "1",
            ops: "4",
            menu: "switch,munmap",
            memory: "arm",
        }
        .args(),
        token: "t5~arm64-linux-tlbmode~2~2~1~4~4~arm~5~-~z21.1011z10.21~1105e989",
        fixed_by: &["arm64-linux-tlbmode-fix-wmb"],
    },
    Finding {
        id: "x86-global-asid-max",
        policy: "x86-linux-invlpgb",
        summary: "the global ASID search hands out MAX_ASID_AVAILABLE a second time while its first mm still runs",
        property: "no_asid_alias",
        window: "allocate_global_asid searches [last_global_asid, MAX_ASID_AVAILABLE) and, finding every ID set \
                 (live, or freed but kept until the next reset), returns MAX_ASID_AVAILABLE itself: its \
                 !global_asid_available test is always false there, use_global_asid having checked the count. \
                 Process A gets it. The next allocation resets the space (INVLPGB of every non-global entry, then \
                 used &= ~freed, which also clears bit MAX beyond the bitmap) while A holds it; A runs again and \
                 its translations are cached under its PCID. Once [last, MAX) is full again, the search returns \
                 MAX once more and process B gets it: a CPU that moves to B's global ASID (a switch, or the \
                 ASID-transition IPI that moves a straggler) loads that PCID without a flush, as global ASIDs \
                 are never flushed on the way in, and can use A's translations for B's addresses",
        source: "Linux arch/x86/mm/tlb.c allocate_global_asid, reset_global_asid_space, use_global_asid, \
                 mm_free_global_asid (d504d1247e36, v6.15; the same in the later trees read, CachyOS/linux \
                 0ebd1b8055ed and linux-next 02a8147f615c)",
        check_args: &["--policy", "x86-linux-invlpgb", "--from", "t5~x86-linux-invlpgb~2~6~2~4~61~sc~c5~-~1z26.1z70.11z62.1z26.1z68.21z24.2z26.1z68.31z24.3z26.1z68.11z23.1z14.5z17.3z27.13z79.11z23.1z14.5z17.3z28.13z80.11z65.1z14.5z9.15z37.11z34.1z78.11z23.1z14.5z9.15z36.11z34.1z78.11z26.1z13.15z9.15z45.11z79.11z67.1z14.5z9.15z37.11z6.1z27.1z78.11z23.1z14.5z9.15z36.11z34.1z78.11z23.1z13.15z10.5z37.11z5.1z26.11z28.~70052ade", "--ops", "61"],
        token: "t5~x86-linux-invlpgb~2~6~2~4~61~sc~c5~-~1z26.1z70.11z62.1z26.1z68.21z24.2z26.1z68.31z24.3z26.1z68.11z23.1z14.5z17.3z27.13z79.11z23.1z14.5z17.3z28.13z80.11z65.1z14.5z9.15z37.11z34.1z78.11z23.1z14.5z9.15z36.11z34.1z78.11z26.1z13.15z9.15z45.11z79.11z67.1z14.5z9.15z37.11z6.1z27.1z78.11z23.1z14.5z9.15z36.11z34.1z78.11z23.1z13.15z10.5z37.11z5.1z26.11z109.4~341759ee",
        fixed_by: &["x86-linux-invlpgb-fix-max"],
    },
    Finding {
        id: "latr-artifact-cow",
        policy: "x86-latr",
        summary: "LATR's artifact defers a COW fault's flush while another thread's madvise runs, and frees the old \
                  page at once",
        property: "no_stale_held",
        window: "Thread A in madvise(MADV_DONTNEED) has set mm->munmap_inprogress (madvise_dontneed) and is in its \
                 zap; thread B on CPU 1 takes a write fault on a page CPU 0's TLB holds (both hold mmap_sem for \
                 read): wp_page_copy's ptep_clear_flush_notify reaches native_flush_tlb_others, which tests only \
                 the mm's flag, so it saves a LATR state and sends no IPI; B maps the new page and puts the old \
                 one, freed if it was the last reference, while CPU 0 still holds the old translation until its \
                 next tick or switch",
        source: "sslab-gatech/latr efad1a12, src/linux (v4.10 with latr.patch): arch/x86/mm/tlb.c:688-702 \
                 native_flush_tlb_others, mm/madvise.c:480-487 madvise_dontneed, mm/memory.c:2246-2304 wp_page_copy, \
                 mm/pgtable-generic.c:73-82 ptep_clear_flush",
        check_args: &Exhaustive {
            policy: "x86-latr",
            cpus: "2",
            mms: "1",
            pages: "2",
            ops: "4",
            menu: "switch,madvise,cow,tick",
            memory: "sc",
        }
        .args(),
        token: "t5~x86-latr~2~1~2~6~4~sc~e01~-~z24.1z17.1~4c8c0ff5",
        fixed_by: &["x86-latr-syscall-only"],
    },
    Finding {
        id: "latr-artifact-migrate",
        policy: "x86-latr",
        summary: "LATR's artifact defers a page migration's flush while a munmap of the same mm runs, and frees the \
                  old page at once",
        property: "no_stale_held",
        window: "Thread A in the munmap system call has set mm->munmap_inprogress (under mmap_sem's write side) and \
                 is in do_munmap; kcompactd on CPU 1, which takes no mmap_sem, migrates another page of the mm: \
                 try_to_unmap_one's ptep_clear_flush reaches native_flush_tlb_others, which tests only the mm's \
                 flag, so it saves a LATR state and sends no IPI; unmap_and_move maps the new page and frees the \
                 old one while CPU 0, running A, still holds the old (writable) translation until its next tick or \
                 switch",
        source: "sslab-gatech/latr efad1a12, src/linux (v4.10 with latr.patch): arch/x86/mm/tlb.c:688-702 \
                 native_flush_tlb_others, mm/mmap.c:2820-2838 munmap, mm/rmap.c:1504 try_to_unmap_one, \
                 mm/migrate.c:1024 __unmap_and_move, mm/migrate.c:1120-1143 unmap_and_move",
        check_args: &Exhaustive {
            policy: "x86-latr",
            cpus: "2",
            mms: "1",
            pages: "2",
            ops: "3",
            menu: "switch,munmap,migrate,tick",
            memory: "sc",
        }
        .args(),
        token: "t5~x86-latr~2~1~2~6~3~sc~1405~-~z24.11~4ce0ea8f",
        fixed_by: &["x86-latr-syscall-only"],
    },
];

/// Returns the finding window called `id`.
pub fn finding(id: &str) -> Option<&'static Finding> {
    FINDINGS.iter().find(|f| f.id == id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_and_summaries_fit_one_line() {
        for (i, f) in FINDINGS.iter().enumerate() {
            assert!(FINDINGS[..i].iter().all(|o| o.id != f.id), "duplicate id {}", f.id);
            assert_eq!(finding(f.id), Some(f));
            assert!(!f.summary.contains('\n') && f.summary.len() <= 120, "{}: {}", f.id, f.summary.len());
            assert!(f.check_args.starts_with(&["--policy"]), "{}", f.id);
            assert!(f.token.starts_with('t'), "{}: no token", f.id);
        }
        assert_eq!(finding("nope"), None);
    }

    #[test]
    fn the_command_is_tlbkit_check_with_the_arguments() {
        assert_eq!(FINDINGS[0].command(), "tlbkit check --policy arm64-freebsd-asid");
    }
}

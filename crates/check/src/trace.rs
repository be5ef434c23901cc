//! What an execution records for its trace: its [`Event`]s, each of a
//! [`Kind`] (the counterexample's default view picks by it).

/// What the trace of an invalidation that waits for its CPU's completing
/// barrier (`kernel::Pending`) says instead of what it removed.
pub(crate) const ISSUED: &str = "issued, complete at this CPU's next";

/// What the trace of a store that waits in its CPU's store buffer says (a
/// field's store, a PTE's clear): the counterexample's view finds the
/// operation a later drain belongs to by it.
pub(crate) const INTO_BUFFER: &str = "into its store buffer";

/// How the trace of a store buffer's drain of one store begins.
pub(crate) const DRAINS: &str = "store buffer drains: ";

/// How the trace says what an invalidation took after its count `n`:
/// "1 entry removed", "2 entries removed".
pub(crate) fn entries_removed(n: usize) -> &'static str {
    if n == 1 {
        "entry removed"
    } else {
        "entries removed"
    }
}

/// One recorded event, for traces.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// The CPU, or `None` for the hardware (speculative fills).
    pub cpu: Option<usize>,
    /// Whether this is a store-buffer drain (a step of its own).
    pub drain: bool,
    /// The step it belongs to (1-based).
    pub step: usize,
    /// What happened.
    pub text: String,
    /// What kind of event it is (the counterexample's default view picks by it).
    pub kind: Kind,
}

/// What kind of thing an [`Event`] is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    /// The start of a kernel operation.
    Op,
    /// A page-table change by the kernel (PTEs set or cleared, a table unhooked or
    /// freed, an address space created, torn down or released).
    PageTable,
    /// A flush call returned.
    FlushDone,
    /// A translation-root write (TTBR0, CR3).
    Root,
    /// A TLB invalidation.
    Invalidate,
    /// An IPI sent, or taken by its target.
    Ipi,
    /// A decision the policy reported ([`tlbkit_policy::Note`]: an ASID rollover).
    Note,
    /// A speculative TLB fill of the entry described.
    Fill(String),
    /// An access to a shared field of the policy: a load (`read`), a store or a
    /// store buffer's drain (`write`), a read-modify-write (`read`, and `write` if
    /// it changed the value).
    Access {
        /// The field's name (the offset form for a field the policy did not name).
        field: String,
        /// Whether the access read the field.
        read: bool,
        /// Whether the access changed (or stored to) the field.
        write: bool,
        /// Whether the field is a spin lock's word.
        lock: bool,
    },
    /// Anything else: fences, barriers, returns from interrupts, shootdown phases.
    Other,
}

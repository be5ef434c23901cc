//! [`CPolicy`]: a compiled C file as a [`Policy`].
//!
//! Every method calls the glue's entry point for it in the policy's copy of
//! the object, with the calling CPU's [`Hw`] current ([`crate::runtime`]).
//! Building one resets the copy's state to what the loader left, sets the
//! machine's options (arm64: the ASID width, KPTI, FEAT_TLBIRANGE; x86: the
//! CPU features, `x86_features`) and runs the file's initcalls, as a
//! kernel boots. An x86 flush call is a shootdown only from its first IPI or
//! broadcast (`Flush::Local` until then); an x86 file's fields are named,
//! and its per-CPU data declared each CPU's own, from the glue's table
//! (`CPolicy::name_x86_fields`). Under the checker the copy's state
//! and heap become the thread's arena first, so the state is the execution's
//! policy memory (see [`crate::load`]).

use crate::build::{Lib, Options};
use crate::error::Error;
use crate::load::{Entries, Lease, LoadedCopy};
use crate::race::Tracker;
use crate::runtime::{enter, Flush, Frame, GlueField, State};
use std::cell::{Cell, RefCell};
use std::fmt;
use std::sync::Arc;
use tlbkit_policy::sync::check;
use tlbkit_policy::{Fields, Hw, MmId, Owner, Phase, Policy, Value, VirtAddr};

/// A kernel C file compiled into a policy.
pub struct CPolicy {
    lib: Arc<Lib>,
    copy: *const LoadedCopy,
    /// The copy, when it is this policy's own (the simulator's); the
    /// checker's belongs to its thread.
    _lease: Option<Lease>,
    state: State,
    /// The bytes the state hash covers: the state's objects but the ops table.
    hashed: Vec<(usize, usize)>,
    /// The arena region a checker gave the copy's memory: `(base, bytes)`.
    region: (usize, usize),
    has_tlbbatch: bool,
    options: Options,
}

// SAFETY: the copy's code and data are used only through `&self` calls,
// which the checker makes from one thread at a time and the simulator from
// the thread that owns the machine.
unsafe impl Sync for CPolicy {}
// SAFETY: as above.
unsafe impl Send for CPolicy {}

/// Returns the panic message of `e`.
fn message(e: &(dyn std::any::Any + Send)) -> String {
    e.downcast_ref::<String>().cloned().or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default()
}

impl CPolicy {
    /// Builds the policy from `lib` for `options` (its shape must be the one
    /// `lib` was compiled for), booting the file.
    pub fn new(lib: &Arc<Lib>, options: &Options) -> Result<CPolicy, Error> {
        assert_eq!((lib.options.cpus, lib.options.mm_slots), (options.cpus, options.mm_slots), "built for this shape");
        // Loading a copy allocates what outlives every execution.
        let mut got = None;
        check::outside_executions(&mut || {
            got = Some(if lib.options.checker {
                lib.thread_copy().map(|c| (c, None))
            } else {
                lib.lease().map(|l| (l.copy(), Some(l)))
            })
        });
        let (copy_ptr, lease) = got.expect("ran")?;
        // SAFETY: the copy lives as long as its lease (ours or the thread's).
        let copy = unsafe { &*copy_ptr };
        let region_bytes = Lib::region_bytes(copy);
        let region = if check::adopt_region(copy.base, region_bytes, copy.prefix) {
            (copy.base, region_bytes)
        } else {
            (copy.base, copy.prefix)
        };
        copy.reset();
        let set = |name: &str, v: u32| {
            if let Some(a) = copy.addr(lib, name) {
                // SAFETY: a 32-bit global of the glue, in the copy's state.
                unsafe { (a as *mut u32).write(v) };
            }
        };
        let (mmfr0, option) = match options.asid_bits {
            8 => (0, 0),
            16 => (2, 0),
            bits => (0, u32::from(bits)),
        };
        set("tlbkit_mmfr0_asidbits", mmfr0);
        set("tlbkit_asid_bits_option", option);
        set("tlbkit_kpti", u32::from(options.kpti));
        set("tlbkit_tlbi_range", u32::from(options.tlbi_range));
        set("tlbkit_cnp", u32::from(options.cnp));
        set("tlbkit_early_bitops", u32::from(options.early_bitops));
        set("tlbkit_x86_features", x86_features(options));
        set("tlbkit_sample_every", u32::from(options.sample_every));
        let has_tlbbatch = copy.addr(lib, "tlbkit_has_tlbbatch").is_some_and(|a| {
            // SAFETY: an int of the glue.
            unsafe { *(a as *const i32) != 0 }
        });
        let mut races = Tracker::default();
        let mut hashed = Vec::new();
        for s in lib.symbols.iter().filter(|s| s.object) {
            let a = copy.load_base + s.value as usize;
            if a < copy.base || a >= copy.base + copy.prefix || s.name == "tlbkit_ops" || s.name == "tlbkit_data_begin"
            {
                continue;
            }
            hashed.push((a, s.size as usize));
            if !options.checker {
                continue;
            }
            if lib.is_file_object(&s.name) || s.name == "tlbkit_percpu_copies" {
                races.track(a, a + s.size as usize);
            } else if s.name == "tlbkit_mm" || s.name == "init_mm" {
                races.track_marked_writes(a, a + s.size as usize);
            }
        }
        let state = State {
            asid_bits: options.asid_bits,
            checker: options.checker,
            booting: Cell::new(true),
            generation: copy.addr(lib, "asid_generation").unwrap_or(0),
            heap: RefCell::new(Vec::new()),
            races: RefCell::new(races),
            held: RefCell::new(vec![Vec::new(); options.cpus]),
            sysregs: copy.entries.sysregs,
            lib: lib.clone(),
            load_base: copy.load_base,
        };
        let policy = CPolicy {
            lib: lib.clone(),
            copy: copy_ptr,
            _lease: lease,
            state,
            hashed,
            region,
            has_tlbbatch,
            options: *options,
        };
        policy.boot()?;
        Ok(policy)
    }

    fn entries(&self) -> &Entries {
        // SAFETY: the copy outlives the policy (see `new`).
        unsafe { &(*self.copy).entries }
    }

    /// Runs the file's initcalls (no CPU: nothing the file does then may race).
    fn boot(&self) -> Result<(), Error> {
        let frame = Frame::boot(&self.state);
        let boot = self.entries().boot;
        // On a guarded stack, in the simulator and the checker alike (which
        // boots inside an execution's arena: a guarded call allocates nothing
        // there): a fault or a loop of the file's initcalls is a refusal to
        // boot that says where.
        let r =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| tlbkit_fault::call(|| enter(&frame, || boot()))));
        self.state.booting.set(false);
        let name = &self.lib.name;
        match r {
            Ok(Ok(0)) => {}
            Ok(Ok(e)) => return Err(Error::Boot(format!("{name}: an initcall returned {e}"))),
            Ok(Err(fault)) => {
                return Err(Error::Boot(format!(
                    "{name} stopped while booting on a machine of {} CPUs and {}-bit ASIDs: {fault}",
                    self.options.cpus, self.options.asid_bits
                )))
            }
            Err(e) => {
                let msg = message(&*e);
                let msg = msg.strip_prefix("no_kernel_bug: ").unwrap_or(&msg);
                return Err(Error::Boot(format!(
                    "{name} stopped while booting on a machine of {} CPUs and {}-bit ASIDs: {msg}",
                    self.options.cpus, self.options.asid_bits
                )));
            }
        }
        // What the initcalls allocated is the file's memory from now on.
        if self.options.checker {
            let mut races = self.state.races.borrow_mut();
            for &(a, n) in self.state.heap.borrow().iter() {
                races.track(a, a + n);
            }
        }
        Ok(())
    }

    /// Runs `f` (a call into the file) with `frame` current. The checker runs
    /// it on its CPU's coroutine, whose faults and loops it reports itself;
    /// the simulator runs it on a guarded stack ([`tlbkit_fault::call`]): a
    /// fault, a loop that never returns or a `BUG_ON` of the file stops the
    /// simulation with one line and exit code 3 (what a run writes, it writes
    /// at its end through a temporary file: nothing already written is lost).
    fn run<R>(&self, frame: &Frame, f: impl FnOnce() -> R) -> R {
        if self.options.checker {
            return enter(frame, f);
        }
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| tlbkit_fault::call(|| enter(frame, f))));
        let why = match r {
            Ok(Ok(r)) => return r,
            Ok(Err(fault)) => fault.to_string(),
            Err(e) => {
                let msg = message(&*e);
                msg.strip_prefix("no_kernel_bug: ").map_or(msg.clone(), |m| format!("the file's code stopped: {m}"))
            }
        };
        eprintln!(
            "tlbkit: error: the C policy {} stopped the simulation: {why} (`tlbkit check --c {}` finds a schedule \
             that reaches it, with its replay token)",
            self.lib.name, self.lib.name
        );
        std::process::exit(3);
    }

    /// Calls into the file on the CPU `hw` stands for; a flush call reports
    /// its shootdown's start and end (the phases between come from its
    /// instructions).
    fn call<H: Hw>(&self, hw: &H, flush: Flush, f: impl FnOnce(&Entries)) {
        // An x86 flush is a shootdown only once it reaches another CPU.
        let flush = if flush == Flush::Issue && self.options.x86 { Flush::Local } else { flush };
        let frame = Frame::new(hw, &self.state, flush);
        if flush == Flush::Issue {
            hw.phase(Phase::Issue);
        }
        self.run(&frame, || f(self.entries()));
        if frame.started() {
            hw.phase(Phase::Done);
        }
    }

    /// Returns where slot `mm`'s `struct mm_struct` lies in this copy (the
    /// glue's `tlbkit_mm[slot]`), and its size (`tlbkit_layout[0]`).
    fn mm_range(&self, mm: MmId) -> Option<(usize, usize)> {
        let size = self.layout(0)?;
        Some((self.copy().addr(&self.lib, "tlbkit_mm")? + mm.index() * size, size))
    }

    /// Returns entry `k` of the glue's `tlbkit_layout` (the mm's size, then
    /// the offsets of the fields tlbkit reads).
    fn layout(&self, k: usize) -> Option<usize> {
        let layout = self.copy().addr(&self.lib, "tlbkit_layout")? as *const u64;
        // SAFETY: the glue's `const unsigned long tlbkit_layout[4]`; k < 4.
        Some(unsafe { *layout.add(k) } as usize)
    }

    /// This policy's loaded copy.
    fn copy(&self) -> &LoadedCopy {
        // SAFETY: the copy outlives the policy.
        unsafe { &*self.copy }
    }

    /// Returns the mm's `context.id` as memory holds it (for tests and traces).
    pub fn context_id(&self, mm: MmId) -> u64 {
        self.mm_field(mm, 1).map_or(0, |a| {
            // SAFETY: the glue's mm array, in the copy.
            unsafe { *(a as *const u64) }
        })
    }

    /// Returns the address of field `k` of `tlbkit_layout` (1: context.id, 2: pinned) of mm slot `mm`.
    fn mm_field(&self, mm: MmId, k: usize) -> Option<usize> {
        Some(self.mm_range(mm)?.0 + self.layout(k)?)
    }
}

/// Returns the x86 CPU features of a machine (`tlbkit_x86_features`, bits
/// in the order of the x86 shims' `X86_FEATURE_*`): PCID, INVPCID and PGE
/// always (every x86-64 part since Haswell and Zen), PTI and INVLPGB as asked.
fn x86_features(options: &Options) -> u32 {
    const PCID: u32 = 1 << 0;
    const INVPCID: u32 = 1 << 1;
    const INVPCID_SINGLE: u32 = 1 << 2;
    const PTI: u32 = 1 << 3;
    const INVLPGB: u32 = 1 << 4;
    const PGE: u32 = 1 << 5;
    let mut f = PCID | INVPCID | INVPCID_SINGLE | PGE;
    if options.pti {
        f |= PTI;
    }
    if options.invlpgb {
        f |= INVLPGB;
    }
    f
}

/// Every loaded x86 copy's mms, for reading an `mm_struct *` in a trace:
/// `(init_mm, tlbkit_mm, its element size, slots)`. Copies are never
/// unloaded, so an address here stays theirs.
static X86_MMS: std::sync::Mutex<Vec<(usize, usize, usize, usize)>> = std::sync::Mutex::new(Vec::new());

/// Reads an x86 file's `struct mm_struct *` (a per-CPU `loaded_mm`): the
/// slot it points at in whichever copy holds it, `init_mm`, or
/// `LOADED_MM_SWITCHING`.
fn show_mm_pointer(v: u64, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    if v == 1 {
        return f.write_str("LOADED_MM_SWITCHING");
    }
    let v = v as usize;
    let mms = X86_MMS.lock().unwrap_or_else(|e| e.into_inner());
    for &(init, array, size, slots) in mms.iter() {
        if v == init {
            return f.write_str("&init_mm");
        }
        if v >= array && v < array + size * slots && (v - array).is_multiple_of(size) {
            return write!(f, "mm{}", (v - array) / size);
        }
    }
    write!(f, "{v:#x}")
}

impl CPolicy {
    /// Names the x86 file's per-CPU fields and each mm's by the glue's
    /// `tlbkit_fields` (`cpu_tlbstate.loaded_mm_asid[cpu1]`,
    /// `mm[2].context.tlb_gen`), and declares each CPU's copy of the per-CPU
    /// section its own: only that CPU writes it, others may read it (the
    /// checker then lets a CPU read its own per-CPU data without a
    /// scheduling point, as the kernel's `this_cpu_read` is one instruction
    /// no other CPU's store can come between).
    fn name_x86_fields(&self, f: &mut dyn Fields) {
        // SAFETY: the copy outlives the policy.
        let copy = unsafe { &*self.copy };
        let ncpus = self.options.cpus;
        let addr = |name: &str| copy.addr(&self.lib, name);
        let (Some(span), Some(offsets)) = (addr("tlbkit_percpu_span"), addr("tlbkit_percpu_offset")) else {
            return;
        };
        // SAFETY: the glue's `unsigned long tlbkit_percpu_span[2]`, set at boot.
        let (start, bytes) = unsafe { (*(span as *const usize), *(span as *const usize).add(1)) };
        let stop = start + bytes;
        // SAFETY: the glue's `unsigned long tlbkit_percpu_offset[NR_CPUS]`, set at boot.
        let offset = |c: usize| unsafe { *(offsets as *const usize).add(c) };
        let (layout, mms, init) = (addr("tlbkit_layout"), addr("tlbkit_mm"), addr("init_mm"));
        let mm_size = layout.map_or(0, |l| {
            // SAFETY: the glue's `const unsigned long tlbkit_layout[4]`.
            unsafe { *(l as *const usize) }
        });
        if let (Some(array), Some(init)) = (mms, init) {
            let mut all = X86_MMS.lock().unwrap_or_else(|e| e.into_inner());
            if !all.iter().any(|e| e.1 == array) {
                all.push((init, array, mm_size, self.options.mm_slots));
            }
        }
        // The file's other globals and statics, by their names.
        for s in self.lib.symbols.iter().filter(|s| s.object && self.lib.is_file_object(&s.name)) {
            let a = copy.load_base + s.value as usize;
            if (start..stop).contains(&a) {
                continue;
            }
            // A lock's word, or a number: arm64's generation-and-ASID readings
            // (`value_of`) are no x86 variable's (`last_global_asid` is one ASID).
            let v = if s.name.ends_with("_lock") { Value::Lock } else { Value::Number };
            if s.size <= 8 {
                f.field(a, format_args!("{}", s.name), v);
            } else {
                for k in 0..(s.size as usize).div_ceil(8) {
                    f.field(a + 8 * k, format_args!("{}[{k}]", s.name), v);
                }
            }
        }
        let value = |kind: i32| match kind {
            1 => Value::Bool,
            2 => Value::Custom(show_mm_pointer),
            3 => Value::Cpus { first: 0 },
            _ => Value::Number,
        };
        if let Some(table) = addr("tlbkit_fields") {
            let mut p = table as *const GlueField;
            loop {
                // SAFETY: the glue's array, ended by an entry with no name.
                let e = unsafe { &*p };
                if e.name.is_null() {
                    break;
                }
                // SAFETY: the glue's string literals.
                let name = unsafe { std::ffi::CStr::from_ptr(e.name) }.to_string_lossy();
                if e.object.is_null() {
                    for (m, base) in
                        mms.iter().flat_map(|&a| (0..self.options.mm_slots).map(move |m| (m, a + m * mm_size)))
                    {
                        for w in (0..e.bytes).step_by(8) {
                            let suffix = if e.bytes > 8 { format!("[{}]", w / 8) } else { String::new() };
                            f.field(base + e.offset + w, format_args!("mm[{m}].{name}{suffix}"), value(e.kind));
                        }
                    }
                } else {
                    // SAFETY: as above.
                    let object = unsafe { std::ffi::CStr::from_ptr(e.object) }.to_string_lossy();
                    if let Some(a) = addr(&object) {
                        for c in 0..ncpus {
                            f.field(a + offset(c) + e.offset, format_args!("{name}[cpu{c}]"), value(e.kind));
                        }
                    }
                }
                // SAFETY: the next entry of the same array (the last has no name).
                p = unsafe { p.add(1) };
            }
        }
        for c in 0..ncpus {
            let owner = Owner::Cpu { cpu: c as u32, others_read: true };
            for a in start..stop {
                f.owner(a + offset(c), owner);
            }
        }
    }
}

/// How a value of the file reads in a trace, by the kernel's name for it.
fn value_of(name: &str, bits: u8) -> Value {
    match name {
        "asid_generation" => Value::Generation { asid_bits: bits },
        "tlb_flush_pending" => Value::Cpus { first: 0 },
        n if n.ends_with("_lock") => Value::Lock,
        n if n.contains("asid") => Value::GenAsid { asid_bits: bits },
        _ => Value::Number,
    }
}

/// Reads an `active_mm` word of the glue: an mm slot, or none.
fn show_active_mm(v: u64, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    match v {
        0xffff_ffff => f.write_str("none"),
        0 => f.write_str("kernel"),
        m => write!(f, "mm{m}"),
    }
}

impl Drop for CPolicy {
    /// Frees what the file allocated and did not free (the kernel keeps it
    /// for the machine's life: `asid_map`, say). Blocks in the copy's region
    /// are the checker's execution arena, which the next execution reuses
    /// whole; the others (the simulator's, and a checker's policy built
    /// outside any execution) came from the system allocator.
    fn drop(&mut self) {
        let (base, len) = self.region;
        let arena = |a: usize| self.options.checker && a >= base && a < base + len;
        for (a, bytes) in self.state.heap.borrow_mut().drain(..).filter(|&(a, _)| !arena(a)) {
            let layout = std::alloc::Layout::from_size_align(bytes, 16).expect("as allocated");
            // SAFETY: allocated by the runtime's `op_alloc` with this layout
            // and not freed since (`op_free` takes a block out of the list);
            // the file's code, which alone holds it, never runs again.
            unsafe { std::alloc::dealloc(a as *mut u8, layout) };
        }
    }
}

impl Policy for CPolicy {
    fn mm_init(&self, mm: MmId) {
        let frame = Frame::boot(&self.state);
        let init = self.entries().mm_init;
        self.run(&frame, || init(mm.0));
        // A new mm in the slot: what the old one's users did races with nothing of it.
        if let (true, Some((a, n))) = (self.options.checker, self.mm_range(mm)) {
            self.state.races.borrow_mut().forget(a, a + n);
        }
    }

    fn mm_release<H: Hw>(&self, hw: &H, mm: MmId) {
        // arm64's destroy_context is empty: the ASID stays allocated until a rollover.
        if let Some(release) = self.entries().mm_release {
            self.call(hw, Flush::None, |_| release(mm.0));
        }
    }

    fn tlbbatch_should_defer<H: Hw>(&self, hw: &H, mm: MmId) -> bool {
        let Some(should) = self.entries().tlbbatch_should_defer else { return true };
        let mut r = 0;
        self.call(hw, Flush::None, |_| r = should(mm.0));
        r != 0
    }

    fn switch_mm<H: Hw>(&self, hw: &H, next: MmId) {
        self.call(hw, Flush::None, |e| (e.switch_mm)(next.0));
    }

    fn flush_page<H: Hw>(&self, hw: &H, mm: MmId, va: VirtAddr) {
        self.call(hw, Flush::Issue, |e| (e.flush_page)(mm.0, va.0));
    }

    fn flush_range<H: Hw>(&self, hw: &H, mm: MmId, start: VirtAddr, pages: u64) {
        self.call(hw, Flush::Issue, |e| (e.flush_range)(mm.0, start.0, pages));
    }

    fn flush_mm<H: Hw>(&self, hw: &H, mm: MmId) {
        self.call(hw, Flush::Issue, |e| (e.flush_mm)(mm.0));
    }

    fn flush_batch<H: Hw>(&self, hw: &H, mms: &[MmId]) {
        if !self.has_tlbbatch {
            for &mm in mms {
                self.flush_mm(hw, mm);
            }
            return;
        }
        if self.options.x86 {
            // x86's arch_tlbbatch_flush is the batch's whole shootdown.
            self.call(hw, Flush::Issue, |e| (e.tlbbatch_flush)());
            return;
        }
        // arch_tlbbatch_flush completes what the pending adds issued: its DSB is the sync.
        hw.phase(Phase::Sync);
        let frame = Frame::new(hw, &self.state, Flush::None);
        let flush = self.entries().tlbbatch_flush;
        self.run(&frame, || flush());
        hw.phase(Phase::Done);
    }

    fn tlbbatch_add_pending<H: Hw>(&self, hw: &H, mm: MmId, va: VirtAddr) {
        if self.has_tlbbatch {
            // x86's only queues (bumps the generation, gathers the CPUs).
            let flush = if self.options.x86 { Flush::None } else { Flush::Issue };
            self.call(hw, flush, |e| (e.tlbbatch_add_pending)(mm.0, va.0));
        }
    }

    fn flush_batched_pending<H: Hw>(&self, hw: &H, mm: MmId) {
        self.call(hw, Flush::Issue, |e| (e.flush_batched_pending)(mm.0));
    }

    fn flush_kernel_range<H: Hw>(&self, hw: &H, start: VirtAddr, pages: u64) {
        self.call(hw, Flush::None, |e| (e.flush_kernel_range)(start.0, pages));
    }

    fn name_fields(&self, f: &mut dyn Fields) {
        if self.options.x86 {
            return self.name_x86_fields(f);
        }
        // SAFETY: the copy outlives the policy.
        let copy = unsafe { &*self.copy };
        let (bits, ncpus) = (self.options.asid_bits, self.options.cpus);
        for s in self.lib.symbols.iter().filter(|s| s.object && self.lib.is_file_object(&s.name)) {
            let a = copy.load_base + s.value as usize;
            let value = value_of(&s.name, bits);
            let size = s.size as usize;
            if let Some(stride) = crate::runtime::per_cpu_stride(size, ncpus) {
                for c in 0..ncpus {
                    f.field(a + c * stride, format_args!("{}[cpu{c}]", s.name), value);
                }
            } else if size <= 8 {
                f.field(a, format_args!("{}", s.name), value);
            } else {
                for k in 0..size / 8 {
                    f.field(a + 8 * k, format_args!("{}[{k}]", s.name), value);
                }
            }
        }
        for m in 0..self.options.mm_slots as u32 {
            if let Some(a) = self.mm_field(MmId(m), 1) {
                f.field(a, format_args!("mm[{m}].context.id"), Value::GenAsid { asid_bits: bits });
            }
            if let Some(a) = self.mm_field(MmId(m), 2) {
                f.field(a, format_args!("mm[{m}].context.pinned"), Value::Number);
            }
        }
        if let Some(a) = copy.addr(&self.lib, "tlbkit_active_mm") {
            for c in 0..ncpus {
                f.field(a + 8 * c, format_args!("active_mm[cpu{c}]"), Value::Custom(show_active_mm));
            }
        }
    }

    /// The file's globals and statics, the glue's state and the file's
    /// blocks, byte for byte; an address into the copy's region is hashed as
    /// its offset, the same in every thread's copy.
    unsafe fn hash_locked(&self, h: &mut dyn core::hash::Hasher) {
        let (base, len) = self.region;
        let mut word = |w: u64| {
            let a = w as usize;
            h.write_u64(if a >= base && a < base + len { (a - base) as u64 | 1 << 63 } else { w });
        };
        let heap = self.state.heap.borrow();
        for &(a, n) in self.hashed.iter().chain(heap.iter()) {
            for k in (0..n).step_by(8) {
                let mut b = [0u8; 8];
                let m = (n - k).min(8);
                // SAFETY: `[a, a + n)` is an object of the copy or a block the file allocated.
                unsafe { std::ptr::copy_nonoverlapping((a + k) as *const u8, b.as_mut_ptr(), m) };
                word(u64::from_le_bytes(b));
            }
        }
    }
}

impl fmt::Debug for CPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CPolicy({})", self.lib.name)
    }
}

//! C policies: a kernel's own arch file, compiled against tlbkit's shims and
//! run by the checker and the simulator as any Rust policy is.
//!
//! A developer who changes `arch/arm64/mm/context.c` or
//! `arch/x86/mm/tlb.c` checks the file as written, not a port of it:
//! `tlbkit check --c context.c`, or the policy `c:context.c` in `tlbkit run`
//! and `compare`. Each architecture has its shim tree and glue ([`shim`]);
//! the name says which ([`tlbkit_registry::c_is_x86`]).
//!
//! # How a file becomes a policy
//! - [`source`]: the files (`c:PATH[@REV][+PATH...]`): C files to compile,
//!   and headers that replace the shims' own `asm/mmu.h`, `asm/tlbflush.h`
//!   or `asm/mmu_context.h`; `@REV` reads a file from its git tree.
//! - [`build`]: the system's C compiler (`cc`, or `$TLBKIT_CC`) compiles
//!   them against the shim tree ([`shim`]: the kernel's interface, each
//!   marked access, lock, barrier and TLB operation a call into tlbkit) and
//!   links one shared object with the glue (the entry points) and a
//!   thread-sanitizer runtime that reports every plain access. The kernel's
//!   asm statements in a given header are translated into calls first
//!   ([`asm`]). Builds are cached by content.
//! - [`load`]: each thread (or simulated machine) loads its own copy of the
//!   object, so that the file's globals are that copy's. The object's
//!   writable data is laid out so that the globals come first and a large
//!   zeroed heap follows: under the checker the whole region becomes the
//!   thread's execution arena, so the globals are saved, restored, keyed
//!   and hashed exactly as a Rust policy's memory is.
//! - [`runtime`]: the functions the compiled code calls (the ops table),
//!   acting through the [`Hw`](tlbkit_policy::Hw) of the CPU that runs the
//!   code and the facade atomics of [`tlbkit_policy::sync`]; x86's IPIs run
//!   the file's function on each target as an IPI handler of the machine.
//! - [`race`]: the plain-access discipline: a plain access to the file's
//!   memory that another CPU also accesses, one of them writing, with no
//!   lock held in common, is a data race (as KCSAN would report it).
//! - [`policy`]: [`CPolicy`], the [`Policy`](tlbkit_policy::Policy) whose
//!   every method is a call of the glue.
//! - [`coverage`]: what a check ran of the files, line by line, and which
//!   lines differ from a base version.
//!
//! # How a C policy is found by name
//! The registry (`tlbkit-registry`) describes every C policy (its entry
//! `C_POLICY`, for the prefix `c:`) but builds none, and does not depend on
//! this crate: this crate depends on the registry and adds its one entry on
//! top. [`front::with_policy`] is the door the simulator and the checker
//! build every named policy through: it builds a `c:FILE...` name here and
//! hands any other to the registry's `with_policy`; [`front::pin_content`]
//! and [`front::unpinned`] are the same door for the name a check records.
//! (A policy cannot be registered at run time instead: the registry's
//! `WithPolicy::with` is generic over the policy's type, and a policy's
//! methods over the hardware.)
//!
//! Nothing of the kernel is linked into tlbkit: the user's files are
//! compiled on the user's machine into an object tlbkit loads at run time.

pub mod asm;
pub mod build;
pub mod coverage;
mod elf;
mod error;
pub mod front;
pub mod load;
pub mod policy;
pub mod race;
pub mod runtime;
pub mod shim;
pub mod site;
pub mod source;

pub use build::{Lib, Options};
pub use error::Error;
pub use policy::CPolicy;
pub use source::Sources;

/// The FNV-1a hash (64 bits): the build cache's key, the same on every host.
pub(crate) struct Fnv(u64);

impl Fnv {
    pub(crate) fn new() -> Fnv {
        Fnv(0xcbf2_9ce4_8422_2325)
    }

    pub(crate) fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
        // A separator, so that ("ab", "c") and ("a", "bc") differ.
        self.0 = (self.0 ^ 0xff).wrapping_mul(0x0100_0000_01b3);
    }

    pub(crate) fn finish(&self) -> u64 {
        self.0
    }
}

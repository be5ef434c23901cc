//! Names for a policy's shared fields, so that a checker's trace reads in the
//! kernel's terms (`rmw active_asids[cpu1]: 0 -> gen 1, asid 1`) instead of offsets.
//!
//! A policy implements [`crate::Policy::name_fields`], which visits every facade
//! atomic, [`crate::sync::SpinLock`] and [`crate::CpuMask`] it shares between
//! CPUs, with the name the kernel gives it and how its value reads ([`Value`]).
//! The checker calls it once per recorded execution, after building the policy
//! and before any CPU runs; the simulator never calls it, so naming costs the
//! simulator nothing: no atomic carries a name, the names exist only in the
//! checker's table from address to name.
//!
//! A policy may also declare who may touch a field ([`Owner`]): a per-CPU
//! field only its CPU writes, data only the holder of a spin lock touches
//! (every field named inside [`crate::sync::SpinLock::name_inner`] is declared
//! so for it), or a field only one CPU reads with plain loads. A model checker
//! uses the declarations to skip interleavings that cannot differ (an access
//! no other CPU can race with, an older value no CPU can read), and checks
//! them at every access it runs: a declaration the policy breaks is reported,
//! never trusted.

use core::fmt;

/// How a shared field's value reads in a trace.
#[derive(Clone, Copy)]
pub enum Value {
    /// A count, index or generation number: decimal.
    Number,
    /// A flag: `true` or `false`.
    Bool,
    /// A set of CPUs, bit `i` standing for CPU `first + i`: `{cpu0, cpu2}`.
    Cpus {
        /// The CPU of bit 0.
        first: u32,
    },
    /// An address-space slot (an [`crate::MmId`]): `mm2`, slot 0 as `kernel`.
    Mm,
    /// A hardware ASID or PCID number: `asid 3`.
    Asid,
    /// A Linux arm64 `context.id`-style word: the generation above the low
    /// `asid_bits` bits, the ASID in them (`gen 2, asid 1`; 0 reads `0`).
    GenAsid {
        /// The ASID width.
        asid_bits: u8,
    },
    /// A Linux arm64 `asid_generation`-style word: a generation counted in steps of
    /// `1 << asid_bits` (`gen 2`).
    Generation {
        /// The ASID width.
        asid_bits: u8,
    },
    /// A [`crate::sync::SpinLock`]'s word, 1 while held: `held` or `free`.
    Lock,
    /// A virtual address: hex.
    Addr,
    /// Hex, for a word with no better reading.
    Hex,
    /// The policy's own reading.
    Custom(fn(u64, &mut fmt::Formatter<'_>) -> fmt::Result),
}

impl fmt::Debug for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Number => f.write_str("Number"),
            Value::Bool => f.write_str("Bool"),
            Value::Cpus { first } => write!(f, "Cpus {{ first: {first} }}"),
            Value::Mm => f.write_str("Mm"),
            Value::Asid => f.write_str("Asid"),
            Value::GenAsid { asid_bits } => write!(f, "GenAsid {{ asid_bits: {asid_bits} }}"),
            Value::Generation { asid_bits } => write!(f, "Generation {{ asid_bits: {asid_bits} }}"),
            Value::Lock => f.write_str("Lock"),
            Value::Addr => f.write_str("Addr"),
            Value::Hex => f.write_str("Hex"),
            Value::Custom(_) => f.write_str("Custom"),
        }
    }
}

impl Value {
    /// Returns a [`fmt::Display`] of `v` read as this kind of value.
    pub fn show(self, v: u64) -> impl fmt::Display {
        Shown(self, v)
    }
}

struct Shown(Value, u64);

impl fmt::Display for Shown {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = self.1;
        match self.0 {
            Value::Number => write!(f, "{v}"),
            Value::Bool => write!(f, "{}", v != 0),
            Value::Cpus { first } => {
                f.write_str("{")?;
                let mut sep = "";
                for i in (0..64).filter(|i| v & (1 << i) != 0) {
                    write!(f, "{sep}cpu{}", first as u64 + i)?;
                    sep = ", ";
                }
                f.write_str("}")
            }
            Value::Mm if v == 0 => f.write_str("kernel"),
            Value::Mm => write!(f, "mm{v}"),
            Value::Asid => write!(f, "asid {v}"),
            Value::GenAsid { .. } if v == 0 => f.write_str("0"),
            Value::GenAsid { asid_bits } => {
                write!(f, "gen {}, asid {}", v >> asid_bits, v & ((1 << asid_bits) - 1))
            }
            Value::Generation { asid_bits } => write!(f, "gen {}", v >> asid_bits),
            Value::Lock => f.write_str(if v & 1 == 1 { "held" } else { "free" }),
            Value::Addr | Value::Hex => write!(f, "{v:#x}"),
            Value::Custom(show) => show(v, f),
        }
    }
}

/// Who may access a shared field, as its policy declares it
/// ([`Fields::owner`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Owner {
    /// Only CPU `cpu` writes the field (in any context, its interrupt
    /// handlers included); other CPUs read it only when `others_read` (a
    /// kernel's per-CPU variable: `cpu_tlbstate.ctxs` is the CPU's alone,
    /// `cpu_tlbstate.loaded_mm` is read by the CPUs that flush).
    Cpu {
        /// The CPU that owns it.
        cpu: u32,
        /// Whether other CPUs read it.
        others_read: bool,
    },
    /// Only a CPU holding the [`crate::sync::SpinLock`] whose word is at
    /// `lock` reads or writes the field.
    Lock {
        /// The lock word's address.
        lock: usize,
    },
    /// Only CPU `cpu` reads the field with a plain load; other CPUs may
    /// write it, and read it only with read-modify-writes or load-acquires
    /// (Linux arm64's `active_asids`, which `flush_context` exchanges on
    /// every CPU). Under a weak memory model no other CPU can read an older
    /// value of it.
    Reader {
        /// The CPU whose plain loads read it.
        cpu: u32,
    },
}

impl Owner {
    /// Returns the owners of CPU `cpu`'s per-CPU variables, which only it
    /// writes: of those no other CPU reads, and of those the others read too.
    pub fn per_cpu(cpu: usize) -> (Owner, Owner) {
        (Owner::Cpu { cpu: cpu as u32, others_read: false }, Owner::Cpu { cpu: cpu as u32, others_read: true })
    }
}

/// What a policy names its fields to (the checker's table).
pub trait Fields {
    /// Names the facade atomic at `addr`: `name` (with its index for an element
    /// of a per-CPU or per-mm array: `active_asids[cpu1]`, `mm[2].context.id`),
    /// its value read as `value`.
    fn field(&mut self, addr: usize, name: fmt::Arguments<'_>, value: Value);

    /// Declares who may access the facade atomic at `addr`. The default
    /// ignores it (a table of names has no use for it).
    fn owner(&mut self, addr: usize, owner: Owner) {
        let _ = (addr, owner);
    }
}

/// Something shared that can be named: a facade atomic, a spin lock, a CPU mask.
pub trait Named {
    /// Names every facade atomic `self` consists of to `f`, under `name`.
    fn name_to(&self, f: &mut dyn Fields, name: fmt::Arguments<'_>, value: Value);
}

impl dyn Fields + '_ {
    /// Names `x` (an atomic, lock or mask) `name`, its value read as `value` (a
    /// lock's and a mask's reading is their own).
    pub fn add<N: Named + ?Sized>(&mut self, x: &N, name: fmt::Arguments<'_>, value: Value) {
        x.name_to(self, name, value);
    }

    /// Declares `owner` for every facade atomic `x` (an atomic or a mask)
    /// consists of.
    pub fn own<N: Named + ?Sized>(&mut self, x: &N, owner: Owner) {
        x.name_to(&mut Declare(self, owner), format_args!(""), Value::Hex);
    }
}

/// Declares an owner for every atomic named to it.
struct Declare<'a, 'f>(&'a mut (dyn Fields + 'f), Owner);

impl Fields for Declare<'_, '_> {
    fn field(&mut self, addr: usize, _name: fmt::Arguments<'_>, _value: Value) {
        self.0.owner(addr, self.1);
    }
}

/// Names to `f` and declares every atomic named `Owner::Lock { lock }`: what a
/// [`crate::sync::SpinLock`]'s value holds.
pub(crate) struct UnderLock<'a, 'f> {
    pub(crate) f: &'a mut (dyn Fields + 'f),
    pub(crate) lock: usize,
}

impl Fields for UnderLock<'_, '_> {
    fn field(&mut self, addr: usize, name: fmt::Arguments<'_>, value: Value) {
        self.f.field(addr, name, value);
        self.f.owner(addr, Owner::Lock { lock: self.lock });
    }

    fn owner(&mut self, addr: usize, owner: Owner) {
        self.f.owner(addr, owner);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::format;

    #[test]
    fn values_read_as_the_kernel_writes_them() {
        assert_eq!(format!("{}", Value::GenAsid { asid_bits: 2 }.show(5)), "gen 1, asid 1");
        assert_eq!(format!("{}", Value::GenAsid { asid_bits: 2 }.show(0)), "0");
        assert_eq!(format!("{}", Value::Generation { asid_bits: 2 }.show(8)), "gen 2");
        assert_eq!(format!("{}", Value::Cpus { first: 64 }.show(0b101)), "{cpu64, cpu66}");
        assert_eq!(format!("{}", Value::Cpus { first: 0 }.show(0)), "{}");
        assert_eq!(format!("{}", Value::Lock.show(1)), "held");
        assert_eq!(format!("{}", Value::Lock.show(0)), "free");
        assert_eq!(format!("{}", Value::Mm.show(0)), "kernel");
        assert_eq!(format!("{}", Value::Bool.show(1)), "true");
    }
}

//! Typed workload parameters: each is declared once, as a `const` handle that
//! carries its [`ParamDef`] (key, default, limits, meaning) and says what kind
//! of value it is, and is read through that handle, never by its key.
//!
//! A handle is declared by its kind's `const fn new`: the key, the default,
//! the inclusive limits as a range and the meaning, in the kind's own numbers
//! (a [`Count`]'s are whole, a [`Flag`] is off unless set), so a declaration
//! is one call rather than a [`ParamDef`] written out field by field.
//!
//! A handle reads its key from a [`Params`] map and falls back to its
//! default where the map has no entry. A map filled from a workload's
//! definition, as the command line, sweeps and Python fill it, holds every
//! parameter, so the fallback only spares a hand-built map (a test's) from
//! naming every key.
//!
//! A workload declares its handles with [`params!`], which also makes the
//! list its entry gives, so each parameter is named once.

use super::{ParamDef, Params};

/// Declares a workload's parameters: a handle for each, then the list of
/// them in the same order under the name given first (the `params` of its
/// entry). An entry is `NAME: Kind(key, default, limits)` with its meaning on
/// the next line (`Flag(key)` takes no default or limits), `pub(crate)` before
/// the name where another workload reads it:
///
/// ```ignore
/// params! {
///     PARAMS;
///     ITERS: Count("iters", 100, 1..=10_000)
///         "iterations of each task";
/// }
/// ```
macro_rules! params {
    ($list:ident; $($vis:vis $name:ident: $kind:ident($($arg:expr),*) $doc:literal;)*) => {
        $(
            #[doc = $doc]
            $vis const $name: $crate::workload::$kind = $crate::workload::$kind::new($($arg,)* $doc);
        )*
        /// Its parameters, in their order above.
        const $list: &[$crate::workload::ParamDef] = &[$($name.0),*];
    };
}
pub(crate) use params;
use std::ops::RangeInclusive;

/// Returns the value of `def` in `p`: the entry for its key, or its default
/// when `p` has none.
fn value(def: &ParamDef, p: &Params) -> f64 {
    p.get(def.key).copied().unwrap_or(def.default)
}

/// A parameter that counts something: a non-negative whole number (also the
/// code of a choice, decoded where it is used).
#[derive(Clone, Copy, Debug)]
pub struct Count(pub ParamDef);

impl Count {
    /// Declares the count `key`, `default` unless set, allowed within
    /// `limits` (both ends included), meaning `doc`.
    pub const fn new(key: &'static str, default: u64, limits: RangeInclusive<u64>, doc: &'static str) -> Count {
        let (min, max) = (*limits.start() as f64, *limits.end() as f64);
        Count(ParamDef { key, default: default as f64, min, max, doc })
    }

    /// Returns its value in `p` (its default if `p` has none), truncated to a
    /// whole number as `as u64` truncates.
    pub fn of(self, p: &Params) -> u64 {
        value(&self.0, p) as u64
    }

    /// [`Count::of`] as a `usize` (`as usize` of the value).
    pub fn usize(self, p: &Params) -> usize {
        value(&self.0, p) as usize
    }

    /// Returns its value in `p` (its default if `p` has none), 0 standing for
    /// one per CPU of `cpus`: the workloads whose tasks default to the
    /// machine's size.
    pub fn or_cpus(self, p: &Params, cpus: usize) -> u64 {
        match self.of(p) {
            0 => cpus as u64,
            n => n,
        }
    }
}

/// A parameter that is a real number (a time, a rate).
#[derive(Clone, Copy, Debug)]
pub struct Real(pub ParamDef);

impl Real {
    /// Declares the real number `key`, `default` unless set, allowed within
    /// `limits` (both ends included), meaning `doc`.
    pub const fn new(key: &'static str, default: f64, limits: RangeInclusive<f64>, doc: &'static str) -> Real {
        Real(ParamDef { key, default, min: *limits.start(), max: *limits.end(), doc })
    }

    /// Returns its value in `p` (its default if `p` has none).
    pub fn of(self, p: &Params) -> f64 {
        value(&self.0, p)
    }
}

/// A parameter that switches something on (any value but 0) or off (0).
#[derive(Clone, Copy, Debug)]
pub struct Flag(pub ParamDef);

impl Flag {
    /// Declares the flag `key`, off unless set (0 or 1), meaning `doc`.
    pub const fn new(key: &'static str, doc: &'static str) -> Flag {
        Flag(ParamDef { key, default: 0.0, min: 0.0, max: 1.0, doc })
    }

    /// Returns whether it is on in `p` (by its default if `p` has none): its
    /// value is not 0.
    pub fn of(self, p: &Params) -> bool {
        value(&self.0, p) != 0.0
    }
}

#[cfg(test)]
mod tests {
    use super::{Count, Flag, ParamDef, Params, Real};

    const DEF: ParamDef = ParamDef { key: "n", default: 3.0, min: 0.0, max: 10.0, doc: "a count" };

    #[test]
    fn a_handle_reads_its_key_and_falls_back_to_its_default() {
        let mut p = Params::new();
        assert_eq!((Count(DEF).of(&p), Real(DEF).of(&p), Flag(DEF).of(&p)), (3, 3.0, true));
        assert_eq!(Count(DEF).or_cpus(&p, 8), 3);
        p.insert("n".to_string(), 0.0);
        assert_eq!((Count(DEF).of(&p), Count(DEF).or_cpus(&p, 8), Flag(DEF).of(&p)), (0, 8, false));
        p.insert("n".to_string(), 2.75);
        assert_eq!((Count(DEF).of(&p), Count(DEF).usize(&p), Real(DEF).of(&p)), (2, 2, 2.75));
    }

    #[test]
    fn a_constructor_writes_its_kinds_definition() {
        let fields = |d: ParamDef| (d.key, d.default, d.min, d.max, d.doc);
        assert_eq!(fields(Count::new("n", 3, 0..=10, "a count").0), fields(DEF));
        assert_eq!(fields(Real::new("n", 3.0, 0.0..=10.0, "a count").0), fields(DEF));
        assert_eq!(fields(Flag::new("f", "a flag").0), ("f", 0.0, 0.0, 1.0, "a flag"));
    }
}

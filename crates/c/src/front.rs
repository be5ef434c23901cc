//! The front door for policies by name, C policies included: what the
//! simulator and the checker call to build the policy a user names.
//!
//! The registry (`tlbkit-registry`) holds every Rust policy and describes the
//! C ones ([`C_POLICY`](tlbkit_registry::C_POLICY), found by its prefix
//! [`C_PREFIX`]); it does not depend on this crate and builds no C policy.
//! This module adds the one C entry on top of it: [`with_policy`] builds a
//! `c:FILE...` name here and hands every other name to
//! [`tlbkit_registry::with_policy`]. It cannot be done the other way round,
//! the registry calling back into a builder given at run time:
//! [`WithPolicy::with`] is generic over the policy's type (so that the
//! checker's search is compiled for each policy), and a [`Policy`]'s methods
//! are generic over the hardware, so no policy travels as a trait object or
//! a function pointer.
//!
//! [`pin_content`] and [`unpinned`] are the same door for a check's record of
//! a name: a C policy's name with its files' digest ([`crate::source`],
//! "Identity by content"), any other name as it is.
//!
//! [`Policy`]: tlbkit_policy::Policy

use crate::{CPolicy, Lib, Options, Sources};
use tlbkit_registry::{Build, WithPolicy, C_PREFIX};

/// Why a policy named could not be built: the registry's error for a
/// registered policy (an unknown name, a shape it refuses, a bug it has no
/// switch for), or the C front end's for a C one (a file that does not
/// compile, no compiler, a file that stops while booting). Each reads as
/// the error it wraps.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The registry's error.
    #[error(transparent)]
    Registry(#[from] tlbkit_registry::Error),
    /// The C front end's error.
    #[error(transparent)]
    C(#[from] crate::Error),
}

/// Builds the policy called `name` from `b` and runs `code` with it: a C
/// policy (`c:FILE...`) here, any other name by the registry
/// ([`tlbkit_registry::with_policy`]). Returns an error for an unknown name,
/// a shape the policy refuses, a bug it has no switch for, or a C policy that
/// cannot be built.
pub fn with_policy<W: WithPolicy>(name: &str, b: &Build, code: W) -> Result<W::Out, Error> {
    if name.starts_with(C_PREFIX) {
        c_policy(name, b, code)
    } else {
        Ok(tlbkit_registry::with_policy(name, b, code)?)
    }
}

/// Builds the C policy `name` (`c:FILE...`) for `b` and runs `code` with it:
/// compiles the files (or finds them compiled), boots one copy to refuse a
/// configuration the file cannot run, then hands out fresh policies.
fn c_policy<W: WithPolicy>(name: &str, b: &Build, code: W) -> Result<W::Out, Error> {
    if let Some(bug) = b.bug {
        return Err(tlbkit_registry::Error::NoBugSwitch { policy: name.to_string(), bug }.into());
    }
    let sources = Sources::parse(name)?;
    let options = Options {
        kpti: b.kpti,
        tlbi_range: b.tlbi_range,
        checker: b.checker,
        pti: b.pti,
        ..Options::machine(b.cpus, b.mm_slots, b.asid_bits)
    }
    .with_sources(&sources);
    let lib = Lib::build(&sources, &options)?;
    drop(CPolicy::new(&lib, &options)?);
    Ok(code.with(&|| CPolicy::new(&lib, &options).expect("the same configuration booted")))
}

/// Returns `name` as a check records it: a C policy pinned to its files'
/// content (`c:context.c#DIGEST`; see [`crate::source`], "Identity by
/// content"), refused if pinned already and its files have changed since;
/// any other name as it is.
pub fn pin_content(name: &str) -> Result<String, crate::Error> {
    if !name.starts_with(C_PREFIX) {
        return Ok(name.to_string());
    }
    crate::source::pin(name)
}

/// Returns `name` without the content digest [`pin_content`] adds: the
/// policy as the user named it.
pub fn unpinned(name: &str) -> &str {
    if name.starts_with(C_PREFIX) {
        crate::source::unpinned(name)
    } else {
        name
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tlbkit_policy::zoo::Bug;
    use tlbkit_policy::Policy;

    /// Runs nothing; says that a policy was built.
    struct Built;
    impl WithPolicy for Built {
        type Out = ();
        fn with<P: Policy>(self, _build: &dyn Fn() -> P) {}
    }

    #[test]
    fn a_registered_name_is_the_registrys_and_a_c_name_is_built_here() {
        let b = Build::new(2, 4, 8);
        assert_eq!(with_policy("arm64-linux", &b, Built), Ok(()));
        let e = with_policy("arm64-nope", &b, Built).unwrap_err();
        assert_eq!(e, Error::Registry(tlbkit_registry::Error::UnknownPolicy { name: "arm64-nope".into() }));
        // The registry alone refuses a C name; the door reads its files.
        assert!(matches!(
            tlbkit_registry::with_policy("c:no/such/context.c", &b, Built),
            Err(tlbkit_registry::Error::CPolicy { .. })
        ));
        let e = with_policy("c:no/such/context.c", &b, Built).unwrap_err();
        assert!(matches!(&e, Error::C(crate::Error::Read { path, .. }) if path == "no/such/context.c"), "{e:?}");
        assert!(e.to_string().starts_with("cannot read no/such/context.c: "), "{e}");
        // A C policy has no bug-zoo switch, before any file is read.
        let bug = Build { bug: Some(Bug::FreebsdArm64EpochWrap), ..b };
        let e = with_policy("c:no/such/context.c", &bug, Built).unwrap_err();
        assert_eq!(
            e,
            Error::Registry(tlbkit_registry::Error::NoBugSwitch {
                policy: "c:no/such/context.c".into(),
                bug: Bug::FreebsdArm64EpochWrap
            })
        );
    }

    #[test]
    fn only_a_c_name_is_pinned() {
        assert_eq!(pin_content("arm64-linux").as_deref(), Ok("arm64-linux"));
        assert_eq!(unpinned("arm64-linux"), "arm64-linux");
        assert_eq!(unpinned("c:context.c#0123456789abcdef"), "c:context.c");
        assert!(matches!(pin_content("c:no/such/context.c"), Err(crate::Error::Read { .. })));
    }
}

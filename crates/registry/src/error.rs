//! The registry's errors: a policy it does not have, a shape a policy refuses,
//! a bug a policy has no switch for, a C policy it is asked to build (the C
//! front end builds those, and has errors of its own).
//!
//! No variant names a parameter: the simulator and the checker wrap this
//! error in theirs (`#[from]`) and say which of their parameters led to it.

use crate::POLICIES;
use tlbkit_policy::zoo::Bug;

/// What went wrong in the registry.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A name that is neither a registered policy nor an alias of one.
    #[error("unknown policy '{name}'{}; valid policies: {}", crate::suggest::did_you_mean(name, POLICIES.iter().map(|p| p.name)), names())]
    UnknownPolicy {
        /// The name given.
        name: String,
    },
    /// A shape (CPUs, address spaces, ASID width) the policy's builder
    /// refuses, with the builder's reason: a policy of your own says in its
    /// own words what it cannot be built for.
    #[error("{why}")]
    Refused {
        /// Why, in the policy's words.
        why: String,
    },
    /// A C policy (`c:FILE...`) given to the registry's own `with_policy`:
    /// the registry describes C policies ([`crate::C_POLICY`]) but does not
    /// build them; the C front end does (`tlbkit_c::front::with_policy`, the
    /// door the simulator and the checker go through for every name).
    #[error("{name} is a C policy, which the C front end builds (tlbkit_c::front::with_policy), not the registry")]
    CPolicy {
        /// The name given.
        name: String,
    },
    /// A bug-zoo bug the policy has no switch for.
    #[error("{policy} has no switch for the bug-zoo bug {bug}")]
    NoBugSwitch {
        /// The policy.
        policy: String,
        /// The bug.
        bug: Bug,
    },
    /// An alias of a name that is not a registered policy.
    #[error("cannot alias '{like}': it is not a registered policy")]
    AliasOfUnknown {
        /// The name given as the policy to alias.
        like: String,
    },
    /// An alias whose name a registered policy has.
    #[error("cannot register the alias '{name}': a registered policy has that name")]
    AliasTaken {
        /// The alias's name.
        name: String,
    },
    /// An alias registered already, of another policy.
    #[error("cannot register the alias '{name}' of '{like}': it is an alias of '{was}'")]
    AliasOfAnother {
        /// The alias's name.
        name: String,
        /// The policy asked for now.
        like: String,
        /// The policy it is an alias of.
        was: String,
    },
}

impl Error {
    /// Returns a builder's refusal, for a policy's `build:` in the registry.
    pub fn refused(why: impl Into<String>) -> Error {
        Error::Refused { why: why.into() }
    }
}

/// Returns the registered policies' names, comma-separated.
fn names() -> String {
    POLICIES.iter().map(|p| p.name).collect::<Vec<_>>().join(", ")
}

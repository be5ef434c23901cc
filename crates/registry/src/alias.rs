//! Another name for a registered policy: an entry like the registered one in
//! every field but its name, built by the registered one's builder. It exists so
//! that a test can call every tool with a name no prefix test would recognise
//! (`zz-test-policy`) and show that each tool gives it the defaults of the
//! policy it copies: that the tools read a policy from its entry, never from
//! its name. Registering one needs the feature `test-alias`, which only tests
//! turn on; without it the list stays empty and a lookup that misses the
//! registry costs one uncontended lock.

use crate::PolicyDef;
use std::sync::{Mutex, PoisonError};

/// Every alias: its entry, and the name of the registered policy it copies.
/// Entries are leaked: an alias lives as long as the process, as registered
/// entries do.
static ALIASES: Mutex<Vec<(&'static PolicyDef, &'static str)>> = Mutex::new(Vec::new());

/// Returns the alias called `name`, if one was registered.
pub(crate) fn find(name: &str) -> Option<&'static PolicyDef> {
    let aliases = ALIASES.lock().unwrap_or_else(PoisonError::into_inner);
    aliases.iter().find(|(def, _)| def.name == name).map(|&(def, _)| def)
}

/// Returns the name of the registered policy whose builder builds the alias
/// called `name`, if one was registered.
pub(crate) fn builds_as(name: &str) -> Option<&'static str> {
    let aliases = ALIASES.lock().unwrap_or_else(PoisonError::into_inner);
    aliases.iter().find(|(def, _)| def.name == name).map(|&(_, like)| like)
}

/// Registers `name` as another name of the registered policy `like`, for the
/// rest of the process: [`crate::policy`] then returns a copy of `like`'s entry
/// under `name`, and [`crate::with_policy`] builds it as `like`. Registering the
/// same alias again returns the entry registered first.
///
/// Returns an error if `like` is not a registered policy, or if `name` is one
/// already or an alias of another.
#[cfg(any(test, feature = "test-alias"))]
pub fn alias(name: &str, like: &str) -> Result<&'static PolicyDef, crate::Error> {
    let Some(def) = crate::POLICIES.iter().find(|p| p.name == like) else {
        return Err(crate::Error::AliasOfUnknown { like: like.to_string() });
    };
    if crate::POLICIES.iter().any(|p| p.name == name) {
        return Err(crate::Error::AliasTaken { name: name.to_string() });
    }
    let mut aliases = ALIASES.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(&(seen, was)) = aliases.iter().find(|(d, _)| d.name == name) {
        return if was == def.name {
            Ok(seen)
        } else {
            Err(crate::Error::AliasOfAnother { name: name.to_string(), like: like.to_string(), was: was.to_string() })
        };
    }
    let copy: &'static PolicyDef = Box::leak(Box::new(PolicyDef { name: Box::leak(name.into()), ..*def }));
    aliases.push((copy, def.name));
    Ok(copy)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{policy, with_policy, Build, WithPolicy};
    use tlbkit_policy::Policy;

    #[test]
    fn an_alias_copies_every_field_but_the_name_and_builds_as_its_policy() {
        let def = alias("zz-alias-of-tlbmode", "arm64-linux-tlbmode").unwrap();
        let like = policy("arm64-linux-tlbmode").unwrap();
        assert_eq!(policy("zz-alias-of-tlbmode").map(|p| p.name), Some("zz-alias-of-tlbmode"));
        assert_eq!(format!("{def:?}"), format!("{like:?}").replace("arm64-linux-tlbmode", "zz-alias-of-tlbmode"));
        assert_eq!(builds_as("zz-alias-of-tlbmode"), Some("arm64-linux-tlbmode"));

        /// The type of the policy built.
        struct Name;
        impl WithPolicy for Name {
            type Out = &'static str;
            fn with<P: Policy>(self, _build: &dyn Fn() -> P) -> &'static str {
                std::any::type_name::<P>()
            }
        }
        let b = Build::new(2, 4, 8);
        assert_eq!(with_policy("zz-alias-of-tlbmode", &b, Name), with_policy("arm64-linux-tlbmode", &b, Name));
    }

    #[test]
    fn an_alias_of_nothing_or_over_a_name_in_use_is_refused() {
        assert_eq!(alias("zz-alias-twice", "x86-latr").map(|p| p.name), Ok("zz-alias-twice"));
        assert_eq!(alias("zz-alias-twice", "x86-latr").map(|p| p.name), Ok("zz-alias-twice"));
        let e = alias("zz-alias-twice", "x86-linux-pcid").unwrap_err();
        assert_eq!(
            e.to_string(),
            "cannot register the alias 'zz-alias-twice' of 'x86-linux-pcid': it is an alias of 'x86-latr'"
        );
        let e = alias("zz-alias-of-an-alias", "zz-alias-twice").unwrap_err();
        assert_eq!(e.to_string(), "cannot alias 'zz-alias-twice': it is not a registered policy");
        let e = alias("x86-latr", "x86-linux-pcid").unwrap_err();
        assert_eq!(e.to_string(), "cannot register the alias 'x86-latr': a registered policy has that name");
        assert!(policy("zz-never-registered").is_none());
    }
}

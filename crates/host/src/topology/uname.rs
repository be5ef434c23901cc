//! The kernel's own name for the machine, its release and the host name, as
//! `uname(2)` gives them.

use crate::Error;
use serde::{Deserialize, Serialize};

/// The fields of `uname(2)` a [`Topology`](super::Topology) keeps.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Uname {
    /// `machine`: `x86_64`, `aarch64`.
    pub machine: String,
    /// `release`: the kernel's version, `6.8.0-45-generic`.
    pub release: String,
    /// `nodename`: the host name.
    pub nodename: String,
}

impl Uname {
    /// Returns this host's `uname(2)`.
    ///
    /// # Errors
    /// [`Error::Io`] if `uname` fails; [`Error::NotLinux`] on other systems.
    #[cfg(target_os = "linux")]
    pub fn host() -> Result<Uname, Error> {
        // SAFETY: `utsname` is plain arrays of `c_char`, for which all zeros
        // is a valid value.
        let mut u: libc::utsname = unsafe { std::mem::zeroed() };
        // SAFETY: `u` is a valid, writable `utsname`.
        if unsafe { libc::uname(&mut u) } != 0 {
            return Err(Error::last_os("uname"));
        }
        Ok(Uname { machine: field(&u.machine), release: field(&u.release), nodename: field(&u.nodename) })
    }

    /// Returns [`Error::NotLinux`]: only Linux is measured.
    ///
    /// # Errors
    /// Always.
    #[cfg(not(target_os = "linux"))]
    pub fn host() -> Result<Uname, Error> {
        Err(Error::not_linux())
    }
}

/// Returns a NUL-terminated `utsname` field as text (the whole array if it
/// has no NUL; bytes that are not UTF-8 replaced).
#[cfg(target_os = "linux")]
fn field(chars: &[libc::c_char]) -> String {
    let bytes: Vec<u8> = chars.iter().map(|&c| c as u8).take_while(|&b| b != 0).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

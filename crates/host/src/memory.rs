//! This process's own memory, as the system counts it (Linux's
//! `/proc/self/status`), for the commands that report what a run held.
//!
//! Every figure is `None` where the system does not say (not Linux, or no
//! `/proc`). The peak is the process's own high-water mark (`VmHWM`), not the
//! one `wait4` gives a parent: a process started by `posix_spawn`, or by
//! `fork` then `exec`, begins with the peak of the process that started it
//! (Linux's `exec` keeps the old address space's high-water mark), so only a
//! process can say what it held itself.

/// The most memory this process has held (its peak resident set), in bytes:
/// `VmHWM`.
pub fn peak_bytes() -> Option<u64> {
    status_bytes("VmHWM:")
}

/// The memory this process holds now (its resident set), in bytes: `VmRSS`.
pub fn resident_bytes() -> Option<u64> {
    status_bytes("VmRSS:")
}

/// Starts the peak over from what the process holds now, returning whether
/// the system allows it (Linux 4.0 and later: `5` written to
/// `/proc/self/clear_refs`).
pub fn reset_peak() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// Returns the field `key` of `/proc/self/status` (a size in kB) in bytes.
fn status_bytes(key: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    parse_kb(&status, key)
}

/// Returns the field `key` of a `status` text (`"VmHWM:   1234 kB"`) in
/// bytes.
fn parse_kb(status: &str, key: &str) -> Option<u64> {
    let kb = status.lines().find_map(|l| l.strip_prefix(key))?.trim().strip_suffix("kB")?.trim();
    kb.parse::<u64>().ok().map(|k| k << 10)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_field_is_read_in_bytes_and_a_missing_one_is_none() {
        let status = "Name:\ttlbkit\nVmHWM:\t    2048 kB\nVmRSS:\t     512 kB\n";
        assert_eq!(parse_kb(status, "VmHWM:"), Some(2048 << 10));
        assert_eq!(parse_kb(status, "VmRSS:"), Some(512 << 10));
        assert_eq!(parse_kb(status, "VmSwap:"), None);
        assert_eq!(parse_kb("VmHWM:\t12 pages\n", "VmHWM:"), None);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_process_holds_memory_and_its_peak_is_at_least_that() {
        let (now, peak) = (resident_bytes().unwrap(), peak_bytes().unwrap());
        assert!(now > 1 << 20, "a test process holds more than a MiB ({now} bytes)");
        assert!(peak >= now, "the peak {peak} is below what is held now, {now}");
    }
}

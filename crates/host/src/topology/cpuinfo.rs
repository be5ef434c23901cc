//! What `/proc/cpuinfo` says of the processor: its model, its clock when
//! cpufreq does not, and its feature flags.
//!
//! x86 prints one block per CPU with `model name` and `cpu MHz`
//! (arch/x86/kernel/cpu/proc.c, `show_cpuinfo`); arm64 prints neither, only
//! the MIDR fields `CPU implementer` and `CPU part` in hex
//! (arch/arm64/kernel/cpuinfo.c, `c_show`; its `model name` line is printed
//! to 32-bit tasks only).

/// Returns the first value of the line `key : value` (the key matched
/// exactly, the blanks around the colon ignored).
fn value<'a>(cpuinfo: &'a str, key: &str) -> Option<&'a str> {
    cpuinfo.lines().find_map(|line| {
        let (k, v) = line.split_once(':')?;
        (k.trim() == key).then_some(v.trim())
    })
}

/// Returns the model: x86's `model name`, else arm64's implementer and part
/// (`implementer 0x41 part 0xd0c`), else `unknown`.
pub(super) fn model(cpuinfo: &str) -> String {
    if let Some(name) = value(cpuinfo, "model name").filter(|v| !v.is_empty()) {
        return name.to_string();
    }
    match (value(cpuinfo, "CPU implementer"), value(cpuinfo, "CPU part")) {
        (Some(implementer), Some(part)) => format!("implementer {implementer} part {part}"),
        _ => "unknown".to_string(),
    }
}

/// Returns the first CPU's `cpu MHz`, if it is there and a positive number.
pub(super) fn mhz(cpuinfo: &str) -> Option<f64> {
    value(cpuinfo, "cpu MHz")?.parse::<f64>().ok().filter(|mhz| mhz.is_finite() && *mhz > 0.0)
}

/// Returns whether the first CPU's `flags` (x86) name `flag`.
pub(super) fn has_flag(cpuinfo: &str, flag: &str) -> bool {
    value(cpuinfo, "flags").is_some_and(|flags| flags.split_whitespace().any(|f| f == flag))
}

//! Scripts of operations (`tlbkit check --script FILE`):
//! `tlbkit_check::search::parse_script`, the reader of a script's lines.
//!
//! The input's first three bytes choose the machine (1 to 8 CPUs, 1 to 8
//! address spaces, 1 to `MAX_PAGES` pages); the rest is the script. A script
//! that reads has at least one operation, each on one of the machine's CPUs
//! and naming a line of the input; a refusal is one line.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tlbkit_check::kernel::MAX_PAGES;
use tlbkit_check::search::parse_script;

fuzz_target!(|data: &[u8]| {
    let [c, m, p, script @ ..] = data else { return };
    let (cpus, mms, pages) = (1 + usize::from(c % 8), 1 + usize::from(m % 8), 1 + usize::from(*p) % MAX_PAGES);
    let Ok(text) = std::str::from_utf8(script) else { return };
    match parse_script(text, cpus, mms, pages) {
        Ok(items) => {
            let lines = text.lines().count();
            assert!(!items.is_empty(), "a script without operations read");
            for item in &items {
                assert!(item.cpu < cpus, "line {}: cpu{} on {cpus} CPUs", item.line, item.cpu);
                assert!((1..=lines).contains(&item.line), "line {} of a script of {lines} lines", item.line);
            }
        }
        Err(why) => assert!(!why.contains('\n'), "a refusal of more than one line: {why}"),
    }
});

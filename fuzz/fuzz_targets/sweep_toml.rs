//! The sweep TOML (`tlbkit sweep FILE`): the file is parsed and checked, then
//! its grid is expanded and every point checked as `tlbkit run` would, which is
//! everything `tlbkit sweep` does before its first run.
//!
//! A grid that checks has at least one point and no more than the runs a sweep
//! may hold.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tlbkit_lab::sweep::{schema::Sweep, MAX_RUNS};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(sweep) = Sweep::parse(text, "f.toml") else { return };
    if let Ok(grid) = sweep.grid() {
        assert!((1..=MAX_RUNS).contains(&(grid.points.len() + grid.other_arch)));
    }
});

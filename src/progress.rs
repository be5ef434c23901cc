//! Progress on stderr for commands that can run long: a bar where the amount of
//! work is known, a spinner where it is not.
//!
//! What is guaranteed: when stderr is not a terminal (a pipe, a file, a test),
//! nothing at all is drawn, so such output is what it would be without progress.
//! Progress never writes to stdout and never touches what a command computes: it
//! only reads counts the work hands it. What is not: that a bar is exact between
//! two updates (its rate and ETA are estimates).

use indicatif::{ProgressBar, ProgressFinish, ProgressStyle};
use std::io::IsTerminal;
use std::time::Duration;

/// What a bar counts.
#[derive(Clone, Copy, Debug)]
pub enum Unit {
    /// Simulation runs.
    Runs,
    /// Bytes of an input file.
    Bytes,
}

/// How often a visible bar redraws by itself, so that its elapsed time and
/// spinner move during a long step.
const TICK: Duration = Duration::from_millis(200);

/// Returns a bar of `len` units on stderr, hidden unless stderr is a terminal;
/// dropping it clears it, so that an error message starts on a clean line.
pub fn bar(len: u64, unit: Unit) -> ProgressBar {
    shown(ProgressBar::new(len), bar_style(unit))
}

/// Returns a spinner with the elapsed time on stderr, hidden unless stderr is
/// a terminal; dropping it clears it.
pub fn spinner() -> ProgressBar {
    shown(ProgressBar::new_spinner(), spinner_style())
}

fn shown(bar: ProgressBar, style: ProgressStyle) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = bar.with_style(style).with_finish(ProgressFinish::AndClear);
    bar.enable_steady_tick(TICK);
    bar
}

fn bar_style(unit: Unit) -> ProgressStyle {
    let template = match unit {
        Unit::Runs => "{elapsed_precise} [{bar:40}] {pos}/{len} runs, {per_sec}, {eta} left {msg}",
        Unit::Bytes => "{elapsed_precise} [{bar:40}] {bytes}/{total_bytes}, {bytes_per_sec}, {eta} left {msg}",
    };
    // The templates are constants; a test parses every one.
    ProgressStyle::with_template(template).expect("a valid progress template").progress_chars("=> ")
}

fn spinner_style() -> ProgressStyle {
    ProgressStyle::with_template("{spinner} {elapsed} {msg}").expect("a valid progress template")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_template_parses() {
        bar_style(Unit::Runs);
        bar_style(Unit::Bytes);
        spinner_style();
    }
}

//! A user's machine file (`tlbkit run --machine PATH.toml`):
//! `tlbkit_sim::preset::file::load_text`, the reader and checker of a
//! machine's fields, bases, sources and ranges, then a small run on the
//! machine it gives.
//!
//! The input is the file's text. A file that is refused is refused in words
//! naming the file; a file that loads is a machine the simulator can run: a
//! two-task `will_it_scale_tlb_flush2` of one lap of eight pages on up to two
//! of its CPUs, under the Linux policy of its architecture, ends in a result or
//! an error, never a panic, a hang or a runaway allocation.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tlbkit_sim::preset::{self, Arch};
use tlbkit_sim::run::{self, RunSpec};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let machine = match preset::file::load_text(text, "fuzz.toml") {
        Ok(m) => m,
        Err(e) => {
            assert!(e.to_string().contains("fuzz.toml"), "a refusal that does not name the file: {e}");
            return;
        }
    };
    let policy = match machine.arch {
        Arch::X86_64 => "x86-linux-613",
        _ => "arm64-linux",
    };
    let spec = RunSpec {
        machine: "fuzz.toml".into(),
        cpus: machine.real_cores.clamp(1, 2),
        policy: policy.into(),
        workload: "will_it_scale_tlb_flush2".into(),
        sets: vec!["laps=1".into(), "pages=8".into(), "tasks=2".into()],
        seed: 1,
        strict: false,
    };
    let _ = run::run_on(&spec, machine);
});

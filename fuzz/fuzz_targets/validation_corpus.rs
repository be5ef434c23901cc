//! Files of the validation corpus (`tlbkit validate --corpus DIR`):
//! `tlbkit_lab::validate::Corpus::from_files`, the reader and checker of the
//! TOML entries, then planning the runs and judging every figure on made-up
//! metrics.
//!
//! The input is one file's text. A file that reads plans runs whose every
//! `{x}` was filled; judging it on metrics that are all 1 gives a row per
//! figure point and never panics (an expression may divide by zero: that is a
//! figure, not a crash); a refusal names the file in one line.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::collections::BTreeMap;
use tlbkit_lab::validate::{judge_all, plan, Corpus, Results};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    match Corpus::from_files([("f.toml".to_string(), text.to_string())]) {
        Ok(corpus) => {
            let entries: Vec<_> = corpus.entries.iter().collect();
            let Ok(specs) = plan(&entries, 2) else { return };
            let mut results = Results::new();
            for s in &specs {
                assert!(!s.command().contains("{x}"), "an unfilled point in {}", s.command());
                let metrics: BTreeMap<String, f64> =
                    corpus.entries[0].figures.iter().map(|_| ("ops_per_s".to_string(), 1.0)).collect();
                results.insert(s.command(), Ok(metrics));
            }
            let judged = judge_all(&entries, &results, 2);
            assert_eq!(judged.len(), 1);
        }
        Err(why) => assert!(why.starts_with("f.toml"), "a refusal that does not name the file: {why}"),
    }
});

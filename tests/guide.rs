//! The user guide (`docs/guide`, an mdBook) quotes tlbkit's output. Each quoted
//! output is a file under `docs/guide/src/outputs/`, included by the chapters
//! with `{{#include}}`, and this test runs the command that produced it and
//! compares: a change to what tlbkit prints fails here until the guide says the
//! same. `TLBKIT_BLESS=1 cargo test --test commands guide::` rewrites the files from the
//! current binary (then read the diff: the prose around them may need words).
//!
//! It also holds the guide to the rest of the repository: every chapter the
//! summary names exists, every file a chapter includes exists, and no file of
//! the project refers to a path outside the repository.

use crate::common::tlbkit;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The quoted outputs: the file under `docs/guide/src/outputs/` and the
/// arguments of the `tlbkit` command that prints it (stdout only), separated
/// by spaces.
const OUTPUTS: &[(&str, &str)] = &[
    ("run.txt", "run --machine cortex-a72 --cpus 1 --policy arm64-freebsd-asid --workload lat_ctx --set procs=20 --set size_kb=0"),
    ("compare.txt", "compare --machine cortex-a72 --cpus 2 --workload lat_ctx --policy arm64-noasid --policy arm64-freebsd-asid --set procs=8 --set jitter=0.02 --runs 5"),
    ("check-clean.txt", "check --policy arm64-linux --deep --mms 3 --ops 3 --jobs 1"),
    ("check-zoo.txt", "check --policy zoo/linux-arm64-a8ffaaa060b8"),
    ("check-early-ack.txt", "check --policy zoo/freebsd-x86-counter-early-ack"),
    ("check-stable-check-use-order.txt", "check --policy zoo/linux-x86-stable-check-use-order --deep --jobs 1"),
    ("check-collapse.txt", "check --policy zoo/linux-x86-3ef938c35035 --deep --jobs 1"),
    ("check-activecpu-reset.txt", "check --policy zoo/arm64-activecpu-reset-reserved --deep --jobs 1"),
    ("check-tlbbatch-v4.txt", "check --policy zoo/linux-x86-invlpgb-tlbbatch-v4 --deep --jobs 1"),
    ("check-tlbbatch-v1.txt", "check --policy zoo/linux-x86-invlpgb-tlbbatch-v1 --deep --jobs 1"),
    ("example-run.txt", "run --machine cortex-a72 --cpus 2 --policy arm64-freebsd-asid-activecpu --workload mprotect_threaded --set iters=20"),
    ("example-compare.txt", "compare --machine cortex-a72 --cpus 2 --workload mprotect_threaded --policy arm64-freebsd-asid-fix-reserved-ttbr0 --policy arm64-freebsd-asid-activecpu --set iters=20 --set jitter=0.02 --runs 4"),
    ("example-check.txt", "check --policy arm64-freebsd-asid-activecpu"),
    ("list-policies.txt", "list policies"),
    // Check your kernel patch: the kernel's files are the test data of third_party/linux.
    ("kernel-today.txt", "check --c third_party/linux/v6.12/arch/arm64/mm/context.c --quick --mms 5 --pages 1"),
    ("kernel-base.txt", "check --c third_party/linux/v6.12/arch/arm64/mm/context.c --quick --base c:third_party/linux/a8ffaaa060b8-parent/arch/arm64/mm/context.c"),
    ("kernel-a8ffaaa060b8.txt", "check --c third_party/linux/a8ffaaa060b8-parent/arch/arm64/mm/context.c"),
    ("kernel-5e10f9887ed8-parent.txt", "check --c third_party/linux/5e10f9887ed8-parent/arch/arm64/mm/context.c --c third_party/linux/5e10f9887ed8-parent/arch/arm64/include/asm/tlbflush.h --c third_party/linux/5e10f9887ed8-parent/arch/arm64/include/asm/mmu.h --cnp"),
    ("kernel-5e10f9887ed8-tlbi.txt", "check --c third_party/linux/5e10f9887ed8-parent/arch/arm64/mm/context.c --c third_party/linux/5e10f9887ed8-parent/arch/arm64/include/asm/tlbflush.h --c third_party/linux/5e10f9887ed8/arch/arm64/include/asm/mmu.h --cnp"),
    ("kernel-5e10f9887ed8.txt", "check --c third_party/linux/5e10f9887ed8-parent/arch/arm64/mm/context.c --c third_party/linux/5e10f9887ed8/arch/arm64/include/asm/tlbflush.h --c third_party/linux/5e10f9887ed8/arch/arm64/include/asm/mmu.h --cnp --cpus 2 --mms 5 --pages 1 --ops 10 --menu switch,reclaim,unmap-table,exit --memory tso --iterations 20000"),
    ("kernel-race.txt", "check --c crates/c/tests/constructed/race.c --cpus 2 --mms 3 --pages 1 --asids 16 --ops 3 --mode exhaustive --jobs 1"),
    ("kernel-compare.txt", "compare --machine altra --cpus 8 --workload mprotect_threaded --policy c:third_party/linux/v6.12/arch/arm64/mm/context.c --policy arm64-linux --set iters=2000 --set jitter=0.02 --runs 5"),
    // Check your x86 patch: v6.18.2's arch/x86/mm/tlb.c, test data of third_party/linux.
    ("kernel-x86-today.txt", "check --c third_party/linux/v6.18.2/arch/x86/mm/tlb.c --quick"),
    ("kernel-x86-compare.txt", "compare --machine icx8336c --cpus 4 --workload madvise_dontneed_loop --policy c:third_party/linux/v6.18.2/arch/x86/mm/tlb.c --policy x86-linux-lazytrim --set jitter=0.02 --runs 3"),
    ("kernel-x86-releases.txt", "compare --machine icx8336c --cpus 4 --workload madvise_dontneed_loop --policy c:third_party/linux/v6.14/arch/x86/mm/tlb.c --policy c:third_party/linux/v6.18.2/arch/x86/mm/tlb.c --set jitter=0.02 --runs 3"),
    ("kernel-x86-v512-v513.txt", "compare --machine icx8336c --cpus 4 --workload madvise_dontneed_loop --policy c:third_party/linux/v5.12.9/arch/x86/mm/tlb.c --policy c:third_party/linux/v5.13/arch/x86/mm/tlb.c --policy x86-linux-513 --set jitter=0.02 --runs 3"),
    ("kernel-x86-global-asid-fix.txt", "check --policy c:third_party/linux/v6.17-hou-2of3/arch/x86/mm/tlb.c+invlpgb=on+sample=every --cpus 4 --mms 6 --pages 2 --asids 32 --memory sc --menu switch,munmap,exit,fork,idle --ops 232 --mode pct --iterations 2000 --script docs/findings/x86-global-asid-max.c.script"),
    ("litmus.txt", "litmus crates/check/litmus/vmsa"),
    // Which verdicts turn on estimates: one entry's four one-CPU runs.
    ("validate-h18.txt", "validate --only H18 --seeds 1 --no-cache"),
    ("validate-h18-tlb-x2.txt", "validate --only H18 --seeds 1 --no-cache --vary tlb=2"),
];

fn bless() -> bool {
    std::env::var_os("TLBKIT_BLESS").is_some_and(|v| v == "1")
}

#[test]
fn the_guide_quotes_what_tlbkit_prints() {
    let dir = root().join("docs/guide/src/outputs");
    // The commands run on the host's cores, each output compared in the
    // guide's order.
    let next = std::sync::atomic::AtomicUsize::new(0);
    let runs = std::sync::Mutex::new(Vec::new());
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get()).min(OUTPUTS.len());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some((_, args)) = OUTPUTS.get(i) else { break };
                let out = tlbkit(&args.split_whitespace().collect::<Vec<_>>());
                runs.lock().unwrap().push((i, out));
            });
        }
    });
    let mut runs = runs.into_inner().unwrap();
    runs.sort_by_key(|r| r.0);
    assert_eq!(runs.len(), OUTPUTS.len());
    let mut stale = Vec::new();
    for ((file, args), (_, out)) in OUTPUTS.iter().zip(runs) {
        let code = out.status.code();
        // validate exits 1 when a target is not met, as one entry's rows
        // alone may leave it.
        let validate_short = args.starts_with("validate") && code == Some(1);
        assert!(
            matches!(code, Some(0) | Some(3)) || validate_short,
            "tlbkit {args} exited with {code:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        // The worked example as written passes its default check (the
        // checker's own tests find each of its mistakes with the same
        // portfolio: crates/check/tests/example.rs).
        if *file == "example-check.txt" {
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(code == Some(0) && text.ends_with("result: no violation\n"), "tlbkit {args}:\n{text}");
        }
        let path = dir.join(file);
        if bless() {
            std::fs::write(&path, &out.stdout).expect("write a guide output");
            continue;
        }
        let quoted = std::fs::read(&path).unwrap_or_default();
        if quoted != out.stdout {
            stale.push(format!("{} (tlbkit {args})", path.display()));
        }
    }
    assert!(
        stale.is_empty(),
        "the guide quotes output tlbkit no longer prints; rerun with TLBKIT_BLESS=1 and read the diff:\n  {}",
        stale.join("\n  ")
    );
}

/// Every subcommand's `--help`, as the command-line reference includes it.
#[test]
fn the_cli_reference_is_the_cli() {
    let dir = root().join("docs/guide/src/outputs/cli");
    let top = tlbkit(&["--help"]);
    let top = String::from_utf8(top.stdout).expect("utf-8 help");
    let subs = subcommands(&top);
    assert!(subs.contains(&"check") && subs.contains(&"run"), "subcommands not found in:\n{top}");
    let mut pages: Vec<(String, Vec<u8>)> = vec![("tlbkit.txt".into(), top.clone().into_bytes())];
    for s in &subs {
        let out = tlbkit(&[s, "--help"]);
        let help = String::from_utf8(out.stdout.clone()).expect("utf-8 help");
        pages.push((format!("{s}.txt"), out.stdout));
        // A command with subcommands of its own (bench, trace): a page for each.
        for t in subcommands(&help) {
            let out = tlbkit(&[s, t, "--help"]);
            pages.push((format!("{s}-{t}.txt"), out.stdout));
        }
    }
    assert!(pages.iter().any(|(f, _)| f == "bench-scale.txt"), "bench's subcommands not found");
    let reference = std::fs::read_to_string(root().join("docs/guide/src/cli.md")).expect("read cli.md");
    let mut stale = Vec::new();
    for (file, text) in &pages {
        let path = dir.join(file);
        if bless() {
            std::fs::create_dir_all(&dir).expect("create the cli outputs folder");
            std::fs::write(&path, text).expect("write a help page");
        } else if std::fs::read(&path).unwrap_or_default() != *text {
            stale.push(path.display().to_string());
        }
        assert!(
            reference.contains(&format!("outputs/cli/{file}")),
            "docs/guide/src/cli.md does not include outputs/cli/{file}"
        );
    }
    assert!(stale.is_empty(), "help pages changed; rerun with TLBKIT_BLESS=1:\n  {}", stale.join("\n  "));
}

/// Returns the subcommands a `--help` page lists, without `help`.
fn subcommands(help: &str) -> Vec<&str> {
    help.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|s| *s != "help")
        .collect()
}

fn chapters() -> Vec<PathBuf> {
    let src = root().join("docs/guide/src");
    let summary = std::fs::read_to_string(src.join("SUMMARY.md")).expect("read SUMMARY.md");
    summary
        .split("](")
        .skip(1)
        .filter_map(|s| s.split(')').next())
        .filter(|s| s.ends_with(".md"))
        .map(|s| src.join(s))
        .collect()
}

#[test]
fn every_chapter_and_include_of_the_guide_exists() {
    let chapters = chapters();
    assert!(chapters.len() >= 15, "SUMMARY.md names only {} chapters", chapters.len());
    for c in &chapters {
        let text = std::fs::read_to_string(c).unwrap_or_else(|e| panic!("{}: {e}", c.display()));
        for inc in text.split("{{#include ").skip(1) {
            let rel = inc.split("}}").next().unwrap_or_default().split(':').next().unwrap_or_default();
            let path = c.parent().unwrap_or(Path::new(".")).join(rel.trim());
            assert!(path.is_file(), "{} includes {}, which does not exist", c.display(), path.display());
        }
    }
}

/// No chapter passes 400 lines: a longer one is split by subject into pages
/// of its own in `SUMMARY.md`, so that a reader finds a subject in the
/// table of contents.
#[test]
fn no_chapter_passes_400_lines() {
    for c in chapters() {
        let n = std::fs::read_to_string(&c).unwrap_or_default().lines().count();
        assert!(n <= 400, "{} has {n} lines, more than 400: split it by subject (a page of its own)", c.display());
    }
}

/// mdbook's anchor of a heading: lower case, spaces as `-`, other
/// punctuation dropped.
fn anchor(heading: &str) -> String {
    heading
        .chars()
        .filter_map(|c| match c {
            c if c.is_alphanumeric() || c == '_' || c == '-' => Some(c.to_ascii_lowercase()),
            c if c.is_whitespace() => Some('-'),
            _ => None,
        })
        .collect()
}

/// Every link from a chapter to another (`](page.md)`, `](page.md#anchor)`)
/// lands: the page exists and the anchor is one of its headings, so that a
/// chapter split in two leaves no link behind.
#[test]
fn every_link_between_chapters_lands() {
    let mut checked = 0;
    for c in chapters() {
        let text = std::fs::read_to_string(&c).unwrap_or_default();
        for link in text.split("](").skip(1) {
            let target = link.split(')').next().unwrap_or_default();
            let (page, frag) = target.split_once('#').unwrap_or((target, ""));
            if !page.ends_with(".md") || page.contains("://") {
                continue;
            }
            let path = c.parent().unwrap_or(Path::new(".")).join(page);
            let linked = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("{} links to {}: {e}", c.display(), path.display()));
            if !frag.is_empty() {
                let anchors: Vec<String> = linked
                    .lines()
                    .filter(|l| l.starts_with('#'))
                    .filter_map(|l| l.trim_start_matches('#').strip_prefix(' '))
                    .map(anchor)
                    .collect();
                assert!(
                    anchors.iter().any(|a| a == frag),
                    "{} links to {page}#{frag}, which has no such heading",
                    c.display()
                );
            }
            checked += 1;
        }
    }
    assert!(checked > 50, "only {checked} links between chapters were found");
}

/// Collects the text files of the repository (not build outputs, not git's).
fn text_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let p = e.path();
        let name = e.file_name().to_string_lossy().into_owned();
        if p.is_dir() {
            if !["target", ".git", "book", "corpus", "artifacts"].contains(&name.as_str()) {
                text_files(&p, out);
            }
        } else if [".rs", ".md", ".toml", ".sh", ".py", ".txt"].iter().any(|x| name.ends_with(x)) || name == "run" {
            out.push(p);
        }
    }
}

#[test]
fn no_file_refers_to_a_path_outside_the_repository() {
    let mut files = Vec::new();
    text_files(&root(), &mut files);
    assert!(files.len() > 50, "found only {} files", files.len());
    // Spelled in two pieces so that this file does not match itself.
    let outside = [concat!("../", "shared"), concat!("/work", "/shared")];
    for f in files {
        let Ok(text) = std::fs::read_to_string(&f) else { continue };
        for o in outside {
            assert!(!text.contains(o), "{} refers to {o}, outside the repository", f.display());
        }
    }
}

/// Returns the repository paths a text names in backquotes (`crates/...`,
/// `src/...`, ...), whole: no placeholder (`TARGET`) and nothing a command
/// writes (`.jsonl` results, the built book).
fn named_paths(text: &str) -> Vec<String> {
    let roots = ["crates/", "src/", "tests/", "examples/", "docs/", "fuzz/"];
    text.split('`')
        .skip(1)
        .step_by(2)
        .filter(|s| roots.iter().any(|r| s.starts_with(r)))
        .filter(|s| s.chars().all(|c| c.is_ascii_alphanumeric() || "_./-".contains(c)))
        .filter(|s| !s.contains("TARGET") && !s.ends_with(".jsonl") && !s.starts_with("docs/guide/book"))
        .map(str::to_string)
        .collect()
}

#[test]
fn every_path_the_guide_and_readme_name_exists() {
    let mut docs = chapters();
    docs.push(root().join("README.md"));
    let mut named = 0;
    for d in docs {
        let text = std::fs::read_to_string(&d).unwrap_or_default();
        for p in named_paths(&text) {
            named += 1;
            assert!(root().join(&p).exists(), "{} names {p}, which does not exist", d.display());
        }
    }
    assert!(named > 50, "the guide names only {named} paths");
}

/// The README is the project's front page: what tlbkit is, the two commands, a
/// tour, one table of speed figures and links into the guide. Measurement
/// history belongs in `bench/` and `CHANGELOG.md`, so that it does not grow back.
#[test]
fn the_readme_stays_under_150_lines() {
    let readme = std::fs::read_to_string(root().join("README.md")).expect("read README.md");
    let lines = readme.lines().count();
    assert!(
        lines <= 150,
        "README.md has {lines} lines, more than 150: move history to bench/ or CHANGELOG.md and detail to the guide"
    );
}

/// The cost model's table of presets is the machine files': one row per
/// preset, in any order, each linking the notes its file names, and no row
/// for a machine that has no file.
#[test]
fn the_cost_models_preset_table_is_the_machine_files() {
    let text = std::fs::read_to_string(root().join("docs/guide/src/cost-model.md")).unwrap();
    let o = tlbkit(&["list", "machines", "--format", "json"]);
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let mut files: Vec<(String, String)> = doc["machines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let notes = m["cost_sources"].as_str().unwrap().trim_start_matches("docs/").to_string();
            (m["name"].as_str().unwrap().to_string(), notes)
        })
        .collect();
    let mut rows: Vec<(String, String)> = text
        .lines()
        .filter(|l| l.starts_with("| `") && l.contains("](costs/"))
        .map(|l| {
            let name = l.split('`').nth(1).unwrap().to_string();
            let link = l.rsplit("](").next().unwrap().split(')').next().unwrap().to_string();
            (name, link)
        })
        .collect();
    files.sort();
    rows.sort();
    assert_eq!(rows, files, "docs/guide/src/cost-model.md's preset table against crates/sim/machines/");
}

/// The guide's table of `validate --vary`'s kinds names each kind's fields,
/// as `tlbkit_sim::preset::vary::COST_KINDS` has them.
#[test]
fn the_vary_kinds_table_is_the_code() {
    let text = std::fs::read_to_string(root().join("docs/guide/src/accuracy-estimates.md")).unwrap();
    for k in tlbkit_sim::preset::vary::COST_KINDS {
        let row = text.lines().find(|l| l.starts_with(&format!("| `{}` |", k.name)));
        let row = row.unwrap_or_else(|| panic!("no row for kind '{}' in accuracy-estimates.md", k.name));
        let named: Vec<&str> = row.split('`').skip(3).step_by(2).collect();
        assert_eq!(named, k.fields, "the row of '{}' names its fields, in order", k.name);
    }
}

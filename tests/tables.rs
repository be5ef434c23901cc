//! Every table a command prints is aligned: in each column, names start and
//! numbers end in the same character position on every line, header included;
//! and the commands that show progress on a terminal write nothing for it when
//! stderr is not one (as here, where it is a pipe).

use std::process::{Command, Output};

fn tlbkit(args: &[&str]) -> Output {
    let o = Command::new(env!("CARGO_BIN_EXE_tlbkit")).args(args).output().expect("run tlbkit");
    assert_eq!(o.status.code(), Some(0), "{args:?}: {}", String::from_utf8_lossy(&o.stderr));
    o
}

fn stdout(args: &[&str]) -> String {
    String::from_utf8(tlbkit(args).stdout).unwrap()
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Align {
    Left,
    Right,
}
use Align::{Left, Right};

/// Returns the character positions (start, end) of a line's cells: its text
/// split at runs of two spaces or more, the last of `n` cells taking the rest
/// of the line (so that it may hold two spaces).
fn cells(line: &str, n: usize) -> Vec<(usize, usize)> {
    let chars: Vec<char> = line.chars().collect();
    let end_of_text = chars.iter().rposition(|c| *c != ' ').map_or(0, |i| i + 1);
    let mut out = Vec::new();
    let mut i = chars.iter().position(|c| *c != ' ').unwrap_or(chars.len());
    while i < end_of_text {
        let start = i;
        if out.len() + 1 == n {
            out.push((start, end_of_text));
            break;
        }
        while i < end_of_text && !(chars[i] == ' ' && chars.get(i + 1) == Some(&' ')) {
            i += 1;
        }
        out.push((start, i));
        while i < end_of_text && chars[i] == ' ' {
            i += 1;
        }
    }
    out
}

/// Asserts that `lines` are rows of one table whose columns align as given:
/// every row has a cell per column, and each column's cells all start (left)
/// or all end (right) at the same character position.
fn assert_aligned(lines: &[&str], align: &[Align]) {
    assert!(lines.len() >= 2, "too few lines to judge: {lines:?}");
    let rows: Vec<Vec<(usize, usize)>> = lines.iter().map(|l| cells(l, align.len())).collect();
    for (line, row) in lines.iter().zip(&rows) {
        assert_eq!(row.len(), align.len(), "a ragged row: {line:?}\n{}", lines.join("\n"));
    }
    for (col, a) in align.iter().enumerate() {
        let edge = |row: &Vec<(usize, usize)>| if *a == Left { row[col].0 } else { row[col].1 };
        for (line, row) in lines.iter().zip(&rows) {
            assert_eq!(
                edge(row),
                edge(&rows[0]),
                "column {col} ({a:?}) is misaligned in {line:?}\n{}",
                lines.join("\n")
            );
        }
    }
}

#[test]
fn the_alignment_check_catches_a_misaligned_cell_counting_characters() {
    // 'µ' is two bytes and one character: these columns are aligned.
    assert_aligned(&["name  time", "a     1 µs", "bb    2 µs"], &[Left, Right]);
    let shifted = std::panic::catch_unwind(|| assert_aligned(&["name  time", "a    1 µs"], &[Left, Right]));
    assert!(shifted.is_err());
    let ragged = std::panic::catch_unwind(|| assert_aligned(&["name  time", "a"], &[Left, Right]));
    assert!(ragged.is_err());
}

#[test]
fn list_descriptions_start_in_one_column_across_sections() {
    let text = stdout(&["list"]);
    let rows: Vec<&str> = text.lines().filter(|l| l.starts_with("  ")).collect();
    assert!(rows.iter().any(|l| l.contains("zoo/")) && rows.iter().any(|l| l.contains("no_stale_use")));
    assert_aligned(&rows, &[Left, Left]);
}

#[test]
fn run_results_and_metrics_line_up_with_each_other() {
    let text = stdout(crate::common::LAT_CTX_RUN);
    let rows: Vec<&str> = text.lines().filter(|l| l.starts_with("  ")).collect();
    assert!(rows.iter().any(|l| l.contains("us_per_switch")) && rows.iter().any(|l| l.contains("sim_time_ns")));
    assert_aligned(&rows, &[Left, Right]);
}

const CLAIM_COLUMNS: [Align; 10] = [Left, Left, Left, Left, Right, Right, Left, Right, Right, Left];

#[test]
fn reproduce_rows_of_names_and_figures_of_several_widths_align() {
    // Origin 004's rows: variants of several widths, figures of two and one digits
    // before the point, a verdict with a remark.
    let text = stdout(&["reproduce", "--only", "origin004-exit-numa1"]);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 7, "{text}");
    assert!(lines[0].starts_with("claim "), "{text}");
    assert_aligned(&lines[..5], &CLAIM_COLUMNS);
    // The claim's note follows its rows, starting under the second column.
    let second = cells(lines[0], CLAIM_COLUMNS.len())[1].0;
    let note = lines[5].chars().position(|c| c != ' ').unwrap();
    assert_eq!(note, second, "{text}");
    assert!(lines[5][note..].starts_with("ranking accepted as modelled"), "{text}");
    // The count of the rows' verdicts ends the table.
    let tally = ["reproduced", "direction-only", "not-reproduced"]
        .map(|v| lines[1..5].iter().filter(|l| l.split("  ").any(|c| c.trim().split(' ').next() == Some(v))).count());
    assert_eq!(
        lines[6],
        format!(
            "verdicts: {} reproduced, {} direction-only, {} not-reproduced, of 4 rows (1 claim); further checks: 0 of \
             0 fail",
            tally[0], tally[1], tally[2]
        ),
        "{text}"
    );
}

#[test]
fn reproduce_puts_a_claims_further_check_under_the_second_column() {
    let text = stdout(&["reproduce", "--only", "origin002-pingpong-512"]);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 4, "{text}");
    assert!(
        lines[3].starts_with("verdicts: ") && lines[3].ends_with("of 1 row (1 claim); further checks: 0 of 1 fail")
    );
    assert_aligned(&lines[..2], &CLAIM_COLUMNS);
    let second = cells(lines[0], CLAIM_COLUMNS.len())[1].0;
    let note = lines[2].chars().position(|c| c != ' ').unwrap();
    assert_eq!(note, second, "{text}");
    assert!(lines[2][note..].starts_with("check tlb_misses_per_round"), "{text}");
}

#[test]
fn bench_cpus_columns_align_with_their_headers() {
    let text = stdout(&["bench", "scale", "--cpus", "2,16,128", "--workload", "mprotect_threaded", "--set", "iters=2"]);
    let rows: Vec<&str> = text.lines().skip(1).filter(|l| !l.contains(": tlbkit run")).collect();
    assert_eq!(rows.len(), 4, "{text}");
    assert!(rows[0].starts_with("workload ") && rows[0].ends_with("peak MiB"), "{text}");
    assert_aligned(&rows, &[Left, Right, Right, Right, Right, Right, Right, Right, Right]);
}

#[test]
fn trace_dump_right_aligns_instruction_counts_of_every_width() {
    let trace = format!("{}/examples/traces/gzip.trace", env!("CARGO_MANIFEST_DIR"));
    let text = stdout(&["trace", "dump", &trace]);
    let rows: Vec<&str> = text.lines().filter(|l| l.starts_with("  ")).collect();
    let widths: std::collections::BTreeSet<usize> =
        rows.iter().map(|l| l.trim_start().split(' ').next().unwrap().len()).collect();
    assert!(widths.len() >= 3, "counts of one width only: {widths:?}");
    assert_aligned(&rows, &[Right, Left]);
}

#[test]
fn progress_writes_nothing_when_stderr_is_not_a_terminal() {
    let runs = ["--machine", "cortex-a72", "--cpus", "2", "--workload", "lat_ctx", "--set", "rounds=3"];
    let compare = [&["compare"][..], &runs, &["--policy", "arm64-noasid", "--policy", "arm64-linux"]];
    let run = [&["run"][..], &runs, &["--policy", "arm64-linux"]];
    let sweep_file =
        std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("tlbkit-tables-{}.toml", std::process::id()));
    let results = sweep_file.with_extension("jsonl");
    std::fs::write(
        &sweep_file,
        "machines = [\"cortex-a72\"]\ncpus = [1]\npolicies = [\"arm64-linux\"]\nworkloads = [\"lat_ctx\"]\n\
         seeds = { first = 1, count = 2 }\n[set.lat_ctx]\nrounds = 3\n",
    )
    .unwrap();
    let trace =
        std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("tlbkit-tables-{}.trace", std::process::id()));
    let lackey = format!("{}/crates/lab/tests/data/tiny.lackey", env!("CARGO_MANIFEST_DIR"));
    let commands: Vec<Vec<&str>> = vec![
        compare.concat(),
        compare.concat().into_iter().chain(["--set", "jitter=0.02", "--format", "csv"]).collect(),
        run.concat(),
        vec!["reproduce", "--only", "origin002-pingpong"],
        vec!["bench", "scale", "--cpus", "2,3", "--workload", "mprotect_threaded", "--set", "iters=2"],
        vec!["sweep", sweep_file.to_str().unwrap(), "--results", results.to_str().unwrap()],
        vec!["trace", "import", "--lackey", &lackey, "-o", trace.to_str().unwrap()],
    ];
    for args in &commands {
        let o = tlbkit(args);
        let err = String::from_utf8_lossy(&o.stderr);
        // compare's note on constant samples is a finding, not progress.
        let err: Vec<&str> = err.lines().filter(|l| !l.starts_with("tlbkit: note: every seed gave")).collect();
        assert!(err.is_empty(), "{args:?} wrote to stderr: {err:?}");
    }
    for f in [&sweep_file, &results, &trace] {
        let _ = std::fs::remove_file(f);
    }
}

//! CPU lists as the kernel writes them (`0-3,8,10-11`: `online`,
//! `shared_cpu_list`, `core_cpus_list`) and as a user gives them (`--cpus`).
//!
//! The kernel prints these lists with `bitmap_print_to_pagebuf` (ascending,
//! no overlaps); its parser (`bitmap_parselist`, lib/bitmap-str.c) also takes
//! overlaps and the `0-15:2/4` stride form. This one keeps a user's order
//! (`--cpus 1,0` pins the first thread to CPU 1) and refuses what would be a
//! mistake in a list of CPUs to pin to: a CPU twice, a range written
//! backwards, the stride form.

/// The largest CPU number accepted: Linux's largest `CONFIG_NR_CPUS` is 8192
/// (x86 `MAXSMP`), so CPU numbers run to 8191.
pub const MAX_CPU: usize = 8191;

/// Why a CPU list does not parse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CpuListError {
    /// Nothing but blanks.
    #[error("the CPU list is empty")]
    Empty,
    /// An item that is neither a number nor a range of two numbers.
    #[error("'{item}' is not a CPU number or a range of them (a list reads like 0-3,8)")]
    NotACpu {
        /// The item, as written.
        item: String,
    },
    /// A range whose end is below its start.
    #[error("the range {first}-{last} runs backwards")]
    Backwards {
        /// Its start.
        first: usize,
        /// Its end.
        last: usize,
    },
    /// A CPU number above [`MAX_CPU`].
    #[error("CPU {cpu} is beyond the largest CPU number Linux allows ({MAX_CPU})")]
    TooBig {
        /// The number.
        cpu: usize,
    },
    /// A CPU given twice (alone or within ranges).
    #[error("CPU {cpu} is listed twice")]
    Repeated {
        /// The CPU.
        cpu: usize,
    },
}

/// Parses a CPU list (`0-3,8,10-11`) into its CPUs in the order written.
///
/// Blanks around the list and around each item are ignored (the kernel's
/// files end in a newline).
///
/// # Errors
/// [`CpuListError`]: an empty list or item, an item that is not a number or
/// range, a backwards range, a CPU above [`MAX_CPU`], a CPU given twice.
pub fn parse_cpu_list(text: &str) -> Result<Vec<usize>, CpuListError> {
    if text.trim().is_empty() {
        return Err(CpuListError::Empty);
    }
    let mut seen = vec![false; MAX_CPU + 1];
    let mut cpus = Vec::new();
    for item in text.trim().split(',') {
        let item = item.trim();
        let (first, last) = match item.split_once('-') {
            Some((first, last)) => (cpu(first, item)?, cpu(last, item)?),
            None => (cpu(item, item)?, cpu(item, item)?),
        };
        if last < first {
            return Err(CpuListError::Backwards { first, last });
        }
        for (c, seen) in seen.iter_mut().enumerate().take(last + 1).skip(first) {
            if std::mem::replace(seen, true) {
                return Err(CpuListError::Repeated { cpu: c });
            }
            cpus.push(c);
        }
    }
    Ok(cpus)
}

/// Parses one CPU number of `item`.
fn cpu(text: &str, item: &str) -> Result<usize, CpuListError> {
    let not_a_cpu = || CpuListError::NotACpu { item: item.to_string() };
    // `usize::from_str` takes a leading '+'; a CPU list has none.
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(not_a_cpu());
    }
    match text.parse::<usize>() {
        Ok(cpu) if cpu <= MAX_CPU => Ok(cpu),
        Ok(cpu) => Err(CpuListError::TooBig { cpu }),
        // Only overflow is left: digits too many for a usize.
        Err(_) => Err(CpuListError::TooBig { cpu: usize::MAX }),
    }
}

/// Formats CPUs as the kernel does: ascending, runs of consecutive CPUs as
/// ranges (`[0, 1, 2, 3, 8]` is `0-3,8`); an empty slice is the empty text.
pub fn format_cpu_list(cpus: &[usize]) -> String {
    let mut sorted = cpus.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut runs: Vec<String> = Vec::new();
    let mut i = 0;
    while i < sorted.len() {
        let first = sorted[i];
        while i + 1 < sorted.len() && sorted[i + 1] == sorted[i] + 1 {
            i += 1;
        }
        runs.push(match sorted[i] {
            last if last == first => first.to_string(),
            last => format!("{first}-{last}"),
        });
        i += 1;
    }
    runs.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_ranges_and_single_cpus_in_written_order() {
        assert_eq!(parse_cpu_list("0-3,8,10-11\n"), Ok(vec![0, 1, 2, 3, 8, 10, 11]));
        assert_eq!(parse_cpu_list("5"), Ok(vec![5]));
        assert_eq!(parse_cpu_list(" 1 , 0 "), Ok(vec![1, 0]));
        assert_eq!(parse_cpu_list("7-7"), Ok(vec![7]));
        assert_eq!(parse_cpu_list("8191"), Ok(vec![8191]));
    }

    #[test]
    fn refuses_malformed_lists_with_exact_errors() {
        let not = |item: &str| Err(CpuListError::NotACpu { item: item.into() });
        assert_eq!(parse_cpu_list(""), Err(CpuListError::Empty));
        assert_eq!(parse_cpu_list(" \n"), Err(CpuListError::Empty));
        assert_eq!(parse_cpu_list("0,,1"), not(""));
        assert_eq!(parse_cpu_list("0,"), not(""));
        assert_eq!(parse_cpu_list("a"), not("a"));
        assert_eq!(parse_cpu_list("-1"), not("-1"));
        assert_eq!(parse_cpu_list("+1"), not("+1"));
        assert_eq!(parse_cpu_list("1-"), not("1-"));
        assert_eq!(parse_cpu_list("1-2-3"), not("1-2-3"));
        assert_eq!(parse_cpu_list("0-15:2/4"), not("0-15:2/4"));
        assert_eq!(parse_cpu_list("3-1"), Err(CpuListError::Backwards { first: 3, last: 1 }));
        assert_eq!(parse_cpu_list("8192"), Err(CpuListError::TooBig { cpu: 8192 }));
        assert_eq!(parse_cpu_list("99999999999999999999999"), Err(CpuListError::TooBig { cpu: usize::MAX }));
        assert_eq!(parse_cpu_list("0-3,2"), Err(CpuListError::Repeated { cpu: 2 }));
        assert_eq!(parse_cpu_list("1,1"), Err(CpuListError::Repeated { cpu: 1 }));
    }

    #[test]
    fn error_texts_are_one_line() {
        assert_eq!(CpuListError::Backwards { first: 3, last: 1 }.to_string(), "the range 3-1 runs backwards");
        assert_eq!(
            CpuListError::NotACpu { item: "x".into() }.to_string(),
            "'x' is not a CPU number or a range of them (a list reads like 0-3,8)"
        );
    }

    #[test]
    fn formats_runs_as_ranges() {
        assert_eq!(format_cpu_list(&[0, 1, 2, 3, 8, 10, 11]), "0-3,8,10-11");
        assert_eq!(format_cpu_list(&[1, 0]), "0-1");
        assert_eq!(format_cpu_list(&[4]), "4");
        assert_eq!(format_cpu_list(&[]), "");
        assert_eq!(format_cpu_list(&[0, 2, 4]), "0,2,4");
    }
}

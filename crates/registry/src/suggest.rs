//! "Did you mean": the nearest of the valid names to a misspelt one, for every
//! error that rejects an unknown name (policy, machine, workload, `--set` key,
//! zoo entry, sweep file entry).

/// Returns the name of `valid` nearest to `given` by edit distance (insertions,
/// deletions, substitutions and swaps of two neighbours), if one is near enough
/// to be a slip: at most a third of the longer name's length, and at least 1
/// and at most 3 edits. Ties go to the first in `valid`'s order.
pub fn nearest<'a>(given: &str, valid: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let mut best: Option<(usize, &str)> = None;
    for v in valid {
        let d = distance(given, v);
        let limit = (given.chars().count().max(v.chars().count()) / 3).clamp(1, 3);
        if d <= limit && best.is_none_or(|(b, _)| d < b) {
            best = Some((d, v));
        }
    }
    best.map(|(_, v)| v)
}

/// Returns ` (did you mean 'NAME'?)` for the nearest of `valid` to `given`, or
/// nothing: to follow the quoted name in an "unknown ..." message.
pub fn did_you_mean<'a>(given: &str, valid: impl IntoIterator<Item = &'a str>) -> String {
    nearest(given, valid).map(|v| format!(" (did you mean '{v}'?)")).unwrap_or_default()
}

/// The optimal string alignment distance between `a` and `b`, by characters.
fn distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    // Three rows of the dynamic programme: two back, one back, this one.
    let mut two: Vec<usize> = vec![0; b.len() + 1];
    let mut one: Vec<usize> = (0..=b.len()).collect();
    let mut row: Vec<usize> = vec![0; b.len() + 1];
    for i in 1..=a.len() {
        row[0] = i;
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            row[j] = (one[j] + 1).min(row[j - 1] + 1).min(one[j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                row[j] = row[j].min(two[j - 2] + 1);
            }
        }
        std::mem::swap(&mut two, &mut one);
        std::mem::swap(&mut one, &mut row);
    }
    one[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slip_finds_its_name_and_a_stranger_finds_none() {
        let policies = ["arm64-noasid", "arm64-linux", "arm64-linux-skipbcast", "x86-linux-pcid"];
        assert_eq!(nearest("arm64-linx", policies), Some("arm64-linux"));
        assert_eq!(nearest("x86-linux-pcdi", policies), Some("x86-linux-pcid"), "a swap is one edit");
        assert_eq!(nearest("arm64-linux", policies), Some("arm64-linux"));
        assert_eq!(nearest("nope", policies), None);
        assert_eq!(nearest("riscv-sfence", policies), None);
        assert_eq!(nearest("procz", ["procs", "rounds", "size_kb"]), Some("procs"));
        assert_eq!(nearest("lat_ct", ["lat_ctx", "lat_mmap"]), Some("lat_ctx"));
        assert_eq!(did_you_mean("lat_ct", ["lat_ctx"]), " (did you mean 'lat_ctx'?)");
        assert_eq!(did_you_mean("zzz", ["lat_ctx"]), "");
    }

    #[test]
    fn distance_counts_edits() {
        assert_eq!(distance("", "abc"), 3);
        assert_eq!(distance("abc", "abc"), 0);
        assert_eq!(distance("abc", "acb"), 1);
        assert_eq!(distance("kitten", "sitting"), 3);
    }
}

//! Summary statistics of repeated runs and Student's t test between two sets of
//! them, computed and printed the way FreeBSD's `ministat(1)` does, so that a
//! `tlbkit compare` table reads (and can be checked) like ministat's.
//!
//! What is guaranteed: for the same samples, every figure printed here equals
//! the one ministat 20150715 (Debian's `ministat` package, FreeBSD's
//! `usr.bin/ministat/ministat.c` of that time) prints, to the digits it prints:
//! N, Min, Max, Median, Avg, Stddev (`%13.8g`), the difference and its
//! half-width, the relative difference and its half-width, and the pooled
//! standard deviation (`%g`). The unit tests pin figures produced by that
//! ministat. In detail, as ministat:
//!
//! - the median is the upper median, `sorted[n / 2]` (FreeBSD's ministat since
//!   2019 averages the two middle values when `n` is even; this one does not);
//! - the critical value comes from a table of Student's t for `n1 + n2 - 2`
//!   degrees of freedom, rounded to 3 decimals, with the normal 1.960 beyond 100
//!   degrees ([`t95`]);
//! - the variances are pooled: `s² = ((n1-1)s1² + (n2-1)s2²) / (n1 + n2 - 2)`,
//!   the half-width is `t · s · sqrt(1/n1 + 1/n2)`, and a difference is proven
//!   when `|avg1 - avg2|` exceeds it;
//! - the relative half-width is the half-width divided by the first set's mean
//!   (FreeBSD's later ministat widens it for the uncertainty of that mean).
//!
//! What is not: the variance is computed from the samples' deviations from
//! their median, not from running sums of `x` and `x²` as that ministat does.
//! The figures are the same unless the spread is tiny against the mean, where
//! ministat's sums cancel: three samples of 0.1 make it print a standard
//! deviation of `-nan`, and this module 0, and ten runs of `lat_ctx` whose
//! spread is 1e-4 of their mean make it print the standard deviation's eighth
//! digit one too high (tests pin both cases). Only the 95% level is offered.

/// A set's summary: what ministat prints per set.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Summary {
    /// Samples.
    pub n: usize,
    /// Smallest sample.
    pub min: f64,
    /// Largest sample.
    pub max: f64,
    /// The upper median: the sample at index `n / 2` of the sorted samples.
    pub median: f64,
    /// Arithmetic mean.
    pub avg: f64,
    /// Sample variance (divisor `n - 1`); NaN for a single sample.
    pub variance: f64,
}

impl Summary {
    /// Returns ministat's figures for the set as a JSON object (`n`, `min`,
    /// `max`, `median`, `avg`, `stddev`), as `tlbkit compare --format json`
    /// and the Python package give them.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "n": self.n,
            "min": self.min,
            "max": self.max,
            "median": self.median,
            "avg": self.avg,
            "stddev": self.stddev(),
        })
    }

    /// Returns the summary of `samples`, or `None` if there are none.
    pub fn of(samples: &[f64]) -> Option<Summary> {
        let n = samples.len();
        if n == 0 {
            return None;
        }
        let mut sorted = samples.to_vec();
        sorted.sort_by(f64::total_cmp);
        // Summed in the order given, as ministat adds each point as it reads it.
        let avg = samples.iter().sum::<f64>() / n as f64;
        // Deviations from the median (a sample, so near the mean) keep the sums
        // small: no cancellation, and exactly 0 for identical samples.
        let median = sorted[n / 2];
        let (sum, squares) =
            samples.iter().fold((0.0, 0.0), |(s, q), x| (s + (x - median), q + (x - median) * (x - median)));
        let variance = (squares - sum * sum / n as f64).max(0.0) / (n as f64 - 1.0);
        Some(Summary { n, min: sorted[0], max: sorted[n - 1], median, avg, variance })
    }

    /// Returns the sample standard deviation.
    pub fn stddev(&self) -> f64 {
        self.variance.sqrt()
    }
}

/// The confidence level of [`compare`], in percent.
pub const CONFIDENCE: f64 = 95.0;

/// Two-sided 95% critical values of Student's t for 1 to 100 degrees of
/// freedom, rounded to 3 decimals: ministat's table (a test checks each against
/// the distribution).
const T95: [f64; 100] = [
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, // 1-10
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, // 11-20
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042, // 21-30
    2.040, 2.037, 2.035, 2.032, 2.030, 2.028, 2.026, 2.024, 2.023, 2.021, // 31-40
    2.020, 2.018, 2.017, 2.015, 2.014, 2.013, 2.012, 2.011, 2.010, 2.009, // 41-50
    2.008, 2.007, 2.006, 2.005, 2.004, 2.003, 2.002, 2.002, 2.001, 2.000, // 51-60
    2.000, 1.999, 1.998, 1.998, 1.997, 1.997, 1.996, 1.995, 1.995, 1.994, // 61-70
    1.994, 1.993, 1.993, 1.993, 1.992, 1.992, 1.991, 1.991, 1.990, 1.990, // 71-80
    1.990, 1.989, 1.989, 1.989, 1.988, 1.988, 1.988, 1.987, 1.987, 1.987, // 81-90
    1.986, 1.986, 1.986, 1.986, 1.985, 1.985, 1.985, 1.984, 1.984, 1.984, // 91-100
];

/// The normal distribution's two-sided 95% critical value, which ministat uses
/// beyond 100 degrees of freedom.
const Z95: f64 = 1.960;

/// Returns the two-sided 95% critical value of Student's t that ministat uses
/// for `df` degrees of freedom: its table up to 100, 1.960 beyond.
///
/// # Panics
///
/// If `df` is 0 (two sets need at least three samples between them).
pub fn t95(df: usize) -> f64 {
    assert!(df > 0, "Student's t needs at least one degree of freedom");
    T95.get(df - 1).copied().unwrap_or(Z95)
}

/// Student's t test of one set's mean against a reference set's, with pooled
/// standard deviation: what ministat prints below each set after the first.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Comparison {
    /// Confidence level in percent ([`CONFIDENCE`]).
    pub confidence: f64,
    /// Whether the difference is proven: `|difference| > half_width`.
    pub proven: bool,
    /// The set's mean minus the reference's.
    pub difference: f64,
    /// Half-width of the confidence interval of the difference.
    pub half_width: f64,
    /// The difference in percent of the reference's mean.
    pub relative_pct: f64,
    /// The half-width in percent of the reference's mean.
    pub relative_half_width_pct: f64,
    /// The pooled standard deviation.
    pub pooled_stddev: f64,
}

impl Comparison {
    /// Returns the comparison as a JSON object, less its confidence level
    /// (always [`CONFIDENCE`]): `tlbkit compare --format json`'s `vs_first`.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "proven": self.proven,
            "difference": self.difference,
            "half_width": self.half_width,
            "relative_pct": self.relative_pct,
            "relative_half_width_pct": self.relative_half_width_pct,
            "pooled_stddev": self.pooled_stddev,
        })
    }
}

/// Compares `set` with the `reference` set at 95% confidence.
///
/// # Panics
///
/// If the two sets have fewer than three samples between them.
pub fn compare(set: &Summary, reference: &Summary) -> Comparison {
    let (n1, n2) = (set.n as f64, reference.n as f64);
    let t = t95(set.n + reference.n - 2);
    let pooled = (((n1 - 1.0) * set.variance + (n2 - 1.0) * reference.variance) / (n1 + n2 - 2.0)).sqrt();
    let difference = set.avg - reference.avg;
    let half_width = t * pooled * (1.0 / n1 + 1.0 / n2).sqrt();
    Comparison {
        confidence: CONFIDENCE,
        proven: difference.abs() > half_width,
        difference,
        half_width,
        relative_pct: difference * 100.0 / reference.avg,
        relative_half_width_pct: half_width * 100.0 / reference.avg,
        pooled_stddev: pooled,
    }
}

/// The marks ministat puts before each set's name and figures (it takes at
/// most seven sets).
pub const SYMBOLS: [char; 7] = ['x', '+', '*', '%', '#', '@', 'O'];

/// Returns the width of the figures table's N column for sets of these sizes:
/// ministat's 3, or as many digits as the largest set has where that is more
/// (ministat's own columns slip from 1000 samples on).
pub fn n_width(sizes: impl IntoIterator<Item = usize>) -> usize {
    sizes.into_iter().map(|n| n.to_string().len()).max().unwrap_or(0).max(3)
}

/// Returns ministat's header of the figures table, its N column `n_width` wide
/// (see [`n_width`]).
pub fn vitals_header(n_width: usize) -> String {
    format!("  {:>n_width$}           Min           Max        Median           Avg        Stddev", "N")
}

/// Returns ministat's line of figures for a set marked `symbol`, its N column
/// `n_width` wide (see [`n_width`]).
pub fn vitals_line(symbol: char, s: &Summary, n_width: usize) -> String {
    let g = |x: f64| format!("{:>13}", format_g(x, 8));
    format!("{symbol} {:>n_width$} {} {} {} {} {}", s.n, g(s.min), g(s.max), g(s.median), g(s.avg), g(s.stddev()))
}

/// Returns ministat's verdict for a comparison, one line or four (the last three
/// indented with a tab), each ending in a newline.
pub fn verdict_text(c: &Comparison) -> String {
    if !c.proven {
        return format!("No difference proven at {:.1}% confidence\n", c.confidence);
    }
    let g = |x: f64| format_g(x, 6);
    format!(
        "Difference at {:.1}% confidence\n\t{} +/- {}\n\t{}% +/- {}%\n\t(Student's t, pooled s = {})\n",
        c.confidence,
        g(c.difference),
        g(c.half_width),
        g(c.relative_pct),
        g(c.relative_half_width_pct),
        g(c.pooled_stddev)
    )
}

/// Formats `x` as C's `printf("%.*g", precision, x)` does: `precision`
/// significant digits (1 if 0), fixed notation for decimal exponents from -4 to
/// `precision - 1` and scientific otherwise (a two-digit exponent at least),
/// trailing zeros removed; `nan`, `-nan`, `inf`, `-inf` as glibc prints them.
pub fn format_g(x: f64, precision: usize) -> String {
    let p = precision.max(1);
    if x.is_nan() {
        return if x.is_sign_negative() { "-nan" } else { "nan" }.to_string();
    }
    if x.is_infinite() {
        return if x < 0.0 { "-inf" } else { "inf" }.to_string();
    }
    // The exponent after rounding to `p` significant digits decides the style.
    let sci = format!("{:.*e}", p - 1, x);
    let (mantissa, exp) = sci.split_once('e').expect("Rust's {:e} always has an exponent");
    let exp: i32 = exp.parse().expect("Rust's {:e} exponent is an integer");
    if exp < -4 || exp >= p as i32 {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{}e{sign}{:02}", trim_fraction(mantissa), exp.unsigned_abs())
    } else {
        let decimals = (p as i32 - 1 - exp) as usize;
        trim_fraction(&format!("{x:.decimals$}")).to_string()
    }
}

/// Returns `x` with a thousands separator every three digits (whole numbers).
pub fn grouped(x: f64) -> String {
    let digits = format!("{:.0}", x.abs());
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    if x < 0.0 {
        format!("-{out}")
    } else {
        out
    }
}

/// Removes trailing zeros of a decimal fraction, and its point if nothing is left.
fn trim_fraction(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn grouped_puts_a_comma_every_three_digits() {
        assert_eq!(grouped(0.0), "0");
        assert_eq!(grouped(999.4), "999");
        assert_eq!(grouped(1000.0), "1,000");
        assert_eq!(grouped(-1234567.0), "-1,234,567");
    }

    /// Two sets of samples whose difference is proven (lower by 16.6%).
    pub(crate) const PROVEN_X: [f64; 10] = [3.44, 3.47, 3.41, 3.45, 3.43, 3.46, 3.42, 3.48, 3.44, 3.40];
    /// The second set of [`PROVEN_X`]'s pair.
    pub(crate) const PROVEN_Y: [f64; 10] = [2.87, 2.86, 2.89, 2.85, 2.88, 2.87, 2.90, 2.86, 2.84, 2.88];
    /// `ministat -A`'s table and verdict for [`PROVEN_X`] against
    /// [`PROVEN_Y`], below the legend.
    pub(crate) const PROVEN_TABLE: &str = "    N           Min           Max        Median           Avg        Stddev
x  10           3.4          3.48          3.44          3.44   0.025819889
+  10          2.84           2.9          2.87          2.87   0.018257419
Difference at 95.0% confidence
\t-0.57 +/- 0.02101
\t-16.5698% +/- 0.610756%
\t(Student's t, pooled s = 0.0223607)
";

    /// Returns what `tlbkit compare` prints for sets named and valued as given:
    /// the legend, the table, and a verdict below each set after the first,
    /// which is ministat's output without its plot (`ministat -A`).
    fn ministat_a(sets: &[(&str, &[f64])]) -> String {
        let mut out = String::new();
        for (i, (name, _)) in sets.iter().enumerate() {
            out.push_str(&format!("{} {name}\n", SYMBOLS[i]));
        }
        let w = n_width(sets.iter().map(|(_, v)| v.len()));
        out.push_str(&vitals_header(w));
        out.push('\n');
        let first = Summary::of(sets[0].1).unwrap();
        for (i, (_, values)) in sets.iter().enumerate() {
            let s = Summary::of(values).unwrap();
            out.push_str(&vitals_line(SYMBOLS[i], &s, w));
            out.push('\n');
            if i > 0 {
                out.push_str(&verdict_text(&compare(&s, &first)));
            }
        }
        out
    }

    // Each expected text below is the output of `ministat -A` (Debian's
    // ministat 20150715-1+b1) on files of these samples, one per line.

    #[test]
    fn close_means_prove_no_difference_as_ministat() {
        let x = [2.91, 2.88, 2.95, 2.90, 2.93, 2.87, 2.94];
        let y = [2.92, 2.89, 2.96, 2.91, 2.90, 2.97, 2.88];
        let expected = "\
x a_x
+ a_y
    N           Min           Max        Median           Avg        Stddev
x   7          2.87          2.95          2.91     2.9114286   0.030237158
+   7          2.88          2.97          2.91     2.9185714   0.034364988
No difference proven at 95.0% confidence
";
        assert_eq!(ministat_a(&[("a_x", &x), ("a_y", &y)]), expected);
    }

    #[test]
    fn a_lower_mean_is_a_proven_negative_difference_as_ministat() {
        // n = 10: the median is the 6th smallest (3.44 and 2.87), not the mean of 5th and 6th.
        let expected = format!("x b_x\n+ b_y\n{PROVEN_TABLE}");
        assert_eq!(ministat_a(&[("b_x", &PROVEN_X), ("b_y", &PROVEN_Y)]), expected);
    }

    #[test]
    fn unequal_sizes_and_a_third_set_compare_with_the_first_as_ministat() {
        let x = [1203.5, 1189.2, 1221.8, 1195.0, 1210.4];
        let y = [1102.3, 1131.9, 1088.4, 1120.0, 1097.6, 1143.2, 1109.8, 1125.5, 1093.1, 1116.7, 1138.0, 1104.4];
        let z = [1190.1, 1215.3, 1201.7, 1185.9, 1223.4, 1208.8, 1196.2, 1211.0];
        let expected = "\
x c_x
+ c_y
* c_z
    N           Min           Max        Median           Avg        Stddev
x   5        1189.2        1221.8        1203.5       1203.98     12.826613
+  12        1088.4        1143.2        1116.7     1114.2417     17.918272
Difference at 95.0% confidence
\t-89.7383 +/- 18.9576
\t-7.45347% +/- 1.57458%
\t(Student's t, pooled s = 16.7129)
*   8        1185.9        1223.4        1208.8       1204.05     12.889752
No difference proven at 95.0% confidence
";
        assert_eq!(ministat_a(&[("c_x", &x), ("c_y", &y), ("c_z", &z)]), expected);
    }

    #[test]
    fn small_values_print_in_exponent_form_as_ministat() {
        let x = [0.000012, 0.0000125, 0.0000118, 0.0000121];
        let y = [0.0000101, 0.0000099, 0.0000103, 0.0000100];
        let expected = "\
x d_x
+ d_y
    N           Min           Max        Median           Avg        Stddev
x   4      1.18e-05      1.25e-05      1.21e-05      1.21e-05 2.9439203e-07
+   4       9.9e-06      1.03e-05      1.01e-05    1.0075e-05 1.7078251e-07
Difference at 95.0% confidence
\t-2.025e-06 +/- 4.1641e-07
\t-16.7355% +/- 3.4414%
\t(Student's t, pooled s = 2.40659e-07)
";
        assert_eq!(ministat_a(&[("d_x", &x), ("d_y", &y)]), expected);
    }

    #[test]
    fn beyond_100_degrees_of_freedom_the_normal_value_is_used_as_ministat() {
        // 60 + 60 samples: 118 degrees of freedom, t = 1.960.
        let x: Vec<f64> = (0..60).map(|i| 100.0 + ((i * 37) % 23) as f64 * 0.5).collect();
        let y: Vec<f64> = (0..60).map(|i| 101.0 + ((i * 41) % 29) as f64 * 0.5).collect();
        let expected = "\
x e_x
+ e_y
    N           Min           Max        Median           Avg        Stddev
x  60           100           111         105.5     105.44167      3.381269
+  60           101           115           108     107.86667     4.2465007
Difference at 95.0% confidence
\t2.425 +/- 1.37353
\t2.29985% +/- 1.30265%
\t(Student's t, pooled s = 3.83834)
";
        assert_eq!(ministat_a(&[("e_x", &x), ("e_y", &y)]), expected);
    }

    #[test]
    fn a_thousand_samples_widen_the_n_column_where_ministats_columns_slip() {
        let many: Vec<f64> = (0..1000).map(|i| 2.0 + f64::from(i) / 1000.0).collect();
        let out = ministat_a(&[("many", &many), ("few", &[2.5, 2.6, 2.7])]);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[2], "     N           Min           Max        Median           Avg        Stddev");
        assert_eq!(lines[3], "x 1000             2         2.999           2.5        2.4995    0.28881944");
        assert_eq!(lines[4], "+    3           2.5           2.7           2.6           2.6           0.1");
        // Below a thousand, ministat's width.
        assert_eq!(n_width([999, 3]), 3);
    }

    #[test]
    fn identical_samples_have_zero_stddev_where_ministat_prints_nan() {
        // ministat 20150715 prints "-nan" for this set's Stddev: its running sums
        // of x and x² cancel to a negative variance. Deviations from the median give 0.
        let s = Summary::of(&[0.1, 0.1, 0.1]).unwrap();
        assert_eq!(s.stddev(), 0.0);
        assert_eq!(
            vitals_line('x', &s, 3),
            "x   3           0.1           0.1           0.1           0.1             0"
        );
        // Any difference from a set without spread is proven, with a zero half-width.
        let c = compare(&Summary::of(&[0.3, 0.3, 0.3]).unwrap(), &s);
        assert!(c.proven);
        assert_eq!((c.half_width, c.pooled_stddev), (0.0, 0.0));
    }

    #[test]
    fn a_tiny_relative_spread_is_exact_where_ministat_is_off_in_the_last_digit() {
        // `tlbkit compare`'s lat_ctx samples of arm64-noasid (seeds 1 to 10,
        // procs=6, 2 CPUs): a spread of 1e-4 of the mean. The exact standard
        // deviation is 0.00047996856437; ministat's sums print 0.00047996857.
        let x = [
            3.444480676328502,
            3.4445757850241545,
            3.4435673309178743,
            3.4431868961352663,
            3.4435009057971016,
            3.4441002415458932,
            3.4443855676328505,
            3.44426177536232,
            3.4444142512077294,
            3.44426177536232,
        ];
        let s = Summary::of(&x).unwrap();
        assert_eq!(
            vitals_line('x', &s, 3),
            "x  10     3.4431869     3.4445758     3.4442618     3.4440735 0.00047996856"
        );
    }

    #[test]
    fn format_g_matches_c_printf() {
        // Expected strings from Python's % operator, which follows C's printf.
        let cases: &[(f64, usize, &str)] = &[
            (0.0, 6, "0"),
            (-0.0, 6, "-0"),
            (1.0, 6, "1"),
            (100000.0, 6, "100000"),
            (1000000.0, 6, "1e+06"),
            (123456789.0, 8, "1.2345679e+08"),
            (0.0001, 6, "0.0001"),
            (0.00001, 6, "1e-05"),
            (0.000123456789, 6, "0.000123457"),
            (999999.5, 6, "1e+06"),
            (9.9999995, 8, "9.9999995"),
            (-2.5, 6, "-2.5"),
            (1e300, 6, "1e+300"),
            (1.5e-300, 6, "1.5e-300"),
            (0.125, 2, "0.12"),
            (2.675, 3, "2.67"),
            (f64::INFINITY, 6, "inf"),
            (f64::NEG_INFINITY, 6, "-inf"),
            (f64::NAN, 6, "nan"),
        ];
        for &(x, p, want) in cases {
            assert_eq!(format_g(x, p), want, "%.{p}g of {x:e}");
        }
    }

    /// Returns P(T <= t) for Student's t with `df` degrees of freedom, t >= 0,
    /// by Simpson's rule over the density.
    fn t_cdf(t: f64, df: usize) -> f64 {
        let pi = std::f64::consts::PI;
        // c = Γ((ν+1)/2) / Γ(ν/2), from ν = 1 or 2 by c(ν+2) = c(ν)·(ν+1)/ν.
        let (mut c, mut v) = if df % 2 == 1 { (1.0 / pi.sqrt(), 1) } else { (pi.sqrt() / 2.0, 2) };
        while v < df {
            c *= (v + 1) as f64 / v as f64;
            v += 2;
        }
        let nu = df as f64;
        let density = |x: f64| c / (nu * pi).sqrt() * (1.0 + x * x / nu).powf(-(nu + 1.0) / 2.0);
        let steps = 20_000;
        let h = t / steps as f64;
        let mut sum = density(0.0) + density(t);
        for i in 1..steps {
            sum += density(i as f64 * h) * if i % 2 == 1 { 4.0 } else { 2.0 };
        }
        0.5 + sum * h / 3.0
    }

    #[test]
    fn t_table_is_the_97_5_percent_quantile_to_3_decimals() {
        for df in 1..=100 {
            let t = t95(df);
            assert!(t_cdf(t - 0.0005, df) < 0.975 && t_cdf(t + 0.0005, df) > 0.975, "df {df}: {t}");
        }
        assert_eq!((t95(101), t95(1000)), (1.960, 1.960));
    }
}

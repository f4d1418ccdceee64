//! The Mann-Whitney U rank test (issue #48): do the measurements of the clusters that took the
//! new snapshot sit higher (or lower) than those of the clusters still on the old one? A rank
//! test judges the difference of two cohorts without assuming a distribution, so a stage needs no
//! hand-set threshold: Kayenta and PipeCD judge canaries the same way.
//!
//! The numbers are SciPy's (`scipy.stats.mannwhitneyu`, `method="auto"`, continuity corrected),
//! checked against recorded results in `tests/mann_whitney.rs`: U of the test cohort from average
//! ranks; the exact distribution of U when either cohort has at most 8 samples and no value is
//! tied, the normal approximation with tie correction otherwise.

use statrs::distribution::{ContinuousCDF, Normal};

/// Which difference the test looks for: the test cohort's values `Greater` than the
/// baseline's, `Less`, or either (`TwoSided`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Alternative {
    Greater,
    Less,
    TwoSided,
}

/// How the p-value was computed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    /// From the exact distribution of U (small cohorts, no ties).
    Exact,
    /// From the normal approximation, tie and continuity corrected.
    Asymptotic,
}

/// The test's result.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RankTest {
    /// U of the test cohort: how many (test, baseline) pairs the test value wins, ties half.
    pub u: f64,
    pub p_value: f64,
    pub method: Method,
}

/// The test of `test` against `baseline`; `None` when either is empty or holds a NaN (no data).
pub fn mann_whitney_u(
    test: &[f64],
    baseline: &[f64],
    alternative: Alternative,
) -> Option<RankTest> {
    if test.is_empty() || baseline.is_empty() || test.iter().chain(baseline).any(|v| v.is_nan()) {
        return None;
    }
    let (n1, n2) = (test.len(), baseline.len());
    let ranked = average_ranks(test, baseline);
    let rank_sum: f64 = ranked.ranks[..n1].iter().sum();
    let u1 = rank_sum - (n1 * (n1 + 1)) as f64 / 2.0;
    let u2 = (n1 * n2) as f64 - u1;
    let (u, factor) = match alternative {
        Alternative::Greater => (u1, 1.0),
        Alternative::Less => (u2, 1.0),
        Alternative::TwoSided => (u1.max(u2), 2.0),
    };
    let method = match (n1 > 8 && n2 > 8) || ranked.tied {
        true => Method::Asymptotic,
        false => Method::Exact,
    };
    let tail = match method {
        Method::Exact => exact_tail(u, n1, n2),
        Method::Asymptotic => normal_tail(u, n1, n2, &ranked.tie_sizes),
    };
    Some(RankTest {
        u: u1,
        p_value: (tail * factor).clamp(0.0, 1.0),
        method,
    })
}

/// The ranks of the pooled samples (test first), ties given their average rank.
struct Ranked {
    ranks: Vec<f64>,
    /// The size of each group of equal values (1 for a value that is not tied).
    tie_sizes: Vec<usize>,
    tied: bool,
}

fn average_ranks(test: &[f64], baseline: &[f64]) -> Ranked {
    let pooled: Vec<f64> = test.iter().chain(baseline).copied().collect();
    let mut order: Vec<usize> = (0..pooled.len()).collect();
    order.sort_by(|a, b| pooled[*a].total_cmp(&pooled[*b]));
    let mut ranks = vec![0.0; pooled.len()];
    let mut tie_sizes = Vec::new();
    let mut start = 0;
    while start < order.len() {
        let value = pooled[order[start]];
        let end = start
            + order[start..]
                .iter()
                .take_while(|i| pooled[**i] == value)
                .count();
        // 1-based ranks start+1 ..= end share their mean.
        let average = (start + 1 + end) as f64 / 2.0;
        for index in &order[start..end] {
            ranks[*index] = average;
        }
        tie_sizes.push(end - start);
        start = end;
    }
    let tied = tie_sizes.iter().any(|size| *size > 1);
    Ranked {
        ranks,
        tie_sizes,
        tied,
    }
}

/// P(U ≥ u) under the null hypothesis, from the exact distribution of U for cohorts of `n1`
/// and `n2`: the coefficients of the Gaussian binomial [n1+n2 choose n1] in q, each the number of
/// orderings with U equal to its power.
fn exact_tail(u: f64, n1: usize, n2: usize) -> f64 {
    let counts = u_counts(n1, n2);
    let total: f64 = counts.iter().sum();
    let from = u.ceil().max(0.0) as usize;
    counts.iter().skip(from).sum::<f64>() / total
}

/// The number of orderings of `n1` and `n2` samples for each U from 0 to n1·n2: the product
/// over i = 1..=n1 of (1 − q^(n2+i)) / (1 − q^i), as a polynomial in q.
fn u_counts(n1: usize, n2: usize) -> Vec<f64> {
    let degree = n1 * n2;
    let mut poly = vec![0.0; degree + 1];
    poly[0] = 1.0;
    for i in 1..=n1 {
        // Times (1 − q^(n2+i)), from the highest power down so each term reads the old value.
        let shift = n2 + i;
        for power in (shift..=degree).rev() {
            poly[power] -= poly[power - shift];
        }
        // Divided by (1 − q^i): a running sum with stride i.
        for power in i..=degree {
            poly[power] += poly[power - i];
        }
    }
    poly
}

/// P(U ≥ u) from the normal approximation with the tie correction and the continuity
/// correction of SciPy.
fn normal_tail(u: f64, n1: usize, n2: usize, tie_sizes: &[usize]) -> f64 {
    let (n1, n2) = (n1 as f64, n2 as f64);
    let n = n1 + n2;
    let tie_term: f64 = tie_sizes
        .iter()
        .map(|t| {
            let t = *t as f64;
            t * t * t - t
        })
        .sum();
    let spread = (n1 * n2 / 12.0 * ((n + 1.0) - tie_term / (n * (n - 1.0)))).sqrt();
    let z = (u - n1 * n2 / 2.0 - 0.5) / spread;
    if z.is_nan() {
        // Every value equal: no evidence of a difference.
        return 1.0;
    }
    let standard = Normal::new(0.0, 1.0).expect("the standard normal distribution");
    standard.sf(z)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exact_counts_of_u_are_the_gaussian_binomial_coefficients() {
        // [4 choose 2]_q = 1 + q + 2q² + q³ + q⁴.
        assert_eq!(u_counts(2, 2), vec![1.0, 1.0, 2.0, 1.0, 1.0]);
        assert_eq!(u_counts(3, 5).iter().sum::<f64>(), 56.0);
    }

    #[test]
    fn no_data_is_none_and_equal_cohorts_show_no_difference() {
        assert_eq!(mann_whitney_u(&[], &[1.0], Alternative::Greater), None);
        assert_eq!(
            mann_whitney_u(&[f64::NAN], &[1.0], Alternative::Greater),
            None
        );
        let same = mann_whitney_u(&[2.0; 10], &[2.0; 10], Alternative::TwoSided).expect("a test");
        assert_eq!((same.u, same.p_value), (50.0, 1.0));
    }
}

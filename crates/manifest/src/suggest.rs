//! "Did you mean": the known name nearest to a mistyped one (a kind, an analysis name).

/// Levenshtein distance, in characters, for short identifiers.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut current = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous[j] + usize::from(ca != *cb);
            current.push(substitution.min(previous[j + 1] + 1).min(current[j] + 1));
        }
        previous = current;
    }
    previous[b.len()]
}

/// The known name nearest to `unknown`, when it is close enough to be a typo of it: within two
/// edits, or a third of the name for longer ones (the first of equals in the given order).
pub fn nearest<'a>(unknown: &str, known: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let limit = (unknown.chars().count() / 3).max(2);
    known
        .into_iter()
        .map(|name| (edit_distance(name, unknown), name))
        .filter(|(distance, _)| *distance <= limit)
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, name)| name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edit_distance_counts_edits() {
        assert_eq!(edit_distance("ClusterPromotion", "ClusterPromotion"), 0);
        assert_eq!(edit_distance("ClusterPromtion", "ClusterPromotion"), 1);
        assert_eq!(edit_distance("", "abc"), 3);
    }

    #[test]
    fn the_nearest_close_name_is_suggested_and_a_far_one_is_not() {
        let known = ["error-rate", "smoke", "ci-checks"];
        assert_eq!(nearest("eror-rate", known), Some("error-rate"));
        assert_eq!(nearest("smoek", known), Some("smoke"));
        assert_eq!(nearest("latency", known), None);
    }
}

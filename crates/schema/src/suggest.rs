//! "Did you mean": the declared name nearest to an unknown one, for typos such as `atuo`.

/// The declared name within two edits of `unknown` (the nearest; the first of equals in
/// sorted order), if any.
pub(crate) fn nearest<'a>(
    unknown: &str,
    declared: impl Iterator<Item = &'a str>,
) -> Option<String> {
    declared
        .map(|known| (edit_distance(known, unknown), known))
        .filter(|(distance, _)| *distance <= 2)
        .min()
        .map(|(_, known)| known.to_string())
}

/// Levenshtein distance, in characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut current = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous[j] + usize::from(ca != *cb);
            current[j + 1] = substitution.min(previous[j + 1] + 1).min(current[j] + 1);
        }
        previous = current;
    }
    previous[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edit_distance_counts_edits() {
        assert_eq!(edit_distance("auto", "atuo"), 2);
        assert_eq!(edit_distance("manual", "manual"), 0);
        assert_eq!(edit_distance("", "abc"), 3);
    }

    #[test]
    fn the_nearest_name_within_two_edits_is_suggested() {
        let declared = ["auto", "manual"];
        assert_eq!(
            nearest("atuo", declared.into_iter()).as_deref(),
            Some("auto")
        );
        assert_eq!(nearest("schedule", declared.into_iter()), None);
    }
}

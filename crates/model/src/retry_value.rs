//! The value of a retry annotation, `retry.tollgate.dev/<stage>: <snapshot>/<n>`, and which
//! snapshot it names: the one reading of it, for the engine that acts on it and for the edits
//! that write the next counter (`tollgate retry`, the web view's Retry button), so that what a
//! preview shows and what the controller does cannot differ.

use crate::snapshot::names_snapshot;

/// A retry annotation's value: `<snapshot id or commit prefix>/<n>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RetryValue {
    pub snapshot: String,
    pub n: u64,
}

/// Reads `<snapshot>/<n>` (n a positive integer).
pub fn parse(value: &str) -> Result<RetryValue, String> {
    let wrong = || {
        format!(
            "{value:?} is not <snapshot id>/<n> (a snapshot id or commit prefix, a slash, a retry counter of 1 or more)"
        )
    };
    let (snapshot, n) = value.trim().rsplit_once('/').ok_or_else(wrong)?;
    let n: u64 = n.parse().map_err(|_| wrong())?;
    if n == 0 || snapshot.is_empty() {
        return Err(wrong());
    }
    Ok(RetryValue {
        snapshot: snapshot.to_string(),
        n,
    })
}

/// The counter of `value` when it is a retry value naming the snapshot of id `snapshot_id`
/// introduced by `commit` (see [`names_snapshot`]).
pub fn counter_for(value: &str, snapshot_id: &str, commit: &str) -> Option<u64> {
    let parsed = parse(value).ok()?;
    names_snapshot(&parsed.snapshot, snapshot_id, commit).then_some(parsed.n)
}

#[cfg(test)]
mod tests {
    use super::{counter_for, parse};

    #[test]
    fn a_value_without_a_positive_counter_or_a_snapshot_is_refused() {
        for wrong in [
            "",
            "abc",
            "0123456789ab/0",
            "/3",
            "0123456789ab/x",
            "0123456789ab/-1",
        ] {
            assert!(parse(wrong).is_err(), "{wrong:?}");
        }
        let parsed = parse(" 0123456789ab/2 ").expect("a value");
        assert_eq!((parsed.snapshot.as_str(), parsed.n), ("0123456789ab", 2));
    }

    #[test]
    fn a_counter_counts_only_for_the_snapshot_it_names() {
        let (id, commit) = ("0123456789abcdef0123", "feedc0ffee");
        assert_eq!(counter_for("0123456789ab/4", id, commit), Some(4));
        assert_eq!(counter_for("FEEDC0F/4", id, commit), Some(4));
        assert_eq!(
            counter_for("0123456789a/4", id, commit),
            None,
            "too short an id"
        );
        assert_eq!(
            counter_for("feedc0/4", id, commit),
            None,
            "too short a commit"
        );
        assert_eq!(counter_for("ffffffffffff/4", id, commit), None);
        assert_eq!(counter_for("0123456789ab/0", id, commit), None);
    }
}

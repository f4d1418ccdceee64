//! The `Retry-After` header of an overloaded answer (RFC 9110 §10.2.3).

use std::time::Duration;

/// A server's hint is honoured up to this long: a bogus value must not park promotions for hours.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);
/// The wait assumed for a hint given as an HTTP date (kube-apiserver sends seconds; parsing dates
/// would need a date parser for a form it does not use).
const DATE_RETRY_AFTER: Duration = Duration::from_secs(1);

/// The wait a `Retry-After` value asks for: delay-seconds, capped at [`MAX_RETRY_AFTER`]; an
/// HTTP date counts as [`DATE_RETRY_AFTER`]; anything else as no hint.
pub fn parse(value: &str) -> Option<Duration> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds).min(MAX_RETRY_AFTER));
    }
    // An IMF-fixdate such as "Wed, 21 Oct 2015 07:28:00 GMT".
    let looks_like_date = value.ends_with("GMT") && value.contains(',');
    looks_like_date.then_some(DATE_RETRY_AFTER)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delay_seconds_are_read() {
        assert_eq!(parse("3"), Some(Duration::from_secs(3)));
        assert_eq!(parse(" 0 "), Some(Duration::ZERO));
    }

    #[test]
    fn a_huge_hint_is_capped() {
        assert_eq!(parse("86400"), Some(MAX_RETRY_AFTER));
    }

    #[test]
    fn an_http_date_waits_a_second() {
        assert_eq!(
            parse("Wed, 21 Oct 2015 07:28:00 GMT"),
            Some(Duration::from_secs(1))
        );
    }

    #[test]
    fn garbage_is_no_hint() {
        assert_eq!(parse("soon"), None);
        assert_eq!(parse("-1"), None);
    }
}

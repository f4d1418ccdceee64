//! Go `time.ParseDuration` syntax, which is what `metav1.Duration` accepts: a sequence of decimal
//! numbers, each with an optional fraction and a unit (`ns`, `us`/`µs`/`μs`, `ms`, `s`, `m`, `h`),
//! such as `300ms`, `1.5h` or `2h45m`. A bare `0` is allowed. Negative durations are rejected:
//! a negative delay has no meaning for a stage.

use std::time::Duration;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    #[error("empty duration")]
    Empty,
    #[error("negative duration {0:?} is not allowed")]
    Negative(String),
    #[error(
        "invalid duration {0:?}: expected a Go duration such as \"30s\", \"5m\" or \"1h30m\" (units: ns, us, ms, s, m, h)"
    )]
    Syntax(String),
    #[error("missing unit in duration {0:?}: write e.g. \"{0}s\" or \"{0}m\"")]
    MissingUnit(String),
    #[error("unknown unit {unit:?} in duration {text:?} (units: ns, us, ms, s, m, h)")]
    UnknownUnit { text: String, unit: String },
    #[error("duration {0:?} is too large")]
    Overflow(String),
}

pub fn parse_go_duration(text: &str) -> Result<Duration, DurationError> {
    if text.is_empty() {
        return Err(DurationError::Empty);
    }
    let mut rest = text;
    if let Some(stripped) = rest.strip_prefix('+') {
        rest = stripped;
    } else if rest.starts_with('-') {
        return Err(DurationError::Negative(text.to_string()));
    }
    if rest == "0" {
        return Ok(Duration::ZERO);
    }
    if rest.is_empty() {
        return Err(DurationError::Syntax(text.to_string()));
    }
    let mut total_nanos: u128 = 0;
    while !rest.is_empty() {
        let int_len = rest.bytes().take_while(u8::is_ascii_digit).count();
        let int_part = &rest[..int_len];
        rest = &rest[int_len..];
        let mut frac_part = "";
        if let Some(after_dot) = rest.strip_prefix('.') {
            let frac_len = after_dot.bytes().take_while(u8::is_ascii_digit).count();
            frac_part = &after_dot[..frac_len];
            rest = &after_dot[frac_len..];
        }
        if int_part.is_empty() && frac_part.is_empty() {
            return Err(DurationError::Syntax(text.to_string()));
        }
        let unit_len = rest
            .char_indices()
            .find(|(_, c)| c.is_ascii_digit() || *c == '.')
            .map(|(i, _)| i)
            .unwrap_or(rest.len());
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let unit_nanos: u128 = match unit {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            "" => return Err(DurationError::MissingUnit(text.to_string())),
            other if other.trim() != other || other.contains(char::is_whitespace) => {
                return Err(DurationError::Syntax(text.to_string()));
            }
            other => {
                return Err(DurationError::UnknownUnit {
                    text: text.to_string(),
                    unit: other.to_string(),
                });
            }
        };
        let overflow = || DurationError::Overflow(text.to_string());
        let int_value: u128 = if int_part.is_empty() {
            0
        } else {
            int_part.parse().map_err(|_| overflow())?
        };
        let mut nanos = int_value.checked_mul(unit_nanos).ok_or_else(overflow)?;
        // Fractions: scale digit by digit, truncating below a nanosecond like Go does.
        let mut scale = unit_nanos;
        for digit in frac_part.bytes() {
            scale /= 10;
            if scale == 0 {
                break;
            }
            nanos += u128::from(digit - b'0') * scale;
        }
        total_nanos = total_nanos.checked_add(nanos).ok_or_else(overflow)?;
        // Go's limit: durations are int64 nanoseconds.
        if total_nanos > i64::MAX as u128 {
            return Err(overflow());
        }
    }
    Ok(Duration::from_nanos(total_nanos as u64))
}

/// Formats a duration the way Go's `Duration.String` does for whole units (`1h30m0s`), used in
/// status messages so users see the form they wrote.
pub fn format_go_duration(d: Duration) -> String {
    let secs = d.as_secs();
    if secs == 0 {
        let ms = d.as_millis();
        return if ms > 0 {
            format!("{ms}ms")
        } else {
            format!("{}ns", d.as_nanos())
        };
    }
    let (h, m, s) = (secs / 3600, (secs % 3600) / 60, secs % 60);
    let frac = d.subsec_millis();
    let s_text = if frac > 0 {
        format!("{s}.{frac:03}").trim_end_matches('0').to_string()
    } else {
        s.to_string()
    };
    match (h, m) {
        (0, 0) => format!("{s_text}s"),
        (0, _) => format!("{m}m{s_text}s"),
        _ => format!("{h}h{m}m{s_text}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_go_forms() {
        let cases = [
            ("0", 0),
            ("5m", 300_000),
            ("1h30m", 5_400_000),
            ("300ms", 300),
            ("1.5h", 5_400_000),
            ("2h45m30s", 9_930_000),
            ("+10s", 10_000),
            (".5s", 500),
            ("1µs", 0),
        ];
        for (text, ms) in cases {
            assert_eq!(
                parse_go_duration(text).map(|d| d.as_millis()),
                Ok(ms),
                "{text}"
            );
        }
    }

    #[test]
    fn rejects_non_go_forms() {
        assert_eq!(parse_go_duration(""), Err(DurationError::Empty));
        assert!(matches!(
            parse_go_duration("5"),
            Err(DurationError::MissingUnit(_))
        ));
        assert!(matches!(
            parse_go_duration("5 minutes"),
            Err(DurationError::Syntax(_) | DurationError::UnknownUnit { .. })
        ));
        assert!(matches!(
            parse_go_duration("5d"),
            Err(DurationError::UnknownUnit { .. })
        ));
        assert!(matches!(
            parse_go_duration("-5m"),
            Err(DurationError::Negative(_))
        ));
        assert!(matches!(
            parse_go_duration("m"),
            Err(DurationError::Syntax(_))
        ));
        assert!(matches!(
            parse_go_duration("9999999999h"),
            Err(DurationError::Overflow(_))
        ));
    }

    #[test]
    fn formats_like_go() {
        assert_eq!(format_go_duration(Duration::from_secs(5400)), "1h30m0s");
        assert_eq!(format_go_duration(Duration::from_secs(300)), "5m0s");
        assert_eq!(format_go_duration(Duration::from_millis(1500)), "1.5s");
    }
}

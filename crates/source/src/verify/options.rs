//! The options of an allowed-signers line (`man ssh-keygen`, ALLOWED SIGNERS): `cert-authority`,
//! `namespaces="…"`, `valid-after="…"` and `valid-before="…"`, read as ssh-keygen reads them.
//! Anything else is an error: an option tollgate does not know might restrict the key (or be a
//! misspelt `valid-before`), and ignoring it would trust the key more than its line says.

use chrono::TimeZone;

use super::show_time;

/// What an option list says.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct SignerOptions {
    pub cert_authority: bool,
    /// `namespaces="git,file"`: the patterns of what the key may sign (`None`: anything).
    pub namespaces: Option<Vec<String>>,
    pub validity: Validity,
}

/// When a key may sign, in seconds since the epoch, both ends included (as ssh-keygen).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Validity {
    pub after: Option<i64>,
    pub before: Option<i64>,
}

impl Validity {
    /// Why a key with this validity may not have signed a commit dated `at`, if it may not. Like
    /// `git verify-commit` (which passes the committer date to `ssh-keygen -Overify-time`), the
    /// date judged is the commit's, not the verifier's clock: history verified once stays
    /// verified when a key's window closes.
    pub fn refusal(&self, at: Option<i64>) -> Option<String> {
        if *self == Validity::default() {
            return None;
        }
        let Some(at) = at else {
            return Some(
                "has a validity window, and the signed object has no date to judge it by"
                    .to_string(),
            );
        };
        if let Some(after) = self.after
            && at < after
        {
            return Some(format!(
                "is not yet valid: valid-after {}, the commit is dated {}",
                show_time(after),
                show_time(at)
            ));
        }
        if let Some(before) = self.before
            && at > before
        {
            return Some(format!(
                "expired: valid-before {}, the commit is dated {}",
                show_time(before),
                show_time(at)
            ));
        }
        None
    }
}

/// Reads an option list (`namespaces="git",valid-before="20260101Z"`). Values must be quoted,
/// as ssh-keygen requires.
pub(super) fn parse(list: &str) -> Result<SignerOptions, String> {
    let mut options = SignerOptions::default();
    let mut rest = list;
    loop {
        let name_end = rest.find(['=', ',']).unwrap_or(rest.len());
        let name = &rest[..name_end];
        rest = &rest[name_end..];
        let value = match rest.strip_prefix('=') {
            Some(quoted) => {
                let Some(inner) = quoted.strip_prefix('"') else {
                    return Err(format!("the value of {name} must be in double quotes"));
                };
                let Some(close) = inner.find('"') else {
                    return Err(format!("the value of {name} has no closing quote"));
                };
                rest = &inner[close + 1..];
                Some(&inner[..close])
            }
            None => None,
        };
        options.set(name, value)?;
        match rest.strip_prefix(',') {
            Some("") => return Err("empty option after the last comma".to_string()),
            Some(next) => rest = next,
            None if rest.is_empty() => return options.checked(),
            None => return Err(format!("unexpected {rest:?} after the {name} option")),
        }
    }
}

impl SignerOptions {
    fn set(&mut self, name: &str, value: Option<&str>) -> Result<(), String> {
        let twice = || format!("{name} is given twice");
        match (name, value) {
            ("cert-authority", None) => self.cert_authority = true,
            ("namespaces", Some(list)) if self.namespaces.is_none() => {
                // Untrimmed, as ssh-keygen reads it: `"file, git"` does not name git.
                self.namespaces = Some(list.split(',').map(str::to_string).collect());
            }
            ("valid-after", Some(time)) if self.validity.after.is_none() => {
                self.validity.after = Some(parse_time(name, time)?);
            }
            ("valid-before", Some(time)) if self.validity.before.is_none() => {
                self.validity.before = Some(parse_time(name, time)?);
            }
            ("namespaces" | "valid-after" | "valid-before", Some(_)) => return Err(twice()),
            ("namespaces" | "valid-after" | "valid-before", None) => {
                return Err(format!("{name} needs a value in double quotes"));
            }
            ("cert-authority", Some(_)) => return Err("cert-authority takes no value".to_string()),
            ("", _) => return Err("empty option".to_string()),
            (other, _) => {
                return Err(format!(
                    "unknown option {other:?}: allowed-signers lines know cert-authority, \
                     namespaces, valid-after and valid-before, and an unknown option might \
                     restrict the key"
                ));
            }
        }
        Ok(())
    }

    /// The checks across options: a window must not be empty (ssh-keygen refuses it too).
    fn checked(self) -> Result<Self, String> {
        if let Validity {
            after: Some(after),
            before: Some(before),
        } = self.validity
            && before <= after
        {
            return Err(format!(
                "valid-before {} is not after valid-after {}",
                show_time(before),
                show_time(after)
            ));
        }
        Ok(self)
    }
}

/// `YYYYMMDD[HHMM[SS]]`, then `Z` or `UTC` for UTC, else the local time zone (ssh-keygen's
/// reading; a controller's container usually runs in UTC), in seconds since the epoch. Unlike
/// ssh-keygen, an impossible date (February 30th) is an error rather than the next valid one.
fn parse_time(name: &str, value: &str) -> Result<i64, String> {
    let invalid = || format!("invalid {name} {value:?}: expected YYYYMMDD[HHMM[SS]][Z]");
    let upper = value.to_ascii_uppercase();
    let (digits, utc) = match upper
        .strip_suffix("UTC")
        .or_else(|| upper.strip_suffix('Z'))
    {
        Some(digits) => (digits, true),
        None => (upper.as_str(), false),
    };
    if !matches!(digits.len(), 8 | 12 | 14) || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(invalid());
    }
    // Two-digit fields after the year; absent ones are zero.
    let field = |at: usize| digits.get(at..at + 2).map_or(Ok(0), str::parse::<u32>);
    let year = digits[..4].parse::<i32>().map_err(|_| invalid())?;
    let [month, day, hour, minute, second] = [4, 6, 8, 10, 12].map(field);
    let naive = chrono::NaiveDate::from_ymd_opt(
        year,
        month.map_err(|_| invalid())?,
        day.map_err(|_| invalid())?,
    )
    .and_then(|date| date.and_hms_opt(hour.ok()?, minute.ok()?, second.ok()?))
    .ok_or_else(invalid)?;
    if utc {
        return Ok(naive.and_utc().timestamp());
    }
    chrono::Local
        .from_local_datetime(&naive)
        .earliest()
        .map(|local| local.timestamp())
        .ok_or_else(|| format!("{name} {value:?} does not exist in the local time zone"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_read_as_ssh_keygen_reads_them() {
        let at = |value: &str| parse_time("valid-before", value);
        assert_eq!(at("20260101Z"), Ok(1_767_225_600));
        assert_eq!(at("20260101utc"), Ok(1_767_225_600));
        assert_eq!(at("202601010130Z"), Ok(1_767_225_600 + 5_400));
        assert_eq!(at("20260101013005z"), Ok(1_767_225_600 + 5_405));
        let local = chrono::Local
            .with_ymd_and_hms(2026, 1, 1, 0, 0, 0)
            .earliest()
            .expect("a local midnight")
            .timestamp();
        assert_eq!(at("20260101"), Ok(local), "without Z: the local time zone");
    }

    #[test]
    fn a_window_includes_both_ends() {
        let window = parse(r#"valid-after="20260101Z",valid-before="20260102Z""#)
            .expect("parses")
            .validity;
        let (after, before) = (1_767_225_600, 1_767_225_600 + 86_400);
        assert_eq!(window.refusal(Some(after)), None);
        assert_eq!(window.refusal(Some(before)), None);
        assert_eq!(
            window.refusal(Some(after - 1)).as_deref(),
            Some(
                "is not yet valid: valid-after 2026-01-01T00:00:00Z, the commit is dated 2025-12-31T23:59:59Z"
            )
        );
        assert_eq!(
            window.refusal(Some(before + 1)).as_deref(),
            Some(
                "expired: valid-before 2026-01-02T00:00:00Z, the commit is dated 2026-01-02T00:00:01Z"
            )
        );
        assert!(window.refusal(None).is_some(), "no date, no trust");
        assert_eq!(Validity::default().refusal(None), None);
    }

    #[test]
    fn options_are_read_with_their_quoted_commas() {
        let options = parse(r#"cert-authority,namespaces="file,git",valid-after="20260101Z""#)
            .expect("parses");
        assert!(options.cert_authority);
        assert_eq!(
            options.namespaces.as_deref(),
            Some(&["file".to_string(), "git".to_string()][..])
        );
        assert_eq!(options.validity.after, Some(1_767_225_600));
        assert_eq!(options.validity.before, None);
        assert_eq!(
            parse(r#"valid-after="20260101Z",valid-after="20270101Z""#),
            Err("valid-after is given twice".to_string())
        );
    }
}

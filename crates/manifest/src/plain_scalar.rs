//! The type of an untagged plain YAML scalar, resolved the way serde-saphyr's `deserialize_any`
//! resolves it with tollgate's options (YAML 1.1 booleans, no legacy octal, non-finite floats
//! rejected). Used by the fast YAML reader, which hands the rare spellings it does not resolve
//! itself (radix prefixes, underscores, `.inf`/`.nan`, overflowing literals) to serde-saphyr.

/// What a plain scalar denotes.
#[derive(Clone, Debug, PartialEq)]
pub enum PlainValue<'a> {
    Null,
    Bool(bool),
    Int(i64),
    UInt(u64),
    Float(f64),
    Str(&'a str),
}

/// `None` when the spelling is one the fast reader leaves to serde-saphyr.
pub fn resolve(text: &str) -> Option<PlainValue<'_>> {
    if matches!(text, "" | "~" | "null" | "Null" | "NULL") {
        return Some(PlainValue::Null);
    }
    if let Some(value) = yaml11_bool(text) {
        return Some(PlainValue::Bool(value));
    }
    let bytes = text.as_bytes();
    let unsigned = match bytes.first() {
        Some(b'+' | b'-') => &bytes[1..],
        _ => bytes,
    };
    // Only a digit or a dot (after an optional sign) can start a number; every other plain
    // scalar that is not null or a boolean is a string.
    if !unsigned
        .first()
        .is_some_and(|b| b.is_ascii_digit() || *b == b'.')
    {
        return Some(PlainValue::Str(text));
    }
    // Underscored digits, radix prefixes and the YAML spellings of infinity and NaN.
    if text.contains('_')
        || unsigned.len() > 1 && unsigned[0] == b'0' && unsigned[1].is_ascii_alphabetic()
        || unsigned.first() == Some(&b'.') && unsigned.get(1).is_some_and(u8::is_ascii_alphabetic)
    {
        return None;
    }
    if unsigned.iter().all(u8::is_ascii_digit) {
        // A redundant leading zero is not an integer (it may still be a float, below).
        let canonical = unsigned.len() == 1 || unsigned[0] != b'0';
        if canonical {
            if bytes[0] == b'-' {
                if let Ok(value) = text.parse::<i64>() {
                    return Some(PlainValue::Int(value));
                }
            } else if let Ok(value) = unsigned_text(text).parse::<u64>() {
                return Some(match i64::try_from(value) {
                    Ok(value) => PlainValue::Int(value),
                    Err(_) => PlainValue::UInt(value),
                });
            }
        }
    }
    match text.parse::<f64>() {
        Ok(value) if value.is_finite() => Some(PlainValue::Float(value)),
        // Overflow to infinity is an error the slow path reports.
        Ok(_) => None,
        Err(_) => Some(PlainValue::Str(text)),
    }
}

fn unsigned_text(text: &str) -> &str {
    text.strip_prefix('+').unwrap_or(text)
}

fn yaml11_bool(text: &str) -> Option<bool> {
    if text.len() > 5 {
        return None;
    }
    let is = |word: &str| text.eq_ignore_ascii_case(word);
    if is("true") || is("yes") || is("y") || is("on") {
        Some(true)
    } else if is("false") || is("no") || is("n") || is("off") {
        Some(false)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::located::Node;

    /// serde-saphyr's resolution of the same text as a whole document.
    fn saphyr(text: &str) -> Option<Node> {
        serde_saphyr::from_str::<Node>(text).ok()
    }

    fn as_node(value: PlainValue<'_>) -> Node {
        match value {
            PlainValue::Null => Node::Null,
            PlainValue::Bool(b) => Node::Bool(b),
            PlainValue::Int(i) => Node::Int(i),
            PlainValue::UInt(u) => Node::UInt(u),
            PlainValue::Float(f) => Node::Float(f),
            PlainValue::Str(s) => Node::Str(s.to_string()),
        }
    }

    #[test]
    fn resolution_matches_serde_saphyr() {
        let samples = [
            "a",
            "yes",
            "No",
            "ON",
            "off",
            "Y",
            "n",
            "true",
            "FALSE",
            "TrUe",
            "null",
            "Null",
            "NULL",
            "~",
            "nULL",
            "0",
            "7",
            "-7",
            "+7",
            "-0",
            "007",
            "-007",
            "+007",
            "1.5",
            ".5",
            "-.5",
            "1.",
            "1e5",
            "1E-3",
            "-1e5",
            "3.3.3",
            "10%",
            "2m",
            "v1.19.1",
            "1h30m",
            "9223372036854775807",
            "9223372036854775808",
            "18446744073709551615",
            "18446744073709551616",
            "-9223372036854775808",
            "-9223372036854775809",
            "123456789012345678901234567890",
            "inf",
            "nan",
            "infinity",
            "+inf",
            "-nan",
            ".",
            "+",
            "1-2",
            "1.2.3-rc1",
            "0.0.0.0",
            "1e",
            "e5",
            "1_000",
            "0x1F",
            "0o17",
            "0b1",
            ".inf",
            "-.inf",
            ".nan",
            "1e999",
            "1.5e308",
            "01.5",
            "00",
            "-0.0",
            "+.5",
            "5.",
        ];
        for text in samples {
            let Some(fast) = resolve(text) else {
                continue;
            };
            assert_eq!(Some(as_node(fast)), saphyr(text), "{text:?}");
        }
        // The spellings handed to serde-saphyr.
        for text in ["1_000", "0x1F", "0o17", ".inf", "-.inf", ".nan", "1e999"] {
            assert_eq!(resolve(text), None, "{text:?}");
        }
    }
}

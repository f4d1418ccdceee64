//! What a provider observed before the conditions judge it: a result (`result` in CEL), no data,
//! or checks still pending; and why a measurement could not be made.

use std::fmt::Write as _;

/// The value bound to `result` in `successCondition` / `failureCondition`.
#[derive(Clone, Debug, PartialEq)]
pub enum ResultValue {
    /// A Prometheus scalar or one-sample vector.
    Number(f64),
    /// A Prometheus vector of several samples, in the order Prometheus returned them.
    Numbers(Vec<f64>),
    /// A commit's checks (all green or not), or a JSON boolean.
    Bool(bool),
    /// A Prometheus string.
    Text(String),
    /// What a web check's JSONPath selected.
    Json(serde_json::Value),
}

/// What a provider saw.
#[derive(Clone, Debug, PartialEq)]
pub enum Observation {
    /// A result, and how status shows it (a number as [`show_number`] writes it: `0.5`, `+Inf`).
    Value { result: ResultValue, shown: String },
    /// An empty answer: judged by `onNoData`. Says what was empty.
    NoData(String),
    /// Checks not finished yet (a pending commit status): inconclusive, never green. Says which.
    Pending(String),
}

/// Why a measurement could not be made: the verdict is `Error`, with this text. Never carries a
/// secret (a token, a header value, a secret file's content or its URL).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MeasureError {
    /// Here and in the next two, `{0}` is the server as the provider may show it (for a URL in
    /// git, [`super::secrets::shown_origin`]): never a credential.
    #[error("no answer from {0} within {1:?}")]
    TimedOut(String, std::time::Duration),
    #[error("cannot connect to {0}: {1}")]
    Connect(String, String),
    #[error("the connection to {0} failed: {1}")]
    Connection(String, String),
    #[error("answered {status}{}", detail.as_deref().map(|d| format!(": {d}")).unwrap_or_default())]
    Status { status: u16, detail: Option<String> },
    #[error("the answer is larger than {0} bytes")]
    TooLarge(usize),
    #[error("the answer is not what the API returns: {0}")]
    Malformed(String),
    #[error("{0}")]
    Query(String),
    #[error("{0}")]
    Secret(String),
    #[error("{0}")]
    Config(String),
}

/// `[0.1, 0.2]`, as status shows a list.
pub fn show_list<T: std::fmt::Display>(items: &[T]) -> String {
    let mut out = String::from("[");
    for (index, item) in items.iter().enumerate() {
        if index > 0 {
            out.push_str(", ");
        }
        let _ = write!(out, "{item}");
    }
    out.push(']');
    out
}

/// Significant digits a measured number is shown with: enough to compare with a threshold,
/// few enough that floating-point noise (`0.500000000000002`) never shows.
const SHOWN_DIGITS: usize = 6;

/// A measured number as status, events and the CLI show it: rounded to [`SHOWN_DIGITS`]
/// significant digits, then written as the shortest text that reads back to that (`0.5`,
/// `0.0123457`, `120`), with an exponent when it is very large or small (`1.5e9`, `2e-7`);
/// infinities as Prometheus writes them (`+Inf`, `-Inf`).
pub fn show_number(number: f64) -> String {
    if number.is_nan() {
        return "NaN".to_string();
    }
    if number.is_infinite() {
        return if number > 0.0 { "+Inf" } else { "-Inf" }.to_string();
    }
    tollgate_engine::status::comparison_record::significant(number, SHOWN_DIGITS)
}

#[cfg(test)]
mod tests {
    use super::show_number;

    #[test]
    fn numbers_show_at_most_six_significant_digits_and_no_float_noise() {
        let shown: Vec<String> = [
            0.500000000000002,
            0.1 + 0.2,
            0.0123456789,
            120.0,
            -3.25,
            0.0,
            1234567.0,
            0.00002,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
        ]
        .into_iter()
        .map(show_number)
        .collect();
        assert_eq!(
            shown,
            [
                "0.5",
                "0.3",
                "0.0123457",
                "120",
                "-3.25",
                "0",
                "1.23457e6",
                "2e-5",
                "+Inf",
                "-Inf",
                "NaN"
            ]
        );
    }
}

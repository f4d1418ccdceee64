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
    /// A result, and how status shows it (as the provider wrote it: `0.5`, `NaN`, `+Inf`).
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
    #[error("no answer within {0:?}")]
    TimedOut(std::time::Duration),
    #[error("cannot connect")]
    Connect,
    #[error("the connection failed: {0}")]
    Connection(String),
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

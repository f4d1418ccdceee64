//! Parse-only check of an analysis's PromQL query, with the `promql-parser` crate (the grammar of
//! Prometheus itself, not a hand-written subset). The query is checked after its templates are
//! rendered with sample values, as Prometheus would receive it.

/// Longest query accepted, in bytes: real queries are a few lines, and the bound keeps a
/// pathological one from stalling validation.
pub const MAX_QUERY_BYTES: usize = 16 * 1024;

/// Why a query would not parse in Prometheus.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PromqlError {
    #[error("PromQL does not parse: {message}")]
    Syntax { message: String },
    #[error("the query is {bytes} bytes long, more than the {limit} bytes tollgate checks")]
    TooLong { bytes: usize, limit: usize },
    /// The third-party parser panicked (a parser bug, reported instead of crashing).
    #[error("the PromQL parser failed on this query (parser bug); simplify the query")]
    ParserPanicked,
}

/// Parses `query` as a PromQL expression.
pub fn check_promql(query: &str) -> Result<(), PromqlError> {
    if query.len() > MAX_QUERY_BYTES {
        return Err(PromqlError::TooLong {
            bytes: query.len(),
            limit: MAX_QUERY_BYTES,
        });
    }
    if query.trim().is_empty() {
        return Err(PromqlError::Syntax {
            message: "the query is empty".to_string(),
        });
    }
    match std::panic::catch_unwind(|| promql_parser::parser::parse(query)) {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(message)) => Err(PromqlError::Syntax { message }),
        Err(_) => Err(PromqlError::ParserPanicked),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_issue_example_parses() {
        let query = "sum(rate(http_requests_total{cluster=~\"eu-1|us\\\\.2\",code=~\"5..\"}[2m]))\n/ sum(rate(http_requests_total{cluster=~\"eu-1|us\\\\.2\"}[2m]))\n";
        assert_eq!(check_promql(query), Ok(()));
        assert_eq!(check_promql("up"), Ok(()));
    }

    #[test]
    fn broken_queries_carry_the_parser_message() {
        for query in [
            "sum(rate(x[2m])",
            "rate(x[2 minutes])",
            "x{a=\"b\"",
            "x +",
            "",
        ] {
            match check_promql(query) {
                Err(PromqlError::Syntax { message }) => assert!(!message.is_empty(), "{query}"),
                other => panic!("expected a syntax error for {query:?}, got {other:?}"),
            }
        }
    }

    #[test]
    fn too_long_a_query_is_refused_before_parsing() {
        let query = format!("x{}", " + x".repeat(MAX_QUERY_BYTES / 4));
        assert!(matches!(
            check_promql(&query),
            Err(PromqlError::TooLong { .. })
        ));
    }
}

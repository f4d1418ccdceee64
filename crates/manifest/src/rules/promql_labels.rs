//! Whether a PromQL query's result keeps a label (a comparative analysis needs one sample per
//! cluster, told apart by the `cluster` label). Read from the parsed expression (`promql-parser`),
//! by the rules of Prometheus' evaluation: a selector keeps every label; an aggregation keeps
//! only what `by (…)` names or `without (…)` does not (`topk`, `bottomk`, `limitk` keep their
//! input's labels); a function keeps its vector argument's (`histogram_quantile`, `rate`, …)
//! unless it makes a new series (`vector`, `scalar`, `absent`); a binary operation between
//! vectors keeps the matched side's labels (`on (…)` keeps only those, `ignoring (…)` drops
//! them, `group_left`/`group_right` keep the many side's); with a scalar, the vector's.

use promql_parser::parser::{
    AggregateExpr, BinaryExpr, Call, Expr, LabelModifier, VectorMatchCardinality, parse,
};

/// Functions whose result is a new series, without the labels of their arguments.
const NEW_SERIES: [&str; 6] = [
    "vector",
    "scalar",
    "time",
    "absent",
    "absent_over_time",
    "pi",
];

/// Aggregations whose result is a subset of their input's series, with their labels.
const SUBSET_AGGREGATIONS: [&str; 4] = ["topk", "bottomk", "limitk", "limit_ratio"];

/// Whether `query`'s result series carry `label`; `None` when it does not parse (that is
/// `check_promql`'s finding).
pub fn keeps_label(query: &str, label: &str) -> Option<bool> {
    let parsed = std::panic::catch_unwind(|| parse(query)).ok()?.ok()?;
    Some(expression_keeps(&parsed, label))
}

fn expression_keeps(expr: &Expr, label: &str) -> bool {
    match expr {
        Expr::VectorSelector(_) | Expr::MatrixSelector(_) => true,
        Expr::NumberLiteral(_) | Expr::StringLiteral(_) | Expr::Extension(_) => false,
        Expr::Paren(paren) => expression_keeps(&paren.expr, label),
        Expr::Unary(unary) => expression_keeps(&unary.expr, label),
        Expr::Subquery(subquery) => expression_keeps(&subquery.expr, label),
        Expr::Aggregate(aggregate) => aggregate_keeps(aggregate, label),
        Expr::Call(call) => call_keeps(call, label),
        Expr::Binary(binary) => binary_keeps(binary, label),
    }
}

fn names(modifier: &LabelModifier, label: &str) -> bool {
    modifier.labels().labels.iter().any(|l| l == label)
}

fn aggregate_keeps(aggregate: &AggregateExpr, label: &str) -> bool {
    let inner = expression_keeps(&aggregate.expr, label);
    if SUBSET_AGGREGATIONS.contains(&aggregate.op.to_string().as_str()) {
        return inner;
    }
    match &aggregate.modifier {
        Some(by @ LabelModifier::Include(_)) => names(by, label) && inner,
        Some(without @ LabelModifier::Exclude(_)) => !names(without, label) && inner,
        None => false,
    }
}

fn call_keeps(call: &Call, label: &str) -> bool {
    if NEW_SERIES.contains(&call.func.name) {
        return false;
    }
    let args = &call.args.args;
    if call.func.name == "label_replace"
        && let Some(Expr::StringLiteral(destination)) = args.get(1).map(|a| a.as_ref())
        && destination.val == label
    {
        return true;
    }
    args.iter().any(|arg| expression_keeps(arg, label))
}

fn binary_keeps(binary: &BinaryExpr, label: &str) -> bool {
    let (lhs, rhs) = (
        expression_keeps(&binary.lhs, label),
        expression_keeps(&binary.rhs, label),
    );
    if !has_series(&binary.lhs) {
        return rhs;
    }
    if !has_series(&binary.rhs) {
        return lhs;
    }
    let Some(modifier) = &binary.modifier else {
        return lhs;
    };
    match (&modifier.card, &modifier.matching) {
        (VectorMatchCardinality::OneToMany(_), _) => rhs,
        (VectorMatchCardinality::ManyToOne(_), _) | (VectorMatchCardinality::ManyToMany, _) => lhs,
        (VectorMatchCardinality::OneToOne, Some(on @ LabelModifier::Include(_))) => {
            names(on, label) && lhs
        }
        (VectorMatchCardinality::OneToOne, Some(ignoring @ LabelModifier::Exclude(_))) => {
            !names(ignoring, label) && lhs
        }
        (VectorMatchCardinality::OneToOne, None) => lhs,
    }
}

/// Whether the expression yields series (a vector), not a scalar.
fn has_series(expr: &Expr) -> bool {
    use promql_parser::parser::value::ValueType;
    matches!(expr.value_type(), ValueType::Vector | ValueType::Matrix)
}

#[cfg(test)]
mod tests {
    use super::keeps_label;

    #[test]
    fn aggregations_without_the_label_drop_it() {
        for query in [
            "sum(rate(x[2m]))",
            "histogram_quantile(0.99, sum by (le) (rate(h_bucket[2m])))",
            "sum without (cluster) (x)",
            "avg(x) / avg(y)",
            "sum by (cluster) (x) / on (job) sum by (cluster, job) (y)",
            "x / ignoring (cluster) y",
            "scalar(sum by (cluster) (x))",
            "vector(1)",
            "1 + 2",
        ] {
            assert_eq!(keeps_label(query, "cluster"), Some(false), "{query}");
        }
    }

    #[test]
    fn selectors_by_cluster_and_functions_over_them_keep_it() {
        for query in [
            "x",
            "rate(x{cluster=~\"a|b\"}[2m])",
            "histogram_quantile(0.99, sum by (le, cluster) (rate(h_bucket{cluster=~\"a\"}[2m])))",
            "sum by (cluster) (rate(e[2m])) / sum by (cluster) (rate(t[2m]))",
            "sum without (le) (x)",
            "topk(3, sum by (cluster) (x))",
            "2 * sum by (cluster) (x)",
            "sum by (cluster) (x) / on (cluster) group_left sum by (cluster, job) (y)",
            "label_replace(sum by (site) (x), \"cluster\", \"$1\", \"site\", \"(.*)\")",
        ] {
            assert_eq!(keeps_label(query, "cluster"), Some(true), "{query}");
        }
        assert_eq!(keeps_label("sum(", "cluster"), None);
    }
}

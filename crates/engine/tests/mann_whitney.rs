//! The engine's Mann-Whitney U test against SciPy's `scipy.stats.mannwhitneyu` on recorded
//! samples (`fixtures/mann_whitney.json`, made by `fixtures/mann_whitney_generate.py`): the same
//! U, and the same p-value to 1e-9, for every case and alternative.

use serde_json::Value;
use tollgate_engine::mann_whitney::{Alternative, mann_whitney_u};

fn numbers(value: &Value) -> Vec<f64> {
    value
        .as_array()
        .expect("a list")
        .iter()
        .map(|v| v.as_f64().expect("a number"))
        .collect()
}

#[test]
fn u_and_p_equal_scipys_on_every_recorded_case() {
    let text = include_str!("fixtures/mann_whitney.json");
    let recorded: Value = serde_json::from_str(text).expect("the fixture");
    let cases = recorded["cases"].as_array().expect("cases");
    assert!(cases.len() > 50, "the fixture was not read");
    for case in cases {
        let alternative = match case["alternative"].as_str() {
            Some("greater") => Alternative::Greater,
            Some("less") => Alternative::Less,
            _ => Alternative::TwoSided,
        };
        let (test, baseline) = (numbers(&case["test"]), numbers(&case["baseline"]));
        let result = mann_whitney_u(&test, &baseline, alternative).expect("a result");
        let (u, p) = (
            case["u"].as_f64().expect("u"),
            case["p"].as_f64().expect("p"),
        );
        let name = format!("{} ({})", case["name"], case["alternative"]);
        assert_eq!(result.u, u, "{name}: U");
        assert!(
            (result.p_value - p).abs() < 1e-9,
            "{name}: p {} (SciPy {p}, {:?})",
            result.p_value,
            result.method
        );
    }
}

//! Order between promotions: the `tollgate.dev/depends-on` annotation, and the cycle check
//! `tollgate validate` and the controller share.

use std::collections::BTreeSet;

/// `tollgate.dev/depends-on: cert-manager[,other]` on a ClusterPromotion: each of its stages
/// starts only after the stage of the same name of each named promotion completed its run.
pub const DEPENDS_ON_ANNOTATION: &str = "tollgate.dev/depends-on";

/// The promotions named by a `tollgate.dev/depends-on` value, trimmed, empty entries dropped,
/// in the order written, each once.
pub fn depends_on_names(value: &str) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for name in value.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        if !names.iter().any(|n| n == name) {
            names.push(name.to_string());
        }
    }
    names
}

/// The promotions `promotion` depends on (its `tollgate.dev/depends-on` annotation).
pub fn depends_on(promotion: &crate::model::ClusterPromotion) -> Vec<String> {
    promotion
        .metadata
        .annotations
        .get(DEPENDS_ON_ANNOTATION)
        .map(|v| depends_on_names(v))
        .unwrap_or_default()
}

/// A path `name -> … -> name` along the dependencies `depends_on_of` gives (`None`: an unknown
/// promotion), if there is one.
pub fn cycle_through<'a>(
    name: &str,
    depends_on_of: impl Fn(&str) -> Option<&'a [String]>,
) -> Option<Vec<String>> {
    fn walk<'a>(
        at: &str,
        target: &str,
        depends_on_of: &impl Fn(&str) -> Option<&'a [String]>,
        path: &mut Vec<String>,
        seen: &mut BTreeSet<String>,
    ) -> bool {
        for next in depends_on_of(at).unwrap_or_default() {
            path.push(next.clone());
            if next == target {
                return true;
            }
            if seen.insert(next.clone()) && walk(next, target, depends_on_of, path, seen) {
                return true;
            }
            path.pop();
        }
        false
    }
    let mut path = vec![name.to_string()];
    let mut seen = BTreeSet::new();
    walk(name, name, &depends_on_of, &mut path, &mut seen).then_some(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn names_are_trimmed_deduplicated_and_in_order() {
        assert_eq!(
            depends_on_names(" cert-manager, ,ingress,cert-manager "),
            ["cert-manager", "ingress"]
        );
        assert!(depends_on_names("").is_empty());
    }

    #[test]
    fn a_cycle_is_found_through_its_start_only() {
        let graph: BTreeMap<String, Vec<String>> = [
            ("a", vec!["b"]),
            ("b", vec!["c"]),
            ("c", vec!["a"]),
            ("e", vec!["a"]),
            ("s", vec!["s"]),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.into_iter().map(String::from).collect()))
        .collect();
        let of = |n: &str| graph.get(n).map(Vec::as_slice);
        assert_eq!(cycle_through("a", of).expect("cycle"), ["a", "b", "c", "a"]);
        assert_eq!(cycle_through("e", of), None, "waits on a cycle, is not one");
        assert_eq!(cycle_through("s", of).expect("self"), ["s", "s"]);
    }
}

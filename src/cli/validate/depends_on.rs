//! `tollgate.dev/depends-on` across the validated files: every name must be a ClusterPromotion
//! among them, and no promotion may depend on itself through others (a cycle would hold every
//! one of its stages forever). Errors at the annotation's line.

use std::collections::BTreeMap;

use tollgate_manifest::parse::ParsedFile;
use tollgate_manifest::{Diagnostic, Severity};
use tollgate_model::depends_on::{DEPENDS_ON_ANNOTATION, cycle_through, depends_on};

use super::policies::key_position;

/// One promotion that names dependencies, and where.
struct Dependant<'a> {
    file: &'a str,
    line: u32,
    depends_on: Vec<String>,
}

pub fn diagnostics<'t>(
    files: &[ParsedFile],
    text_of: impl Fn(&str) -> Option<&'t str>,
) -> Vec<Diagnostic> {
    let mut graph: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut dependants: BTreeMap<String, Dependant<'_>> = BTreeMap::new();
    for file in files {
        for document in &file.promotions {
            let Some(promotion) = &document.promotion else {
                continue;
            };
            let names = depends_on(promotion);
            graph.insert(promotion.name().to_string(), names.clone());
            if !names.is_empty() {
                dependants.insert(
                    promotion.name().to_string(),
                    Dependant {
                        file: &file.file,
                        line: document.line,
                        depends_on: names,
                    },
                );
            }
        }
    }
    let mut diagnostics = Vec::new();
    for (name, dependant) in &dependants {
        let at = |code: &'static str, message: String| {
            let keys = ["metadata", "annotations", DEPENDS_ON_ANNOTATION];
            let (line, column) = text_of(dependant.file)
                .and_then(|text| key_position(text, dependant.line, &keys))
                .unwrap_or((dependant.line, 1));
            Diagnostic {
                severity: Severity::Error,
                code,
                file: dependant.file.to_string(),
                line,
                column,
                path: format!("metadata.annotations[{DEPENDS_ON_ANNOTATION}]"),
                message: format!("ClusterPromotion {name:?}: {message}"),
            }
        };
        for unknown in dependant
            .depends_on
            .iter()
            .filter(|d| !graph.contains_key(*d))
        {
            diagnostics.push(at(
                "depends-on-unknown",
                format!(
                    "{DEPENDS_ON_ANNOTATION} names {unknown:?}, which is no ClusterPromotion among the validated files; the controller refuses it and starts none of this promotion's stages"
                ),
            ));
        }
        if let Some(cycle) = cycle_through(name, |n| graph.get(n).map(Vec::as_slice)) {
            diagnostics.push(at(
                "depends-on-cycle",
                format!(
                    "{DEPENDS_ON_ANNOTATION} makes a cycle ({}): each would wait for the other forever; the controller refuses it",
                    cycle.join(" -> ")
                ),
            ));
        }
    }
    diagnostics
}

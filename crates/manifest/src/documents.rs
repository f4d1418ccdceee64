//! Rules across the documents of one or more files, which per-document validation cannot see:
//! a promotion name defined twice (the controller rejects every definition of it), and a
//! document that was probably meant to be a ClusterPromotion but is ignored because its `kind`
//! or `apiVersion` is slightly off (at run time, a promotion it used to define would be pruned).

use std::collections::BTreeMap;

use crate::diagnostic::{Diagnostic, Severity};
use crate::model::{API_GROUP, API_VERSION, KIND};
use crate::parse::{IgnoredDocument, ParsedFile};
use crate::suggest::edit_distance;

/// Where a promotion name is defined.
struct Definition<'a> {
    file: &'a str,
    line: u32,
    column: u32,
}

/// An error at every definition of a promotion name defined more than once across `files`, at
/// its `metadata.name` line when `source` (a file's text by name) can show it.
pub fn duplicate_names<'t>(
    files: &[ParsedFile],
    source: impl Fn(&str) -> Option<&'t str>,
) -> Vec<Diagnostic> {
    let mut definitions: BTreeMap<&str, Vec<Definition<'_>>> = BTreeMap::new();
    for file in files {
        let text = source(&file.file);
        for promotion in &file.promotions {
            if let Some(name) = &promotion.name {
                let (line, column) = text
                    .and_then(|text| name_position(text, promotion.line))
                    .unwrap_or((promotion.line, 1));
                definitions.entry(name).or_default().push(Definition {
                    file: &file.file,
                    line,
                    column,
                });
            }
        }
    }
    let mut diagnostics = Vec::new();
    for (name, places) in definitions.iter().filter(|(_, places)| places.len() > 1) {
        for (index, definition) in places.iter().enumerate() {
            let others: Vec<String> = places
                .iter()
                .enumerate()
                .filter(|(other, _)| *other != index)
                .map(|(_, other)| format!("{}:{}", other.file, other.line))
                .collect();
            diagnostics.push(Diagnostic {
                severity: Severity::Error,
                code: "duplicate-promotion-name",
                file: definition.file.to_string(),
                line: definition.line,
                column: definition.column,
                path: "metadata.name".to_string(),
                message: format!(
                    "ClusterPromotion {name:?} is also defined at {}; the controller rejects every definition of a name defined more than once",
                    others.join(", ")
                ),
            });
        }
    }
    diagnostics
}

/// The lines of the document starting at `first_line` (1-based), numbered, up to its end.
fn document_lines(text: &str, first_line: u32) -> impl Iterator<Item = (u32, &str)> {
    let skip = first_line.saturating_sub(1) as usize;
    text.lines()
        .enumerate()
        .skip(skip)
        .take_while(move |(index, line)| *index == skip || !line.starts_with("---"))
        .filter_map(|(index, line)| Some((u32::try_from(index + 1).ok()?, line)))
}

/// Line and column of the `name:` key of a block-style top-level `metadata:` mapping.
fn name_position(text: &str, first_line: u32) -> Option<(u32, u32)> {
    let mut in_metadata = false;
    for (number, line) in document_lines(text, first_line) {
        let indent = line.len() - line.trim_start().len();
        if indent == 0 && !line.trim().is_empty() && !line.starts_with('#') {
            in_metadata = line.trim_end() == "metadata:";
        } else if in_metadata && line.trim_start().starts_with("name:") {
            return Some((number, u32::try_from(indent + 1).ok()?));
        }
    }
    None
}

/// Why an ignored document looks like a mistyped ClusterPromotion, if it does.
fn near_miss(document: &IgnoredDocument) -> Option<(&'static str, String)> {
    let kind = document.kind.as_deref()?;
    let api_version = document.api_version.as_deref().unwrap_or_default();
    if kind == KIND {
        return Some((
            "apiVersion",
            format!(
                "kind ClusterPromotion with apiVersion {api_version:?}: not group {API_GROUP:?}, so this document is ignored (and a promotion it used to define is pruned); did you mean {API_VERSION:?}?"
            ),
        ));
    }
    if kind.eq_ignore_ascii_case(KIND) || edit_distance(kind, KIND) <= 2 {
        return Some((
            "kind",
            format!(
                "kind {kind:?} is not {KIND:?}, so this document is ignored (and a promotion it used to define is pruned); did you mean {KIND:?}?"
            ),
        ));
    }
    None
}

/// The 1-based line of the top-level `key:` of the document starting at `first_line`.
fn key_line(text: &str, first_line: u32, key: &str) -> Option<u32> {
    document_lines(text, first_line)
        .find(|(_, line)| {
            line.strip_prefix(key)
                .is_some_and(|rest| rest.trim_start().starts_with(':'))
        })
        .map(|(number, _)| number)
}

/// A warning for every ignored document of `parsed` (whose text is `text`) that looks like a
/// ClusterPromotion with a mistyped `kind` or `apiVersion`. Unrelated kinds stay silent.
pub fn near_miss_kinds(parsed: &ParsedFile, text: &str) -> Vec<Diagnostic> {
    parsed
        .ignored
        .iter()
        .filter_map(|document| {
            let (field, message) = near_miss(document)?;
            let line = key_line(text, document.line, field).unwrap_or(document.line);
            Some(Diagnostic {
                severity: Severity::Warning,
                code: "near-miss-cluster-promotion",
                file: parsed.file.clone(),
                line,
                column: 1,
                path: field.to_string(),
                message,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::{Limits, parse_file};

    fn document(api_version: &str, kind: &str) -> String {
        format!("apiVersion: {api_version}\nkind: {kind}\nmetadata:\n  name: app\nspec: {{}}\n")
    }

    fn warnings(api_version: &str, kind: &str) -> Vec<Diagnostic> {
        let text = format!("# first\n{}", document(api_version, kind));
        let parsed = parse_file("f.yaml", text.as_bytes(), &Limits::default());
        near_miss_kinds(&parsed, &text)
    }

    #[test]
    fn mistyped_kinds_and_groups_are_warned_about_at_their_line() {
        for kind in [
            "ClusterPromtion",
            "clusterpromotion",
            "CLUSTERPROMOTION",
            "ClusterPromotions",
        ] {
            let found = warnings(API_VERSION, kind);
            assert_eq!(found.len(), 1, "{kind}");
            assert_eq!(
                (found[0].line, found[0].path.as_str()),
                (3, "kind"),
                "{kind}"
            );
        }
        let found = warnings("config.projectsveltos.com/v1beta1", KIND);
        assert_eq!(found.len(), 1);
        assert_eq!((found[0].line, found[0].path.as_str()), (2, "apiVersion"));
        assert!(
            found[0]
                .message
                .contains("config.projectsveltos.io/v1beta1")
        );
    }

    #[test]
    fn unrelated_kinds_stay_silent() {
        for (api_version, kind) in [
            ("v1", "ConfigMap"),
            (API_VERSION, "ClusterProfile"),
            ("lib.projectsveltos.io/v1beta1", "SveltosCluster"),
        ] {
            assert_eq!(warnings(api_version, kind), Vec::new(), "{kind}");
        }
    }

    #[test]
    fn names_defined_twice_are_errors_at_each_definition() {
        let one = format!(
            "{}---\n{}",
            document(API_VERSION, KIND),
            document(API_VERSION, KIND)
        );
        let other = document(API_VERSION, KIND);
        let files = [
            parse_file("one.yaml", one.as_bytes(), &Limits::default()),
            parse_file("other.yaml", other.as_bytes(), &Limits::default()),
        ];
        let texts = [("one.yaml", one.as_str()), ("other.yaml", other.as_str())];
        let source = |file: &str| texts.iter().find(|(f, _)| *f == file).map(|(_, t)| *t);
        let found = duplicate_names(&files, source);
        let places: Vec<(&str, u32, u32)> = found
            .iter()
            .map(|d| (d.file.as_str(), d.line, d.column))
            .collect();
        assert_eq!(
            places,
            [
                ("one.yaml", 4, 3),
                ("one.yaml", 10, 3),
                ("other.yaml", 4, 3)
            ]
        );
        assert!(found.iter().all(Diagnostic::is_error));
        assert!(
            found[0].message.contains("one.yaml:10, other.yaml:4"),
            "{}",
            found[0].message
        );
        // Without the text: the document's first line.
        let found = duplicate_names(&files, |_| None);
        assert_eq!((found[1].line, found[1].column), (7, 1));
    }
}

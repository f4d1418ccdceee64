//! The fast reader's contract, checkable at run time: wherever it reads a file, it reads exactly
//! what the serde-saphyr path reads (values, every node's location, document lines). Used by the
//! differential tests below and, through [`check_fast_reader`] (the fast reader's only public
//! door), by the `spec_file` fuzz target, which feeds it arbitrary input.

use serde_json::Value;
use serde_saphyr::Spanned;

use crate::fast_yaml::read;
use crate::limits::Limits;
use crate::located::{self, Node};
use crate::location::{Loc, Locations};

type Read = Vec<(Value, Locations, u32)>;

fn reference(text: &str) -> Result<Read, String> {
    let documents: Vec<Spanned<Node>> =
        serde_saphyr::from_multiple(text).map_err(|e| e.to_string())?;
    Ok(documents
        .iter()
        .map(|document| {
            let mut locations = Locations::default();
            let mut problems = Vec::new();
            let value = located::to_json(document, &mut locations, &mut problems);
            (value, locations, Loc::of(document).line)
        })
        .collect())
}

fn fast(text: &str) -> Option<Read> {
    let documents = read(text, &Limits::default()).ok()?;
    Some(
        documents
            .into_iter()
            .map(|d| (d.value, d.tree.locations(text), d.tree.root().line))
            .collect(),
    )
}

/// `Ok(())` when the fast YAML reader either reads `text` exactly as serde-saphyr does (values,
/// every field's location, document lines) or declines it (serde-saphyr then reads it); `Err`
/// describing the first difference otherwise.
pub fn check_fast_reader(text: &str) -> Result<(), String> {
    agrees_with_reference(text).map(drop)
}

/// `Ok(true)` when the fast path read `text` exactly as serde-saphyr does, `Ok(false)` when it
/// declined (the slow path reads it), `Err` describing the first difference otherwise.
pub(crate) fn agrees_with_reference(text: &str) -> Result<bool, String> {
    let Some(fast) = fast(text) else {
        return Ok(false);
    };
    let slow =
        reference(text).map_err(|e| format!("fast path accepted invalid YAML ({e}):\n{text}"))?;
    if fast.len() != slow.len() {
        return Err(format!(
            "document count: fast {} reference {}:\n{text}",
            fast.len(),
            slow.len()
        ));
    }
    for ((fv, fl, fline), (sv, sl, sline)) in fast.iter().zip(&slow) {
        if fv != sv {
            return Err(format!("value: fast {fv} reference {sv}:\n{text}"));
        }
        if fline != sline {
            return Err(format!(
                "root line: fast {fline} reference {sline}:\n{text}"
            ));
        }
        if fl != sl {
            let mut lines = Vec::new();
            for (path, loc) in sl.entries() {
                if fl.get(path) != Some(*loc) {
                    lines.push(format!("{path}: fast {:?} reference {loc:?}", fl.get(path)));
                }
            }
            return Err(format!("locations differ:\n{}\n{text}", lines.join("\n")));
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use proptest::prelude::*;
    use proptest::strategy::ValueTree;

    /// Whether the fast path read `text`; panics when it read it differently.
    fn agrees(text: &str) -> bool {
        super::agrees_with_reference(text).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn edge_cases_read_like_serde_saphyr_or_fall_back() {
        let cases = [
            "a: |\n  x\n   \n  y\n",
            // Found by the fuzzer: a `:` glued to a flow collection is an error for a plain key.
            "m: {key: env, values :[a, b]}\n",
            "m: {\"key\":[a]}\n",
            "m: {a:b}\n",
            "a: |+\n  x\n\n\nb: 1\n",
            "a: |-\n  x\n  y\n",
            "a: |2\n   x\n",
            "a: >\n  x\n  y\n",
            "a:\nb: 1\n",
            "a:\n- - x\n  - y\n",
            "- a\n- b\n",
            "a: &x 1\nb: *x\n",
            "a: !!str 1\n",
            "\"a\\\"b\": 1\n'c''d': 2\n",
            "? a\n: 1\n",
            "x: {a: 1}\ny:\n  <<: {b: 2}\n",
            "a: 1\r\nb: 2\r\n",
            "a: 1 #\tc\n",
            "name: caf\u{e9} \u{2014} na\u{ef}ve\nk\u{e9}y: [\u{e9}, b]\n",
            "a: 1\n...\n",
            "--- # c\na: 1\n--- \nb: [1, 2]\n",
            "  a: 1\n  b: 2\n",
            "a: b[0]\nc: d,e\nf: {g: h}\n",
            "x: {\"a\":1, 'b': [], c: {}}\n",
            "a: 1\na: 2\n",
            "a: {b: 1, b: 2}\n",
            "a: [1, 2,]\n",
            "a: b\n  c\n",
            "a: 'x\n  y'\n",
            "1: a\nyes: b\n~: c\n1.50: d\n",
            "a: [yes, 0x1F, 1_000, .inf, 1e999, 007, -0, +5]\n",
            "a:\n  - b: 1\n    c: [x]\n  - d\n",
            "a:\n    - x\n    -\n      y: 1\n",
            "{}\n",
            "---\n[]\n---\n{a: 1}\n",
            "---\n# only a comment\n---\na: 1\n",
            "",
        ];
        let mut fast = 0;
        for case in cases {
            fast += usize::from(agrees(case));
        }
        assert!(fast >= 10, "only {fast} edge cases took the fast path");
    }

    /// Seed manifests with bytes replaced, inserted and deleted at random (fixed seed): the
    /// reader never panics, and whatever it accepts it reads exactly as serde-saphyr does.
    #[test]
    fn mutated_manifests_read_like_serde_saphyr_or_fall_back() {
        const PIECES: &[&str] = &[
            " ", "  ", "\n", ":", ": ", "- ", "-", "#", " #", "'", "\"", "|", "|-", ">", "[", "]",
            "{", "}", ",", "&a", "*a", "!", "?", "---", "...", "\\", "\t", "\r", "yes", "1", "1.5",
            "\u{e9}", "\u{2028}", "~",
        ];
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let seeds: Vec<String> = yaml_files(&root.join("../../../shared/fixtures/seeds"))
            .iter()
            .filter_map(|f| std::fs::read_to_string(f).ok())
            .collect();
        assert!(!seeds.is_empty());
        let mut state: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = |bound: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            usize::try_from(state % u64::try_from(bound.max(1)).unwrap_or(1)).unwrap_or(0)
        };
        let mut fast = 0;
        for _ in 0..1500 {
            let mut text = seeds[next(seeds.len())].clone();
            for _ in 0..1 + next(3) {
                let mut at = next(text.len());
                while !text.is_char_boundary(at) {
                    at -= 1;
                }
                let piece = PIECES[next(PIECES.len())];
                match next(3) {
                    0 => text.insert_str(at, piece),
                    1 => {
                        let mut end = (at + 1 + next(4)).min(text.len());
                        while !text.is_char_boundary(end) {
                            end += 1;
                        }
                        text.replace_range(at..end, "");
                    }
                    _ => {
                        let mut end = (at + piece.len()).min(text.len());
                        while !text.is_char_boundary(end) {
                            end += 1;
                        }
                        text.replace_range(at..end, piece);
                    }
                }
            }
            fast += usize::from(agrees(&text));
        }
        // About half still take the fast path; the rest must have fallen back, not misread.
        assert!(
            fast >= 375,
            "only {fast} of 1500 mutated manifests took the fast path"
        );
    }

    fn yaml_files(dir: &Path) -> Vec<PathBuf> {
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
            .map(|entries| {
                entries
                    .filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| p.extension().is_some_and(|e| e == "yaml" || e == "yml"))
                    .collect()
            })
            .unwrap_or_default();
        files.sort();
        files
    }

    #[test]
    fn corpus_reads_like_serde_saphyr() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let dirs = [
            root.join("../../fixtures/valid"),
            root.join("../../fixtures/invalid"),
            root.join("../../../shared/fixtures/seeds"),
            root.join("../../../shared/fixtures/crds"),
            root.join("crds"),
            root.join("../../examples"),
        ];
        let mut fast_files = Vec::new();
        let mut slow_files = Vec::new();
        for file in dirs.iter().flat_map(|d| yaml_files(d)) {
            let Ok(text) = std::fs::read_to_string(&file) else {
                continue;
            };
            let name = file.display().to_string();
            if agrees(&text) {
                fast_files.push(name);
            } else {
                slow_files.push(name);
            }
        }
        // The speed-up must not silently disappear: every seed manifest takes the fast path.
        let slow_seeds: Vec<&String> = slow_files
            .iter()
            .filter(|f| f.contains("/seeds/"))
            .collect();
        assert!(
            slow_seeds.is_empty(),
            "seeds read by serde-saphyr: {slow_seeds:#?}"
        );
        assert!(
            fast_files.len() >= 50,
            "only {} files took the fast path",
            fast_files.len()
        );
    }

    /// A generated YAML tree, with the presentation choices for rendering it.
    #[derive(Clone, Debug)]
    enum Gen {
        Scalar(String),
        Literal { text: String, chomp: &'static str },
        Seq(Vec<Gen>, bool),
        Map(Vec<(String, Gen)>, bool),
    }

    /// Scalars as written: plain words and numbers-that-are-not, resolved ones (booleans, ints,
    /// floats, null), quoted text with escapes, and trailing comments.
    fn scalar() -> impl Strategy<Value = String> {
        prop_oneof![
            "[a-z][a-z0-9.-]{0,8}",
            "[0-9]{1,4}(\\.[0-9]{1,2}){0,2}%?",
            prop::sample::select(vec![
                "yes",
                "No",
                "on",
                "true",
                "False",
                "null",
                "~",
                "-3",
                "+4",
                "007",
                "1e3",
                ".5",
                "2m",
                "v1.19.1",
                "10%",
                "a b c",
                "x:y",
                "http://a/b",
                "café",
                "-x",
                "?x",
            ])
            .prop_map(str::to_string),
            "[a-z ]{0,6}".prop_map(|t| format!("\"{t}\\n\\\"\"")),
            "[a-z ']{0,6}".prop_map(|t| format!("'{}'", t.replace('\'', "''"))),
            "[a-z]{1,5}".prop_map(|t| format!("{t} # note: {t}")),
        ]
    }

    fn key() -> impl Strategy<Value = String> {
        prop_oneof![
            4 => "[a-z][a-zA-Z0-9]{0,7}",
            1 => "[a-z]{1,4}\\.[a-z]{1,4}/[a-z]{1,4}",
            1 => "[a-z]{1,4}".prop_map(|k| format!("\"{k} k\"")),
            1 => prop::sample::select(vec!["yes", "1", "1.50", "null", "-x"]).prop_map(str::to_string),
        ]
    }

    fn tree() -> impl Strategy<Value = Gen> {
        let leaf = prop_oneof![
            4 => scalar().prop_map(Gen::Scalar),
            1 => (
                prop::collection::vec("[a-z#:][a-z #:]{0,9}", 1..4),
                prop::sample::select(vec!["", "-", "+"]),
                0usize..3,
            )
                .prop_map(|(lines, chomp, blanks)| {
                    let mut text = lines.join("\n  ");
                    text.push_str(&"\n".repeat(blanks));
                    Gen::Literal { text, chomp }
                }),
        ];
        leaf.prop_recursive(5, 48, 5, |inner| {
            prop_oneof![
                (prop::collection::vec(inner.clone(), 1..5), any::<bool>())
                    .prop_map(|(items, flow)| Gen::Seq(items, flow)),
                (
                    prop::collection::btree_map(key(), inner, 1..5),
                    any::<bool>()
                )
                    .prop_map(|(entries, flow)| Gen::Map(entries.into_iter().collect(), flow)),
            ]
        })
    }

    fn flowable(node: &Gen) -> bool {
        match node {
            Gen::Scalar(s) => !s.contains('#') && !s.contains(':') && !s.starts_with('?'),
            Gen::Literal { .. } => false,
            Gen::Seq(items, _) => items.iter().all(flowable),
            Gen::Map(entries, _) => entries.iter().all(|(_, v)| flowable(v)),
        }
    }

    fn flow(node: &Gen) -> String {
        match node {
            Gen::Scalar(s) => s.clone(),
            Gen::Literal { .. } => String::new(),
            Gen::Seq(items, _) => format!(
                "[{}]",
                items.iter().map(flow).collect::<Vec<_>>().join(", ")
            ),
            Gen::Map(entries, _) => format!(
                "{{{}}}",
                entries
                    .iter()
                    .map(|(k, v)| format!("{k}: {}", flow(v)))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }

    /// Block rendering of `node` as the value after `key:` or `- ` at indentation `indent`.
    fn render_value(node: &Gen, indent: usize, step: usize, in_seq: bool, out: &mut String) {
        match node {
            Gen::Scalar(s) => {
                out.push(' ');
                out.push_str(s);
                out.push('\n');
            }
            Gen::Literal { text, chomp } => {
                out.push_str(&format!(" |{chomp}\n"));
                let pad = " ".repeat(indent + step);
                for line in text.split('\n') {
                    if line.trim().is_empty() {
                        out.push('\n');
                    } else {
                        out.push_str(&pad);
                        out.push_str(line);
                        out.push('\n');
                    }
                }
            }
            Gen::Seq(_, true) | Gen::Map(_, true) if flowable(node) => {
                out.push(' ');
                out.push_str(&flow(node));
                out.push('\n');
            }
            Gen::Seq(..) | Gen::Map(..) => {
                out.push('\n');
                // Sequences under a key may sit at the key's own indentation.
                let child = if matches!(node, Gen::Seq(..)) && !in_seq && step == 2 {
                    indent
                } else {
                    indent + step
                };
                render_block(node, child, step, out);
            }
        }
    }

    fn render_block(node: &Gen, indent: usize, step: usize, out: &mut String) {
        let pad = " ".repeat(indent);
        match node {
            Gen::Seq(items, _) => {
                for item in items {
                    out.push_str(&pad);
                    out.push('-');
                    match item {
                        // Compact `- key: value`.
                        Gen::Map(entries, false) => {
                            out.push(' ');
                            let mut first = true;
                            for (k, v) in entries {
                                if !first {
                                    out.push_str(&" ".repeat(indent + 2));
                                }
                                first = false;
                                out.push_str(k);
                                out.push(':');
                                render_value(v, indent + 2, step, false, out);
                            }
                        }
                        _ => render_value(item, indent, step, true, out),
                    }
                }
            }
            Gen::Map(entries, _) => {
                for (k, v) in entries {
                    out.push_str(&pad);
                    out.push_str(k);
                    out.push(':');
                    render_value(v, indent, step, false, out);
                }
            }
            Gen::Scalar(_) | Gen::Literal { .. } => {}
        }
    }

    /// One to two documents of generated block- and flow-style YAML.
    fn document_text() -> impl Strategy<Value = String> {
        prop::collection::vec(
            (
                prop::collection::btree_map(key(), tree(), 1..6),
                prop::sample::select(vec![2usize, 4]),
                any::<bool>(),
            ),
            1..3,
        )
        .prop_map(|documents| {
            let mut text = String::new();
            for (i, (entries, step, comment)) in documents.into_iter().enumerate() {
                if i > 0 || comment {
                    text.push_str("---\n");
                }
                if comment {
                    text.push_str("# a comment\n\n");
                }
                render_block(
                    &Gen::Map(entries.into_iter().collect(), false),
                    0,
                    step,
                    &mut text,
                );
            }
            text
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(400))]

        /// Generated documents in block and flow style read exactly as serde-saphyr reads them:
        /// same JSON, same location for every node, same document lines.
        #[test]
        fn generated_documents_read_like_serde_saphyr(text in document_text()) {
            agrees(&text);
        }
    }

    /// The property above only means something if the fast path reads most generated documents.
    #[test]
    fn most_generated_documents_take_the_fast_path() {
        let mut runner = proptest::test_runner::TestRunner::deterministic();
        let strategy = document_text();
        let mut fast = 0;
        for _ in 0..200 {
            let text = strategy
                .new_tree(&mut runner)
                .map(|tree| tree.current())
                .unwrap_or_default();
            let ok = agrees(&text);
            fast += usize::from(ok);
        }
        assert!(
            fast >= 120,
            "only {fast} of 200 generated documents took the fast path"
        );
    }
}

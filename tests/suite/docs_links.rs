//! The documentation holds together in a clone: every relative link in README.md and docs/*.md
//! resolves to a file of the repository and, with `#anchor`, to a heading that produces that anchor
//! (GitHub's rule); no link or quoted path climbs out of the repository with `../`; every page of
//! docs/ is reachable from the README; and every `docs/<page>.md#anchor` cited anywhere in the
//! sources names a heading that exists, so code comments cannot point at a section that moved.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};

fn project_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A Markdown page, by its path relative to the repository root.
struct Page {
    path: PathBuf,
    text: String,
}

/// README.md and docs/*.md of the repository at `root`.
fn pages(root: &Path) -> Vec<Page> {
    let mut paths = vec![PathBuf::from("README.md")];
    if let Ok(entries) = std::fs::read_dir(root.join("docs")) {
        let mut docs: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .map(|e| PathBuf::from("docs").join(e.file_name()))
            .filter(|p| p.extension().is_some_and(|x| x == "md"))
            .collect();
        docs.sort();
        paths.extend(docs);
    }
    paths
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(root.join(&path))
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            Page { path, text }
        })
        .collect()
}

/// The lines of `text` outside fenced code blocks, with their 1-based numbers.
fn prose_lines(text: &str) -> Vec<(usize, &str)> {
    let mut fenced = false;
    let mut lines = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            fenced = !fenced;
            continue;
        }
        if !fenced {
            lines.push((index + 1, line));
        }
    }
    lines
}

/// A line split into its prose (code spans replaced by `CODE`) and its code spans. `in_code`: the
/// line starts inside a code span the previous line of its paragraph opened (spans may wrap).
/// Returns whether the line ends inside one.
fn split_code_spans(line: &str, in_code: bool) -> (String, Vec<&str>, bool) {
    let mut prose = String::new();
    let mut spans = Vec::new();
    let mut code = in_code;
    for (index, part) in line.split('`').enumerate() {
        if index > 0 {
            code = !code;
        }
        if code {
            prose.push_str("CODE");
            spans.push(part);
        } else {
            prose.push_str(part);
        }
    }
    (prose, spans, code)
}

/// The prose lines of `text` split as [`split_code_spans`] does, carrying a wrapped code span
/// from one line of a paragraph to the next: (line number, prose, code spans).
fn split_lines(text: &str) -> Vec<(usize, String, Vec<&str>)> {
    let mut in_code = false;
    let mut split = Vec::new();
    for (number, line) in prose_lines(text) {
        if line.trim().is_empty() {
            in_code = false;
            continue;
        }
        let (prose, spans, still_in_code) = split_code_spans(line, in_code);
        in_code = still_in_code;
        split.push((number, prose, spans));
    }
    split
}

/// The targets of inline links `[text](target "title")` and reference definitions `[x]: target`.
fn link_targets(prose: &str) -> Vec<String> {
    let mut targets = Vec::new();
    let mut rest = prose;
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        let end = after.find(')').unwrap_or(after.len());
        let target = after[..end].split_whitespace().next().unwrap_or_default();
        targets.push(target.trim_matches(['<', '>']).to_string());
        rest = &after[end..];
    }
    let trimmed = prose.trim_start();
    if trimmed.starts_with('[')
        && let Some(at) = trimmed.find("]:")
        && let Some(target) = trimmed[at + 2..].split_whitespace().next()
    {
        targets.push(target.to_string());
    }
    targets
}

/// GitHub's anchor for a heading's text: lower case, spaces to hyphens, and every character that
/// is not a letter, a digit, `-` or `_` dropped (inline code and link markup render as their text).
fn slug(heading: &str) -> String {
    let mut text = String::new();
    let (prose, spans, _) = split_code_spans(heading, false);
    let mut spans = spans.into_iter();
    for (index, part) in prose.split("CODE").enumerate() {
        if index > 0 {
            text.push_str(spans.next().unwrap_or_default());
        }
        text.push_str(part);
    }
    let text = without_link_targets(&text);
    text.trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// `[text](target)` → `text`.
fn without_link_targets(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("](") {
        out.push_str(&rest[..at]);
        let after = &rest[at + 2..];
        rest = after.find(')').map_or("", |end| &after[end + 1..]);
    }
    out.push_str(rest);
    out.replace('[', "")
}

/// The anchors a page's headings produce, with GitHub's `-1`, `-2` suffixes for repeats.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut anchors = BTreeSet::new();
    for (_, line) in prose_lines(text) {
        let Some(heading) = line.strip_prefix('#') else {
            continue;
        };
        let heading = heading.trim_start_matches('#');
        if !heading.starts_with(' ') {
            continue;
        }
        let base = slug(heading.trim().trim_end_matches('#'));
        let count = seen.entry(base.clone()).or_insert(0);
        let anchor = match *count {
            0 => base,
            n => format!("{base}-{n}"),
        };
        *count += 1;
        anchors.insert(anchor);
    }
    anchors
}

/// `path` joined onto `base` without touching the disk; `None` when it climbs above the root.
fn resolve(base: &Path, path: &str) -> Option<PathBuf> {
    let mut parts: Vec<Component> = base.components().collect();
    for component in Path::new(path).components() {
        match component {
            Component::ParentDir => {
                parts.pop()?;
            }
            Component::CurDir => {}
            Component::Normal(_) => parts.push(component),
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(parts.iter().collect())
}

fn is_external(target: &str) -> bool {
    ["https://", "http://", "mailto:"]
        .iter()
        .any(|scheme| target.starts_with(scheme))
}

/// Whether `file#anchor` (relative to the root) exists; the reason when it does not.
fn check_target(root: &Path, file: &Path, anchor: Option<&str>) -> Result<(), String> {
    let full = root.join(file);
    if !full.exists() {
        return Err(format!("{} does not exist", file.display()));
    }
    let Some(anchor) = anchor.filter(|a| !a.is_empty()) else {
        return Ok(());
    };
    if full.extension().is_none_or(|x| x != "md") {
        return Err(format!(
            "#{anchor} on {}, which is not Markdown",
            file.display()
        ));
    }
    let text = std::fs::read_to_string(&full).map_err(|e| format!("{}: {e}", file.display()))?;
    if anchors(&text).contains(anchor) {
        Ok(())
    } else {
        Err(format!(
            "{} has no heading with anchor #{anchor}",
            file.display()
        ))
    }
}

/// Every broken or escaping link and every escaping quoted path of the pages at `root`.
fn link_problems(root: &Path) -> Vec<String> {
    let mut problems = Vec::new();
    for page in pages(root) {
        let dir = page.path.parent().unwrap_or(Path::new("")).to_path_buf();
        let at = |line: usize| format!("{}:{line}", page.path.display());
        for (line, prose, spans) in split_lines(&page.text) {
            for span in spans.iter().filter(|s| s.starts_with("../")) {
                if resolve(&dir, span).is_none() {
                    problems.push(format!("{}: `{span}` is outside the repository", at(line)));
                }
            }
            for target in link_targets(&prose) {
                if is_external(&target) {
                    continue;
                }
                let (file, anchor) = match target.split_once('#') {
                    Some((file, anchor)) => (file, Some(anchor)),
                    None => (target.as_str(), None),
                };
                let resolved = if file.is_empty() {
                    Some(page.path.clone())
                } else {
                    resolve(&dir, file)
                };
                let Some(resolved) = resolved else {
                    problems.push(format!("{}: link {target} leaves the repository", at(line)));
                    continue;
                };
                if let Err(reason) = check_target(root, &resolved, anchor) {
                    problems.push(format!("{}: link {target}: {reason}", at(line)));
                }
            }
        }
    }
    problems
}

/// docs/ pages the README does not link to (the citations table aside).
fn unreachable_pages(root: &Path) -> Vec<String> {
    let all = pages(root);
    let readme = all.iter().find(|p| p.path == Path::new("README.md"));
    let linked: BTreeSet<PathBuf> = readme
        .map(|page| {
            split_lines(&page.text)
                .into_iter()
                .flat_map(|(_, prose, _)| link_targets(&prose))
                .filter_map(|t| resolve(Path::new(""), t.split('#').next().unwrap_or_default()))
                .collect()
        })
        .unwrap_or_default();
    all.iter()
        .map(|p| &p.path)
        .filter(|p| p.starts_with("docs"))
        .filter(|p| !linked.contains(*p))
        .map(|p| format!("{} is not linked from README.md", p.display()))
        .collect()
}

/// Files of the repository that may cite docs: sources, manifests, scripts, Markdown.
fn citing_files(root: &Path) -> Vec<PathBuf> {
    const SKIP: [&str; 4] = ["target", "corpus", "regressions", "snapshots"];
    const EXTENSIONS: [&str; 6] = ["rs", "md", "toml", "yaml", "yml", "sh"];
    let mut found = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.filter_map(Result::ok) {
            let name = entry.file_name().to_string_lossy().to_string();
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if name.starts_with('.') || kind.is_symlink() {
                continue;
            }
            if kind.is_dir() && !SKIP.contains(&name.as_str()) {
                dirs.push(entry.path());
            } else if kind.is_file()
                && entry
                    .path()
                    .extension()
                    .is_some_and(|x| EXTENSIONS.iter().any(|e| x == *e))
            {
                found.push(entry.path());
            }
        }
    }
    found.sort();
    found
}

/// Every `docs/<page>.md[#anchor]` in `text` (a page name of lower-case letters, digits, `-`, `_`).
fn cited_docs(text: &str) -> Vec<(String, Option<String>)> {
    let anchor_char =
        |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_';
    let mut cited = Vec::new();
    for (at, _) in text.match_indices("docs/") {
        let before = text[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '/' || c == '.' || c == '_') {
            continue;
        }
        let rest = &text[at + "docs/".len()..];
        let name_len = rest.find(|c: char| !anchor_char(c)).unwrap_or(rest.len());
        if name_len == 0 || !rest[name_len..].starts_with(".md") {
            continue;
        }
        let page = format!("docs/{}.md", &rest[..name_len]);
        let after = &rest[name_len + ".md".len()..];
        let anchor = after.strip_prefix('#').map(|a| {
            let len = a.find(|c: char| !anchor_char(c)).unwrap_or(a.len());
            a[..len].to_string()
        });
        cited.push((page, anchor));
    }
    cited
}

/// Citations of docs/ pages or anchors, anywhere in the repository, that do not exist. This file
/// is left out: its checker tests cite made-up pages on purpose.
fn citation_problems(root: &Path) -> Vec<String> {
    let mut problems = Vec::new();
    let this_file = root.join(file!());
    for file in citing_files(root).into_iter().filter(|f| *f != this_file) {
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        let shown = file
            .strip_prefix(root)
            .unwrap_or(&file)
            .display()
            .to_string();
        for (index, line) in text.lines().enumerate() {
            for (page, anchor) in cited_docs(line) {
                if let Err(reason) = check_target(root, Path::new(&page), anchor.as_deref()) {
                    problems.push(format!("{shown}:{}: cites {page}: {reason}", index + 1));
                }
            }
        }
    }
    problems
}

#[test]
fn every_link_of_the_readme_and_docs_resolves_inside_the_repository() {
    let problems = link_problems(&project_root());
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn every_docs_page_is_linked_from_the_readme() {
    let problems = unreachable_pages(&project_root());
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn every_docs_anchor_cited_in_the_sources_exists() {
    let problems = citation_problems(&project_root());
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The checks themselves, on a repository made for them: each kind of breakage is reported.
mod the_checker {
    use super::*;

    fn repo(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("temp dir");
        for (path, text) in files {
            let full = dir.path().join(path);
            std::fs::create_dir_all(full.parent().expect("parent")).expect("mkdir");
            std::fs::write(full, text).expect("write");
        }
        dir
    }

    #[test]
    fn anchors_follow_githubs_rule() {
        assert_eq!(slug(r#"D4: no stale "done""#), "d4-no-stale-done");
        assert_eq!(slug("onFailure: Halt"), "onfailure-halt");
        assert_eq!(slug("`tollgate run`"), "tollgate-run");
        assert_eq!(
            slug("Waves, new commits & blackouts"),
            "waves-new-commits--blackouts"
        );
        assert_eq!(slug("[Linked](x.md) heading"), "linked-heading");
        let repeated = anchors("# A\n## Notes\n```\n# not a heading\n```\n## Notes\n#hashtag\n");
        let expected: BTreeSet<String> = ["a", "notes", "notes-1"].map(String::from).into();
        assert_eq!(repeated, expected);
    }

    #[test]
    fn a_missing_file_a_missing_anchor_and_an_escape_are_reported() {
        let dir = repo(&[
            (
                "README.md",
                "[ok](docs/a.md#real-heading) [gone](docs/missing.md) [bad](docs/a.md#nowhere)\n\
                 [out](../shared/docs/DESIGN.md) see `../shared/docs/DESIGN.md` §4\n\
                 [web](https://example.com/x) [self](#top) `a span that\n\
                 wraps` [wrapped](gone.md#x)\n```\n[in code](nowhere.md)\n```\n# Top\n",
            ),
            (
                "docs/a.md",
                "# Real heading\n[up](../README.md#top) [sibling](b.md)\n",
            ),
        ]);
        let problems = link_problems(dir.path()).join("\n");
        assert!(
            problems.contains("README.md:1: link docs/missing.md: docs/missing.md does not exist"),
            "{problems}"
        );
        assert!(
            problems.contains(
                "README.md:1: link docs/a.md#nowhere: docs/a.md has no heading with anchor #nowhere"
            ),
            "{problems}"
        );
        assert!(
            problems.contains("README.md:2: link ../shared/docs/DESIGN.md leaves the repository"),
            "{problems}"
        );
        assert!(
            problems.contains("README.md:2: `../shared/docs/DESIGN.md` is outside the repository"),
            "{problems}"
        );
        assert!(
            problems.contains("docs/a.md:2: link b.md: docs/b.md does not exist"),
            "{problems}"
        );
        assert!(!problems.contains("real-heading"), "{problems}");
        assert!(
            !problems.contains("in code") && !problems.contains("example.com"),
            "{problems}"
        );
        assert!(!problems.contains("#top"), "{problems}");
        assert!(
            problems.contains("README.md:4: link gone.md#x: gone.md does not exist"),
            "{problems}"
        );
        assert_eq!(problems.lines().count(), 6, "{problems}");
    }

    #[test]
    fn a_docs_page_the_readme_does_not_link_is_reported() {
        let dir = repo(&[
            ("README.md", "[a](docs/a.md)\n"),
            ("docs/a.md", "# A\n"),
            ("docs/orphan.md", "# Orphan\n"),
        ]);
        assert_eq!(
            unreachable_pages(dir.path()),
            vec!["docs/orphan.md is not linked from README.md".to_string()]
        );
    }

    #[test]
    fn a_code_comment_citing_a_missing_anchor_is_reported() {
        let dir = repo(&[
            ("README.md", "# Readme\n"),
            (
                "docs/architecture.md",
                "# Architecture\n### D4: no stale \"done\"\n",
            ),
            (
                "crates/engine/src/completion.rs",
                "//! Strict (docs/architecture.md#d4-no-stale-done).\n\
                 //! Moved (docs/architecture.md#d4-gone), gone (docs/nowhere.md).\n\
                 // Not ours: ../shared/docs/DESIGN.md, upstream docs/deployment_order/x.md\n",
            ),
        ]);
        let problems = citation_problems(dir.path()).join("\n");
        assert!(problems.contains("completion.rs:2: cites docs/architecture.md: docs/architecture.md has no heading with anchor #d4-gone"), "{problems}");
        assert!(
            problems
                .contains("completion.rs:2: cites docs/nowhere.md: docs/nowhere.md does not exist"),
            "{problems}"
        );
        assert_eq!(problems.lines().count(), 2, "{problems}");
    }
}

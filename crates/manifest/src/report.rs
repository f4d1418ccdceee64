//! Rendering diagnostics: rustc-like text quoting the offending line, a stable JSON document, and
//! GitHub Actions workflow commands (annotations on the pull request diff).

use serde::Serialize;

use crate::diagnostic::{Diagnostic, Severity};

/// Totals for the JSON report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Summary {
    pub files: usize,
    pub promotions: usize,
    pub valid: bool,
}

/// `error[code]: message`, ` --> file:L:C`, the quoted line with a caret under the column, and the
/// field path. `source_of` returns a file's text (when it was readable as UTF-8).
pub fn render_human<'a>(
    diags: &[Diagnostic],
    source_of: impl Fn(&str) -> Option<&'a str>,
) -> String {
    let mut out = String::new();
    for d in diags {
        let gutter = " ".repeat(d.line.to_string().len());
        out.push_str(&format!(
            "{}[{}]: {}\n",
            d.severity.as_str(),
            d.code,
            d.message
        ));
        out.push_str(&format!("{gutter}--> {}:{}:{}\n", d.file, d.line, d.column));
        let quoted = source_of(&d.file)
            .and_then(|text| text.lines().nth((d.line as usize).saturating_sub(1)));
        if let Some(line_text) = quoted {
            let (shown, caret_at) = window(line_text.trim_end_matches('\r'), d.column as usize);
            // Tabs are kept in the padding so the caret lines up under the same character.
            let padding: String = shown
                .chars()
                .take(caret_at)
                .map(|c| if c == '\t' { '\t' } else { ' ' })
                .collect();
            out.push_str(&format!("{gutter} |\n"));
            out.push_str(&format!("{} | {shown}\n", d.line));
            out.push_str(&format!("{gutter} | {padding}^\n"));
        }
        if !d.path.is_empty() {
            out.push_str(&format!("{gutter} = field: {}\n", d.path));
        }
        out.push('\n');
    }
    out
}

/// The longest source line quoted in full; longer ones are cut to a window around the column.
const MAX_QUOTED_CHARS: usize = 120;

/// The part of `line` to quote and the caret's position in it (0-based chars) for a 1-based
/// `column`: the whole line when short, else `MAX_QUOTED_CHARS` around the column with `…` marks.
fn window(line: &str, column: usize) -> (String, usize) {
    let chars: Vec<char> = line.chars().collect();
    let caret = column.saturating_sub(1).min(chars.len());
    if chars.len() <= MAX_QUOTED_CHARS {
        return (line.to_string(), caret);
    }
    let start = caret.saturating_sub(MAX_QUOTED_CHARS / 2);
    let end = (start + MAX_QUOTED_CHARS).min(chars.len());
    let mut shown = String::new();
    if start > 0 {
        shown.push('…');
    }
    shown.extend(&chars[start..end]);
    if end < chars.len() {
        shown.push('…');
    }
    (shown, caret - start + usize::from(start > 0))
}

#[derive(Serialize)]
struct JsonReport<'a> {
    valid: bool,
    files: usize,
    promotions: usize,
    diagnostics: &'a [Diagnostic],
}

/// `{"valid": bool, "files": N, "promotions": N, "diagnostics": [...]}`, pretty-printed.
pub fn render_json(diags: &[Diagnostic], summary: Summary) -> String {
    let report = JsonReport {
        valid: summary.valid,
        files: summary.files,
        promotions: summary.promotions,
        diagnostics: diags,
    };
    // Serializing plain strings and numbers cannot fail; an empty object is a safe fallback.
    serde_json::to_string_pretty(&report).unwrap_or_else(|_| "{}".to_string())
}

/// Escaping for a workflow command's message.
fn escape_data(text: &str) -> String {
    text.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// Escaping for a workflow command's properties (`file=…,title=…`).
fn escape_property(text: &str) -> String {
    escape_data(text).replace(':', "%3A").replace(',', "%2C")
}

/// One `::error file=F,line=L,col=C,title=tollgate <code>::message` line per diagnostic.
pub fn render_github(diags: &[Diagnostic]) -> String {
    let mut out = String::new();
    for d in diags {
        let command = match d.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        let message = if d.path.is_empty() {
            d.message.clone()
        } else {
            format!("{}: {}", d.path, d.message)
        };
        out.push_str(&format!(
            "::{command} file={},line={},col={},title={}::{}\n",
            escape_property(&d.file),
            d.line,
            d.column,
            escape_property(&format!("tollgate {}", d.code)),
            escape_data(&message)
        ));
    }
    out
}

#[cfg(test)]
mod window_tests {
    use super::{MAX_QUOTED_CHARS, window};

    #[test]
    fn short_lines_are_quoted_whole() {
        assert_eq!(
            window("  delay: 5 minutes", 10),
            ("  delay: 5 minutes".to_string(), 9)
        );
    }

    #[test]
    fn long_lines_are_cut_around_the_column() {
        let line = format!("{}X{}", "a".repeat(4000), "b".repeat(4000));
        let (shown, caret) = window(&line, 4001);
        assert!(
            shown.chars().count() <= MAX_QUOTED_CHARS + 2,
            "{}",
            shown.len()
        );
        assert_eq!(shown.chars().nth(caret), Some('X'));
        assert!(shown.starts_with('…') && shown.ends_with('…'));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn diagnostic() -> Diagnostic {
        Diagnostic {
            severity: Severity::Error,
            code: "duplicate-stage-name",
            file: "a,b:c.yaml".into(),
            line: 3,
            column: 9,
            path: "spec.stages[1].name".into(),
            message: "Duplicate value: \"a\"\n100% sure".into(),
        }
    }

    #[test]
    fn human_quotes_the_line_with_a_caret() {
        let source = "x: 1\ny: 2\n  - name: a\n";
        let text = render_human(&[diagnostic()], |_| Some(source));
        assert_eq!(
            text,
            "error[duplicate-stage-name]: Duplicate value: \"a\"\n100% sure\n --> a,b:c.yaml:3:9\n  |\n3 |   - name: a\n  |         ^\n  = field: spec.stages[1].name\n\n"
        );
    }

    #[test]
    fn json_is_stable() {
        let text = render_json(
            &[diagnostic()],
            Summary {
                files: 1,
                promotions: 2,
                valid: false,
            },
        );
        let value: serde_json::Value = serde_json::from_str(&text).expect("json");
        assert_eq!(value["valid"], false);
        assert_eq!(value["files"], 1);
        assert_eq!(value["promotions"], 2);
        assert_eq!(value["diagnostics"][0]["severity"], "error");
        assert_eq!(value["diagnostics"][0]["code"], "duplicate-stage-name");
        assert_eq!(value["diagnostics"][0]["line"], 3);
    }

    #[test]
    fn github_escapes_properties_and_data() {
        assert_eq!(
            render_github(&[diagnostic()]),
            "::error file=a%2Cb%3Ac.yaml,line=3,col=9,title=tollgate duplicate-stage-name::spec.stages[1].name: Duplicate value: \"a\"%0A100%25 sure\n"
        );
    }
}

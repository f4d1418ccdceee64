//! Diagnostics: one finding, with its file, 1-based line and column, and field path.

use serde::Serialize;

use crate::location::Locations;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Diagnostic {
    pub severity: Severity,
    /// Stable kebab-case identifier, e.g. `duplicate-stage-name`.
    pub code: &'static str,
    pub file: String,
    pub line: u32,
    pub column: u32,
    /// Field path such as `spec.stages[1].trigger.auto.delay`; empty for file-level problems.
    pub path: String,
    pub message: String,
}

impl Diagnostic {
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

/// Which part of a field a finding points at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Anchor {
    /// The field's value (or, when the field is missing, its nearest written ancestor).
    Value,
    /// The field's key (unknown fields, duplicate keys).
    Key,
    /// An exact position, e.g. a line inside a Lua script.
    At { line: u32, column: u32 },
}

/// A finding before it is located in the file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    pub severity: Severity,
    pub code: &'static str,
    pub path: String,
    pub message: String,
    pub anchor: Anchor,
}

impl Finding {
    pub fn error(code: &'static str, path: impl Into<String>, message: impl Into<String>) -> Self {
        Finding {
            severity: Severity::Error,
            code,
            path: path.into(),
            message: message.into(),
            anchor: Anchor::Value,
        }
    }

    pub fn warning(
        code: &'static str,
        path: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Finding {
            severity: Severity::Warning,
            ..Finding::error(code, path, message)
        }
    }

    pub fn at_key(mut self) -> Self {
        self.anchor = Anchor::Key;
        self
    }

    pub fn at(mut self, line: u32, column: u32) -> Self {
        self.anchor = Anchor::At { line, column };
        self
    }
}

/// `file:line:column: path: message`, the one-line form used in status and logs.
impl std::fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}:{}: ", self.file, self.line, self.column)?;
        if !self.path.is_empty() {
            write!(f, "{}: ", self.path)?;
        }
        f.write_str(&self.message)
    }
}

/// Places a finding: at the field's key or value, or at the nearest written ancestor when the
/// field itself is missing.
pub fn locate(file: &str, finding: &Finding, locations: &Locations) -> Diagnostic {
    let (line, column) = match finding.anchor {
        Anchor::At { line, column } => (line, column),
        Anchor::Key | Anchor::Value => match locations.nearest(&finding.path) {
            Some((found, loc)) => {
                let exact = found == finding.path;
                match (finding.anchor, loc.key) {
                    (Anchor::Key, Some(key)) => (key.line, key.column),
                    // A missing field is reported at the key of the object that lacks it, and
                    // a problem with a whole mapping or sequence at the key that names it.
                    (_, Some(key)) if !exact || loc.container => (key.line, key.column),
                    _ => (loc.value.line, loc.value.column),
                }
            }
            None => (1, 1),
        },
    };
    Diagnostic {
        severity: finding.severity,
        code: finding.code,
        file: file.to_string(),
        line: line.max(1),
        column: column.max(1),
        path: finding.path.clone(),
        message: finding.message.clone(),
    }
}

//! The name a manifest file is shown under when its errors belong to no promotion it defines (a
//! YAML syntax error, a YAML bomb, a limit, a promotion without a name): the promotion's
//! `metadata.name` read leniently from the raw text, or else a name derived from the file's path.
//! Either way the error gets a GitPromotion of its own instead of going unseen.

use sha2::{Digest, Sha256};
use tollgate_manifest::rules::k8s_names::dns1123_subdomain_problem;
use tollgate_model::policy::POLICY_KIND;

/// Only the head of a file is searched: a name is near the top, and hostile input must not cost
/// more than this.
const SCAN_LIMIT_BYTES: usize = 64 * 1024;
/// Names are label values on generated objects and events.
const MAX_NAME_LEN: usize = 63;
const PATH_NAME_PREFIX: &str = "invalid-file-";
/// Hex digits of the path's SHA-256 that keep two path-derived names apart.
const HASH_HEX_DIGITS: usize = 10;

/// Per YAML document, what the line scan saw at the top level.
#[derive(Default)]
struct DocumentScan {
    /// `Some(true)` for `kind: ClusterPromotion`, `Some(false)` for any other readable kind.
    promotion_kind: Option<bool>,
    in_metadata: bool,
    /// Indentation of the first key inside `metadata:`; `name:` counts only at exactly this one.
    metadata_indent: Option<usize>,
    name: Option<String>,
}

impl DocumentScan {
    /// The name, unless the document is readably of another kind.
    fn promotion_name(self) -> Option<String> {
        if self.promotion_kind == Some(false) {
            None
        } else {
            self.name
        }
    }
}

/// Reads `metadata.name` of the first document that is not readably of another kind, line by
/// line: a top-level `metadata:` block with a `name:` line at its first indentation. No YAML
/// parsing, no alias expansion, no allocation beyond the name; `None` unless the value is a
/// plain or quoted scalar that is a valid promotion name.
pub(crate) fn readable_name(bytes: &[u8]) -> Option<String> {
    let head = &bytes[..bytes.len().min(SCAN_LIMIT_BYTES)];
    let mut document = DocumentScan::default();
    for line in head.split(|b| *b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.starts_with(b"---") || line.starts_with(b"...") {
            if let Some(name) = std::mem::take(&mut document).promotion_name() {
                return Some(name);
            }
            continue;
        }
        scan_line(&mut document, line);
    }
    document.promotion_name()
}

/// Whether a file that does not parse says, at the top level of its head, `kind: RolloutPolicy`:
/// its errors are then a policy file's errors, reported with the policies, not a promotion's.
pub(crate) fn declares_policy(bytes: &[u8]) -> bool {
    let head = &bytes[..bytes.len().min(SCAN_LIMIT_BYTES)];
    head.split(|b| *b == b'\n').any(|line| {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        line.strip_prefix(b"kind:").and_then(scalar).as_deref() == Some(POLICY_KIND)
    })
}

fn scan_line(document: &mut DocumentScan, line: &[u8]) {
    let indent = line.iter().take_while(|b| **b == b' ').count();
    let content = &line[indent..];
    if content.is_empty() || content.starts_with(b"#") {
        return;
    }
    if indent == 0 {
        document.in_metadata = false;
        if let Some(rest) = content.strip_prefix(b"metadata:") {
            document.in_metadata = is_blank(rest);
            document.metadata_indent = None;
        } else if let Some(rest) = content.strip_prefix(b"kind:") {
            document.promotion_kind = scalar(rest).map(|kind| kind == "ClusterPromotion");
        }
        return;
    }
    if !document.in_metadata {
        return;
    }
    let metadata_indent = *document.metadata_indent.get_or_insert(indent);
    if indent == metadata_indent
        && document.name.is_none()
        && let Some(rest) = content.strip_prefix(b"name:")
    {
        document.name = scalar(rest).filter(|name| is_promotion_name(name));
    }
}

/// Nothing but spaces and an optional comment.
fn is_blank(rest: &[u8]) -> bool {
    let rest = rest.trim_ascii_start();
    rest.is_empty() || rest.starts_with(b"#")
}

/// The value after `key:`: a plain scalar up to a comment, or a quoted one without escapes.
/// Anchors, aliases, tags, block and flow values are refused.
fn scalar(rest: &[u8]) -> Option<String> {
    if !rest.is_empty() && !rest.starts_with(b" ") {
        return None;
    }
    let rest = rest.trim_ascii();
    let value = match rest.first()? {
        quote @ (b'"' | b'\'') => {
            let inner = &rest[1..];
            let end = inner.iter().position(|b| b == quote)?;
            let after = inner[end + 1..].trim_ascii_start();
            if !(after.is_empty() || after.starts_with(b"#")) {
                return None;
            }
            &inner[..end]
        }
        b'&' | b'*' | b'!' | b'|' | b'>' | b'{' | b'[' | b'#' => return None,
        _ => {
            let end = rest
                .windows(2)
                .position(|pair| pair == b" #")
                .unwrap_or(rest.len());
            rest[..end].trim_ascii_end()
        }
    };
    if value.contains(&b'\\') {
        return None;
    }
    std::str::from_utf8(value).ok().map(str::to_string)
}

fn is_promotion_name(name: &str) -> bool {
    name.len() <= MAX_NAME_LEN && dns1123_subdomain_problem(name).is_none()
}

/// `invalid-file-` and the path, lowercased with every other character as `-`. With
/// `disambiguate` (the plain name is taken), or when the name would be too long, it ends in a
/// hash of the exact path, so two files never share a name.
pub(crate) fn path_name(path: &str, disambiguate: bool) -> String {
    let mut readable = String::with_capacity(path.len());
    for c in path.chars() {
        let c = c.to_ascii_lowercase();
        let c = if c.is_ascii_lowercase() || c.is_ascii_digit() {
            c
        } else {
            '-'
        };
        if !(c == '-' && (readable.is_empty() || readable.ends_with('-'))) {
            readable.push(c);
        }
    }
    let readable = readable.trim_end_matches('-');
    let plain = format!("{PATH_NAME_PREFIX}{readable}");
    let plain = plain.trim_end_matches('-');
    if !disambiguate && plain.len() <= MAX_NAME_LEN {
        return plain.to_string();
    }
    let digest = Sha256::digest(path.as_bytes());
    let hash: String = digest
        .iter()
        .flat_map(|byte| [byte >> 4, byte & 0xf])
        .take(HASH_HEX_DIGITS)
        .map(|nibble| char::from_digit(u32::from(nibble), 16).unwrap_or('0'))
        .collect();
    let keep = MAX_NAME_LEN - HASH_HEX_DIGITS - 1;
    let head = plain[..plain.len().min(keep)].trim_end_matches('-');
    format!("{head}-{hash}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_name_is_read_from_the_metadata_block_of_a_broken_file() {
        let text = "apiVersion: config.projectsveltos.io/v1beta1\nkind: ClusterPromotion\nmetadata:\n  labels:\n    name: not-this\n  name: web # the app\nspec:\n  stages:\n  - name: a\n     clusterSelector: x: y\n";
        assert_eq!(readable_name(text.as_bytes()).as_deref(), Some("web"));
        let quoted = "metadata:\n    name: \"web-2\"\nkind: ClusterPromotion\nspec: [\n";
        assert_eq!(readable_name(quoted.as_bytes()).as_deref(), Some("web-2"));
        let single = "kind: ClusterPromotion\r\nmetadata:\r\n  name: 'db'\r\n";
        assert_eq!(readable_name(single.as_bytes()).as_deref(), Some("db"));
    }

    #[test]
    fn no_name_is_read_where_it_is_not_plainly_a_promotion_name() {
        for text in [
            // Not a top-level metadata block, or name is not its direct child.
            "spec:\n  metadata:\n    name: web\n",
            "metadata:\n  labels:\n    name: web\n",
            "metadata: {name: web}\n",
            // Aliases, anchors, tags, block scalars are never followed.
            "metadata:\n  name: *web\n",
            "metadata:\n  name: &a web\n",
            "metadata:\n  name: !!str web\n",
            "metadata:\n  name: |\n    web\n",
            // Not a valid promotion name.
            "metadata:\n  name: Web_App\n",
            "metadata:\n  name: \"we\\u0062\"\n",
            "metadata:\n  name:web\n",
            // Another kind.
            "kind: ConfigMap\nmetadata:\n  name: web\n",
            // Tabs are not YAML indentation.
            "metadata:\n\tname: web\n",
            "",
            "\u{0}\u{ff}\n",
        ] {
            assert_eq!(readable_name(text.as_bytes()), None, "{text:?}");
        }
        let long = format!("metadata:\n  name: {}\n", "a".repeat(64));
        assert_eq!(readable_name(long.as_bytes()), None);
    }

    #[test]
    fn the_first_promotion_document_names_the_file() {
        let text = "kind: ConfigMap\nmetadata:\n  name: settings\n---\nmetadata:\n  name: web\nkind: ClusterPromotion\n---\nkind: ClusterPromotion\nmetadata:\n  name: db\n";
        assert_eq!(readable_name(text.as_bytes()).as_deref(), Some("web"));
    }

    #[test]
    fn the_scan_is_bounded_on_hostile_input() {
        let mut text = "a: &a [x]\n".repeat(SCAN_LIMIT_BYTES / 10 + 1);
        text.push_str("metadata:\n  name: late\n");
        assert_eq!(
            readable_name(text.as_bytes()),
            None,
            "past the scanned head"
        );
        let bomb =
            "metadata:\n  name: bomb\n  annotations:\n    a: &a [x, x]\n    b: &b [*a, *a]\n";
        assert_eq!(readable_name(bomb.as_bytes()).as_deref(), Some("bomb"));
    }

    #[test]
    fn a_broken_policy_file_is_recognised_by_its_kind() {
        assert!(declares_policy(
            b"apiVersion: tollgate.dev/v1alpha1\nkind: RolloutPolicy\nspec: [\n"
        ));
        assert!(declares_policy(
            b"kind: 'RolloutPolicy' # fleet\r\nmetadata: {\n"
        ));
        assert!(!declares_policy(b"kind: ClusterPromotion\nspec: [\n"));
        assert!(!declares_policy(b"spec:\n  kind: RolloutPolicy\n"));
    }

    #[test]
    fn path_names_are_readable_valid_and_distinct() {
        assert_eq!(
            path_name("apps/Broken.yaml", false),
            "invalid-file-apps-broken-yaml"
        );
        assert_eq!(path_name("--x__.yml", false), "invalid-file-x-yml");
        let long = format!("deep/{}/bomb.yaml", "directory".repeat(10));
        let a = path_name(&long, false);
        let b = path_name(&long.replace("bomb", "bomb2"), false);
        for name in [&a, &b] {
            assert!(name.len() <= MAX_NAME_LEN, "{name}");
            assert!(is_promotion_name(name), "{name}");
        }
        assert_ne!(a, b, "long paths that share a head differ by their hash");
        let plain = path_name("a-b.yaml", false);
        let other = path_name("a_b.yaml", true);
        assert_eq!(plain, "invalid-file-a-b-yaml");
        assert!(other.starts_with("invalid-file-a-b-yaml-") && other != plain);
        assert!(is_promotion_name(&other));
        assert!(is_promotion_name(&path_name("...", false)));
        assert!(is_promotion_name(&path_name("...", true)));
    }
}

//! Turning one manifest blob into named promotions or diagnostics. The only place this crate
//! touches the manifest format; everything else sees [`ParsedBlob`].

use std::sync::Arc;

use tollgate_manifest::parse::{oversized_file, parse_file};
use tollgate_manifest::rules::k8s_names::dns1123_subdomain_problem;
use tollgate_manifest::{ClusterPromotion, RolloutPolicy};

use crate::claim_name::{declares_policy, readable_name};

pub use tollgate_manifest::diagnostic::{Diagnostic, Severity};
pub use tollgate_manifest::parse::Limits;

/// One `ClusterPromotion` document of a file.
#[derive(Clone, Debug)]
pub(crate) struct ParsedDoc {
    pub name: String,
    pub outcome: Result<Arc<ClusterPromotion>, Vec<Diagnostic>>,
}

/// One `RolloutPolicy` document of a file. Without a usable name its errors still count: they
/// are reported with the policies' errors (a policy file never claims a promotion name).
#[derive(Clone, Debug)]
pub(crate) struct PolicyDoc {
    pub name: Option<String>,
    /// Line of the document's first node.
    pub line: u32,
    /// Line of its `spec.selector` key (else of the document): where it selects promotions.
    pub selector_line: u32,
    pub outcome: Result<Arc<RolloutPolicy>, Vec<Diagnostic>>,
}

#[derive(Clone, Debug, Default)]
pub(crate) struct ParsedBlob {
    pub docs: Vec<ParsedDoc>,
    pub policies: Vec<PolicyDoc>,
    /// Errors that belong to no named promotion (YAML syntax, a promotion without a name…).
    pub file_errors: Vec<Diagnostic>,
    /// When `file_errors` has errors: the promotion name still readable from the raw text, which
    /// those errors are shown under (see [`crate::claim_name`]).
    pub readable_name: Option<Box<str>>,
    /// When `file_errors` has errors and no promotion name is readable: the raw text declares
    /// `kind: RolloutPolicy`, so the errors are reported with the policies.
    pub broken_policy_file: bool,
}

impl ParsedBlob {
    /// A copy allocated by the calling thread. mimalloc gives an ended thread's page back only
    /// once every block on it is freed: the manifests a sync keeps (every snapshot holds one)
    /// would pin a parse thread's pages, mostly its freed parse temporaries, for good. Copied
    /// here, the parse thread's blocks all go and so do its pages (at 10,000 promotions a burst
    /// commit of 1,000 changed files left the controller ~10 MiB larger).
    fn owned_here(&self) -> ParsedBlob {
        let mut copy = self.clone();
        for doc in &mut copy.docs {
            if let Ok(promotion) = &mut doc.outcome {
                *promotion = Arc::new(ClusterPromotion::clone(promotion));
            }
        }
        for doc in &mut copy.policies {
            if let Ok(policy) = &mut doc.outcome {
                *policy = Arc::new(RolloutPolicy::clone(policy));
            }
        }
        copy
    }

    /// The diagnostics as they would read for a blob at `file` (a blob is parsed once, under the
    /// first path it was seen at; the same content may later sit at another path).
    pub fn relocate(diagnostics: &[Diagnostic], file: &str) -> Vec<Diagnostic> {
        diagnostics
            .iter()
            .map(|d| {
                let mut d = d.clone();
                d.file = file.to_string();
                d
            })
            .collect()
    }
}

/// A manifest blob as read from the object database: its bytes, or only its size when that is
/// over the file-size limit (a huge blob is never loaded into memory).
#[derive(Clone, Debug)]
pub(crate) enum BlobContent {
    Loaded(Vec<u8>),
    TooLarge(usize),
}

impl BlobContent {
    /// Reads blob `oid`, checking its size in the object header first.
    pub fn read(
        repo: &git2::Repository,
        oid: git2::Oid,
        limits: &Limits,
    ) -> Result<Self, git2::Error> {
        let (size, _kind) = repo.odb()?.read_header(oid)?;
        if size > limits.max_file_bytes {
            return Ok(BlobContent::TooLarge(size));
        }
        Ok(BlobContent::Loaded(repo.find_blob(oid)?.content().to_vec()))
    }
}

/// Parses one blob with the spec crate's parser. Documents of other kinds are skipped there;
/// a promotion document without a usable name cannot be attributed (nor get a GitPromotion under
/// that name), so its diagnostics become file-level.
pub(crate) fn parse_blob(file: &str, content: &BlobContent, limits: &Limits) -> ParsedBlob {
    let parsed = match content {
        BlobContent::Loaded(bytes) => parse_file(file, bytes, limits),
        BlobContent::TooLarge(size) => oversized_file(file, *size, limits),
    };
    let mut blob = ParsedBlob {
        docs: Vec::with_capacity(parsed.promotions.len()),
        policies: parsed.policies.into_iter().map(policy_doc).collect(),
        file_errors: parsed.diagnostics,
        readable_name: None,
        broken_policy_file: false,
    };
    for document in parsed.promotions {
        let name = document
            .name
            .filter(|name| dns1123_subdomain_problem(name).is_none());
        match (name, document.promotion) {
            (Some(name), Some(promotion)) => blob.docs.push(ParsedDoc {
                name,
                outcome: Ok(Arc::new(promotion)),
            }),
            (Some(name), None) => blob.docs.push(ParsedDoc {
                name,
                outcome: Err(document.diagnostics),
            }),
            (None, _) => blob.file_errors.extend(document.diagnostics),
        }
    }
    if let BlobContent::Loaded(bytes) = content
        && blob.file_errors.iter().any(Diagnostic::is_error)
    {
        blob.readable_name = readable_name(bytes).map(String::into_boxed_str);
        blob.broken_policy_file = blob.readable_name.is_none() && declares_policy(bytes);
    }
    blob
}

fn policy_doc(document: tollgate_manifest::ParsedPolicy) -> PolicyDoc {
    let name = document
        .name
        .filter(|name| dns1123_subdomain_problem(name).is_none());
    PolicyDoc {
        name,
        line: document.line,
        selector_line: document.selector_line.unwrap_or(document.line),
        outcome: match document.policy {
            Some(policy) => Ok(Arc::new(policy)),
            None => Err(document.diagnostics),
        },
    }
}

/// Parses many blobs, one result per input in input order, spread over the available cores
/// when there are enough of them to be worth a thread.
pub(crate) fn parse_blobs(
    blobs: &[(git2::Oid, String, BlobContent)],
    limits: &Limits,
) -> Vec<ParsedBlob> {
    const MIN_PER_THREAD: usize = 32;
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    let threads = cores.min(blobs.len() / MIN_PER_THREAD).max(1);
    let parse = |chunk: &[(git2::Oid, String, BlobContent)]| -> Vec<ParsedBlob> {
        chunk
            .iter()
            .map(|(_, path, content)| parse_blob(path, content, limits))
            .collect()
    };
    if threads == 1 {
        return parse(blobs);
    }
    let chunk_size = blobs.len().div_ceil(threads);
    std::thread::scope(|scope| {
        let handles: Vec<_> = blobs
            .chunks(chunk_size)
            .map(|chunk| scope.spawn(move || parse(chunk)))
            .collect();
        handles
            .into_iter()
            .flat_map(|handle| {
                handle
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .map(|parsed| parsed.owned_here())
            .collect()
    })
}

/// The error for a name defined more than once at one commit (in two files, or twice in one).
pub(crate) fn duplicate_name_diagnostic(name: &str, files: &[&str]) -> Diagnostic {
    let file = files.first().copied().unwrap_or_default();
    let message = match files {
        [a, b] if a == b => format!("ClusterPromotion {name:?} is defined more than once in {a}"),
        _ => format!(
            "ClusterPromotion {name:?} is defined in more than one file: {}",
            files.join(", ")
        ),
    };
    Diagnostic {
        severity: Severity::Error,
        code: "duplicate-promotion-name",
        file: file.to_string(),
        line: 1,
        column: 1,
        path: "metadata.name".to_string(),
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(name: &str) -> Vec<u8> {
        tollgate_fixtures::promotion(name)
            .stage(tollgate_fixtures::stage("one").selector("env", "one"))
            .to_yaml()
            .into_bytes()
    }

    #[test]
    fn parallel_parsing_keeps_input_order() {
        let blobs: Vec<(git2::Oid, String, BlobContent)> = (0..200)
            .map(|i| {
                let content = if i % 7 == 0 {
                    b"kind: [".to_vec()
                } else {
                    manifest(&format!("p{i}"))
                };
                let oid = git2::Oid::hash_object(git2::ObjectType::Blob, &content).expect("hash");
                (oid, format!("f{i}.yaml"), BlobContent::Loaded(content))
            })
            .collect();
        let parsed = parse_blobs(&blobs, &Limits::default());
        assert_eq!(parsed.len(), blobs.len());
        for (i, blob) in parsed.iter().enumerate() {
            if i % 7 == 0 {
                assert!(blob.docs.is_empty() && !blob.file_errors.is_empty(), "{i}");
                assert_eq!(blob.file_errors[0].file, format!("f{i}.yaml"));
            } else {
                assert_eq!(blob.docs.len(), 1, "{i}");
                assert_eq!(blob.docs[0].name, format!("p{i}"));
                assert!(blob.docs[0].outcome.is_ok(), "{:?}", blob.docs[0].outcome);
            }
        }
    }

    #[test]
    fn a_blob_owned_here_shares_nothing_with_the_parse_it_copies() {
        let content = manifest("web");
        let parsed = parse_blob(
            "web.yaml",
            &BlobContent::Loaded(content),
            &Limits::default(),
        );
        let copy = parsed.owned_here();
        let (Ok(original), Ok(copied)) = (&parsed.docs[0].outcome, &copy.docs[0].outcome) else {
            panic!("both parse");
        };
        assert_eq!(original, copied);
        assert!(
            !Arc::ptr_eq(original, copied),
            "a copy, not the parse thread's allocation"
        );
    }

    #[test]
    fn an_oversized_blob_is_refused_from_its_header_without_loading_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let repo = git2::Repository::init_bare(dir.path()).expect("repo");
        let limits = Limits {
            max_file_bytes: 64,
            ..Limits::default()
        };
        let small = repo.blob(&manifest("p")[..60]).expect("blob");
        let large = repo.blob(&manifest("p")).expect("blob");
        assert!(matches!(
            BlobContent::read(&repo, small, &limits),
            Ok(BlobContent::Loaded(bytes)) if bytes.len() == 60
        ));
        let content = BlobContent::read(&repo, large, &limits).expect("header");
        assert!(matches!(content, BlobContent::TooLarge(size) if size > 64));
        let parsed = parse_blob("big.yaml", &content, &limits);
        assert!(parsed.docs.is_empty());
        assert_eq!(parsed.file_errors[0].code, "file-too-large");
        assert_eq!(parsed.file_errors[0].file, "big.yaml");
    }

    #[test]
    fn duplicate_names_are_described() {
        let two_files = duplicate_name_diagnostic("app", &["a.yaml", "b.yaml"]);
        assert!(two_files.message.contains("a.yaml, b.yaml"));
        assert_eq!(two_files.file, "a.yaml");
        let one_file = duplicate_name_diagnostic("app", &["a.yaml", "a.yaml"]);
        assert!(one_file.message.contains("more than once in a.yaml"));
    }
}

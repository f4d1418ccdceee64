//! The bodies of the fuzz targets (`fuzz/fuzz_targets/`). They live in the library so that the
//! corpus replay test (`tests/suite/fuzz_corpus.rs`) runs exactly what the fuzzer ran, in every CI
//! run.
//!
//! Each one checks properties of the result, not only that nothing panics: a fuzzer that finds a
//! wrong answer is worth more than one that finds a crash.

use std::sync::Arc;

use axum::http::{HeaderMap, HeaderName, HeaderValue};
use chrono::DateTime;
use tollgate_manifest::report::{self, Summary};
use tollgate_manifest::{CommitInfo, Limits, Snapshot, SpecHashes, parse_file};
use tollgate_source::Secret;

use crate::outbound::signature::hmac_sha256_hex;
use crate::server::webhook::{self, Outcome, Provider};

/// The name every fuzzed spec file is reported under.
pub const SPEC_FILE: &str = "fuzz.yaml";
/// The branch the fuzzed webhooks are judged against.
pub const WEBHOOK_BRANCH: &str = "main";
/// The webhook secret the fuzzed requests are signed with.
pub const WEBHOOK_SECRET: &str = "fuzz-webhook-secret";

/// `tollgate validate` on one file, then everything downstream of a valid promotion: hashes,
/// a JSON round trip, rendering, and the three report formats.
pub fn spec_file(data: &[u8]) {
    let limits = Limits::default();
    let parsed = parse_file(SPEC_FILE, data, &limits);
    let text = std::str::from_utf8(data).ok();
    let lines = yaml_line_count(data);

    // The fast YAML reader must read whatever it accepts exactly as serde-saphyr does.
    if let Some(text) = text
        && let Err(difference) = tollgate_manifest::check_fast_reader(text)
    {
        panic!("fast reader disagrees with serde-saphyr: {difference}");
    }

    let diagnostics = parsed.all_diagnostics();
    for diagnostic in &diagnostics {
        assert_eq!(diagnostic.file, SPEC_FILE);
        assert!(!diagnostic.message.is_empty(), "{diagnostic:?}");
        // A location past the end of the file would point the user at nothing.
        assert!(
            diagnostic.line as usize <= lines + 1,
            "line {} of a {lines}-line file: {diagnostic:?}",
            diagnostic.line
        );
    }
    for promotion in &parsed.promotions {
        let has_error = promotion.diagnostics.iter().any(|d| d.is_error());
        assert_eq!(
            promotion.promotion.is_none(),
            has_error,
            "a promotion is kept iff it has no error: {:?}",
            promotion.diagnostics
        );
        if let Some(valid) = &promotion.promotion {
            check_valid_promotion(valid, &limits);
        }
    }

    let human = report::render_human(&diagnostics, |_| text);
    assert_eq!(human.is_empty(), diagnostics.is_empty());
    let summary = Summary {
        files: 1,
        promotions: parsed.promotions.len(),
        valid: !parsed.has_errors(),
    };
    let json = report::render_json(&diagnostics, summary);
    assert!(
        serde_json::from_str::<serde_json::Value>(&json).is_ok(),
        "--output json is JSON"
    );
    for line in report::render_github(&diagnostics).lines() {
        // A newline inside a message would end the annotation early.
        assert!(line.starts_with("::"), "github annotation line: {line:?}");
    }
}

/// Lines as YAML counts them (LF, CR and CRLF each end one), on bytes so that a non-UTF-8 file's
/// diagnostic still has a line to point at.
fn yaml_line_count(data: &[u8]) -> usize {
    let mut lines = 1;
    let mut bytes = data.iter().peekable();
    while let Some(&byte) = bytes.next() {
        if byte == b'\n' || (byte == b'\r' && bytes.peek() != Some(&&b'\n')) {
            lines += 1;
        }
    }
    lines
}

/// A valid promotion hashes deterministically, survives a JSON round trip with the same hashes
/// (the normalised form is itself valid), and renders a profile per stage.
fn check_valid_promotion(promotion: &tollgate_manifest::ClusterPromotion, limits: &Limits) {
    let hashes = SpecHashes::of(promotion);
    assert_eq!(
        hashes,
        SpecHashes::of(promotion),
        "hashing is deterministic"
    );

    let json = serde_json::to_vec(promotion).expect("a model always serialises");
    let reparsed = parse_file(SPEC_FILE, &json, limits);
    let again = reparsed
        .promotions
        .first()
        .and_then(|p| p.promotion.as_ref())
        .unwrap_or_else(|| {
            panic!(
                "the normalised form of a valid promotion is valid: {:?}",
                reparsed.all_diagnostics()
            )
        });
    assert_eq!(SpecHashes::of(again), hashes, "hashes survive a round trip");

    let snapshot = Snapshot {
        index: 1,
        hashes: hashes.into(),
        commit: CommitInfo {
            sha: "0".repeat(40),
            seq: 0,
            author: "fuzz".into(),
            author_email: "fuzz@example.com".into(),
            committer: "fuzz".into(),
            committer_email: "fuzz@example.com".into(),
            time: DateTime::UNIX_EPOCH,
            committed: DateTime::UNIX_EPOCH,
            subject: "fuzz".into(),
            signature: None,
        }
        .into(),
        same_content_as: None,
        promotion: Arc::new(promotion.clone()),
        file: SPEC_FILE.into(),
        contributors: Arc::from([]),
    };
    for stage in &promotion.spec.stages {
        for profile in [
            tollgate_render::render_stage_profile(&snapshot, stage, &[]),
            tollgate_render::render_preverification_profile(&snapshot, stage),
        ] {
            let name = profile
                .pointer("/metadata/name")
                .and_then(|n| n.as_str())
                .unwrap_or_default();
            // Validation guarantees generated names are DNS-1123 subdomains.
            assert!(
                !name.is_empty() && name.len() <= 253,
                "generated name {name:?}"
            );
        }
    }
}

/// Flags in the first input byte of a webhook case.
const SEND_SIGNATURE: u8 = 1;
const SIGN_CORRECTLY: u8 = 2;
const SEND_EVENT: u8 = 4;

/// One webhook request for `provider`: the first byte says which headers to send and whether to
/// sign correctly; up to the first newline is the event header's value; the rest is the body.
/// Correct signatures are computed here so the fuzzer reaches the payload parser.
pub fn webhook(provider: Provider, data: &[u8]) {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let (event, body) = match rest.iter().position(|&b| b == b'\n') {
        Some(newline) => (&rest[..newline], &rest[newline + 1..]),
        None => (&rest[..0], rest),
    };
    let secret = Secret::new(WEBHOOK_SECRET);
    let signed = flags & SEND_SIGNATURE != 0 && flags & SIGN_CORRECTLY != 0;

    let mut headers = HeaderMap::new();
    if flags & SEND_SIGNATURE != 0 {
        let value = if flags & SIGN_CORRECTLY != 0 {
            correct_signature(provider, body)
        } else {
            // A wrong one: the event bytes, which the fuzzer controls freely.
            String::from_utf8_lossy(event).into_owned()
        };
        if let Ok(value) = HeaderValue::from_str(&value) {
            headers.insert(HeaderName::from_static(provider.auth_header()), value);
        }
    }
    let event_sent = match (flags & SEND_EVENT != 0, provider.event_header()) {
        (true, Some(name)) => match HeaderValue::from_bytes(event) {
            Ok(value) => {
                headers.insert(HeaderName::from_static(name), value);
                Some(event)
            }
            Err(_) => None,
        },
        _ => None,
    };

    let outcome = webhook::classify(provider, &secret, &headers, body, WEBHOOK_BRANCH);
    assert!(!outcome.label().is_empty() && !outcome.message().is_empty());

    if !signed {
        // Nothing of an unauthenticated request is looked at, let alone acted on.
        assert!(
            matches!(outcome, Outcome::MissingSignature | Outcome::BadSignature),
            "unsigned request judged {outcome:?}"
        );
        return;
    }
    assert!(
        !matches!(outcome, Outcome::MissingSignature | Outcome::BadSignature),
        "correctly signed request refused: {outcome:?}"
    );
    if outcome == Outcome::Accepted {
        if provider.event_header().is_some() {
            assert_eq!(event_sent, Some(provider.push_event().as_bytes()));
        }
        let names_branch = body
            .windows(b"refs/heads/main".len())
            .any(|w| w == b"refs/heads/main");
        assert!(
            names_branch || provider == Provider::Generic,
            "accepted a push that never names the tracked branch"
        );
    }
}

/// What an honest sender of `provider` puts in its auth header for `body`.
fn correct_signature(provider: Provider, body: &[u8]) -> String {
    let hex = hmac_sha256_hex(WEBHOOK_SECRET.as_bytes(), body);
    match provider {
        Provider::GitLab => WEBHOOK_SECRET.to_string(),
        Provider::Gitea => hex,
        Provider::GitHub | Provider::Generic => format!("sha256={hex}"),
    }
}

//! What the source found about a commit's signature, as plain data the engine reasons about
//! (docs/trust.md#what-verification-proves).

use serde::{Deserialize, Serialize};

/// The signature check of one commit against the controller's trusted keys.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "state")]
pub enum SignatureCheck {
    /// Signed by a trusted key: its principals (the allowed-signers principals of an SSH key, the
    /// user-ID e-mail addresses of an OpenPGP key) and its fingerprint.
    Verified {
        principals: Vec<String>,
        key: String,
    },
    /// Not signed by a trusted key, and why.
    Unverified {
        reason: Unverified,
        /// Which key, or what failed (never secret: public key fingerprints and parser errors).
        #[serde(default, skip_serializing_if = "String::is_empty")]
        detail: String,
    },
}

/// Why a commit is not verified.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Unverified {
    /// The commit carries no signature.
    Unsigned,
    /// Signed, by a key that is not among the trusted keys.
    UnknownKey,
    /// The signature does not verify (tampered commit, wrong namespace, unreadable signature).
    BadSignature,
}

impl Unverified {
    /// The words status and events use: `unsigned`, `unknown key`, `bad signature`.
    pub fn as_str(self) -> &'static str {
        match self {
            Unverified::Unsigned => "unsigned",
            Unverified::UnknownKey => "unknown key",
            Unverified::BadSignature => "bad signature",
        }
    }
}

impl std::fmt::Display for Unverified {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl SignatureCheck {
    pub fn unverified(reason: Unverified, detail: impl Into<String>) -> Self {
        SignatureCheck::Unverified {
            reason,
            detail: detail.into(),
        }
    }

    /// The verified principals; `None` when not verified.
    pub fn principals(&self) -> Option<&[String]> {
        match self {
            SignatureCheck::Verified { principals, .. } => Some(principals),
            SignatureCheck::Unverified { .. } => None,
        }
    }

    pub fn is_verified(&self) -> bool {
        matches!(self, SignatureCheck::Verified { .. })
    }

    /// One line: `verified (alice@example.com, SHA256:…)` or `unknown key: SHA256:…`.
    pub fn describe(&self) -> String {
        match self {
            SignatureCheck::Verified { principals, key } => {
                format!("verified ({}, {key})", principals.join(", "))
            }
            SignatureCheck::Unverified { reason, detail } if detail.is_empty() => {
                reason.to_string()
            }
            SignatureCheck::Unverified { reason, detail } => format!("{reason}: {detail}"),
        }
    }
}

/// The trailer of a commit that approves one stage of one snapshot:
/// `Tollgate-Approve: <promotion>/<stage>@<snapshot id>`.
pub const APPROVE_TRAILER: &str = "Tollgate-Approve";
/// The trailer of a signed commit that vouches for the unsigned history before it (`Strict`).
pub const SEAL_TRAILER: &str = "Tollgate-Seal";
/// The trailer of a signed statement commit by which an admin approves the pending changes of a
/// RolloutPolicy with `admins` (issue #44): `Tollgate-Approve-Policy: <policy>@<change commit>`.
pub const APPROVE_POLICY_TRAILER: &str = "Tollgate-Approve-Policy";

//! A git commit's signature: the `gpgsig` header, checked over the commit without it. Results are
//! cached by commit id (a commit never changes) until the trusted keys do.

use std::collections::HashMap;
use std::sync::Arc;

use git2::{Oid, Repository};
use tollgate_model::{SignatureCheck, Unverified};

use super::SignatureVerifier;
use super::keys::TrustedKeys;

/// Checks `commit`'s signature against `keys`.
pub fn commit_signature(repo: &Repository, commit: Oid, keys: &TrustedKeys) -> SignatureCheck {
    match repo.extract_signature(&commit, None) {
        Ok((signature, signed)) => keys.check(&signature, &signed),
        Err(e) if e.code() == git2::ErrorCode::NotFound => {
            SignatureCheck::unverified(Unverified::Unsigned, "")
        }
        Err(e) => SignatureCheck::unverified(
            Unverified::BadSignature,
            format!("cannot read the signature: {}", e.message()),
        ),
    }
}

/// Signature checks by commit, for one set of trusted keys.
#[derive(Debug)]
pub struct CommitChecks {
    keys: Arc<TrustedKeys>,
    checked: HashMap<Oid, SignatureCheck>,
}

impl CommitChecks {
    pub fn new(keys: Arc<TrustedKeys>) -> Self {
        CommitChecks {
            keys,
            checked: HashMap::new(),
        }
    }

    /// The check of `commit`, computed once.
    pub fn check(&mut self, repo: &Repository, commit: Oid) -> SignatureCheck {
        if let Some(check) = self.checked.get(&commit) {
            return check.clone();
        }
        let check = commit_signature(repo, commit, &self.keys);
        self.checked.insert(commit, check.clone());
        check
    }
}

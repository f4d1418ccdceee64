//! `--verify-commits` and `--trusted-keys` (issue #33, docs/trust.md): which commits may roll out,
//! and the keys that sign them. Shared by `run` (verification) and `history` (marks).

use std::path::PathBuf;

use tollgate_source::{TrustConfig, VerifyCommits};

/// `--verify-commits`: how much of the branch must be signed by a trusted key.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum VerifyMode {
    /// A commit becomes a snapshot only if it is signed by a trusted key.
    #[value(name = "Head")]
    Head,
    /// Every commit since the last verified one must be; a signed commit with a
    /// `Tollgate-Seal: <justification>` trailer vouches for the unsigned history before it.
    #[value(name = "Strict")]
    Strict,
}

#[derive(clap::Args, Clone, Debug, Default)]
pub struct TrustArgs {
    /// Roll out only verified commits: `Head` (the commit is signed by a trusted key) or `Strict`
    /// (every commit since the last verified one is). Needs --trusted-keys.
    #[arg(
        long,
        env = "TOLLGATE_VERIFY_COMMITS",
        value_enum,
        ignore_case = true,
        requires = "trusted_keys"
    )]
    pub verify_commits: Option<VerifyMode>,
    /// Directory of trusted keys: `*.sshpub` (OpenSSH public keys, one per line, an optional
    /// principal first as in git's allowed-signers) and `*.asc` (armored OpenPGP public keys).
    /// Re-read on change. Without --verify-commits it only checks approval signatures.
    #[arg(long, env = "TOLLGATE_TRUSTED_KEYS")]
    pub trusted_keys: Option<PathBuf>,
}

impl TrustArgs {
    pub fn config(&self) -> TrustConfig {
        TrustConfig {
            verify_commits: self.verify_commits.map(|mode| match mode {
                VerifyMode::Head => VerifyCommits::Head,
                VerifyMode::Strict => VerifyCommits::Strict,
            }),
            trusted_keys: self.trusted_keys.clone(),
        }
    }
}

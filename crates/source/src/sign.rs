//! Signing the commits `tollgate approve` and `tollgate rollback` write, with the user's git
//! signing configuration (issue #33): `gpg.format` (`openpgp`, the default, or `ssh`),
//! `user.signingKey`, `gpg.program` / `gpg.ssh.program`, and `commit.gpgSign`. Like git, the CLI
//! runs the signing program (`gpg -bsau KEY`, `ssh-keygen -Y sign -n git -f KEY`); the controller
//! never signs. A configured signer that fails is an error, never an unsigned commit.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use git2::Repository;

#[derive(Debug, thiserror::Error)]
pub enum SignError {
    #[error("git config: cannot read {key}: {source}")]
    Config {
        key: &'static str,
        #[source]
        source: git2::Error,
    },
    #[error("gpg.format {0:?} is not supported (use openpgp or ssh; x509 is not)")]
    Format(String),
    #[error(
        "gpg.format is ssh but user.signingKey is not set: git config user.signingKey ~/.ssh/id_ed25519.pub"
    )]
    NoSshKey,
    #[error("cannot run the signing program {program}: {source}")]
    Spawn {
        program: String,
        #[source]
        source: std::io::Error,
    },
    #[error("signing with {program} failed ({status}): {stderr}")]
    Failed {
        program: String,
        status: String,
        stderr: String,
    },
    #[error("{program} wrote no {armor} signature")]
    NoSignature {
        program: String,
        armor: &'static str,
    },
}

/// How commits are signed: the format, the program and the key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Signing {
    pub format: SigningFormat,
    pub program: String,
    /// `user.signingKey`: an OpenPGP key id (default: the committer identity), or for SSH a key
    /// file (private, or public with the private key in the agent) or a literal public key.
    pub key: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SigningFormat {
    OpenPgp,
    Ssh,
}

fn string(config: &git2::Config, key: &'static str) -> Result<Option<String>, SignError> {
    match config.get_string(key) {
        Ok(value) => Ok(Some(value)),
        Err(e) if e.code() == git2::ErrorCode::NotFound => Ok(None),
        Err(source) => Err(SignError::Config { key, source }),
    }
}

impl Signing {
    /// The repository's signing configuration; `None` when it signs nothing (neither
    /// `user.signingKey` nor `commit.gpgSign` set). `committer` is the default OpenPGP key.
    pub fn from_config(repo: &Repository, committer: &str) -> Result<Option<Signing>, SignError> {
        let config = repo.config().map_err(|source| SignError::Config {
            key: "the configuration",
            source,
        })?;
        let key = string(&config, "user.signingkey")?;
        let wanted = config.get_bool("commit.gpgsign").unwrap_or(false);
        if key.is_none() && !wanted {
            return Ok(None);
        }
        let format = string(&config, "gpg.format")?.unwrap_or_else(|| "openpgp".to_string());
        let signing = match format.as_str() {
            "openpgp" => Signing {
                format: SigningFormat::OpenPgp,
                program: string(&config, "gpg.openpgp.program")?
                    .or(string(&config, "gpg.program")?)
                    .unwrap_or_else(|| "gpg".to_string()),
                key: key.unwrap_or_else(|| committer.to_string()),
            },
            "ssh" => Signing {
                format: SigningFormat::Ssh,
                program: string(&config, "gpg.ssh.program")?
                    .unwrap_or_else(|| "ssh-keygen".to_string()),
                key: key.ok_or(SignError::NoSshKey)?,
            },
            other => return Err(SignError::Format(other.to_string())),
        };
        Ok(Some(signing))
    }

    /// The armored signature of `payload` (a commit without its signature header).
    pub fn sign(&self, payload: &[u8]) -> Result<String, SignError> {
        match self.format {
            SigningFormat::OpenPgp => {
                let args = ["--status-fd=2", "-bsau", self.key.as_str()];
                let signature = run(&self.program, &args, payload)?;
                armored(&self.program, signature, "-----BEGIN PGP SIGNATURE-----")
            }
            SigningFormat::Ssh => {
                // A literal public key: the private key is in the agent (`-U`), as git does it.
                let literal = self.key.strip_prefix("key::").or_else(|| {
                    (self.key.starts_with("ssh-") || self.key.starts_with("ecdsa-"))
                        .then_some(self.key.as_str())
                });
                let file = match literal {
                    Some(public) => LiteralKey::write(public)?,
                    None => LiteralKey::path(expand_home(&self.key)),
                };
                let path = file.path.display().to_string();
                let mut args = vec!["-Y", "sign", "-n", "git", "-f", path.as_str()];
                if literal.is_some() {
                    args.push("-U");
                }
                let signature = run(&self.program, &args, payload)?;
                armored(&self.program, signature, "-----BEGIN SSH SIGNATURE-----")
            }
        }
    }
}

/// A key file for `ssh-keygen -f`: the user's, or a temporary one holding a literal public key.
struct LiteralKey {
    path: PathBuf,
    _temp: Option<tempfile::TempDir>,
}

impl LiteralKey {
    fn path(path: PathBuf) -> Self {
        LiteralKey { path, _temp: None }
    }

    fn write(public: &str) -> Result<Self, SignError> {
        let spawn = |source| SignError::Spawn {
            program: "a temporary key file".to_string(),
            source,
        };
        let temp = tempfile::tempdir().map_err(spawn)?;
        let path = temp.path().join("signing_key.pub");
        std::fs::write(&path, format!("{public}\n")).map_err(spawn)?;
        Ok(LiteralKey {
            path,
            _temp: Some(temp),
        })
    }
}

fn expand_home(path: &str) -> PathBuf {
    match (path.strip_prefix("~/"), std::env::var_os("HOME")) {
        (Some(rest), Some(home)) => PathBuf::from(home).join(rest),
        _ => PathBuf::from(path),
    }
}

/// Runs `program args` with `input` on stdin; its stdout, or an error with its stderr.
fn run(program: &str, args: &[&str], input: &[u8]) -> Result<Vec<u8>, SignError> {
    let spawn = |source| SignError::Spawn {
        program: program.to_string(),
        source,
    };
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(spawn)?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(input).map_err(spawn)?;
    }
    let output = child.wait_with_output().map_err(spawn)?;
    if !output.status.success() {
        return Err(SignError::Failed {
            program: program.to_string(),
            status: output.status.to_string(),
            stderr: String::from_utf8_lossy(&output.stderr).trim().to_string(),
        });
    }
    Ok(output.stdout)
}

fn armored(program: &str, output: Vec<u8>, begin: &'static str) -> Result<String, SignError> {
    let text = String::from_utf8_lossy(&output).into_owned();
    if !text.trim_start().starts_with(begin) {
        return Err(SignError::NoSignature {
            program: program.to_string(),
            armor: if begin.contains("SSH") {
                "SSH"
            } else {
                "OpenPGP"
            },
        });
    }
    Ok(text)
}

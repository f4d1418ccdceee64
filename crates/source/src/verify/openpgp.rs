//! OpenPGP keys (armored `*.asc`) and detached-signature verification with `pgp`.

use pgp::composed::{Deserializable, DetachedSignature, SignedPublicKey};
use pgp::types::KeyDetails;
use tollgate_model::{SignatureCheck, Unverified};

use super::keys::KeyDirError;

mod validity;

#[derive(Debug)]
pub(crate) struct OpenPgpKey {
    key: SignedPublicKey,
    principals: Vec<String>,
}

/// The keys `wanted` names (see [`super::TrustedKeys::openpgp_signer`]).
pub(super) fn named_by(keys: &[OpenPgpKey], wanted: &str) -> Vec<super::keys::SignerIdentity> {
    let wanted = wanted.trim().trim_end_matches('!');
    let hex = wanted
        .trim_start_matches("0x")
        .replace(' ', "")
        .to_ascii_uppercase();
    let by_id = hex.len() >= 8 && hex.chars().all(|c| c.is_ascii_hexdigit());
    let user_part = wanted
        .trim_start_matches('<')
        .trim_end_matches('>')
        .to_ascii_lowercase();
    keys.iter()
        .filter(|trusted| {
            let key = &trusted.key;
            match by_id {
                true => std::iter::once(format!("{:X}", key.fingerprint()))
                    .chain(
                        key.public_subkeys
                            .iter()
                            .map(|s| format!("{:X}", s.key.fingerprint())),
                    )
                    .any(|fingerprint| fingerprint.ends_with(&hex)),
                false => {
                    !user_part.is_empty()
                        && key.details.users.iter().any(|user| {
                            user.id
                                .as_str()
                                .is_some_and(|id| id.to_ascii_lowercase().contains(&user_part))
                        })
                }
            }
        })
        .map(|trusted| super::keys::SignerIdentity {
            key: format!("{:X}", trusted.key.fingerprint()),
            principals: trusted.principals.clone(),
        })
        .collect()
}

/// The e-mail address of a user ID (`Alice <alice@example.com>`), lowercased; the whole ID when it
/// has none.
fn principal_of(user_id: &str) -> String {
    let inner = user_id
        .rsplit_once('<')
        .and_then(|(_, rest)| rest.split_once('>'))
        .map(|(email, _)| email);
    inner.unwrap_or(user_id).trim().to_ascii_lowercase()
}

/// Reads every armored public key of a file; each must carry valid self-signatures.
pub(crate) fn read_openpgp_keys(path: &str, text: &str) -> Result<Vec<OpenPgpKey>, KeyDirError> {
    let error = |message: String| KeyDirError::Key {
        path: path.to_string(),
        line: 1,
        message,
    };
    let parsed = SignedPublicKey::from_armor_many(text.as_bytes())
        .map_err(|e| error(format!("not an armored OpenPGP public key: {e}")))?
        .0;
    let mut keys = Vec::new();
    for key in parsed {
        let key = key.map_err(|e| error(format!("invalid OpenPGP public key: {e}")))?;
        key.verify_bindings().map_err(|e| {
            error(format!(
                "OpenPGP key {:X}: its self-signatures do not verify: {e}",
                key.fingerprint()
            ))
        })?;
        let principals: Vec<String> = key
            .details
            .users
            .iter()
            .filter_map(|user| user.id.as_str().map(principal_of))
            .collect();
        if principals.is_empty() {
            return Err(error(format!(
                "OpenPGP key {:X} has no user ID to name its signer",
                key.fingerprint()
            )));
        }
        keys.push(OpenPgpKey { key, principals });
    }
    if keys.is_empty() {
        return Err(error("no OpenPGP public key in the file".to_string()));
    }
    Ok(keys)
}

/// Verifies an armored detached signature over `signed` against the trusted OpenPGP keys: the
/// issuer (fingerprint or key ID) must be a trusted primary key or one of its subkeys, neither
/// revoked nor expired when the signature was made.
pub(crate) fn check(keys: &[OpenPgpKey], signature: &[u8], signed: &[u8]) -> SignatureCheck {
    let signature = match DetachedSignature::from_armor_single(signature) {
        Ok((signature, _)) => signature,
        Err(e) => {
            return SignatureCheck::unverified(
                Unverified::BadSignature,
                format!("unreadable OpenPGP signature: {e}"),
            );
        }
    };
    let issuer = Issuer::of(&signature.signature);
    for trusted in keys {
        let primary = &trusted.key.primary_key;
        let (result, subkey) = if issuer.issued(primary) {
            (signature.verify(primary, signed), None)
        } else if let Some(subkey) = trusted
            .key
            .public_subkeys
            .iter()
            .find(|subkey| issuer.issued(&subkey.key))
        {
            (signature.verify(&subkey.key, signed), Some(subkey))
        } else {
            continue;
        };
        let fingerprint = format!("{:X}", trusted.key.fingerprint());
        if let Err(e) = result {
            return SignatureCheck::unverified(
                Unverified::BadSignature,
                format!("{fingerprint}: {e}"),
            );
        }
        let made = signature
            .signature
            .created()
            .map(|t| i64::from(t.as_secs()));
        return match validity::refusal(keys, trusted, subkey, made) {
            Some(why) => SignatureCheck::unverified(Unverified::BadSignature, why),
            None => SignatureCheck::Verified {
                principals: trusted.principals.clone(),
                key: fingerprint,
            },
        };
    }
    SignatureCheck::unverified(Unverified::UnknownKey, issuer.shown())
}

/// Who a signature says made it: issuer fingerprints and key IDs.
struct Issuer {
    fingerprints: Vec<String>,
    key_ids: Vec<Vec<u8>>,
}

impl Issuer {
    fn of(signature: &pgp::packet::Signature) -> Self {
        Issuer {
            fingerprints: signature
                .issuer_fingerprint()
                .iter()
                .map(|f| format!("{f:X}"))
                .collect(),
            key_ids: signature
                .issuer_key_id()
                .iter()
                .map(|id| id.as_ref().to_vec())
                .collect(),
        }
    }

    fn issued(&self, key: &dyn KeyDetails) -> bool {
        self.fingerprints
            .contains(&format!("{:X}", key.fingerprint()))
            || self
                .key_ids
                .contains(&key.legacy_key_id().as_ref().to_vec())
    }

    /// How an unknown issuer is named: its fingerprint, else its key ID.
    fn shown(&self) -> String {
        self.fingerprints
            .first()
            .cloned()
            .or_else(|| {
                self.key_ids
                    .first()
                    .map(|id| id.iter().map(|b| format!("{b:02X}")).collect())
            })
            .unwrap_or_else(|| "no issuer".to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_user_id_is_named_by_its_email() {
        assert_eq!(
            principal_of("Alice Doe <Alice@Example.com>"),
            "alice@example.com"
        );
        assert_eq!(principal_of("release-bot"), "release-bot");
    }

    #[test]
    fn not_a_key_names_the_file() {
        let error = read_openpgp_keys("team.asc", "hello").expect_err("refused");
        assert!(
            error.to_string().starts_with("trusted keys: team.asc:1: "),
            "{error}"
        );
    }
}

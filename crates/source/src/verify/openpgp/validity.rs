//! Whether a trusted OpenPGP key could make a signature when the signature says it was made: not
//! revoked, and not expired then (the key expiration time of its newest self-signature, counted
//! from the key's creation, RFC 9580 §5.2.3.13); the same for the signing subkey. Every
//! self-signature and revocation was verified when the key was read (`verify_bindings`), so
//! what they say is the key owner's word.
//!
//! Expiry is judged at the signature's creation time, as the SSH validity window is judged at the
//! commit date: history verified once stays verified when a key expires. A revocation refuses
//! every signature, whenever made and for whatever reason: a revoked key may be in other hands.

use pgp::composed::{SignedPublicKey, SignedPublicSubKey};
use pgp::packet::{Signature, SignatureType};
use pgp::types::{KeyDetails, Timestamp};

use super::OpenPgpKey;
use crate::verify::show_time;

/// Why `trusted` (and `subkey`, when it made the signature) could not have made a signature at
/// `made` (seconds since the epoch), if it could not. Copies of the key in other files count
/// too: an old export left beside a revoked one must not undo the revocation.
pub(super) fn refusal(
    keys: &[OpenPgpKey],
    trusted: &OpenPgpKey,
    subkey: Option<&SignedPublicSubKey>,
    made: Option<i64>,
) -> Option<String> {
    let fingerprint = trusted.key.fingerprint();
    let copies: Vec<&SignedPublicKey> = keys
        .iter()
        .map(|key| &key.key)
        .filter(|key| key.fingerprint() == fingerprint)
        .collect();
    let primary = Lifetime {
        name: format!("key {fingerprint:X}"),
        revoked: copies
            .iter()
            .any(|key| !key.details.revocation_signatures.is_empty()),
        created: trusted.key.primary_key.created_at(),
        expiry_from: copies
            .iter()
            .flat_map(|key| primary_self_signatures(key))
            .collect(),
    };
    if let Some(why) = primary.refusal(made) {
        return Some(why);
    }
    let subkey = subkey?;
    let subkey_fingerprint = subkey.key.fingerprint();
    let signatures: Vec<&Signature> = copies
        .iter()
        .flat_map(|key| &key.public_subkeys)
        .filter(|copy| copy.key.fingerprint() == subkey_fingerprint)
        .flat_map(|copy| &copy.signatures)
        .collect();
    let of_type = |typ: SignatureType| {
        signatures
            .iter()
            .copied()
            .filter(move |s| s.typ() == Some(typ))
    };
    Lifetime {
        name: format!("signing subkey {subkey_fingerprint:X} of key {fingerprint:X}"),
        revoked: of_type(SignatureType::SubkeyRevocation).next().is_some(),
        created: subkey.key.created_at(),
        expiry_from: of_type(SignatureType::SubkeyBinding).collect(),
    }
    .refusal(made)
}

/// The self-signatures that can set the primary key's expiry: direct-key signatures and the
/// certifications of its user IDs.
fn primary_self_signatures(key: &SignedPublicKey) -> impl Iterator<Item = &Signature> {
    let direct = key
        .details
        .direct_signatures
        .iter()
        .filter(|s| s.typ() == Some(SignatureType::Key));
    let certifications = key
        .details
        .users
        .iter()
        .flat_map(|user| &user.signatures)
        .filter(|s| {
            matches!(
                s.typ(),
                Some(
                    SignatureType::CertGeneric
                        | SignatureType::CertPersona
                        | SignatureType::CertCasual
                        | SignatureType::CertPositive
                )
            )
        });
    direct.chain(certifications)
}

/// A key or subkey as far as its validity goes.
struct Lifetime<'k> {
    /// `key FPR` or `signing subkey FPR of key FPR`, for the refusal.
    name: String,
    revoked: bool,
    created: Timestamp,
    /// Its self-signatures (bindings, for a subkey): the newest one sets the expiry.
    expiry_from: Vec<&'k Signature>,
}

impl Lifetime<'_> {
    fn refusal(&self, made: Option<i64>) -> Option<String> {
        let name = &self.name;
        if self.revoked {
            return Some(format!("{name} is revoked"));
        }
        let newest = self
            .expiry_from
            .iter()
            .max_by_key(|s| s.created().map(Timestamp::as_secs))?;
        // No subpacket, or zero: the key does not expire.
        let lifetime = newest
            .key_expiration_time()
            .map(|d| d.as_secs())
            .filter(|&s| s > 0)?;
        let expires = i64::from(self.created.as_secs()) + i64::from(lifetime);
        match made {
            Some(made) if made < expires => None,
            Some(made) => Some(format!(
                "{name} expired on {}; the signature was made {}",
                show_time(expires),
                show_time(made)
            )),
            None => Some(format!(
                "{name} expires, and the signature carries no creation time to judge it by"
            )),
        }
    }
}

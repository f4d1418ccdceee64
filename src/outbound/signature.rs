//! Webhook authentication checks, all constant-time in the secret and the presented value.

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

type HmacSha256 = Hmac<Sha256>;

/// Whether `hex_signature` is the hex HMAC-SHA256 of `body` under `secret` (case-insensitive hex).
pub fn hmac_sha256_matches(secret: &[u8], body: &[u8], hex_signature: &str) -> bool {
    let Ok(presented) = hex::decode(hex_signature.trim()) else {
        return false;
    };
    let Ok(mut mac) = HmacSha256::new_from_slice(secret) else {
        return false;
    };
    mac.update(body);
    // `verify_slice` compares in constant time.
    mac.verify_slice(&presented).is_ok()
}

/// Whether a shared token (GitLab's `X-Gitlab-Token`) equals the secret. Both sides are hashed
/// first so that the comparison takes the same time whatever their lengths.
pub fn token_matches(secret: &[u8], presented: &[u8]) -> bool {
    let expected = Sha256::digest(secret);
    let actual = Sha256::digest(presented);
    expected.as_slice().ct_eq(actual.as_slice()).into()
}

/// The hex HMAC-SHA256 of `body` under `secret`, as senders compute it.
pub fn hmac_sha256_hex(secret: &[u8], body: &[u8]) -> String {
    match HmacSha256::new_from_slice(secret) {
        Ok(mut mac) => {
            mac.update(body);
            hex::encode(mac.finalize().into_bytes())
        }
        // HMAC takes keys of any length; this arm exists only because the API returns a Result.
        Err(_) => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // RFC 4231 test case 2.
    const KEY: &[u8] = b"Jefe";
    const DATA: &[u8] = b"what do ya want for nothing?";
    const MAC: &str = "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843";

    #[test]
    fn hmac_matches_the_rfc_4231_vector() {
        assert_eq!(hmac_sha256_hex(KEY, DATA), MAC);
        assert!(hmac_sha256_matches(KEY, DATA, MAC));
        assert!(hmac_sha256_matches(KEY, DATA, &MAC.to_uppercase()));
    }

    #[test]
    fn hmac_rejects_other_keys_bodies_and_garbage() {
        assert!(!hmac_sha256_matches(b"jefe", DATA, MAC));
        assert!(!hmac_sha256_matches(
            KEY,
            b"what do ya want for nothing!",
            MAC
        ));
        assert!(!hmac_sha256_matches(KEY, DATA, &MAC[..62]));
        assert!(!hmac_sha256_matches(KEY, DATA, "not hex at all"));
        assert!(!hmac_sha256_matches(KEY, DATA, ""));
    }

    #[test]
    fn token_compare_is_exact() {
        assert!(token_matches(b"s3cret", b"s3cret"));
        assert!(!token_matches(b"s3cret", b"s3cret "));
        assert!(!token_matches(b"s3cret", b"S3cret"));
        assert!(!token_matches(b"s3cret", b""));
    }
}

//! The kubeconfig's client certificate, checked before the TLS stack sees it: rustls (through
//! webpki) refuses X.509 v1 certificates with an opaque "UnsupportedCertVersion", which does not
//! tell the user that the certificate, not the cluster, is the problem, nor how to fix it.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use kube::config::AuthInfo;

#[derive(Debug, thiserror::Error)]
pub enum ClientCertificateError {
    #[error(
        "the kubeconfig's client certificate ({origin}) is X.509 v1, which rustls refuses; regenerate it as v3: sign it with extensions (e.g. `openssl req -x509 … -addext basicConstraints=critical,CA:FALSE`, or `openssl x509 -req … -extfile v3.ext` with a v3 extensions section)"
    )]
    Version1 { origin: String },
}

/// Fails when the kubeconfig's client certificate is X.509 v1. Anything this check cannot read is
/// left to kube, whose own error names it.
pub fn check(auth: &AuthInfo) -> Result<(), ClientCertificateError> {
    let (pem, origin) = match (&auth.client_certificate_data, &auth.client_certificate) {
        (Some(data), _) => match STANDARD.decode(data.trim()) {
            Ok(pem) => (pem, "client-certificate-data".to_string()),
            Err(_) => return Ok(()),
        },
        (None, Some(path)) => match std::fs::read(path) {
            Ok(pem) => (pem, format!("client-certificate {path}")),
            Err(_) => return Ok(()),
        },
        (None, None) => return Ok(()),
    };
    match first_certificate(&pem).and_then(|der| x509_version(&der)) {
        Some(1) => Err(ClientCertificateError::Version1 { origin }),
        _ => Ok(()),
    }
}

/// The DER bytes of the first `CERTIFICATE` block of a PEM text (the leaf of a chain).
fn first_certificate(pem: &[u8]) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(pem).ok()?;
    let (_, rest) = text.split_once("-----BEGIN CERTIFICATE-----")?;
    let (body, _) = rest.split_once("-----END CERTIFICATE-----")?;
    let base64: String = body.chars().filter(|c| !c.is_ascii_whitespace()).collect();
    STANDARD.decode(base64).ok()
}

/// One DER element at `at`: its tag, where its content starts and how long it is.
fn element(der: &[u8], at: usize) -> Option<(u8, usize, usize)> {
    let tag = *der.get(at)?;
    let first = *der.get(at + 1)?;
    if first < 0x80 {
        return Some((tag, at + 2, usize::from(first)));
    }
    let count = usize::from(first & 0x7f);
    if count == 0 || count > 4 {
        return None;
    }
    let bytes = der.get(at + 2..at + 2 + count)?;
    let length = bytes.iter().fold(0usize, |n, b| (n << 8) | usize::from(*b));
    Some((tag, at + 2 + count, length))
}

/// The X.509 version (1, 2 or 3) of a DER certificate: `Certificate ::= SEQUENCE { tbsCertificate
/// SEQUENCE { version [0] EXPLICIT INTEGER DEFAULT v1, … } … }`, the INTEGER being version − 1.
fn x509_version(der: &[u8]) -> Option<u8> {
    const SEQUENCE: u8 = 0x30;
    const VERSION_TAG: u8 = 0xa0;
    const INTEGER: u8 = 0x02;
    let (tag, certificate, _) = element(der, 0)?;
    if tag != SEQUENCE {
        return None;
    }
    let (tag, tbs, _) = element(der, certificate)?;
    if tag != SEQUENCE {
        return None;
    }
    let (tag, explicit, _) = element(der, tbs)?;
    if tag != VERSION_TAG {
        // No version field: the DEFAULT, v1.
        return Some(1);
    }
    let (tag, value, length) = element(der, explicit)?;
    if tag != INTEGER || length != 1 {
        return None;
    }
    der.get(value)?.checked_add(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// tbsCertificate beginning with the given bytes, wrapped as a Certificate.
    fn certificate(tbs_start: &[u8]) -> Vec<u8> {
        let mut tbs = vec![0x30, u8::try_from(tbs_start.len()).expect("short")];
        tbs.extend_from_slice(tbs_start);
        let mut der = vec![0x30, u8::try_from(tbs.len()).expect("short")];
        der.extend(tbs);
        der
    }

    #[test]
    fn reads_the_version_field() {
        // v3: [0] { INTEGER 2 }, then a serial number.
        assert_eq!(
            x509_version(&certificate(&[0xa0, 3, 0x02, 1, 2, 0x02, 1, 7])),
            Some(3)
        );
        // v1 spelled out, and v1 by omission (the serial number comes first).
        assert_eq!(
            x509_version(&certificate(&[0xa0, 3, 0x02, 1, 0, 0x02, 1, 7])),
            Some(1)
        );
        assert_eq!(x509_version(&certificate(&[0x02, 1, 7])), Some(1));
        assert_eq!(x509_version(b"not DER"), None);
        assert_eq!(x509_version(&[]), None);
    }

    #[test]
    fn long_form_lengths_are_read() {
        let mut der = vec![0x30, 0x82, 0x01, 0x00, 0x30, 0x81, 0x80, 0x02, 1, 7];
        der.resize(0x104, 0);
        assert_eq!(x509_version(&der), Some(1));
    }
}

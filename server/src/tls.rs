//! TLS for the HTTP API: the certificate and key (PEM) from files, or a self-signed
//! certificate made at start (`docs/security.md` §9).
//!
//! `tls = true` with `tls_cert`/`tls_key` naming existing files loads them. If the files do
//! not exist, a self-signed certificate is made and written there (key mode 0600), so the next
//! start serves the same certificate and players keep their pinned fingerprint. Without file
//! names, the self-signed certificate lives for this run only. Either way the server logs the
//! certificate's SHA-256 fingerprint, which a player pins with `--tls-fingerprint` (or trusts
//! through `--ca-file` when the certificate comes from a CA).

use crate::error::{Error, Result};
use openssl::asn1::Asn1Time;
use openssl::bn::{BigNum, MsbOption};
use openssl::ec::{EcGroup, EcKey};
use openssl::hash::MessageDigest;
use openssl::nid::Nid;
use openssl::pkey::PKey;
use openssl::x509::extension::{BasicConstraints, SubjectAlternativeName};
use openssl::x509::{X509Name, X509};
use std::net::IpAddr;
use std::path::Path;

/// A certificate and its key, PEM, and the certificate's fingerprint.
pub struct TlsMaterial {
    pub cert_pem: Vec<u8>,
    pub key_pem: Vec<u8>,
    /// SHA-256 of the certificate's DER, lowercase hex without separators.
    pub fingerprint: String,
    /// Where it came from (for the start-up log).
    pub origin: String,
}

fn ssl(what: &str) -> impl Fn(openssl::error::ErrorStack) -> Error + '_ {
    move |e| Error::io(what.to_string(), std::io::Error::other(e.to_string()))
}

/// SHA-256 fingerprint of a PEM certificate.
pub fn fingerprint(cert_pem: &[u8]) -> Result<String> {
    let c = X509::from_pem(cert_pem).map_err(ssl("parsing the TLS certificate"))?;
    let d = c
        .digest(MessageDigest::sha256())
        .map_err(ssl("certificate digest"))?;
    Ok(d.iter().map(|b| format!("{b:02x}")).collect())
}

/// A self-signed certificate (ECDSA P-256, SHA-256, one year) for `localhost`, `host` and
/// the listen address.
pub fn self_signed(host: IpAddr) -> Result<(Vec<u8>, Vec<u8>)> {
    let e = ssl("making a self-signed certificate");
    let group = EcGroup::from_curve_name(Nid::X9_62_PRIME256V1).map_err(&e)?;
    let key = PKey::from_ec_key(EcKey::generate(&group).map_err(&e)?).map_err(&e)?;
    let mut name = X509Name::builder().map_err(&e)?;
    name.append_entry_by_nid(Nid::COMMONNAME, "layercast-server")
        .map_err(&e)?;
    let name = name.build();
    let mut b = X509::builder().map_err(&e)?;
    b.set_version(2).map_err(&e)?;
    let mut serial = BigNum::new().map_err(&e)?;
    serial.rand(127, MsbOption::MAYBE_ZERO, false).map_err(&e)?;
    let serial = serial.to_asn1_integer().map_err(&e)?;
    b.set_serial_number(&serial).map_err(&e)?;
    b.set_subject_name(&name).map_err(&e)?;
    b.set_issuer_name(&name).map_err(&e)?;
    b.set_pubkey(&key).map_err(&e)?;
    let (from, to) = (
        Asn1Time::days_from_now(0).map_err(&e)?,
        Asn1Time::days_from_now(365).map_err(&e)?,
    );
    b.set_not_before(&from).map_err(&e)?;
    b.set_not_after(&to).map_err(&e)?;
    b.append_extension(BasicConstraints::new().critical().build().map_err(&e)?)
        .map_err(&e)?;
    let mut san = SubjectAlternativeName::new();
    san.dns("localhost").ip("127.0.0.1");
    if !host.is_unspecified() && !host.is_loopback() {
        san.ip(&host.to_string());
    }
    let san = san.build(&b.x509v3_context(None, None)).map_err(&e)?;
    b.append_extension(san).map_err(&e)?;
    b.sign(&key, MessageDigest::sha256()).map_err(&e)?;
    let cert = b.build().to_pem().map_err(&e)?;
    let key = key.private_key_to_pem_pkcs8().map_err(&e)?;
    Ok((cert, key))
}

/// Loads or makes the server's TLS material (see the module documentation).
pub fn load(cert: Option<&Path>, key: Option<&Path>, host: IpAddr) -> Result<TlsMaterial> {
    let read =
        |p: &Path| std::fs::read(p).map_err(|e| Error::io(format!("reading {}", p.display()), e));
    let (cert_pem, key_pem, origin) = match (cert, key) {
        (Some(c), Some(k)) if c.exists() && k.exists() => {
            (read(c)?, read(k)?, format!("{} and {}", c.display(), k.display()))
        }
        (Some(c), Some(k)) if !c.exists() && !k.exists() => {
            let (cp, kp) = self_signed(host)?;
            crate::auth::write_secret(k, std::str::from_utf8(&kp).unwrap_or_default())
                .map_err(|e| Error::io(format!("writing {}", k.display()), e))?;
            crate::auth::write_new_file(c, &cp, 0o644)
                .map_err(|e| Error::io(format!("writing {}", c.display()), e))?;
            (cp, kp, format!("self-signed, written to {}", c.display()))
        }
        (None, None) => {
            let (cp, kp) = self_signed(host)?;
            (cp, kp, "self-signed for this run".into())
        }
        _ => {
            return Err(Error::config(
                "tls_cert",
                "give both tls_cert and tls_key, both existing or both absent (then a self-signed pair is written there)",
            ))
        }
    };
    // Check the pair before tiny_http does, for a clear message.
    let c = X509::from_pem(&cert_pem).map_err(ssl("parsing tls_cert"))?;
    let k = PKey::private_key_from_pem(&key_pem).map_err(ssl("parsing tls_key"))?;
    let pk = c.public_key().map_err(ssl("certificate public key"))?;
    if !pk.public_eq(&k) {
        return Err(Error::config("tls_key", "does not belong to tls_cert"));
    }
    Ok(TlsMaterial {
        fingerprint: fingerprint(&cert_pem)?,
        cert_pem,
        key_pem,
        origin,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn self_signed_pair_persists_and_mismatches_are_refused() {
        let dir = std::env::temp_dir().join(format!("lc-tls-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let (c, k) = (dir.join("c.pem"), dir.join("k.pem"));
        let a = load(Some(&c), Some(&k), "10.0.0.1".parse().unwrap()).unwrap();
        assert_eq!(a.fingerprint.len(), 64);
        let b = load(Some(&c), Some(&k), "10.0.0.1".parse().unwrap()).unwrap();
        assert_eq!(a.fingerprint, b.fingerprint, "the written pair is reused");
        let other = load(None, None, "127.0.0.1".parse().unwrap()).unwrap();
        assert_ne!(other.fingerprint, a.fingerprint);
        std::fs::write(&k, &other.key_pem).unwrap();
        assert!(load(Some(&c), Some(&k), "10.0.0.1".parse().unwrap()).is_err());
        assert!(load(Some(&c), None, "10.0.0.1".parse().unwrap()).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }
}

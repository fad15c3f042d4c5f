//! Requests between the hosts of a cluster, signed: a host that forwards a
//! request (or a call or send of guest code, or a WebSocket) signs what it
//! claims, with the key the cluster keeps in PostgreSQL, and the host that
//! serves it believes the claim only if the signature holds. A request that
//! only says it comes from a host is refused; the signature's form and
//! time are checked before its body is read ([`Signature::read`]), so that
//! a request no host sent is refused without its body.
//!
//! The signature is an HMAC-SHA256 over the method, the path and query,
//! the forwarding host, the chain of calling instances, the caller, the
//! time, a digest of the body and, for a request to an actor's HTTP
//! handler, the headers it carries for the guest; it is valid for
//! [`MAX_SKEW`] either side of the signing host's clock.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

/// The header that carries the caller of a forwarded request (hex of its
/// JSON), for the host that serves it.
pub const CALLER_HEADER: &str = "x-burrow-caller";
/// The header that carries a forwarded request's signature:
/// `<milliseconds since the Unix epoch>.<hex HMAC>`.
pub const SIGNATURE_HEADER: &str = "x-burrow-signature";
/// The header that carries the headers of a forwarded request for an
/// actor's HTTP handler: a JSON list of `[name, hex of the value]`,
/// signed.
pub const HTTP_HEADERS_HEADER: &str = "x-burrow-http-headers";

/// How far a signature's time may be from the clock of the host that
/// checks it (the hosts' clocks are assumed to be kept in step).
pub const MAX_SKEW: Duration = Duration::from_secs(60);

/// What a forwarded request claims, as signed.
pub(crate) struct Claim<'a> {
    pub(crate) method: &'a str,
    pub(crate) path_and_query: &'a str,
    /// The forwarding host's id.
    pub(crate) forwarded: &'a str,
    /// The chain of calling instances (its header's text, or empty).
    pub(crate) chain: &'a str,
    /// The caller (its header's text, or empty).
    pub(crate) caller: &'a str,
    /// The headers of a request for an actor's HTTP handler
    /// ([`HTTP_HEADERS_HEADER`]'s text), or empty.
    pub(crate) http_headers: &'a str,
    pub(crate) body: &'a [u8],
}

impl Claim<'_> {
    fn mac(&self, secret: &[u8], at_ms: u64) -> Hmac<Sha256> {
        let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes any key");
        let body = Sha256::digest(self.body);
        let parts: [&[u8]; 7] = [
            self.method.as_bytes(),
            self.path_and_query.as_bytes(),
            self.forwarded.as_bytes(),
            self.chain.as_bytes(),
            self.caller.as_bytes(),
            &at_ms.to_be_bytes(),
            &body,
        ];
        // The headers of an HTTP handler's request only where there are
        // some: every other claim signs what it signed before they were.
        let http_headers = (!self.http_headers.is_empty()).then_some(self.http_headers.as_bytes());
        for part in parts.into_iter().chain(http_headers) {
            // Lengths first: no two claims sign the same bytes.
            mac.update(&(part.len() as u64).to_be_bytes());
            mac.update(part);
        }
        mac
    }

    /// The signature header's value for this claim, now.
    pub(crate) fn sign(&self, secret: &[u8]) -> String {
        let at_ms = now_ms();
        let tag = self.mac(secret, at_ms).finalize().into_bytes();
        format!("{at_ms}.{}", hex::encode(tag))
    }

    /// Checks `signature` (a signature header's value) against this claim:
    /// `Err` says why it does not hold.
    #[cfg(test)]
    pub(crate) fn verify(&self, secret: &[u8], signature: &str) -> Result<(), String> {
        self.holds(secret, &Signature::read(secret, signature)?)
    }

    /// Whether `signature`, read and within its time already, signs this
    /// claim: `Err` says why not.
    pub(crate) fn holds(&self, secret: &[u8], signature: &Signature) -> Result<(), String> {
        self.mac(secret, signature.at_ms)
            .verify_slice(&signature.tag)
            .map_err(|_| "the signature does not match the request".into())
    }
}

/// A signature header's value, read and with its time checked: what can
/// be known of a signed request before its body is read.
pub(crate) struct Signature {
    at_ms: u64,
    tag: Vec<u8>,
}

impl Signature {
    /// Reads `text` (`<milliseconds>.<hex>`), for a host whose cluster key
    /// is `secret`: `Err` says why it cannot hold, whatever it signs (no
    /// key here, not of the form, a time more than [`MAX_SKEW`] away from
    /// this host's clock).
    pub(crate) fn read(secret: &[u8], text: &str) -> Result<Signature, String> {
        if secret.is_empty() {
            return Err("this host has no cluster key".into());
        }
        let (at, tag) = text
            .split_once('.')
            .ok_or("the signature is not <time>.<hex>")?;
        let at_ms: u64 = at
            .parse()
            .map_err(|_| "the signature's time is not a number")?;
        let tag = hex::decode(tag).map_err(|_| "the signature is not hex")?;
        let skew = now_ms().abs_diff(at_ms);
        if skew > MAX_SKEW.as_millis() as u64 {
            return Err(format!(
                "the signature is {skew} ms away from this host's clock (at most {} ms)",
                MAX_SKEW.as_millis()
            ));
        }
        Ok(Signature { at_ms, tag })
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(body: &[u8]) -> Claim<'_> {
        Claim {
            method: "POST",
            path_and_query: "/actors/counter/a/actions/increment",
            forwarded: "host-1",
            chain: "",
            caller: "",
            http_headers: "",
            body,
        }
    }

    #[test]
    fn a_signature_holds_for_its_claim_only() {
        let secret = [7u8; 32];
        let signature = claim(b"[1]").sign(&secret);
        assert_eq!(claim(b"[1]").verify(&secret, &signature), Ok(()));
        assert!(claim(b"[2]").verify(&secret, &signature).is_err());
        assert!(claim(b"[1]").verify(&[8u8; 32], &signature).is_err());
        let other_caller = Claim {
            caller: "admin",
            ..claim(b"[1]")
        };
        assert!(other_caller.verify(&secret, &signature).is_err());
        let other_headers = Claim {
            http_headers: r#"[["x-signature","forged"]]"#,
            ..claim(b"[1]")
        };
        assert!(other_headers.verify(&secret, &signature).is_err());
        assert!(claim(b"[1]").verify(&[], &signature).is_err());
        assert!(claim(b"[1]").verify(&secret, "garbage").is_err());
    }

    #[test]
    fn a_signature_is_read_and_timed_before_what_it_signs() {
        let secret = [7u8; 32];
        let signature = claim(b"[1]").sign(&secret);
        let read = Signature::read(&secret, &signature).unwrap();
        assert_eq!(claim(b"[1]").holds(&secret, &read), Ok(()));
        assert!(claim(b"[2]").holds(&secret, &read).is_err());
        for (text, why) in [
            ("garbage", "not <time>.<hex>"),
            ("soon.00", "time is not a number"),
            ("1.zz", "not hex"),
            ("1.00", "away from this host's clock"),
        ] {
            let refused = Signature::read(&secret, text).err().unwrap();
            assert!(refused.contains(why), "{text}: {refused}");
        }
        let refused = Signature::read(&[], &signature).err().unwrap();
        assert!(refused.contains("no cluster key"), "{refused}");
    }

    #[test]
    fn an_old_signature_is_refused() {
        let secret = [7u8; 32];
        let old = now_ms() - MAX_SKEW.as_millis() as u64 - 1_000;
        let tag = claim(b"").mac(&secret, old).finalize().into_bytes();
        let signature = format!("{old}.{}", hex::encode(tag));
        let err = claim(b"").verify(&secret, &signature).unwrap_err();
        assert!(err.contains("away from this host's clock"), "{err}");
    }
}

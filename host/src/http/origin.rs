//! Browsers on a server without tokens. Such a server lets every request
//! through, and so listens only where the operator alone reaches it (the
//! loopback, see `auth.rs`); but a web page open in the operator's browser
//! reaches the loopback too. So it answers a browser's request only when:
//!
//! - its `Host` is a loopback address, `localhost`, or the address the
//!   client reached the server at: a name of someone else's that points
//!   here (DNS rebinding) would let that site's pages read the answers;
//! - it has no `Origin` (programs: curl, `burrow-client`, the CLI), or the
//!   server's own: the inspector at `/ui`, its WebSockets included. A
//!   page of any other site (another port of the loopback is another
//!   site) is refused.
//!
//! A server with tokens needs neither: a browser does not send a token by
//! itself, so another site's page cannot make a request that passes.

use std::net::{IpAddr, SocketAddr};

use axum::http::uri::{Authority, Uri};
use axum::http::{HeaderMap, header};

use super::ApiError;

/// Refuses (403) a request another site's page or another name may have
/// made; `local` is where the client reached the server, if known, and
/// `tls` whether it came over HTTPS.
pub(super) fn check(
    headers: &HeaderMap,
    local: Option<SocketAddr>,
    tls: bool,
) -> Result<(), ApiError> {
    let host = match headers.get(header::HOST) {
        None => None,
        Some(value) => Some(
            value
                .to_str()
                .ok()
                .and_then(|text| text.parse::<Authority>().ok())
                .ok_or_else(|| untrusted_host("the Host header is not an address"))?,
        ),
    };
    if let Some(host) = &host
        && !trusted_host(host.host(), local)
    {
        return Err(untrusted_host(&format!(
            "the Host `{}` is not an address of this server",
            host.host()
        )));
    }
    let Some(origin) = headers.get(header::ORIGIN) else {
        return Ok(());
    };
    let origin = origin.to_str().unwrap_or("(not text)");
    let own = host.is_some_and(|host| same_site(origin, &host, tls));
    if own {
        return Ok(());
    }
    Err(ApiError::new(
        403,
        "cross-origin",
        format!(
            "a request from the web page at `{origin}` is refused: this server has no API tokens, \
             so only its own pages (the inspector at /ui) may use it from a browser"
        ),
    ))
}

fn untrusted_host(why: &str) -> ApiError {
    ApiError::new(
        403,
        "untrusted-host",
        format!(
            "{why}: a server without API tokens answers only requests to a loopback address, \
             `localhost` or the address it listens on (a name could be another site's, pointed \
             here); use one of them, or serve with tokens"
        ),
    )
}

/// Whether `host` (a `Host` header's name or address) names this server
/// without a name someone else could point here.
fn trusted_host(host: &str, local: Option<SocketAddr>) -> bool {
    if host.eq_ignore_ascii_case("localhost") {
        return true;
    }
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    match bare.parse::<IpAddr>() {
        Ok(ip) => ip.is_loopback() || local.is_some_and(|local| same_ip(local.ip(), ip)),
        Err(_) => false,
    }
}

fn same_ip(a: IpAddr, b: IpAddr) -> bool {
    a.to_canonical() == b.to_canonical()
}

/// Whether `origin` (an `Origin` header) is the site of a request sent
/// to `host`: the same name or address and the same port, either scheme.
fn same_site(origin: &str, host: &Authority, tls: bool) -> bool {
    let Ok(origin) = origin.parse::<Uri>() else {
        return false;
    };
    let (Some(scheme), Some(authority)) = (origin.scheme_str(), origin.authority()) else {
        return false;
    };
    let default = |scheme: &str| match scheme {
        "http" => Some(80),
        "https" => Some(443),
        _ => None,
    };
    let Some(origin_port) = authority.port_u16().or_else(|| default(scheme)) else {
        return false;
    };
    let host_port = host.port_u16().unwrap_or(if tls { 443 } else { 80 });
    authority.host().eq_ignore_ascii_case(host.host()) && origin_port == host_port
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(host: Option<&str>, origin: Option<&str>) -> HeaderMap {
        let mut headers = HeaderMap::new();
        if let Some(host) = host {
            headers.insert(header::HOST, host.parse().unwrap());
        }
        if let Some(origin) = origin {
            headers.insert(header::ORIGIN, origin.parse().unwrap());
        }
        headers
    }

    fn code(host: Option<&str>, origin: Option<&str>, local: Option<&str>) -> Option<String> {
        let local = local.map(|l| l.parse().unwrap());
        check(&headers(host, origin), local, false)
            .err()
            .map(|e| e.code)
    }

    #[test]
    fn programs_and_the_servers_own_pages_are_let_through() {
        let local = Some("127.0.0.1:7878");
        for (host, origin) in [
            (None, None),
            (Some("127.0.0.1:7878"), None),
            (Some("localhost:7878"), None),
            (Some("LocalHost:7878"), None),
            (Some("[::1]:7878"), None),
            (Some("127.0.0.2:7878"), None),
            (Some("127.0.0.1:7878"), Some("http://127.0.0.1:7878")),
            (Some("localhost:7878"), Some("http://localhost:7878")),
            (Some("[::1]:7878"), Some("http://[::1]:7878")),
            // Behind a proxy that ends TLS.
            (Some("localhost:7878"), Some("https://localhost:7878")),
            (Some("localhost"), Some("http://localhost")),
        ] {
            assert_eq!(code(host, origin, local), None, "{host:?} {origin:?}");
        }
        // The address the client reached, on a wildcard listener.
        assert_eq!(
            code(Some("10.1.2.3:7878"), None, Some("10.1.2.3:7878")),
            None
        );
        assert_eq!(
            code(
                Some("10.1.2.3:7878"),
                Some("http://10.1.2.3:7878"),
                Some("10.1.2.3:7878")
            ),
            None
        );
    }

    #[test]
    fn other_sites_and_other_names_are_refused() {
        let local = Some("127.0.0.1:7878");
        let refused = |host, origin| code(Some(host), origin, local);
        let cross = Some("cross-origin".to_owned());
        let untrusted = Some("untrusted-host".to_owned());
        assert_eq!(
            refused("127.0.0.1:7878", Some("http://evil.example")),
            cross
        );
        assert_eq!(refused("127.0.0.1:7878", Some("null")), cross);
        assert_eq!(
            refused("127.0.0.1:7878", Some("http://127.0.0.1:3000")),
            cross
        );
        assert_eq!(
            refused("127.0.0.1:7878", Some("http://localhost:7878")),
            cross
        );
        assert_eq!(refused("127.0.0.1:7878", Some("file://")), cross);
        assert_eq!(refused("evil.example:7878", None), untrusted);
        assert_eq!(
            refused("evil.example:7878", Some("http://evil.example:7878")),
            untrusted
        );
        assert_eq!(refused("localhost.evil.example", None), untrusted);
        assert_eq!(refused("10.9.9.9:7878", None), untrusted);
        assert_eq!(refused("not an address", None), untrusted);
        // An Origin with no Host to compare with.
        assert_eq!(code(None, Some("http://127.0.0.1:7878"), local), cross);
        // Without a known local address, only the loopback.
        assert_eq!(code(Some("10.1.2.3:7878"), None, None), untrusted);
    }
}

//! What an actor's outgoing HTTP requests may reach: the authorities its
//! manifest lists (`http = ["https://api.example.com",
//! "http://127.0.0.1:9000", "https://*.example.org"]`), nothing else, and
//! no address in a range that belongs to this machine or its network
//! (loopback, link-local with the cloud's metadata service, private,
//! unspecified, multicast) unless that exact host is listed.
//!
//! The address rule is applied to the addresses a name resolves to, right
//! before connecting to one of them, so a name cannot be made to resolve
//! to a refused address between the check and the connection.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// A scheme an actor may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    /// `http`.
    Http,
    /// `https`.
    Https,
}

impl Scheme {
    /// The scheme of `name` (`http` or `https`, in any case).
    pub fn parse(name: &str) -> Option<Scheme> {
        if name.eq_ignore_ascii_case("http") {
            Some(Scheme::Http)
        } else if name.eq_ignore_ascii_case("https") {
            Some(Scheme::Https)
        } else {
            None
        }
    }

    /// The port a URL of this scheme means when it names none.
    pub fn default_port(self) -> u16 {
        match self {
            Scheme::Http => 80,
            Scheme::Https => 443,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Scheme::Http => "http",
            Scheme::Https => "https",
        }
    }
}

/// One authority of an actor's list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authority {
    scheme: Scheme,
    /// The host, lowercase (an IPv6 address without brackets).
    host: String,
    /// `*.` before the host: any name with one label or more before it,
    /// never the host itself, never an address of the refused ranges.
    wildcard: bool,
    port: u16,
}

impl std::fmt::Display for Authority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let wildcard = if self.wildcard { "*." } else { "" };
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        write!(f, "{}://{wildcard}{host}:{}", self.scheme.name(), self.port)
    }
}

impl Authority {
    /// Reads one entry of a manifest's `http` list: a scheme, a host (or
    /// `*.` and a domain) and an optional port, and nothing else.
    pub fn parse(entry: &str) -> Result<Authority, String> {
        let bad = |why: &str| format!("`{entry}` {why}");
        let (scheme, rest) = entry
            .split_once("://")
            .ok_or_else(|| bad("is not a URL: write it as `https://host` or `http://host:port`"))?;
        let scheme =
            Scheme::parse(scheme).ok_or_else(|| bad("has a scheme other than http or https"))?;
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        if rest.is_empty() {
            return Err(bad("names no host"));
        }
        if rest.contains(['/', '?', '#', '@']) {
            return Err(bad(
                "has a path, a query, a fragment or user information: list the scheme, the host \
                 and the port only",
            ));
        }
        let (wildcard, rest) = match rest.strip_prefix("*.") {
            Some(rest) => (true, rest),
            None => (false, rest),
        };
        // A placeholder host lets the URL parser read the port and the
        // brackets of an IPv6 address for us.
        let parsed = url::Url::parse(&format!("{}://{rest}", scheme.name()))
            .map_err(|e| bad(&format!("is not a valid authority: {e}")))?;
        let host = match parsed.host() {
            Some(url::Host::Domain(name)) => name.to_ascii_lowercase(),
            Some(url::Host::Ipv4(ip)) if !wildcard => ip.to_string(),
            Some(url::Host::Ipv6(ip)) if !wildcard => ip.to_string(),
            Some(_) => {
                return Err(bad(
                    "puts `*.` before an address: only names take a wildcard",
                ));
            }
            None => return Err(bad("names no host")),
        };
        if host.contains('*') {
            return Err(bad("has a `*` other than one `*.` in front"));
        }
        if wildcard && !host.contains('.') {
            return Err(bad(
                "puts `*.` before a top-level name: a wildcard needs a domain of two labels or more",
            ));
        }
        let port = parsed.port().unwrap_or(scheme.default_port());
        Ok(Authority {
            scheme,
            host,
            wildcard,
            port,
        })
    }

    /// Whether a request to `host` (lowercase, an IPv6 address without
    /// brackets) on `port` over `scheme` is this authority's.
    fn matches(&self, scheme: Scheme, host: &str, port: u16) -> bool {
        if self.scheme != scheme || self.port != port {
            return false;
        }
        if self.wildcard {
            host.len() > self.host.len() + 1
                && host.ends_with(&self.host)
                && host.as_bytes()[host.len() - self.host.len() - 1] == b'.'
        } else {
            host == self.host
        }
    }
}

/// What one actor's requests may reach: the authorities of its manifest.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Allowed {
    authorities: Vec<Authority>,
}

/// How a request's authority is listed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listed {
    /// Its very host is listed: it may resolve to any address.
    Exactly,
    /// A wildcard covers it: it may not resolve to a refused address.
    ByWildcard,
}

impl Allowed {
    /// Reads a manifest's `http` list.
    pub fn parse(entries: &[String]) -> Result<Allowed, String> {
        let authorities = entries
            .iter()
            .map(|entry| Authority::parse(entry))
            .collect::<Result<_, _>>()?;
        Ok(Allowed { authorities })
    }

    /// Whether nothing is listed (the default: no request may leave).
    pub fn is_empty(&self) -> bool {
        self.authorities.is_empty()
    }

    /// The listed authorities, as the host reads them.
    pub fn authorities(&self) -> impl Iterator<Item = &Authority> {
        self.authorities.iter()
    }

    /// How a request to `host` on `port` over `scheme` is listed, if it
    /// is. `host` may be in any case; an IPv6 address in brackets or not.
    pub fn listing(&self, scheme: Scheme, host: &str, port: u16) -> Option<Listed> {
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let host = host.to_ascii_lowercase();
        let host = match host.parse::<IpAddr>() {
            Ok(ip) => ip.to_string(),
            Err(_) => host.trim_end_matches('.').to_owned(),
        };
        let matching = self
            .authorities
            .iter()
            .filter(|a| a.matches(scheme, &host, port));
        let mut listed = None;
        for authority in matching {
            if !authority.wildcard {
                return Some(Listed::Exactly);
            }
            listed = Some(Listed::ByWildcard);
        }
        listed
    }
}

/// The range `ip` belongs to if it is one that outgoing requests may reach
/// only when their host is listed exactly: this machine, its network, or
/// addresses that name no single host.
pub fn refused_range(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(ip) => refused_v4(ip),
        IpAddr::V6(ip) => match ip.to_ipv4_mapped() {
            Some(v4) => refused_v4(v4),
            None => refused_v6(ip),
        },
    }
}

fn refused_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, ..] = ip.octets();
    if ip.is_unspecified() || a == 0 {
        Some("unspecified (0.0.0.0/8)")
    } else if ip.is_loopback() {
        Some("loopback (127.0.0.0/8)")
    } else if ip.is_link_local() {
        Some("link-local (169.254.0.0/16, where cloud metadata services answer)")
    } else if ip.is_private() {
        Some("private (10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16)")
    } else if a == 100 && (64..128).contains(&b) {
        Some("shared address space (100.64.0.0/10)")
    } else if a == 192 && b == 0 && ip.octets()[2] == 0 {
        Some("IETF protocol assignments (192.0.0.0/24)")
    } else if a == 198 && (b == 18 || b == 19) {
        Some("benchmarking (198.18.0.0/15)")
    } else if ip.is_multicast() {
        Some("multicast (224.0.0.0/4)")
    } else if a >= 240 {
        Some("reserved or broadcast (240.0.0.0/4)")
    } else {
        None
    }
}

fn refused_v6(ip: Ipv6Addr) -> Option<&'static str> {
    let first = ip.segments()[0];
    if ip.is_unspecified() {
        Some("unspecified (::)")
    } else if ip.is_loopback() {
        Some("loopback (::1)")
    } else if first & 0xffc0 == 0xfe80 {
        Some("link-local (fe80::/10)")
    } else if first & 0xfe00 == 0xfc00 {
        Some("unique local (fc00::/7)")
    } else if first & 0xffc0 == 0xfec0 {
        Some("site-local (fec0::/10)")
    } else if ip.is_multicast() {
        Some("multicast (ff00::/8)")
    } else if ip.segments()[..6] == [0, 0, 0, 0, 0, 0] {
        Some("IPv4-compatible (::/96)")
    } else if first == 0x64 && ip.segments()[1] == 0xff9b {
        Some("IPv4/IPv6 translation (64:ff9b::/96)")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allowed(entries: &[&str]) -> Allowed {
        Allowed::parse(&entries.iter().map(|e| e.to_string()).collect::<Vec<_>>()).unwrap()
    }

    #[test]
    fn entries_are_a_scheme_a_host_and_a_port() {
        let list = allowed(&[
            "https://API.Example.com",
            "http://127.0.0.1:9000/",
            "https://*.example.org",
            "http://[::1]:8080",
        ]);
        let shown: Vec<String> = list.authorities().map(ToString::to_string).collect();
        assert_eq!(
            shown,
            [
                "https://api.example.com:443",
                "http://127.0.0.1:9000",
                "https://*.example.org:443",
                "http://[::1]:8080"
            ]
        );
        for (entry, why) in [
            ("api.example.com", "is not a URL"),
            ("ftp://example.com", "scheme other than http"),
            ("https://example.com/path", "has a path"),
            ("https://user@example.com", "user information"),
            ("https://example.com?q", "has a path, a query"),
            ("https://*.com", "top-level"),
            ("https://*.127.0.0.1", "only names take a wildcard"),
            ("https://a.*.example.com", "has a `*`"),
            ("https://", "names no host"),
            ("https://example.com:99999", "not a valid authority"),
        ] {
            let e = Authority::parse(entry).unwrap_err();
            assert!(e.contains(why), "{entry}: {e}");
        }
    }

    #[test]
    fn a_request_is_listed_by_scheme_host_and_port() {
        let list = allowed(&[
            "https://api.example.com",
            "http://127.0.0.1:9000",
            "https://*.example.org",
            "http://[::1]:8080",
        ]);
        use Scheme::*;
        assert_eq!(
            list.listing(Https, "api.example.com", 443),
            Some(Listed::Exactly)
        );
        assert_eq!(
            list.listing(Https, "API.EXAMPLE.COM.", 443),
            Some(Listed::Exactly)
        );
        assert_eq!(list.listing(Http, "api.example.com", 443), None);
        assert_eq!(list.listing(Https, "api.example.com", 8443), None);
        assert_eq!(list.listing(Https, "evil.api.example.com", 443), None);
        assert_eq!(list.listing(Http, "127.0.0.1", 9000), Some(Listed::Exactly));
        assert_eq!(list.listing(Http, "127.0.0.1", 9001), None);
        assert_eq!(
            list.listing(Https, "a.example.org", 443),
            Some(Listed::ByWildcard)
        );
        assert_eq!(
            list.listing(Https, "a.b.example.org", 443),
            Some(Listed::ByWildcard)
        );
        assert_eq!(list.listing(Https, "example.org", 443), None);
        assert_eq!(list.listing(Https, "badexample.org", 443), None);
        assert_eq!(list.listing(Http, "[::1]", 8080), Some(Listed::Exactly));
        assert_eq!(list.listing(Http, "0:0::1", 8080), Some(Listed::Exactly));
        assert!(Allowed::default().is_empty());
        assert_eq!(
            Allowed::default().listing(Https, "api.example.com", 443),
            None
        );
    }

    #[test]
    fn addresses_of_this_machine_and_its_network_are_refused() {
        for ip in [
            "0.0.0.0",
            "0.1.2.3",
            "127.0.0.1",
            "127.1.2.3",
            "169.254.169.254",
            "169.254.0.1",
            "10.0.0.1",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "100.64.0.1",
            "192.0.0.8",
            "198.18.0.1",
            "224.0.0.1",
            "255.255.255.255",
            "::",
            "::1",
            "fe80::1",
            "fc00::1",
            "fd12:3456::1",
            "fec0::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "::ffff:10.1.2.3",
            "::127.0.0.1",
            "64:ff9b::a9fe:a9fe",
        ] {
            let ip: IpAddr = ip.parse().unwrap();
            assert!(refused_range(ip).is_some(), "{ip} is not refused");
        }
        for ip in [
            "8.8.8.8",
            "1.1.1.1",
            "172.32.0.1",
            "100.128.0.1",
            "169.253.0.1",
            "2606:4700:4700::1111",
            "2001:4860:4860::8888",
            "::ffff:8.8.8.8",
        ] {
            let ip: IpAddr = ip.parse().unwrap();
            assert_eq!(refused_range(ip), None, "{ip} is refused");
        }
        assert!(
            refused_range("169.254.169.254".parse().unwrap())
                .unwrap()
                .contains("metadata")
        );
    }
}

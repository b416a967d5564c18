//! The `domain` matcher: a URL's host (WHATWG URL parsing via the `url` crate, IDNA → punycode,
//! lower-case, trailing dots ignored) against an exact host, a `*.` suffix or an IP address.

use std::net::{Ipv4Addr, Ipv6Addr};

use super::{Host, MAX_KEY_BYTES, Value};

/// Schemes whose host the URL standard parses as a domain (others keep an opaque host).
const SPECIAL_SCHEMES: [&str; 6] = ["http", "https", "ws", "wss", "ftp", "file"];

/// A compiled `domain` spec.
#[derive(Debug, Clone)]
pub(super) enum DomainPattern {
    /// `domain:host`: exactly this host.
    Exact(String),
    /// `domain:*.suffix`: any host strictly below `suffix`.
    Suffix(String),
    /// An IPv4 literal (also an IPv4-mapped IPv6 one).
    V4(Ipv4Addr),
    /// An IPv6 literal.
    V6(Ipv6Addr),
}

impl DomainPattern {
    /// Compiles a `domain` spec; returns the pattern and its index key.
    pub(super) fn compile(spec: &str) -> Result<(DomainPattern, String), String> {
        let host = spec.strip_prefix("domain:").ok_or_else(|| {
            "a domain spec is written `domain:<host>` or `domain:*.<suffix>`".to_owned()
        })?;
        let (suffix, host) = match host.strip_prefix("*.") {
            Some(rest) => (true, rest),
            None => (false, host),
        };
        let why = if host.is_empty() {
            Some("empty host")
        } else if host.contains('*') {
            Some("only a leading `*.` wildcard is allowed")
        } else if host.contains(['/', '\\']) {
            Some("a path is not allowed")
        } else if host.contains('@') {
            Some("userinfo is not allowed")
        } else if host.contains(['?', '#']) {
            Some("a query or fragment is not allowed")
        } else if host.contains(':') && !(host.starts_with('[') && host.ends_with(']')) {
            Some("a port is not allowed (write an IPv6 address in brackets)")
        } else {
            None
        };
        if let Some(why) = why {
            return Err(why.to_owned());
        }
        let parsed = url::Host::parse(host).map_err(|e| format!("not a valid host: {e}"))?;
        let pattern = match (normalize(parsed), suffix) {
            (None, _) => return Err("empty host".to_owned()),
            (Some(Host::Domain(d)), false) => DomainPattern::Exact(d),
            (Some(Host::Domain(d)), true) => DomainPattern::Suffix(d),
            (Some(_), true) => {
                return Err("a `*.` suffix must be a domain name, not an IP address".to_owned());
            }
            (Some(Host::Ipv4(a)), false) => DomainPattern::V4(a),
            (Some(Host::Ipv6(a)), false) => match a.to_ipv4_mapped() {
                Some(v4) => DomainPattern::V4(v4),
                None => DomainPattern::V6(a),
            },
        };
        let key = match &pattern {
            DomainPattern::Exact(d) | DomainPattern::Suffix(d) => cap_key(d),
            DomainPattern::V4(a) => a.to_string(),
            DomainPattern::V6(a) => a.to_string(),
        };
        Ok((pattern, key))
    }

    pub(super) fn matches(&self, host: &Host) -> bool {
        match (self, host) {
            (DomainPattern::Exact(want), Host::Domain(d)) => d == want,
            (DomainPattern::Suffix(want), Host::Domain(d)) => {
                d.len() > want.len()
                    && d.ends_with(want.as_str())
                    && d.as_bytes()[d.len() - want.len() - 1] == b'.'
            }
            (DomainPattern::V4(want), Host::Ipv4(a)) => a == want,
            (DomainPattern::V4(want), Host::Ipv6(a)) => a.to_ipv4_mapped() == Some(*want),
            (DomainPattern::V6(want), Host::Ipv6(a)) => a == want,
            _ => false,
        }
    }
}

/// Converts a parsed host, dropping trailing dots; `None` if nothing is left.
fn normalize(host: url::Host<String>) -> Option<Host> {
    match host {
        url::Host::Domain(d) => {
            let d = d.trim_end_matches('.');
            (!d.is_empty()).then(|| Host::Domain(d.to_owned()))
        }
        url::Host::Ipv4(a) => Some(Host::Ipv4(a)),
        url::Host::Ipv6(a) => Some(Host::Ipv6(a)),
    }
}

/// Prepares a URL field: see [`Value::prepare`].
pub(super) fn prepare(text: &str) -> Value {
    if let Some(host) = plain_host(text) {
        return Value::Host(Host::Domain(host.to_owned()));
    }
    let Ok(url) = url::Url::parse(text) else {
        return Value::Missing;
    };
    let host = match url.host() {
        None => return Value::Missing,
        Some(url::Host::Ipv4(a)) => url::Host::Ipv4(a),
        Some(url::Host::Ipv6(a)) => url::Host::Ipv6(a),
        Some(url::Host::Domain(d)) if SPECIAL_SCHEMES.contains(&url.scheme()) => {
            url::Host::Domain(d.to_owned())
        }
        // An opaque host (`ssh://Git@Example.COM/`): parse it as a special URL's host would be.
        Some(url::Host::Domain(d)) => match url::Host::parse(d) {
            Ok(host) => host,
            Err(_) => return Value::Missing,
        },
    };
    let web = matches!(url.scheme(), "http" | "https");
    match normalize(host) {
        None => Value::Missing,
        Some(host) if web => Value::Host(host),
        Some(host) => Value::OtherScheme(host),
    }
}

/// The host of a plain `http(s)://host[/?#…]` URL whose host the URL standard would leave as it
/// is: lower-case ASCII letters, digits, `-` and `.`, no empty label, no `xn--` label (IDNA
/// decodes those), and a last label starting with a letter (so it is never read as an IPv4
/// number). Anything else (ports, userinfo, escapes, upper case, tabs) goes through the full
/// parser.
fn plain_host(text: &str) -> Option<&str> {
    let rest = text
        .strip_prefix("https://")
        .or_else(|| text.strip_prefix("http://"))?;
    let end = rest
        .bytes()
        .position(|b| matches!(b, b'/' | b'?' | b'#'))
        .unwrap_or(rest.len());
    let host = &rest[..end];
    if host.is_empty()
        || !host
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
    {
        return None;
    }
    let mut last = "";
    for label in host.split('.') {
        if label.is_empty() || label.starts_with("xn--") {
            return None;
        }
        last = label;
    }
    last.as_bytes()
        .first()
        .is_some_and(u8::is_ascii_lowercase)
        .then_some(host)
}

/// Calls `f` with every non-empty probe of a host: the domain and each parent suffix, or the IP
/// address's text (and an IPv4-mapped IPv6 address's IPv4 text).
pub(super) fn probes(host: &Host, f: &mut dyn FnMut(&str)) {
    match host {
        // Only suffixes of at most `MAX_KEY_BYTES` (no key is longer: `cap_key`), so a host of
        // many labels costs its length to probe, not its length squared.
        Host::Domain(d) => {
            if d.len() <= MAX_KEY_BYTES {
                f(d);
            }
            let tail = d.len().saturating_sub(MAX_KEY_BYTES + 1);
            for (i, _) in d[tail..].match_indices('.') {
                let i = tail + i;
                if i + 1 < d.len() {
                    f(&d[i + 1..]);
                }
            }
        }
        Host::Ipv4(a) => f(&a.to_string()),
        Host::Ipv6(a) => {
            f(&a.to_string());
            if let Some(v4) = a.to_ipv4_mapped() {
                f(&v4.to_string());
            }
        }
    }
}

/// A domain key cut to at most [`MAX_KEY_BYTES`]: the longest of its parent suffixes that
/// fits (`""` for none). A host the key matches ends in that suffix after a `.`, so it still
/// probes it.
fn cap_key(domain: &str) -> String {
    if domain.len() <= MAX_KEY_BYTES {
        return domain.to_owned();
    }
    let from = domain.len() - MAX_KEY_BYTES;
    match domain[from - 1..].find('.') {
        Some(i) => domain[from + i..].to_owned(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The plain-host shortcut gives what the full WHATWG parse gives, and declines the rest.
    #[test]
    fn plain_host_agrees_with_the_url_parser() {
        let taken = [
            "https://docs.rs/x",
            "http://a.b-c.example?q",
            "https://x1.y2.z#f",
            "https://host",
            "https://a.x0x1f",
            "https://localhost/",
        ];
        for text in taken {
            let host = plain_host(text).unwrap_or_else(|| panic!("{text} declined"));
            let url = url::Url::parse(text).unwrap();
            assert_eq!(Some(host), url.host_str(), "{text}");
        }
        let declined = [
            "https://Docs.rs/",
            "https://docs.rs:443/",
            "https://u@docs.rs/",
            "https://127.0.0.1/",
            "https://1.2.3/",
            "https://a.0x1f.0x10/",
            "https://a.0x1f",
            "https://a..b/",
            "https://a.b./",
            "https://xn--nxasmq6b.com/",
            "https://d%6fcs.rs/",
            "https://do\tcs.rs/",
            "https:\\\\docs.rs/",
            " https://docs.rs/",
            "HTTPS://docs.rs/",
            "https:///x",
            "ftp://docs.rs/",
            "https://docs.rs\\evil.com/",
        ];
        for text in declined {
            assert_eq!(plain_host(text), None, "{text}");
        }
    }
}

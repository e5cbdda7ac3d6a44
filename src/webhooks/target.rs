//! Where a webhook may go. An endpoint is an `http` or `https` URL whose
//! host resolves only to public addresses: loopback, private, link-local,
//! shared (carrier-grade NAT), multicast and unspecified ranges are refused,
//! so that a caller cannot point Riverfeed at the network it runs in
//! (SSRF). `--webhooks-allow-private` lifts that for tests and closed
//! networks. [`resolve`] checks a URL when it is registered; [`check`] is
//! what the sender's resolver applies to the addresses it connects to, so
//! a name that resolves differently later (DNS rebinding) cannot slip
//! past.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use reqwest::Url;

/// Why an address may not receive webhooks, if it may not.
pub fn forbidden(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => forbidden_v4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => forbidden_v4(v4),
            None => forbidden_v6(v6),
        },
    }
}

fn forbidden_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, ..] = ip.octets();
    if ip.is_loopback() {
        Some("loopback")
    } else if ip.is_private() {
        Some("private")
    } else if ip.is_link_local() {
        Some("link-local")
    } else if a == 100 && (64..128).contains(&b) {
        Some("shared (carrier-grade NAT)")
    } else if ip.is_unspecified() || a == 0 {
        Some("unspecified")
    } else if ip.is_multicast() || ip.is_broadcast() || a >= 240 {
        Some("multicast or reserved")
    } else {
        None
    }
}

fn forbidden_v6(ip: Ipv6Addr) -> Option<&'static str> {
    let first = ip.segments()[0];
    if ip.is_loopback() {
        Some("loopback")
    } else if ip.is_unspecified() {
        Some("unspecified")
    } else if first & 0xfe00 == 0xfc00 {
        Some("private (unique local)")
    } else if first & 0xffc0 == 0xfe80 {
        Some("link-local")
    } else if ip.is_multicast() {
        Some("multicast")
    } else {
        None
    }
}

/// The addresses `url` reaches, each allowed unless `allow_private`; an
/// error names the first address refused and why.
pub async fn resolve(url: &Url, allow_private: bool) -> Result<Vec<SocketAddr>, String> {
    let host = url.host_str().unwrap_or_default();
    let port = url.port_or_known_default().unwrap_or(443);
    // Bracketed IPv6 literals (`[::1]`) resolve as the bare address.
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((bare, port))
        .await
        .map_err(|e| format!("cannot resolve {host}: {e}"))?
        .collect();
    if addrs.is_empty() {
        return Err(format!("{host} resolves to no address"));
    }
    check(host, &addrs, allow_private)?;
    Ok(addrs)
}

/// Refuses `addrs`, which `host` resolved to, if any may not receive
/// webhooks (unless `allow_private`), naming the first and why.
pub fn check(host: &str, addrs: &[SocketAddr], allow_private: bool) -> Result<(), String> {
    if allow_private {
        return Ok(());
    }
    match addrs
        .iter()
        .find_map(|a| forbidden(a.ip()).map(|why| (a, why)))
    {
        Some((addr, why)) => Err(format!(
            "{host} resolves to {} ({why}); webhooks go to public addresses only \
             (the server's --webhooks-allow-private lifts this)",
            addr.ip()
        )),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Webhook;

    #[test]
    fn private_and_special_ranges_are_refused() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "224.0.0.1",
            "255.255.255.255",
            "::1",
            "::",
            "fd00::1",
            "fe80::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "ff02::1",
        ] {
            assert!(forbidden(ip.parse().unwrap()).is_some(), "{ip}");
        }
        for ip in ["93.184.216.34", "8.8.8.8", "100.128.0.1", "2606:4700::1111"] {
            assert_eq!(forbidden(ip.parse().unwrap()), None, "{ip}");
        }
    }

    #[test]
    fn urls_are_http_with_a_host() {
        assert!(Webhook::check_url("https://hooks.example.com/riverfeed").is_ok());
        for bad in [
            "ftp://example.com/",
            "not a url",
            "file:///etc/passwd",
            "http://",
        ] {
            assert!(Webhook::check_url(bad).is_err(), "{bad}");
        }
    }

    #[tokio::test]
    async fn loopback_resolves_only_when_allowed() {
        for url in [
            "http://127.0.0.1:9/",
            "http://localhost:9/",
            "http://[::1]:9/",
        ] {
            let url = Webhook::check_url(url).unwrap();
            let refused = resolve(&url, false).await.unwrap_err();
            assert!(refused.contains("loopback"), "{refused}");
            assert!(!resolve(&url, true).await.unwrap().is_empty());
        }
    }
}

//! The tables walked row by row: the first, middle and last address of
//! each row refused, and the public addresses just outside each row
//! allowed.

use super::*;
use crate::model::Webhook;

/// The first, middle and last numbers of a prefix `width` bits wide.
fn spread(prefix: u128, len: u8, width: u8) -> [u128; 3] {
    let size_bits = u32::from(width - len);
    let last = if size_bits == 128 {
        u128::MAX
    } else {
        prefix | ((1u128 << size_bits) - 1)
    };
    let middle = prefix + ((last - prefix) / 2 + 1).min(last - prefix);
    [prefix, middle, last]
}

/// The numbers just below and just above a prefix, where they exist.
fn neighbours(prefix: u128, len: u8, width: u8) -> Vec<u128> {
    let [first, _, last] = spread(prefix, len, width);
    let top = if width == 128 {
        u128::MAX
    } else {
        (1u128 << width) - 1
    };
    let mut out = Vec::new();
    if first > 0 {
        out.push(first - 1);
    }
    if last < top {
        out.push(last + 1);
    }
    out
}

fn ip4(n: u128) -> Ipv4Addr {
    Ipv4Addr::from(n as u32)
}

fn nat64(v4: Ipv4Addr) -> IpAddr {
    IpAddr::V6(Ipv6Addr::from(
        (0x64_ff9b_u128 << 96) | u128::from(u32::from(v4)),
    ))
}

#[test]
fn every_ipv4_row_is_refused_first_middle_and_last_and_through_nat64() {
    for row in V4 {
        let prefix = u128::from(u32::from(row.prefix));
        assert_eq!(
            prefix & !spread(0, row.len, 32)[2],
            prefix,
            "{row:?} is not a prefix"
        );
        for n in spread(prefix, row.len, 32) {
            let ip = ip4(n);
            let refused = forbidden(IpAddr::V4(ip));
            assert!(refused.is_some(), "{ip} ({})", row.name);
            let through = forbidden(nat64(ip)).unwrap_or_else(|| panic!("NAT64 of {ip}"));
            assert_eq!(through.embedded.map(|e| e.0), Some(ip));
            assert!(
                forbidden(IpAddr::V6(ip.to_ipv6_mapped())).is_some(),
                "mapped {ip}"
            );
            assert!(
                forbidden(IpAddr::V6(ip.to_ipv6_compatible())).is_some(),
                "compat {ip}"
            );
        }
    }
}

#[test]
fn every_ipv6_row_is_refused_first_middle_and_last() {
    for row in V6 {
        let prefix = u128::from(row.prefix);
        assert_eq!(
            prefix & !spread(0, row.len, 128)[2],
            prefix,
            "{row:?} is not a prefix"
        );
        if row.rule == Rule::Embeds {
            // Decided by the IPv4 address it embeds: walked with the IPv4
            // table above, and public ones pass below.
            continue;
        }
        for n in spread(prefix, row.len, 128) {
            let ip = Ipv6Addr::from(n);
            assert!(forbidden(IpAddr::V6(ip)).is_some(), "{ip} ({})", row.name);
        }
    }
}

#[test]
fn public_addresses_next_to_every_row_stay_allowed() {
    let mut checked = 0;
    for row in V4 {
        for n in neighbours(u128::from(u32::from(row.prefix)), row.len, 32) {
            let ip = ip4(n);
            if row_v4(ip).is_none() {
                assert_eq!(forbidden(IpAddr::V4(ip)), None, "{ip} next to {}", row.name);
                assert_eq!(forbidden(nat64(ip)), None, "NAT64 of {ip}");
                checked += 1;
            }
        }
    }
    for row in V6 {
        for n in neighbours(u128::from(row.prefix), row.len, 128) {
            let ip = Ipv6Addr::from(n);
            if row_v6(ip).is_none() {
                assert_eq!(forbidden(IpAddr::V6(ip)), None, "{ip} next to {}", row.name);
                checked += 1;
            }
        }
    }
    assert!(checked >= 40, "only {checked} neighbours are public");
    for ip in [
        "1.1.1.1",
        "8.8.8.8",
        "93.184.216.34",
        "100.128.0.1",
        "223.255.255.255",
        "2606:4700::1111",
        "2000::",
        "3fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
        "64:ff9b::808:808",
    ] {
        assert_eq!(forbidden(ip.parse().unwrap()), None, "{ip}");
    }
}

/// The forms and ranges once accepted, each refused with the row that
/// holds it.
#[test]
fn forms_once_accepted_are_refused() {
    for (ip, row) in [
        ("::127.0.0.1", "IPv4-compatible (deprecated)"),
        ("::7f00:1", "IPv4-compatible (deprecated)"),
        ("64:ff9b::7f00:1", "NAT64 (well-known prefix)"),
        ("64:ff9b:1::a00:1", "NAT64 (local use)"),
        ("2002:7f00:1::1", "6to4"),
        ("2001:0:4136:e378:8000:63bf:3fff:fdd2", "Teredo"),
        ("::ffff:0:7f00:1", "IPv4-translated"),
        ("::ffff:127.0.0.1", "IPv4-mapped"),
        ("::ffff:8.8.8.8", "IPv4-mapped"),
        ("fec0::1", "site-local (deprecated)"),
        ("100::1", "discard-only"),
        ("192.0.2.7", "documentation (TEST-NET-1)"),
        ("198.18.0.1", "benchmarking"),
        ("198.19.255.254", "benchmarking"),
        ("192.0.0.1", "IPv4 service continuity prefix"),
        ("192.0.0.200", "IETF protocol assignments"),
        ("2001:2::1", "benchmarking"),
        ("2001:20::1", "ORCHIDv2"),
    ] {
        let refused = forbidden(ip.parse().unwrap()).unwrap_or_else(|| panic!("{ip} allowed"));
        assert_eq!(refused.row, row, "{ip}");
    }
    let said = forbidden("64:ff9b::a9fe:a9fe".parse().unwrap()).unwrap();
    assert_eq!(
        said.to_string(),
        "NAT64 (well-known prefix) of 169.254.169.254, which is link-local"
    );
}

#[tokio::test]
async fn refused_literals_are_refused_as_urls_too() {
    for url in [
        "http://[::127.0.0.1]/",
        "http://[::7f00:1]/",
        "http://[64:ff9b::7f00:1]/",
        "http://[2002:7f00:1::1]/",
        "http://[::ffff:0:7f00:1]/",
        "http://[fec0::1]/",
        "http://[100::1]/",
        "http://192.0.2.1/",
        "http://198.18.0.1/",
        "http://192.0.0.170/",
        "http://0x7f.1/",
    ] {
        let parsed = Webhook::check_url(url).unwrap();
        assert!(literal_ip(&parsed).is_some(), "{url} is a literal");
        let refused = resolve(&parsed, false).await.unwrap_err();
        assert!(
            refused.contains("public addresses only"),
            "{url}: {refused}"
        );
        assert!(
            resolve(&parsed, true).await.is_ok(),
            "{url} with private allowed"
        );
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

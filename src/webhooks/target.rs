//! Where a webhook may go. An endpoint is an `http` or `https` URL whose
//! host resolves only to public addresses, so that a caller cannot point
//! Riverfeed at the network it runs in (SSRF). What is not public is one
//! table per family, [`V4`] and [`V6`]: every row of the IANA IPv4 and
//! IPv6 Special-Purpose Address Registries, multicast, and the IPv6 space
//! outside global unicast, each row a prefix under its registry name.
//! `--webhooks-allow-private` lifts the check for tests and closed
//! networks.
//!
//! [`check`] is the one check, applied to the addresses a URL resolves to
//! when it is registered ([`resolve`]), to the addresses the sender's own
//! resolver gives for each connection (so a name that resolves differently
//! later, DNS rebinding, cannot slip past), and to a URL whose host is an
//! address.
//!
//! **IPv6 forms that embed an IPv4 address** are refused outright, all but
//! one: IPv4-mapped, IPv4-compatible and IPv4-translated addresses never
//! name a public receiver (its IPv4 address does), and 6to4, Teredo and
//! local-use NAT64 reach IPv4 hosts through relays and translators whose
//! reach Riverfeed cannot see (Teredo even hides its client address).
//! The exception is the well-known NAT64 prefix `64:ff9b::/96`: on an
//! IPv6-only network with DNS64, every IPv4 receiver resolves into it, so
//! refusing it would refuse them all. Its embedded IPv4 address is checked
//! as an IPv4 address instead: `64:ff9b::7f00:1` is loopback.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use reqwest::Url;

/// What a row does to the addresses under its prefix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    /// None may receive webhooks.
    Refuse,
    /// The last 32 bits are an IPv4 address, checked as one.
    Embeds,
}

/// One row of a table: a prefix, its length, its registry name, its rule.
#[derive(Clone, Copy, Debug)]
pub struct Row<A> {
    pub prefix: A,
    pub len: u8,
    pub name: &'static str,
    pub rule: Rule,
}

const fn v4(a: u8, b: u8, c: u8, d: u8, len: u8, name: &'static str) -> Row<Ipv4Addr> {
    Row {
        prefix: Ipv4Addr::new(a, b, c, d),
        len,
        name,
        rule: Rule::Refuse,
    }
}

const fn v6(segments: [u16; 8], len: u8, name: &'static str, rule: Rule) -> Row<Ipv6Addr> {
    let [a, b, c, d, e, f, g, h] = segments;
    Row {
        prefix: Ipv6Addr::new(a, b, c, d, e, f, g, h),
        len,
        name,
        rule,
    }
}

/// IPv4 addresses no webhook goes to: the IANA IPv4 Special-Purpose
/// Address Registry, row by row, and multicast. The first row that holds
/// an address names why (narrower rows stand before the ones holding them).
pub const V4: &[Row<Ipv4Addr>] = &[
    v4(0, 0, 0, 0, 32, "this host on this network"),
    v4(0, 0, 0, 0, 8, "this network"),
    v4(10, 0, 0, 0, 8, "private-use"),
    v4(
        100,
        64,
        0,
        0,
        10,
        "shared address space (carrier-grade NAT)",
    ),
    v4(127, 0, 0, 0, 8, "loopback"),
    v4(169, 254, 0, 0, 16, "link-local"),
    v4(172, 16, 0, 0, 12, "private-use"),
    v4(192, 0, 0, 0, 29, "IPv4 service continuity prefix"),
    v4(192, 0, 0, 8, 32, "IPv4 dummy address"),
    v4(192, 0, 0, 9, 32, "port control protocol anycast"),
    v4(
        192,
        0,
        0,
        10,
        32,
        "traversal using relays around NAT anycast",
    ),
    v4(192, 0, 0, 170, 31, "NAT64/DNS64 discovery"),
    v4(192, 0, 0, 0, 24, "IETF protocol assignments"),
    v4(192, 0, 2, 0, 24, "documentation (TEST-NET-1)"),
    v4(192, 31, 196, 0, 24, "AS112-v4"),
    v4(192, 52, 193, 0, 24, "automatic multicast tunneling"),
    v4(192, 88, 99, 0, 24, "deprecated (6to4 relay anycast)"),
    v4(192, 168, 0, 0, 16, "private-use"),
    v4(192, 175, 48, 0, 24, "direct delegation AS112 service"),
    v4(198, 18, 0, 0, 15, "benchmarking"),
    v4(198, 51, 100, 0, 24, "documentation (TEST-NET-2)"),
    v4(203, 0, 113, 0, 24, "documentation (TEST-NET-3)"),
    v4(224, 0, 0, 0, 4, "multicast"),
    v4(255, 255, 255, 255, 32, "limited broadcast"),
    v4(240, 0, 0, 0, 4, "reserved"),
];

use Rule::{Embeds, Refuse};

/// IPv6 addresses no webhook goes to: the IANA IPv6 Special-Purpose
/// Address Registry row by row, the forms that embed an IPv4 address (see
/// the [module](self) doc), site-local and multicast, and what lies outside
/// global unicast (`2000::/3`), which the IANA keeps reserved. The first
/// row that holds an address decides.
pub const V6: &[Row<Ipv6Addr>] = &[
    v6([0, 0, 0, 0, 0, 0, 0, 0], 128, "unspecified", Refuse),
    v6([0, 0, 0, 0, 0, 0, 0, 1], 128, "loopback", Refuse),
    v6([0, 0, 0, 0, 0, 0xffff, 0, 0], 96, "IPv4-mapped", Refuse),
    v6([0, 0, 0, 0, 0xffff, 0, 0, 0], 96, "IPv4-translated", Refuse),
    v6(
        [0, 0, 0, 0, 0, 0, 0, 0],
        96,
        "IPv4-compatible (deprecated)",
        Refuse,
    ),
    v6(
        [0x64, 0xff9b, 0, 0, 0, 0, 0, 0],
        96,
        "NAT64 (well-known prefix)",
        Embeds,
    ),
    v6(
        [0x64, 0xff9b, 1, 0, 0, 0, 0, 0],
        48,
        "NAT64 (local use)",
        Refuse,
    ),
    v6([0x100, 0, 0, 0, 0, 0, 0, 0], 64, "discard-only", Refuse),
    v6(
        [0x100, 0, 0, 1, 0, 0, 0, 0],
        64,
        "dummy IPv6 prefix",
        Refuse,
    ),
    v6([0x2001, 0, 0, 0, 0, 0, 0, 0], 32, "Teredo", Refuse),
    v6(
        [0x2001, 1, 0, 0, 0, 0, 0, 1],
        128,
        "port control protocol anycast",
        Refuse,
    ),
    v6([0x2001, 1, 0, 0, 0, 0, 0, 2], 128, "TURN anycast", Refuse),
    v6(
        [0x2001, 1, 0, 0, 0, 0, 0, 3],
        128,
        "DNS-SD registration anycast",
        Refuse,
    ),
    v6([0x2001, 2, 0, 0, 0, 0, 0, 0], 48, "benchmarking", Refuse),
    v6(
        [0x2001, 3, 0, 0, 0, 0, 0, 0],
        32,
        "automatic multicast tunneling",
        Refuse,
    ),
    v6([0x2001, 4, 0x112, 0, 0, 0, 0, 0], 48, "AS112-v6", Refuse),
    v6(
        [0x2001, 0x10, 0, 0, 0, 0, 0, 0],
        28,
        "deprecated (ORCHID)",
        Refuse,
    ),
    v6([0x2001, 0x20, 0, 0, 0, 0, 0, 0], 28, "ORCHIDv2", Refuse),
    v6(
        [0x2001, 0x30, 0, 0, 0, 0, 0, 0],
        28,
        "drone remote ID entity tags",
        Refuse,
    ),
    v6(
        [0x2001, 0, 0, 0, 0, 0, 0, 0],
        23,
        "IETF protocol assignments",
        Refuse,
    ),
    v6(
        [0x2001, 0xdb8, 0, 0, 0, 0, 0, 0],
        32,
        "documentation",
        Refuse,
    ),
    v6([0x2002, 0, 0, 0, 0, 0, 0, 0], 16, "6to4", Refuse),
    v6(
        [0x2620, 0x4f, 0x8000, 0, 0, 0, 0, 0],
        48,
        "direct delegation AS112 service",
        Refuse,
    ),
    v6([0x3fff, 0, 0, 0, 0, 0, 0, 0], 20, "documentation", Refuse),
    v6(
        [0x5f00, 0, 0, 0, 0, 0, 0, 0],
        16,
        "segment routing (SRv6) SIDs",
        Refuse,
    ),
    v6([0xfc00, 0, 0, 0, 0, 0, 0, 0], 7, "unique-local", Refuse),
    v6([0xfe80, 0, 0, 0, 0, 0, 0, 0], 10, "link-local", Refuse),
    v6(
        [0xfec0, 0, 0, 0, 0, 0, 0, 0],
        10,
        "site-local (deprecated)",
        Refuse,
    ),
    v6([0xff00, 0, 0, 0, 0, 0, 0, 0], 8, "multicast", Refuse),
    v6(
        [0, 0, 0, 0, 0, 0, 0, 0],
        3,
        "reserved (not global unicast)",
        Refuse,
    ),
    v6(
        [0x4000, 0, 0, 0, 0, 0, 0, 0],
        2,
        "reserved (not global unicast)",
        Refuse,
    ),
    v6(
        [0x8000, 0, 0, 0, 0, 0, 0, 0],
        1,
        "reserved (not global unicast)",
        Refuse,
    ),
];

/// Whether `ip` lies under `prefix`/`len` (bits as a big-endian number).
fn under(ip: u128, prefix: u128, len: u8, width: u8) -> bool {
    let shift = u32::from(width - len);
    len == 0 || (ip >> shift) == (prefix >> shift)
}

/// Why an address may not receive webhooks: the row that refuses it and,
/// for an IPv4 address embedded in an IPv6 one, that address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Refused {
    pub row: &'static str,
    pub embedded: Option<(Ipv4Addr, &'static str)>,
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.embedded {
            Some((v4, why)) => write!(f, "{} of {v4}, which is {why}", self.row),
            None => f.write_str(self.row),
        }
    }
}

fn row_v4(ip: Ipv4Addr) -> Option<&'static Row<Ipv4Addr>> {
    let bits = u128::from(u32::from(ip));
    V4.iter()
        .find(|r| under(bits, u128::from(u32::from(r.prefix)), r.len, 32))
}

fn row_v6(ip: Ipv6Addr) -> Option<&'static Row<Ipv6Addr>> {
    let bits = u128::from(ip);
    V6.iter()
        .find(|r| under(bits, u128::from(r.prefix), r.len, 128))
}

/// Why `ip` may not receive webhooks, if it may not: the first row of its
/// family's table that holds it.
pub fn forbidden(ip: IpAddr) -> Option<Refused> {
    match ip {
        IpAddr::V4(ip) => row_v4(ip).map(|r| Refused {
            row: r.name,
            embedded: None,
        }),
        IpAddr::V6(ip) => {
            let row = row_v6(ip)?;
            match row.rule {
                Rule::Refuse => Some(Refused {
                    row: row.name,
                    embedded: None,
                }),
                Rule::Embeds => {
                    let embedded = Ipv4Addr::from((u128::from(ip) & 0xffff_ffff) as u32);
                    row_v4(embedded).map(|r| Refused {
                        row: row.name,
                        embedded: Some((embedded, r.name)),
                    })
                }
            }
        }
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

/// The URL's host, if it is an address rather than a name.
pub fn literal_ip(url: &Url) -> Option<IpAddr> {
    let host = url.host_str()?;
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .parse()
        .ok()
}

/// Refuses `addrs`, which `host` resolved to (or is), if any may not
/// receive webhooks (unless `allow_private`), naming the first and why.
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
mod tests;

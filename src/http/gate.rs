//! Places bounded in total and per client address: open HTTP connections
//! (see [`super::listen`]) and websockets that have not yet sent
//! `connection_init`. One client cannot take every place, and every client
//! together cannot take more than the server holds.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

/// Who a place is counted against: an IPv4 address, or an IPv6 /64 (one
/// host usually holds a whole /64, so counting its addresses one by one
/// would bound nothing).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ClientKey(u128);

impl ClientKey {
    pub fn of(ip: IpAddr) -> Self {
        match ip {
            IpAddr::V4(v4) => Self(u32::from(v4) as u128),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => Self(u32::from(v4) as u128),
                None => Self((u128::from(v6) & !((1u128 << 64) - 1)) | (1 << 32)),
            },
        }
    }
}

/// Why a place was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Full {
    /// Every place is taken.
    Total,
    /// This client address holds its share.
    Address,
}

/// A bounded set of places.
#[derive(Debug)]
pub struct Gate {
    total: usize,
    per_address: usize,
    held: Mutex<Held>,
}

#[derive(Debug, Default)]
struct Held {
    total: usize,
    by_address: HashMap<ClientKey, usize>,
}

impl Gate {
    pub fn new(total: usize, per_address: usize) -> Arc<Self> {
        Arc::new(Self {
            total,
            per_address,
            held: Mutex::default(),
        })
    }

    /// The most places in total.
    pub fn total(&self) -> usize {
        self.total
    }

    /// The most places one address holds.
    pub fn per_address(&self) -> usize {
        self.per_address
    }

    /// A place for `ip`, held until the ticket drops.
    pub fn admit(self: &Arc<Self>, ip: IpAddr) -> Result<Ticket, Full> {
        let key = ClientKey::of(ip);
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        if held.total >= self.total {
            return Err(Full::Total);
        }
        let mine = held.by_address.entry(key).or_default();
        if *mine >= self.per_address {
            return Err(Full::Address);
        }
        *mine += 1;
        held.total += 1;
        Ok(Ticket {
            gate: self.clone(),
            key,
        })
    }

    /// Places held now.
    pub fn held(&self) -> usize {
        self.held.lock().unwrap_or_else(|e| e.into_inner()).total
    }
}

/// One place in a [`Gate`]; frees it when dropped.
#[derive(Debug)]
pub struct Ticket {
    gate: Arc<Gate>,
    key: ClientKey,
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut held = self.gate.held.lock().unwrap_or_else(|e| e.into_inner());
        held.total -= 1;
        if let Some(mine) = held.by_address.get_mut(&self.key) {
            *mine -= 1;
            if *mine == 0 {
                held.by_address.remove(&self.key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_are_bounded_in_total_and_per_address() {
        let gate = Gate::new(3, 2);
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let first = gate.admit(a).unwrap();
        let _second = gate.admit(a).unwrap();
        assert_eq!(gate.admit(a).err(), Some(Full::Address));
        let _third = gate.admit(b).unwrap();
        assert_eq!(gate.admit(b).err(), Some(Full::Total));
        drop(first);
        let _again = gate.admit(a).expect("a place freed");
        assert_eq!(gate.held(), 3);
    }

    #[test]
    fn an_ipv6_host_counts_as_its_slash_64() {
        let one: IpAddr = "2001:db8:1:2::1".parse().unwrap();
        let other: IpAddr = "2001:db8:1:2:ffff::9".parse().unwrap();
        let elsewhere: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        assert_eq!(ClientKey::of(one), ClientKey::of(other));
        assert_ne!(ClientKey::of(one), ClientKey::of(elsewhere));
        let mapped: IpAddr = "::ffff:10.0.0.1".parse().unwrap();
        let v4: IpAddr = "10.0.0.1".parse().unwrap();
        assert_eq!(ClientKey::of(mapped), ClientKey::of(v4));
    }
}

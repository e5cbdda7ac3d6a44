//! Places bounded in total and per client address: open HTTP connections
//! (see [`super::listen`]) and websockets that have not yet sent
//! `connection_init`. One client cannot take every place, and every client
//! together cannot take more than the server holds.
//!
//! The websockets' gate gives the oldest place to a newcomer when every
//! place is taken ([`Gate::replacing`]): its holder is told to leave. A
//! flood of upgrades from many addresses then only shortens how long a
//! silent upgrade may wait; to push out a client that sends
//! `connection_init` at once it would have to open every place within that
//! client's round trip.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use tokio_util::sync::CancellationToken;

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

/// The address as counted: `10.0.0.1`, or `2001:db8:1:2::/64`.
impl std::fmt::Display for ClientKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match u32::try_from(self.0) {
            Ok(v4) => std::net::Ipv4Addr::from(v4).fmt(f),
            Err(_) => {
                let prefix = std::net::Ipv6Addr::from(self.0 & !((1u128 << 64) - 1));
                write!(f, "{prefix}/64")
            }
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
    /// When every place is taken, a newcomer takes the oldest one instead
    /// of being refused.
    replacing: bool,
    /// A std mutex: held for a few map operations, never across an await.
    held: Mutex<Held>,
}

#[derive(Debug, Default)]
struct Held {
    total: usize,
    by_address: HashMap<ClientKey, usize>,
    /// In a replacing gate, the places held in the order they were taken,
    /// each with the token that tells its holder to leave.
    order: BTreeMap<u64, (ClientKey, CancellationToken)>,
    /// The number of the next place taken.
    next: u64,
}

impl Held {
    fn release(&mut self, key: ClientKey) {
        self.total -= 1;
        if let Some(mine) = self.by_address.get_mut(&key) {
            *mine -= 1;
            if *mine == 0 {
                self.by_address.remove(&key);
            }
        }
    }
}

impl Gate {
    /// A gate that refuses newcomers when every place is taken.
    pub fn new(total: usize, per_address: usize) -> Arc<Self> {
        Self::build(total, per_address, false)
    }

    /// A gate that, when every place is taken, gives the oldest one to a
    /// newcomer and tells its holder to leave ([`Ticket::told_to_leave`]).
    /// Per address it refuses, as [`Gate::new`] does.
    pub fn replacing(total: usize, per_address: usize) -> Arc<Self> {
        Self::build(total, per_address, true)
    }

    fn build(total: usize, per_address: usize, replacing: bool) -> Arc<Self> {
        Arc::new(Self {
            total,
            per_address,
            replacing,
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

    /// A place for `ip`, held until the ticket drops (or, in a replacing
    /// gate, until a newcomer takes it).
    pub fn admit(self: &Arc<Self>, ip: IpAddr) -> Result<Ticket, Full> {
        let key = ClientKey::of(ip);
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        if held.by_address.get(&key).copied().unwrap_or(0) >= self.per_address {
            return Err(Full::Address);
        }
        if held.total >= self.total {
            if !self.replacing {
                return Err(Full::Total);
            }
            let Some((_, (oldest, leave))) = held.order.pop_first() else {
                return Err(Full::Total);
            };
            held.release(oldest);
            leave.cancel();
        }
        *held.by_address.entry(key).or_default() += 1;
        held.total += 1;
        let number = held.next;
        held.next += 1;
        let leave = CancellationToken::new();
        if self.replacing {
            held.order.insert(number, (key, leave.clone()));
        }
        Ok(Ticket {
            gate: self.clone(),
            key,
            number,
            leave,
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
    /// The place's number, in the order places were taken.
    number: u64,
    /// Cancelled when a newcomer took this place.
    leave: CancellationToken,
}

impl Ticket {
    /// Cancelled when a newcomer took this ticket's place (only ever in a
    /// replacing gate): its holder should go.
    pub fn told_to_leave(&self) -> CancellationToken {
        self.leave.clone()
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut held = self.gate.held.lock().unwrap_or_else(|e| e.into_inner());
        // A place given to a newcomer was released then.
        if self.gate.replacing && held.order.remove(&self.number).is_none() {
            return;
        }
        held.release(self.key);
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
    fn a_replacing_gate_gives_the_oldest_place_to_a_newcomer() {
        let gate = Gate::replacing(3, 2);
        let ip = |n: u8| IpAddr::from([10, 0, 0, n]);
        let oldest = gate.admit(ip(1)).unwrap();
        let second = gate.admit(ip(1)).unwrap();
        let third = gate.admit(ip(2)).unwrap();
        assert_eq!(gate.admit(ip(1)).err(), Some(Full::Address));
        // Every place is taken: the newcomer takes the oldest one.
        let newcomer = gate.admit(ip(3)).expect("the oldest place");
        assert!(oldest.told_to_leave().is_cancelled());
        assert!(!second.told_to_leave().is_cancelled());
        assert_eq!(gate.held(), 3);
        // Its holder going frees nothing more; the address has room again.
        drop(oldest);
        assert_eq!(gate.held(), 3);
        let again = gate.admit(ip(1)).expect("the next oldest place");
        assert!(second.told_to_leave().is_cancelled());
        drop((second, third, newcomer, again));
        assert_eq!(gate.held(), 0);
        assert!(gate.held.lock().unwrap().by_address.is_empty());
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
        assert_eq!(ClientKey::of(mapped).to_string(), "10.0.0.1");
        assert_eq!(ClientKey::of(other).to_string(), "2001:db8:1:2::/64");
    }
}

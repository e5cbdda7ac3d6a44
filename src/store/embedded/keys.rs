//! How the embedded store lays records out as RocksDB keys and values.
//!
//! Every key starts with the tenant, so nothing crosses tenants. A string in
//! the middle of a key is written with its length first (two bytes, big
//! endian): keys of one owner then sort together whatever the ids look like,
//! and a key can be split back into its parts. The last string of a key is
//! written bare, so listings ordered by that id come out in byte order.
//! Numbers are big endian with the sign bit flipped, so they sort as numbers;
//! "descending" fields are additionally inverted.

use std::fmt::Display;

use crate::model::{Bump, Millis, Reason};
use crate::store::codes::{BUMP_RULE, REASON_KIND};
use crate::store::{ErrorKind, StoreError, StoreResult};

pub type Oid = [u8; 12];

/// Tags that share the `graph` family.
pub mod graph {
    pub const USER: u8 = 0;
    /// Tags 1 to 8 held edges, groups' kinds, memberships, assignments
    /// and supervisors before relations: moved at open (see `relations.rs`).
    pub const EARLIER_EDGE: u8 = 1;
    pub const EARLIER_GROUP: u8 = 2;
    pub const EARLIER_MEMBER: u8 = 3;
    pub const EARLIER_MEMBER_OF: u8 = 4;
    pub const EARLIER_ASSIGNED_TO: u8 = 5;
    pub const EARLIER_ASSIGNMENT: u8 = 6;
    pub const EARLIER_SUPERVISOR: u8 = 7;
    pub const EARLIER_SUPERVISEE: u8 = 8;
    /// `(tenant, reader, edge code, actor)` → the position the actor's
    /// actions begin after for the reader.
    pub const CUT: u8 = 9;
    /// `(tenant, user)`: an actor no longer fanned out to followers.
    pub const CELEBRITY: u8 = 10;
    /// `(tenant, reader)` held the reader's river record before rivers had
    /// a family of their own: moved at open (see `rivers.rs`).
    pub const EARLIER_RIVER: u8 = 11;
    /// Tags 12 to 14 held group feeds' rings before they were records:
    /// moved at open (see `group_feeds.rs`). `(tenant, group)` → the
    /// number of the group's last post.
    pub const RING_COUNTER: u8 = 12;
    /// `(tenant, group, slot)` → the post's number and the action's
    /// position: one slot of a group's ring.
    pub const RING_SLOT: u8 = 13;
    /// `(tenant, group, action)` → its slot: what the ring holds.
    pub const RING_ACTION: u8 = 14;
    /// `(tenant, owner, group key)` → a notice group, whole.
    pub const NOTICE_GROUP: u8 = 15;
    /// `(tenant, owner, group id)` → its group key.
    pub const NOTICE_ID: u8 = 16;
    /// `(tenant, owner, last desc, group id desc)` → its key and whether it
    /// is listed and unread: an owner's groups in the order they are read.
    pub const NOTICE_ORDER: u8 = 17;
    /// `(tenant, owner)` → the owner's inbox.
    pub const INBOX: u8 = 18;
    /// `(relation, tenant, from, to)` → its attributes.
    pub const RELATION_OUT: u8 = 19;
    /// `(relation, tenant, to, from)` → its attributes.
    pub const RELATION_IN: u8 = 20;
    /// `(tenant, owner)` → how many of the owner's groups are listed and
    /// unread, changed in the batch that changes one of them.
    pub const NOTICE_UNREAD: u8 = 21;
}

/// Tags that share the `queue` family.
pub mod queue {
    /// `(action, tenant)` → a fan-out's lease, as earlier versions kept
    /// them: moved to the `jobs` family at open.
    pub const FAN_OUT: u8 = 0;
    /// `(comment, tenant)` → a bump and its lease, as earlier versions kept
    /// them: moved to the `jobs` family at open.
    pub const BUMP: u8 = 1;
    /// `(tenant, reader, edge kind, actor)` → an unfollow's cleanup and its
    /// lease, as earlier versions kept them: moved to the `jobs` family at
    /// open.
    pub const UNFOLLOW: u8 = 2;
    /// `(expires at, tenant, action)`: actions recorded with an expiry,
    /// soonest first.
    pub const EXPIRY: u8 = 3;
    /// `(conducted, tenant, action)`: every action, oldest first, for
    /// `--item-ttl`.
    pub const AGE: u8 = 4;
    /// `(tenant, source key)` → a notice job and its lease, as earlier
    /// versions kept them: moved to the `jobs` family at open.
    pub const NOTICE_JOB: u8 = 5;
    /// `(tenant, actor, foreign id)` → the id of the actor's action
    /// recorded under it: one action per foreign id.
    pub const FOREIGN: u8 = 6;
}

/// Tags that share the `reactions` family.
pub mod reaction {
    pub const COMMENT: u8 = 0;
    /// `(tenant, action, user)`: a like, as versions before likes were
    /// relations kept them; moved to the `graph` family at open.
    pub const EARLIER_LIKE: u8 = 1;
    /// `(tenant, action, user)` → the time the user's discussions entry for
    /// the action stands at.
    pub const PARTICIPANT: u8 = 2;
}

/// A key under construction.
#[derive(Clone, Debug, Default)]
pub struct Key(pub Vec<u8>);

impl Key {
    pub fn new() -> Self {
        Key(Vec::with_capacity(64))
    }

    pub fn tag(tag: u8) -> Self {
        let mut key = Self::new();
        key.0.push(tag);
        key
    }

    /// A string in the middle of a key: length, then bytes. Ids are at most
    /// 256 bytes (checked at the API), far below the two-byte length.
    pub fn str(mut self, s: &str) -> Self {
        push_str(&mut self.0, s);
        self
    }

    /// The last string of a key, bare.
    pub fn last(mut self, s: &str) -> Self {
        self.0.extend_from_slice(s.as_bytes());
        self
    }

    pub fn byte(mut self, b: u8) -> Self {
        self.0.push(b);
        self
    }

    pub fn oid(mut self, id: Oid) -> Self {
        self.0.extend_from_slice(&id);
        self
    }

    pub fn num(mut self, n: i64) -> Self {
        self.0.extend_from_slice(&ordered(n).to_be_bytes());
        self
    }

    #[cfg(test)]
    pub fn num_desc(mut self, n: i64) -> Self {
        self.0.extend_from_slice(&(!ordered(n)).to_be_bytes());
        self
    }

    pub fn into_vec(self) -> Vec<u8> {
        self.0
    }
}

pub fn push_str(buf: &mut Vec<u8>, s: &str) {
    buf.extend_from_slice(&(s.len() as u16).to_be_bytes());
    buf.extend_from_slice(s.as_bytes());
}

fn ordered(n: i64) -> u64 {
    (n as u64) ^ (1 << 63)
}

fn unordered(n: u64) -> i64 {
    (n ^ (1 << 63)) as i64
}

/// The first key after every key that starts with `prefix`, or `None` when
/// there is none (a prefix of `0xff` bytes).
pub fn successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return Some(end);
        }
    }
    None
}

/// The first key strictly after `key` (for "after this id" listings).
pub fn after(key: &[u8]) -> Vec<u8> {
    let mut next = key.to_vec();
    next.push(0);
    next
}

pub fn corrupt(what: &str) -> StoreError {
    StoreError::new(
        ErrorKind::Internal,
        format!("corrupt {what} in the embedded store"),
    )
}

/// Reads the parts of a key back, front to back.
pub struct Reader<'a>(pub &'a [u8]);

impl<'a> Reader<'a> {
    pub fn skip(&mut self, n: usize) -> StoreResult<()> {
        if self.0.len() < n {
            return Err(corrupt("key"));
        }
        self.0 = &self.0[n..];
        Ok(())
    }

    pub fn byte(&mut self) -> StoreResult<u8> {
        let (&b, rest) = self.0.split_first().ok_or_else(|| corrupt("key"))?;
        self.0 = rest;
        Ok(b)
    }

    pub fn str(&mut self) -> StoreResult<&'a str> {
        let (len, rest) = self
            .0
            .split_first_chunk::<2>()
            .ok_or_else(|| corrupt("key"))?;
        let len = u16::from_be_bytes(*len) as usize;
        if rest.len() < len {
            return Err(corrupt("key"));
        }
        let (s, rest) = rest.split_at(len);
        self.0 = rest;
        std::str::from_utf8(s).map_err(|_| corrupt("key"))
    }

    pub fn last(&mut self) -> StoreResult<&'a str> {
        let s = std::str::from_utf8(self.0).map_err(|_| corrupt("key"))?;
        self.0 = &[];
        Ok(s)
    }

    pub fn oid(&mut self) -> StoreResult<Oid> {
        let (id, rest) = self
            .0
            .split_first_chunk::<12>()
            .ok_or_else(|| corrupt("key"))?;
        self.0 = rest;
        Ok(*id)
    }

    pub fn oid_desc(&mut self) -> StoreResult<Oid> {
        let mut id = self.oid()?;
        id.iter_mut().for_each(|b| *b = !*b);
        Ok(id)
    }

    pub fn num(&mut self) -> StoreResult<i64> {
        let (n, rest) = self
            .0
            .split_first_chunk::<8>()
            .ok_or_else(|| corrupt("key"))?;
        self.0 = rest;
        Ok(unordered(u64::from_be_bytes(*n)))
    }

    pub fn num_desc(&mut self) -> StoreResult<i64> {
        let (n, rest) = self
            .0
            .split_first_chunk::<8>()
            .ok_or_else(|| corrupt("key"))?;
        self.0 = rest;
        Ok(unordered(!u64::from_be_bytes(*n)))
    }
}

/// The length of the `(tenant, owner)` prefix of a timeline or change key: the
/// unit the prefix bloom filters are built on. `None` for a shorter key.
pub fn owner_prefix_len(key: &[u8]) -> Option<usize> {
    let tenant = u16::from_be_bytes(*key.first_chunk::<2>()?) as usize;
    let owner_at = 2 + tenant;
    let owner = u16::from_be_bytes(*key.get(owner_at..)?.first_chunk::<2>()?) as usize;
    let end = owner_at + 2 + owner;
    (key.len() >= end).then_some(end)
}

/// Timeline key: `(tenant, owner, relevancy desc, action desc)`.
pub fn timeline(buf: &mut Vec<u8>, tenant: &str, owner: &str, relevancy: Millis, id: Oid) {
    buf.clear();
    push_str(buf, tenant);
    push_str(buf, owner);
    buf.extend_from_slice(&(!ordered(relevancy)).to_be_bytes());
    buf.extend(id.iter().map(|b| !b));
}

/// Outbox key: `(tenant, owner, conducted desc, action desc)`, laid out as a
/// timeline key, so the same ranges read both. The owner is what
/// [`outbox_owner`] makes of the outbox.
pub fn outbox(buf: &mut Vec<u8>, tenant: &str, owner: &str, conducted: Millis, id: Oid) {
    timeline(buf, tenant, owner, conducted, id);
}

/// The owner an outbox is kept under: an actor's is their id; the others
/// put a control character (which no id holds) before the group's or
/// reader's, so no two kinds meet.
pub fn outbox_owner(outbox: &crate::store::Outbox) -> String {
    use crate::store::Outbox;
    match outbox {
        Outbox::Actor(actor) => actor.clone(),
        Outbox::Group(group) => format!("\u{1}{group}"),
        Outbox::Named(reader) => format!("\u{2}{reader}"),
        Outbox::Sent(group) => format!("\u{3}{group}"),
    }
}

/// Change key: `(tenant, owner, changed, action)`.
pub fn change(buf: &mut Vec<u8>, tenant: &str, owner: &str, changed: Millis, id: Oid) {
    buf.clear();
    push_str(buf, tenant);
    push_str(buf, owner);
    buf.extend_from_slice(&ordered(changed).to_be_bytes());
    buf.extend_from_slice(&id);
}

/// Item key: `(tenant, action, owner)`: one reader's item of an action.
pub fn item(buf: &mut Vec<u8>, tenant: &str, id: Oid, owner: &str) {
    buf.clear();
    push_str(buf, tenant);
    buf.extend_from_slice(&id);
    buf.extend_from_slice(owner.as_bytes());
}

/// A position as stored beside a record (see [`crate::model::Position::to_bytes`]).
pub fn encode_position(p: crate::model::Position) -> [u8; 20] {
    p.to_bytes()
}

pub fn decode_position(bytes: &[u8]) -> StoreResult<crate::model::Position> {
    crate::model::Position::from_bytes(bytes).ok_or_else(|| corrupt("position"))
}

/// Where one reader's item of an action stands (the `items` family's value).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ItemState {
    pub relevancy: Millis,
    pub changed: Millis,
    /// A tombstone the reader asked for: not in the feed, never re-delivered.
    pub hidden: bool,
}

impl ItemState {
    pub fn encode(&self) -> [u8; 17] {
        let mut out = [0u8; 17];
        out[..8].copy_from_slice(&self.relevancy.to_be_bytes());
        out[8..16].copy_from_slice(&self.changed.to_be_bytes());
        out[16] = self.hidden as u8;
        out
    }

    pub fn decode(bytes: &[u8]) -> StoreResult<Self> {
        let bytes: &[u8; 17] = bytes.try_into().map_err(|_| corrupt("feed item"))?;
        let (relevancy, rest) = bytes
            .split_first_chunk::<8>()
            .ok_or_else(|| corrupt("feed item"))?;
        let (changed, hidden) = rest
            .split_first_chunk::<8>()
            .ok_or_else(|| corrupt("feed item"))?;
        Ok(Self {
            relevancy: i64::from_be_bytes(*relevancy),
            changed: i64::from_be_bytes(*changed),
            hidden: match hidden[0] {
                0 => false,
                1 => true,
                flag => return Err(corrupt(&format!("feed item (hidden flag {flag})"))),
            },
        })
    }
}

/// A timeline value: the change stamp, then the reason.
pub fn encode_entry(buf: &mut Vec<u8>, reason: &Reason, changed: Millis) {
    buf.clear();
    buf.extend_from_slice(&changed.to_be_bytes());
    buf.push(REASON_KIND.byte(reason.kind));
    push_str(buf, &reason.actor_id);
    if let Some(bump) = &reason.bump {
        buf.push(BUMP_RULE.byte(bump.rule));
        buf.extend_from_slice(&bump.at.to_be_bytes());
        buf.extend_from_slice(bump.by.as_bytes());
    }
}

/// Reads a value written by [`encode_entry`]: `(changed, reason)`. `record`
/// names the entry for the error its codes may cause.
pub fn decode_entry(bytes: &[u8], record: impl Display) -> StoreResult<(Millis, Reason)> {
    let mut r = Reader(bytes);
    let changed = i64::from_be_bytes(*r.0.first_chunk::<8>().ok_or_else(|| corrupt("feed item"))?);
    r.skip(8)?;
    let kind = REASON_KIND.read_byte(r.byte()?, &record)?;
    let actor_id = r.str()?.to_owned();
    let bump = if r.0.is_empty() {
        None
    } else {
        let rule = BUMP_RULE.read_byte(r.byte()?, &record)?;
        let at = i64::from_be_bytes(*r.0.first_chunk::<8>().ok_or_else(|| corrupt("feed item"))?);
        r.skip(8)?;
        Some(Bump {
            rule,
            by: r.last()?.to_owned(),
            at,
        })
    };
    Ok((
        changed,
        Reason {
            kind,
            actor_id,
            bump,
        },
    ))
}

/// A queue entry's value as earlier versions wrote it (the lease's end,
/// the worker holding it, and for a bump the action it concerns): read
/// once, when the entries move to the `jobs` family.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lease {
    pub until: Millis,
    pub worker: String,
    pub action: Option<Oid>,
}

impl Lease {
    #[cfg(test)]
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(8 + 13 + self.worker.len());
        out.extend_from_slice(&self.until.to_be_bytes());
        match self.action {
            Some(id) => {
                out.push(1);
                out.extend_from_slice(&id);
            }
            None => out.push(0),
        }
        out.extend_from_slice(self.worker.as_bytes());
        out
    }

    pub fn decode(bytes: &[u8]) -> StoreResult<Self> {
        let mut r = Reader(bytes);
        let until = i64::from_be_bytes(*r.0.first_chunk::<8>().ok_or_else(|| corrupt("queue"))?);
        r.skip(8)?;
        let action = match r.byte()? {
            0 => None,
            1 => Some(r.oid()?),
            flag => return Err(corrupt(&format!("queue entry (action flag {flag})"))),
        };
        Ok(Self {
            until,
            worker: r.last()?.to_owned(),
            action,
        })
    }
}

/// Stored records (actions, comments) as MessagePack with field names: about
/// half the size of JSON and several times quicker to read back, while new
/// optional fields still read old records.
pub fn encode_record<T: serde::Serialize>(value: &T) -> StoreResult<Vec<u8>> {
    rmp_serde::to_vec_named(value)
        .map_err(|e| StoreError::internal("embedded store: cannot encode a record", e))
}

pub fn decode_record<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> StoreResult<T> {
    rmp_serde::from_slice(bytes)
        .map_err(|e| StoreError::internal("embedded store: corrupt record", e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{BumpRule, ReasonKind};

    #[test]
    fn numbers_sort_as_numbers_both_ways() {
        let values = [i64::MIN, -5, -1, 0, 1, 7, i64::MAX];
        let up: Vec<Vec<u8>> = values.iter().map(|&n| Key::new().num(n).0).collect();
        assert!(up.windows(2).all(|w| w[0] < w[1]));
        let down: Vec<Vec<u8>> = values.iter().map(|&n| Key::new().num_desc(n).0).collect();
        assert!(down.windows(2).all(|w| w[0] > w[1]));
        for &n in &values {
            assert_eq!(Reader(&Key::new().num(n).0).num().unwrap(), n);
            assert_eq!(Reader(&Key::new().num_desc(n).0).num_desc().unwrap(), n);
        }
    }

    #[test]
    fn entries_round_trip() {
        let reasons = [
            Reason::new(ReasonKind::Follows, "bob"),
            Reason {
                kind: ReasonKind::Bumped,
                actor_id: "bob".into(),
                bump: Some(Bump {
                    rule: BumpRule::Supervisor,
                    by: "carol".into(),
                    at: -3,
                }),
            },
        ];
        let mut buf = Vec::new();
        for reason in reasons {
            encode_entry(&mut buf, &reason, 42);
            assert_eq!(decode_entry(&buf, "t").unwrap(), (42, reason));
        }
        assert!(decode_entry(&[1, 2], "t").is_err());
    }

    #[test]
    fn unknown_codes_are_corrupt_and_named() {
        let mut buf = Vec::new();
        encode_entry(&mut buf, &Reason::new(ReasonKind::Follows, "bob"), 42);
        buf[8] = 99;
        let err = decode_entry(&buf, "timeline acme/alice/x").unwrap_err();
        assert!(err.message.contains("timeline acme/alice/x"), "{err}");
        assert!(err.message.contains("reason code 99"), "{err}");
        let mut lease = Lease {
            until: 1,
            worker: "w".into(),
            action: None,
        }
        .encode();
        lease[8] = 2;
        assert!(Lease::decode(&lease).is_err());
        let mut state = ItemState {
            relevancy: 1,
            changed: 2,
            hidden: true,
        }
        .encode();
        assert!(ItemState::decode(&state).unwrap().hidden);
        state[16] = 7;
        assert!(ItemState::decode(&state).is_err());
    }

    #[test]
    fn owner_prefix_covers_tenant_and_owner() {
        let mut buf = Vec::new();
        timeline(&mut buf, "acme", "alice", 5, [1; 12]);
        assert_eq!(owner_prefix_len(&buf), Some(2 + 4 + 2 + 5));
        assert_eq!(owner_prefix_len(&buf[..7]), None);
        assert_eq!(successor(&[1, 0xff]), Some(vec![2]));
        assert_eq!(successor(&[0xff]), None);
    }

    #[test]
    fn leases_round_trip() {
        for lease in [
            Lease {
                until: 9,
                worker: "w-1".into(),
                action: Some([7; 12]),
            },
            Lease {
                until: 0,
                worker: String::new(),
                action: None,
            },
        ] {
            assert_eq!(Lease::decode(&lease.encode()).unwrap(), lease);
        }
    }
}

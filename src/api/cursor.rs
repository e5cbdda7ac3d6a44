//! Opaque cursors.
//!
//! A cursor is URL-safe base64 of: a version byte, the kind of list, a hash of
//! the list's identity (tenant and owner, or tenant and ref id…), the position,
//! and a checksum over all of it. A cursor from another list, or one that was
//! edited, is refused with `BAD_USER_INPUT` instead of silently paging the wrong
//! thing. The position is a key (`relevancy`, `actionId`), so pages stay correct
//! while new items arrive between them.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;

use super::error::bad_input;
use crate::model::{ObjectId, Position};

const VERSION: u8 = 1;

/// The lists that have cursors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum ListKind {
    Home = 1,
    Slice = 2,
    Users = 3,
}

/// Which list a cursor belongs to.
#[derive(Clone, Debug)]
pub struct ListId {
    kind: ListKind,
    hash: u64,
}

fn fnv1a(parts: &[&[u8]]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for byte in part.iter().chain(std::iter::once(&0xffu8)) {
            hash ^= u64::from(*byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
    }
    hash
}

impl ListId {
    pub fn home(tenant: &str, owner: &str) -> Self {
        Self::new(ListKind::Home, &[tenant, owner])
    }

    pub fn slice(tenant: &str, ref_id: &str) -> Self {
        Self::new(ListKind::Slice, &[tenant, ref_id])
    }

    /// A list of users: `relation` is e.g. "followers", `user` whose list it is.
    pub fn users(tenant: &str, relation: &str, user: &str) -> Self {
        Self::new(ListKind::Users, &[tenant, relation, user])
    }

    fn new(kind: ListKind, parts: &[&str]) -> Self {
        let bytes: Vec<&[u8]> = parts.iter().map(|p| p.as_bytes()).collect();
        Self {
            kind,
            hash: fnv1a(&bytes),
        }
    }

    fn encode(&self, position: &[u8]) -> String {
        let mut buf = Vec::with_capacity(14 + position.len());
        buf.push(VERSION);
        buf.push(self.kind as u8);
        buf.extend_from_slice(&self.hash.to_be_bytes());
        buf.extend_from_slice(position);
        let check = fnv1a(&[&buf]) as u32;
        buf.extend_from_slice(&check.to_be_bytes());
        URL_SAFE_NO_PAD.encode(buf)
    }

    fn decode<'a>(&self, cursor: &str, buf: &'a mut Vec<u8>) -> async_graphql::Result<&'a [u8]> {
        let invalid = || bad_input(format!("cursor {cursor:?} is not valid"));
        *buf = URL_SAFE_NO_PAD.decode(cursor).map_err(|_| invalid())?;
        if buf.len() < 14 {
            return Err(invalid());
        }
        let (body, check) = buf.split_at(buf.len() - 4);
        if check != (fnv1a(&[body]) as u32).to_be_bytes() || body[0] != VERSION {
            return Err(invalid());
        }
        if body[1] != self.kind as u8 || body[2..10] != self.hash.to_be_bytes() {
            return Err(bad_input(format!(
                "cursor {cursor:?} belongs to another list; cursors only page the list that issued them"
            )));
        }
        Ok(&buf[10..buf.len() - 4])
    }

    pub fn position_cursor(&self, position: Position) -> String {
        let mut bytes = [0u8; 20];
        bytes[..8].copy_from_slice(&position.relevancy.to_be_bytes());
        bytes[8..].copy_from_slice(&position.action_id.bytes());
        self.encode(&bytes)
    }

    pub fn decode_position(&self, cursor: &str) -> async_graphql::Result<Position> {
        let mut buf = Vec::new();
        let bytes = self.decode(cursor, &mut buf)?;
        let (relevancy, id) = bytes
            .split_first_chunk::<8>()
            .ok_or_else(|| bad_input(format!("cursor {cursor:?} is not valid")))?;
        let id: [u8; 12] = id
            .try_into()
            .map_err(|_| bad_input(format!("cursor {cursor:?} is not valid")))?;
        Ok(Position {
            relevancy: i64::from_be_bytes(*relevancy),
            action_id: ObjectId::from_bytes(id),
        })
    }

    pub fn id_cursor(&self, id: ObjectId) -> String {
        self.encode(&id.bytes())
    }

    pub fn decode_id(&self, cursor: &str) -> async_graphql::Result<ObjectId> {
        let mut buf = Vec::new();
        let bytes = self.decode(cursor, &mut buf)?;
        let id: [u8; 12] = bytes
            .try_into()
            .map_err(|_| bad_input(format!("cursor {cursor:?} is not valid")))?;
        Ok(ObjectId::from_bytes(id))
    }

    pub fn string_cursor(&self, value: &str) -> String {
        self.encode(value.as_bytes())
    }

    pub fn decode_string(&self, cursor: &str) -> async_graphql::Result<String> {
        let mut buf = Vec::new();
        let bytes = self.decode(cursor, &mut buf)?;
        String::from_utf8(bytes.to_vec())
            .map_err(|_| bad_input(format!("cursor {cursor:?} is not valid")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_other_lists_and_edits() {
        let home = ListId::home("acme", "alice");
        let position = Position {
            relevancy: 1_700_000_000_000,
            action_id: ObjectId::new(),
        };
        let cursor = home.position_cursor(position);
        assert_eq!(home.decode_position(&cursor).unwrap(), position);

        let other = ListId::home("acme", "bob");
        let err = other.decode_position(&cursor).unwrap_err();
        assert!(err.message.contains("another list"), "{}", err.message);
        let other_tenant = ListId::home("globex", "alice");
        assert!(other_tenant.decode_position(&cursor).is_err());

        let mut bytes = URL_SAFE_NO_PAD.decode(&cursor).unwrap();
        bytes[12] ^= 1;
        let edited = URL_SAFE_NO_PAD.encode(bytes);
        assert!(home
            .decode_position(&edited)
            .unwrap_err()
            .message
            .contains("not valid"));
        assert!(home.decode_position("garbage!").is_err());
        assert!(home.decode_position("").is_err());

        let users = ListId::users("acme", "followers", "bob");
        let c = users.string_cursor("zoë");
        assert_eq!(users.decode_string(&c).unwrap(), "zoë");
    }
}

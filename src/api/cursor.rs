//! Opaque cursors.
//!
//! A cursor says which list it belongs to (the kind of list and a hash of its
//! identity: tenant and owner, or tenant and ref id…) and a position in it. It is
//! sealed with ChaCha20-Poly1305 under the deployment's cursor key, so a client
//! can neither read it (a page that skipped items the viewer may not read still
//! ends on their position) nor forge one. The position is a key
//! (`relevancy`, `actionId`), so pages stay correct while items arrive.
//!
//! The key is `--cursor-key`'s, or else one the deployment drew at its first
//! start and keeps in its store ([`CursorKey::kept`]): every process of a
//! deployment, and a process across restarts, seals and opens with the same
//! key. A cursor opens with its key's id in clear (four bytes of a hash of
//! the key), so one that does not open says why ([`Invalid`]): it was sealed
//! under another key (the key changed), it was damaged, or it belongs to
//! another list. Each is refused with `BAD_USER_INPUT`, and
//! `extensions.cursor` names the cause.
//!
//! Edges and events carry a [`LazyCursor`]: what to seal, sealed only when a
//! client selects the cursor. Nonces are a random prefix drawn per process
//! and a counter, so sealing makes no system call.

use async_graphql::ErrorExtensions;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, CHACHA20_POLY1305, NONCE_LEN};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use ring::rand::{SecureRandom, SystemRandom};

use super::error::bad_input;
use crate::model::{ObjectId, Position, Stamp};
use crate::store::{Records, Store, StoreResult};

const VERSION: u8 = 2;

/// The bytes of a key's id, in clear at the head of each cursor.
const KEY_ID_LEN: usize = 4;

/// The deployment value the drawn key is kept under.
const KEPT_KEY: &str = "cursor-key";

/// The key cursors are sealed with. Processes that serve the same clients
/// (and a process across restarts) need the same key for cursors to carry over.
pub struct CursorKey {
    key: LessSafeKey,
    /// Which key this is, as far as a cursor can tell: a hash of it.
    id: [u8; KEY_ID_LEN],
    random: SystemRandom,
    /// Nonces: a random 64-bit prefix, drawn again whenever the 32-bit
    /// counter after it wraps, so no nonce repeats within a process, and two
    /// processes sharing the key collide only if they draw the same prefix.
    prefix: Mutex<[u8; 8]>,
    counter: AtomicU64,
}

/// Why a cursor is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Invalid {
    /// Sealed under another key: the deployment's key changed since.
    OtherKey,
    /// Not a cursor as the server gave it: cut short, edited, or made up.
    Damaged,
    /// A good cursor of another list (another feed, owner or field).
    OtherList,
}

impl Invalid {
    /// `extensions.cursor` of the error.
    pub fn name(self) -> &'static str {
        match self {
            Invalid::OtherKey => "OTHER_KEY",
            Invalid::Damaged => "DAMAGED",
            Invalid::OtherList => "OTHER_LIST",
        }
    }

    /// The API error for `cursor`.
    fn error(self, cursor: &str) -> async_graphql::Error {
        let message = match self {
            Invalid::OtherKey => format!(
                "cursor {cursor:?} was issued under another cursor key: the server's key \
                 changed since (--cursor-key was set or changed, or the store is another \
                 one), and cursors of the old key do not open; start again without a cursor"
            ),
            Invalid::Damaged => format!(
                "cursor {cursor:?} is damaged (cut short or edited); pass a cursor back \
                 exactly as the server gave it, or start again without one"
            ),
            Invalid::OtherList => format!(
                "cursor {cursor:?} belongs to another list; cursors only page the list \
                 (and the field) that issued them"
            ),
        };
        let reason = self.name();
        bad_input(message).extend_with(|_, e| e.set("cursor", reason))
    }
}

impl CursorKey {
    /// A key derived from secret material: `--cursor-key`'s, or the one the
    /// deployment keeps.
    pub fn from_secret(secret: &[u8]) -> Self {
        let mut material = b"riverfeed cursor key\0".to_vec();
        material.extend_from_slice(secret);
        let digest = ring::digest::digest(&ring::digest::SHA256, &material);
        Self::from_bytes(digest.as_ref())
    }

    /// The key the deployment keeps in `store`: drawn at random by the first
    /// process that asks, read back by every other and after every restart.
    pub async fn kept(store: &dyn Store) -> StoreResult<Self> {
        let drawn = random_bytes();
        let secret = store.meta_or_insert(KEPT_KEY, &drawn).await?;
        Ok(Self::from_secret(&secret))
    }

    /// The secret the deployment keeps in `store`, if one was drawn: what
    /// an export carries so that cursors open where it is imported.
    pub async fn kept_secret(store: &dyn Store) -> StoreResult<Option<Vec<u8>>> {
        store.meta(KEPT_KEY).await
    }

    /// Keeps `secret` as the deployment's in `store`, in place of any:
    /// cursors of the key it replaces no longer open.
    pub async fn keep_secret(store: &dyn Store, secret: &[u8]) -> StoreResult<()> {
        store.set_meta(KEPT_KEY, secret).await
    }

    /// A fresh random key: cursors last as long as it does.
    #[cfg(test)]
    pub fn random() -> Self {
        Self::from_bytes(&random_bytes())
    }

    fn from_bytes(bytes: &[u8]) -> Self {
        let key = UnboundKey::new(&CHACHA20_POLY1305, bytes).expect("a 32-byte key");
        let mut named = b"riverfeed cursor key id\0".to_vec();
        named.extend_from_slice(bytes);
        let digest = ring::digest::digest(&ring::digest::SHA256, &named);
        let mut id = [0u8; KEY_ID_LEN];
        id.copy_from_slice(&digest.as_ref()[..KEY_ID_LEN]);
        let random = SystemRandom::new();
        let mut prefix = [0u8; 8];
        random
            .fill(&mut prefix)
            .expect("the system random source works");
        Self {
            key: LessSafeKey::new(key),
            id,
            random,
            prefix: Mutex::new(prefix),
            counter: AtomicU64::new(0),
        }
    }

    fn nonce(&self) -> [u8; NONCE_LEN] {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let mut prefix = self.prefix.lock().unwrap_or_else(|e| e.into_inner());
        if n > 0 && n.is_multiple_of(1 << 32) {
            self.random
                .fill(&mut prefix[..])
                .expect("the system random source works");
        }
        let mut nonce = [0u8; NONCE_LEN];
        nonce[..8].copy_from_slice(&prefix[..]);
        nonce[8..].copy_from_slice(&(n as u32).to_be_bytes());
        nonce
    }

    /// The key's id, the nonce, then what is sealed.
    fn seal(&self, mut plain: Vec<u8>) -> String {
        let nonce = self.nonce();
        self.key
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::empty(),
                &mut plain,
            )
            .expect("sealing a short buffer works");
        let mut out = Vec::with_capacity(KEY_ID_LEN + NONCE_LEN + plain.len());
        out.extend_from_slice(&self.id);
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&plain);
        URL_SAFE_NO_PAD.encode(out)
    }

    /// What `cursor` seals, if this key sealed it: two seals of one
    /// position differ (each draws a nonce), what they seal does not, so
    /// a tool comparing two answers compares this.
    pub fn open(&self, cursor: &str) -> Result<Vec<u8>, Invalid> {
        let bytes = URL_SAFE_NO_PAD
            .decode(cursor)
            .map_err(|_| Invalid::Damaged)?;
        let tag = CHACHA20_POLY1305.tag_len();
        if bytes.len() < KEY_ID_LEN + NONCE_LEN + tag {
            return Err(Invalid::Damaged);
        }
        let (id, rest) = bytes.split_at(KEY_ID_LEN);
        if id != self.id {
            return Err(Invalid::OtherKey);
        }
        let (nonce, sealed) = rest.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| Invalid::Damaged)?;
        let mut sealed = sealed.to_vec();
        let plain = self
            .key
            .open_in_place(nonce, Aad::empty(), &mut sealed)
            .map_err(|_| Invalid::Damaged)?;
        Ok(plain.to_vec())
    }
}

fn random_bytes() -> [u8; 32] {
    let mut bytes = [0u8; 32];
    SystemRandom::new()
        .fill(&mut bytes)
        .expect("the system random source works");
    bytes
}

/// The lists that have cursors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum ListKind {
    Home = 1,
    Slice = 2,
    Users = 3,
    Comments = 4,
    /// The changes of a home feed, for resumable subscriptions.
    FeedChanges = 5,
    /// One actor's actions (their outbox).
    Actor = 6,
    /// One user's discussions.
    Discussions = 7,
    /// One group's feed.
    Group = 8,
    /// A user's notification groups.
    Notifications = 9,
    /// A webhook's deliveries in one state.
    Deliveries = 10,
}

/// Which list a cursor belongs to, and the key its cursors are sealed with.
#[derive(Clone)]
pub struct ListId<'k> {
    kind: ListKind,
    hash: u64,
    key: &'k CursorKey,
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

impl<'k> ListId<'k> {
    pub fn home(key: &'k CursorKey, tenant: &str, owner: &str) -> Self {
        Self::new(key, ListKind::Home, &[tenant, owner])
    }

    pub fn notifications(key: &'k CursorKey, tenant: &str, owner: &str) -> Self {
        Self::new(key, ListKind::Notifications, &[tenant, owner])
    }

    pub fn slice(key: &'k CursorKey, tenant: &str, ref_id: &str) -> Self {
        Self::new(key, ListKind::Slice, &[tenant, ref_id])
    }

    /// One actor's actions, as one viewer sees them.
    pub fn actor(key: &'k CursorKey, tenant: &str, actor: &str) -> Self {
        Self::new(key, ListKind::Actor, &[tenant, actor])
    }

    /// The actions one user commented on.
    pub fn group(key: &'k CursorKey, tenant: &str, group: &str) -> Self {
        Self::new(key, ListKind::Group, &[tenant, group])
    }

    pub fn discussions(key: &'k CursorKey, tenant: &str, user: &str) -> Self {
        Self::new(key, ListKind::Discussions, &[tenant, user])
    }

    /// The changes of one reader's home feed.
    pub fn feed_changes(key: &'k CursorKey, tenant: &str, owner: &str) -> Self {
        Self::new(key, ListKind::FeedChanges, &[tenant, owner])
    }

    /// The comments of one action.
    pub fn comments(key: &'k CursorKey, tenant: &str, action_id: &str) -> Self {
        Self::new(key, ListKind::Comments, &[tenant, action_id])
    }

    /// A list of users: `relation` is e.g. "followers", `user` whose list it is.
    pub fn users(key: &'k CursorKey, tenant: &str, relation: &str, user: &str) -> Self {
        Self::new(key, ListKind::Users, &[tenant, relation, user])
    }

    /// A webhook's deliveries in `state`.
    pub fn deliveries(key: &'k CursorKey, tenant: &str, webhook: &str, state: &str) -> Self {
        Self::new(key, ListKind::Deliveries, &[tenant, webhook, state])
    }

    fn new(key: &'k CursorKey, kind: ListKind, parts: &[&str]) -> Self {
        let bytes: Vec<&[u8]> = parts.iter().map(|p| p.as_bytes()).collect();
        Self {
            kind,
            hash: fnv1a(&bytes),
            key,
        }
    }

    fn encode(&self, position: &[u8]) -> String {
        seal(self.key, self.kind, self.hash, position)
    }

    fn lazy(&self, body: Body) -> LazyCursor {
        LazyCursor {
            kind: self.kind,
            hash: self.hash,
            body,
        }
    }

    /// A position cursor, sealed when it is asked for.
    pub fn lazy_position(&self, position: Position) -> LazyCursor {
        self.lazy(Body::TimeId(position.relevancy, position.action_id))
    }

    /// A change-stamp cursor, sealed when it is asked for.
    pub fn lazy_stamp(&self, stamp: Stamp) -> LazyCursor {
        self.lazy(Body::TimeId(stamp.changed, stamp.action_id))
    }

    pub fn lazy_id(&self, id: ObjectId) -> LazyCursor {
        self.lazy(Body::Id(id))
    }

    pub fn lazy_string(&self, value: &str) -> LazyCursor {
        self.lazy(Body::Str(value.to_owned()))
    }

    fn decode<'a>(&self, cursor: &str, buf: &'a mut Vec<u8>) -> async_graphql::Result<&'a [u8]> {
        *buf = self.key.open(cursor).map_err(|why| why.error(cursor))?;
        if buf.len() < 10 || buf[0] != VERSION {
            return Err(Invalid::Damaged.error(cursor));
        }
        if buf[1] != self.kind as u8 || buf[2..10] != self.hash.to_be_bytes() {
            return Err(Invalid::OtherList.error(cursor));
        }
        Ok(&buf[10..])
    }

    pub fn position_cursor(&self, position: Position) -> String {
        self.time_id_cursor(position.relevancy, position.action_id)
    }

    pub fn decode_position(&self, cursor: &str) -> async_graphql::Result<Position> {
        let (relevancy, action_id) = self.decode_time_id(cursor)?;
        Ok(Position {
            relevancy,
            action_id,
        })
    }

    pub fn stamp_cursor(&self, stamp: Stamp) -> String {
        self.time_id_cursor(stamp.changed, stamp.action_id)
    }

    pub fn decode_stamp(&self, cursor: &str) -> async_graphql::Result<Stamp> {
        let (changed, action_id) = self.decode_time_id(cursor)?;
        Ok(Stamp { changed, action_id })
    }

    fn time_id_cursor(&self, time: i64, id: ObjectId) -> String {
        self.encode(&time_id(time, id))
    }

    fn decode_time_id(&self, cursor: &str) -> async_graphql::Result<(i64, ObjectId)> {
        let mut buf = Vec::new();
        let bytes = self.decode(cursor, &mut buf)?;
        let (time, id) = bytes
            .split_first_chunk::<8>()
            .ok_or_else(|| Invalid::Damaged.error(cursor))?;
        let id: [u8; 12] = id.try_into().map_err(|_| Invalid::Damaged.error(cursor))?;
        Ok((i64::from_be_bytes(*time), ObjectId::from_bytes(id)))
    }

    pub fn id_cursor(&self, id: ObjectId) -> String {
        self.encode(&id.bytes())
    }

    pub fn decode_id(&self, cursor: &str) -> async_graphql::Result<ObjectId> {
        let mut buf = Vec::new();
        let bytes = self.decode(cursor, &mut buf)?;
        let id: [u8; 12] = bytes
            .try_into()
            .map_err(|_| Invalid::Damaged.error(cursor))?;
        Ok(ObjectId::from_bytes(id))
    }

    pub fn string_cursor(&self, value: &str) -> String {
        self.encode(value.as_bytes())
    }

    pub fn decode_string(&self, cursor: &str) -> async_graphql::Result<String> {
        let mut buf = Vec::new();
        let bytes = self.decode(cursor, &mut buf)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| Invalid::Damaged.error(cursor))
    }
}

fn time_id(time: i64, id: ObjectId) -> [u8; 20] {
    let mut bytes = [0u8; 20];
    bytes[..8].copy_from_slice(&time.to_be_bytes());
    bytes[8..].copy_from_slice(&id.bytes());
    bytes
}

fn seal(key: &CursorKey, kind: ListKind, hash: u64, position: &[u8]) -> String {
    let mut buf = Vec::with_capacity(10 + position.len() + 16);
    buf.push(VERSION);
    buf.push(kind as u8);
    buf.extend_from_slice(&hash.to_be_bytes());
    buf.extend_from_slice(position);
    key.seal(buf)
}

#[derive(Clone, Debug)]
enum Body {
    TimeId(i64, ObjectId),
    Id(ObjectId),
    Str(String),
}

/// What a cursor will hold, sealed only by [`LazyCursor::seal`]: a page or
/// an event whose query selects no cursor pays nothing for it.
#[derive(Clone, Debug)]
pub struct LazyCursor {
    kind: ListKind,
    hash: u64,
    body: Body,
}

impl LazyCursor {
    pub fn seal(&self, key: &CursorKey) -> String {
        match &self.body {
            Body::TimeId(time, id) => seal(key, self.kind, self.hash, &time_id(*time, *id)),
            Body::Id(id) => seal(key, self.kind, self.hash, &id.bytes()),
            Body::Str(value) => seal(key, self.kind, self.hash, value.as_bytes()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `extensions.cursor` says of a refused cursor.
    fn cause(err: async_graphql::Error) -> String {
        let extensions = err.extensions.expect("extensions");
        assert_eq!(
            extensions.get("code"),
            Some(&async_graphql::Value::from("BAD_USER_INPUT"))
        );
        match extensions.get("cursor") {
            Some(async_graphql::Value::String(name)) => name.clone(),
            other => panic!("no cursor cause: {other:?} ({})", err.message),
        }
    }

    #[test]
    fn round_trips_and_refuses_other_lists_keys_and_edits() {
        let key = CursorKey::random();
        let home = ListId::home(&key, "acme", "alice");
        let position = Position {
            relevancy: 1_700_000_000_000,
            action_id: ObjectId::new(),
        };
        let cursor = home.position_cursor(position);
        assert_eq!(home.decode_position(&cursor).unwrap(), position);

        let other = ListId::home(&key, "acme", "bob");
        let err = other.decode_position(&cursor).unwrap_err();
        assert!(err.message.contains("another list"), "{}", err.message);
        assert_eq!(cause(err), "OTHER_LIST");
        let other_tenant = ListId::home(&key, "globex", "alice");
        assert_eq!(
            cause(other_tenant.decode_position(&cursor).unwrap_err()),
            "OTHER_LIST"
        );

        // An edit anywhere past the key's id (the nonce, what is sealed, the
        // tag), a cut, or what is no cursor at all: damaged.
        let raw = URL_SAFE_NO_PAD.decode(&cursor).unwrap();
        for at in [KEY_ID_LEN, KEY_ID_LEN + NONCE_LEN, raw.len() - 1] {
            let mut bytes = raw.clone();
            bytes[at] ^= 1;
            let err = home
                .decode_position(&URL_SAFE_NO_PAD.encode(bytes))
                .unwrap_err();
            assert!(err.message.contains("damaged"), "{}", err.message);
            assert_eq!(cause(err), "DAMAGED");
        }
        let cut = URL_SAFE_NO_PAD.encode(&raw[..raw.len() - 1]);
        for damaged in [cut.as_str(), "garbage!", ""] {
            assert_eq!(cause(home.decode_position(damaged).unwrap_err()), "DAMAGED");
        }

        let users = ListId::users(&key, "acme", "followers", "bob");
        let c = users.string_cursor("zoë");
        assert_eq!(users.decode_string(&c).unwrap(), "zoë");

        // Sealed: the position cannot be read off the cursor, and another
        // key does not open it, saying so.
        let id = position.action_id.bytes();
        assert!(
            !raw.windows(12).any(|w| w == id),
            "the action id is not in clear"
        );
        let other_key = CursorKey::random();
        let err = ListId::home(&other_key, "acme", "alice")
            .decode_position(&cursor)
            .unwrap_err();
        assert!(
            err.message.contains("another cursor key"),
            "{}",
            err.message
        );
        assert_eq!(cause(err), "OTHER_KEY");
        // A lazy cursor seals to one that opens as the eager one does, and
        // no two seals share a nonce.
        let lazy = home.lazy_position(position).seal(&key);
        assert_eq!(home.decode_position(&lazy).unwrap(), position);
        let again = home.lazy_position(position).seal(&key);
        assert_ne!(lazy, again, "a fresh nonce each time");
        let nonce =
            |c: &str| URL_SAFE_NO_PAD.decode(c).unwrap()[KEY_ID_LEN..][..NONCE_LEN].to_vec();
        assert_ne!(nonce(&lazy), nonce(&again));
        let same = CursorKey::from_secret(b"configured");
        let again = CursorKey::from_secret(b"configured");
        let sealed = ListId::home(&same, "acme", "alice").position_cursor(position);
        assert_eq!(
            ListId::home(&again, "acme", "alice")
                .decode_position(&sealed)
                .unwrap(),
            position
        );
    }
}

//! Records: small values kept by key, each written whole under a version
//! (compare and set). A backend stores them and reads them by key or by key
//! prefix ([`RecordStore`], three methods); what each kind holds and how a
//! change is made is written once, here ([`Records`]), for every backend:
//!
//! - **cuts**: per reader and edge, where the edge's source begins for them,
//!   and the ranges ended edges kept (`<reader> <kind> <actor>`);
//! - **celebrities**: actors no longer fanned out to followers (`<user>`);
//! - **inboxes**: a user's notification state (`<owner>`);
//! - **groups**: a group's kind (`<group>`), read and set by
//!   [`Graph::join_group`](super::Graph::join_group);
//! - **group feeds**: a group's ring of last posts (`<group>`), posted to
//!   and read by [`GroupFeeds`](super::group_feeds::GroupFeeds);
//! - **webhooks** and their **dead deliveries**: the endpoints a tenant
//!   registered (`<webhook>`), and the deliveries given up on
//!   (`<webhook> <message>`), read and written by [`crate::webhooks`];
//! - **idempotency keys**: requests sent with an `Idempotency-Key` and
//!   their answers (`<user> <key>`), by [`crate::http::idempotency`];
//! - **deletions**: actions deleted lately (`<action>`), for the retries
//!   of requests that recorded or deleted them, by [`crate::api`];
//! - **meta**: small values the deployment keeps about itself (the feed
//!   model it last ran, its cursor key…), outside any tenant.
//!
//! A key's parts are joined by a unit separator (U+001F): ids never hold
//! control characters, so a key splits back into its parts and a prefix of
//! parts names exactly the records under it.

use async_trait::async_trait;

use super::codes::EDGE_KIND;
use super::metered::port;
use super::{Cut, StoreError, StoreResult};
use crate::model::{EdgeKind, Inbox, Position};

/// What a record holds; each kind has keys of its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RecordKind {
    /// A deployment's own values (tenant: none).
    Meta,
    /// One edge's cut and kept ranges, for one reader.
    Cut,
    /// An actor marked a celebrity (no body).
    Celebrity,
    /// A user's inbox.
    Inbox,
    /// A group's kind, given by its first join (`<group>`).
    Group,
    /// A group's feed, its ring of last posts (`<group>`; see
    /// [`group_feeds`](super::group_feeds)).
    GroupFeed,
    /// A webhook endpoint registered (`<webhook id>`; see
    /// [`crate::webhooks`]).
    Webhook,
    /// A webhook delivery given up on after a day of retries
    /// (`<webhook id> <message id>`), kept for replay.
    DeadDelivery,
    /// A request sent with an `Idempotency-Key` and its answer, for a
    /// while (`<user> <key>`; see [`crate::http::idempotency`]).
    IdempotencyKey,
    /// An action deleted, kept as long as a request's answer is kept for
    /// retries (`<action id>`): a retry of the request that recorded it
    /// does not store it again, and one of the request that deleted it
    /// answers as that request would have.
    Deletion,
}

impl RecordKind {
    pub const ALL: [RecordKind; 10] = [
        RecordKind::Meta,
        RecordKind::Cut,
        RecordKind::Celebrity,
        RecordKind::Inbox,
        RecordKind::Group,
        RecordKind::GroupFeed,
        RecordKind::Webhook,
        RecordKind::DeadDelivery,
        RecordKind::IdempotencyKey,
        RecordKind::Deletion,
    ];
}

/// A record as stored: its version (1 when first written, one higher with
/// each write) and its body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stored {
    pub version: u64,
    pub body: Vec<u8>,
}

/// Which records a [`RecordStore::records`] read names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Keys<'a> {
    /// These keys.
    These(&'a [String]),
    /// Every key that begins with this.
    Under(&'a str),
    /// A page of the keys that begin with `under`: at most `limit`, in key
    /// order, from the first past `after` (a key under `under`, from the
    /// first without it).
    Page {
        under: &'a str,
        after: Option<&'a str>,
        limit: usize,
    },
}

/// Joins the parts of a key.
pub const SEPARATOR: char = '\u{1f}';

port! {
/// Records kept by key under a version.
pub trait RecordStore: Send + Sync {
    /// The records of `kind` that `keys` names and that exist, each with
    /// its key: of given keys in their order, under a prefix (or a page of
    /// them) in key order. One round trip.
    async fn records(
        &self,
        kind: RecordKind,
        tenant: &str,
        keys: Keys<'_>,
    ) -> StoreResult<Vec<(String, Stored)>>;
    /// Writes one record whole (`body`), or removes it (`None`). With
    /// `expect`, only if the version stored is that one (0: none is
    /// stored); returns false, writing nothing, if it is another. Without,
    /// always. A written record's version is one higher than the one it
    /// replaced (1 over none).
    async fn put_record(
        &self,
        kind: RecordKind,
        tenant: &str,
        key: &str,
        body: Option<Vec<u8>>,
        expect: Option<u64>,
    ) -> StoreResult<bool>;
}
}

/// The key of `reader`'s cut of the `kind` edge to `actor`.
pub(crate) fn cut_key(reader: &str, kind: EdgeKind, actor: &str) -> String {
    format!(
        "{reader}{SEPARATOR}{}{SEPARATOR}{actor}",
        EDGE_KIND.name(kind)
    )
}

/// One range of an edge's cut: since, began, until (none: standing).
pub type CutRange = (Position, Position, Option<Position>);

/// An edge's ranges, 60 bytes each (since, began, until; an end of
/// `Position::MAX` stands for none).
pub fn encode_cut(ranges: &[CutRange]) -> Vec<u8> {
    let mut out = Vec::with_capacity(ranges.len() * 60);
    for (since, began, until) in ranges {
        out.extend_from_slice(&since.to_bytes());
        out.extend_from_slice(&began.to_bytes());
        out.extend_from_slice(&until.unwrap_or(Position::MAX).to_bytes());
    }
    out
}

fn decode_cut(body: &[u8], record: &str) -> StoreResult<Vec<CutRange>> {
    if !body.len().is_multiple_of(60) {
        return Err(StoreError::corrupt(
            record,
            format_args!("{} bytes of ranges", body.len()),
        ));
    }
    Ok(body
        .chunks(60)
        .filter_map(|r| {
            let until = Position::from_bytes(&r[40..])?;
            Some((
                Position::from_bytes(r)?,
                Position::from_bytes(&r[20..])?,
                (until != Position::MAX).then_some(until),
            ))
        })
        .collect())
}

/// A value as a record's body (MessagePack, by field names).
pub fn encode_body<T: serde::Serialize>(value: &T, what: &str) -> StoreResult<Vec<u8>> {
    rmp_serde::to_vec_named(value)
        .map_err(|e| StoreError::internal(format!("cannot encode a {what}"), e))
}

/// The value a record's body holds; `record` names it if it is corrupt.
pub fn decode_body<T: serde::de::DeserializeOwned>(
    body: &[u8],
    record: impl std::fmt::Display,
) -> StoreResult<T> {
    rmp_serde::from_slice(body).map_err(|e| StoreError::corrupt(record, e.to_string()))
}

/// The webhook a record holds, at the record's version.
pub fn decode_webhook(
    stored: &Stored,
    tenant: &str,
    id: &str,
) -> StoreResult<crate::model::Webhook> {
    let mut hook: crate::model::Webhook =
        decode_body(&stored.body, format_args!("webhook {tenant}/{id}"))?;
    hook.version = stored.version;
    Ok(hook)
}

/// The key of a dead delivery's record: `<webhook> <message>`.
pub fn dead_delivery_key(webhook: &str, message: &str) -> String {
    format!("{webhook}{SEPARATOR}{message}")
}

/// An inbox as a record's body.
pub fn encode_inbox(inbox: &Inbox) -> StoreResult<Vec<u8>> {
    rmp_serde::to_vec_named(inbox).map_err(|e| StoreError::internal("cannot encode an inbox", e))
}

/// The inbox a record holds, at the record's version.
pub fn decode_inbox(stored: &Stored, tenant: &str, owner: &str) -> StoreResult<Inbox> {
    let mut inbox: Inbox = rmp_serde::from_slice(&stored.body)
        .map_err(|e| StoreError::corrupt(format_args!("inbox {tenant}/{owner}"), e.to_string()))?;
    inbox.version = stored.version;
    Ok(inbox)
}

/// The records each kind holds, read and changed by the same rules on every
/// backend. Every [`RecordStore`] has them.
#[async_trait]
pub trait Records: RecordStore {
    /// The record of `kind` under `key`, if there is one.
    async fn record(
        &self,
        kind: RecordKind,
        tenant: &str,
        key: &str,
    ) -> StoreResult<Option<Stored>> {
        let keys = [key.to_owned()];
        let found = self.records(kind, tenant, Keys::These(&keys)).await?;
        Ok(found.into_iter().next().map(|(_, stored)| stored))
    }

    /// Every cut of `reader`: per edge, the standing one (if set) and the
    /// ranges kept.
    async fn cuts(&self, tenant: &str, reader: &str) -> StoreResult<Vec<Cut>> {
        let prefix = format!("{reader}{SEPARATOR}");
        let mut out = Vec::new();
        for (key, stored) in self
            .records(RecordKind::Cut, tenant, Keys::Under(&prefix))
            .await?
        {
            let record = format!("cut {tenant}/{}", key.replace(SEPARATOR, "/"));
            let mut parts = key[prefix.len()..].splitn(2, SEPARATOR);
            let (Some(code), Some(actor)) = (parts.next(), parts.next()) else {
                return Err(StoreError::corrupt(record, "a key without edge and actor"));
            };
            let kind = EDGE_KIND.read_name(code, &record)?;
            for (since, began, until) in decode_cut(&stored.body, &record)? {
                out.push(Cut {
                    kind,
                    actor: actor.to_owned(),
                    since,
                    began,
                    until,
                });
            }
        }
        Ok(out)
    }

    /// Sets a cut of `reader`: the standing edge's (no `until`), replacing
    /// it; or a range an ended edge kept (with `until`), beside the ranges
    /// kept before (one per `until`, a new one replacing the old).
    async fn set_cut(&self, tenant: &str, reader: &str, cut: &Cut) -> StoreResult<()> {
        let key = cut_key(reader, cut.kind, &cut.actor);
        loop {
            let stored = self.record(RecordKind::Cut, tenant, &key).await?;
            let (version, mut ranges) = match stored {
                Some(stored) => (stored.version, decode_cut(&stored.body, &key)?),
                None => (0, Vec::new()),
            };
            ranges.retain(|r| r.2 != cut.until);
            ranges.push((cut.since, cut.began, cut.until));
            let body = Some(encode_cut(&ranges));
            if self
                .put_record(RecordKind::Cut, tenant, &key, body, Some(version))
                .await?
            {
                return Ok(());
            }
        }
    }

    /// Clears `reader`'s cuts for the `kind` edge to `actor`: the standing
    /// one and every kept range.
    async fn clear_cut(
        &self,
        tenant: &str,
        reader: &str,
        kind: EdgeKind,
        actor: &str,
    ) -> StoreResult<()> {
        let key = cut_key(reader, kind, actor);
        self.put_record(RecordKind::Cut, tenant, &key, None, None)
            .await
            .map(drop)
    }

    /// Notes that `user`'s actions are no longer fanned out to followers
    /// (hybrid). For good: their readers merge their outbox in from then on.
    async fn mark_celebrity(&self, tenant: &str, user: &str) -> StoreResult<()> {
        // Marked once: a second mark finds the first and writes nothing.
        self.put_record(
            RecordKind::Celebrity,
            tenant,
            user,
            Some(Vec::new()),
            Some(0),
        )
        .await
        .map(drop)
    }

    /// Which of `users` are marked celebrities.
    async fn celebrities(&self, tenant: &str, users: &[String]) -> StoreResult<Vec<String>> {
        if users.is_empty() {
            return Ok(Vec::new());
        }
        let found = self
            .records(RecordKind::Celebrity, tenant, Keys::These(users))
            .await?;
        Ok(found.into_iter().map(|(user, _)| user).collect())
    }

    /// A small value the deployment keeps about itself, by key.
    async fn meta(&self, key: &str) -> StoreResult<Option<Vec<u8>>> {
        let found = self.record(RecordKind::Meta, "", key).await?;
        Ok(found.map(|s| s.body))
    }

    /// Sets a [`Records::meta`] value.
    async fn set_meta(&self, key: &str, value: &[u8]) -> StoreResult<()> {
        self.put_record(RecordKind::Meta, "", key, Some(value.to_vec()), None)
            .await
            .map(drop)
    }

    /// The [`Records::meta`] value under `key`, storing `value` first if
    /// none is: of processes that start at once, the first write wins (a
    /// write over no version) and every one answers what that write stored.
    async fn meta_or_insert(&self, key: &str, value: &[u8]) -> StoreResult<Vec<u8>> {
        loop {
            if let Some(kept) = self.meta(key).await? {
                return Ok(kept);
            }
            let body = Some(value.to_vec());
            if self
                .put_record(RecordKind::Meta, "", key, body, Some(0))
                .await?
            {
                return Ok(value.to_vec());
            }
        }
    }

    /// `owner`'s inbox; a fresh one (version 0) if never stored.
    async fn inbox(&self, tenant: &str, owner: &str) -> StoreResult<Inbox> {
        match self.record(RecordKind::Inbox, tenant, owner).await? {
            Some(stored) => decode_inbox(&stored, tenant, owner),
            None => Ok(Inbox::new(tenant, owner)),
        }
    }

    /// Stores `inbox` only over the version before its own (nothing, for
    /// version 1). Returns false if another write came first: the caller
    /// reads again.
    async fn put_inbox(&self, inbox: &Inbox) -> StoreResult<bool> {
        if inbox.version == 0 {
            return Ok(false);
        }
        let body = Some(encode_inbox(inbox)?);
        let expect = Some(inbox.version - 1);
        self.put_record(RecordKind::Inbox, &inbox.tenant, &inbox.owner, body, expect)
            .await
    }
}

impl<T: RecordStore + ?Sized> Records for T {}

//! Webhook registrations and dead deliveries, as records of their tenant
//! ([`RecordKind::Webhook`], [`RecordKind::DeadDelivery`]), written whole
//! under their version, the same way on every backend.

use serde::{Deserialize, Serialize};

use super::outbox::Delivery;
use super::sign::Secret;
use super::EventType;
use crate::model::Millis;
use crate::store::records::SEPARATOR;
use crate::store::{Keys, RecordKind, Records, Store, StoreError, StoreResult};

/// Webhooks one tenant may register: every event is queued once per
/// endpoint that hears it.
pub const MAX_WEBHOOKS: usize = 16;

/// How long a rotated-out secret still signs deliveries, beside the new
/// one, so a receiver can switch over without refusing any.
pub const ROTATION_GRACE_MS: Millis = 24 * 60 * 60 * 1000;

/// An endpoint registered to hear a tenant's events.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Webhook {
    /// `wh_` and 24 hex digits.
    pub id: String,
    pub url: String,
    pub events: Vec<EventType>,
    /// The signing secret (`whsec_…`).
    pub secret: String,
    /// The secret the last rotation replaced, and until when it still
    /// signs beside [`Webhook::secret`].
    #[serde(default)]
    pub previous: Option<(String, Millis)>,
    pub enabled: bool,
    pub created: Millis,
    /// The record's version (not stored in the body).
    #[serde(skip)]
    pub version: u64,
}

impl Webhook {
    /// Whether it hears `event`. A disabled webhook hears it too: its
    /// deliveries are kept dead when they come due, to replay once it is
    /// enabled again.
    pub fn hears(&self, event: EventType) -> bool {
        self.events.contains(&event)
    }

    /// The secrets a delivery at `now` is signed with: the current one, and
    /// the one rotated out while its grace lasts.
    pub fn secrets(&self, now: Millis) -> StoreResult<Vec<Secret>> {
        let mut out = vec![self.parse(&self.secret)?];
        if let Some((old, until)) = &self.previous {
            if now < *until {
                out.push(self.parse(old)?);
            }
        }
        Ok(out)
    }

    fn parse(&self, text: &str) -> StoreResult<Secret> {
        Secret::parse(text).map_err(|e| {
            StoreError::corrupt(format_args!("webhook {}", self.id), format_args!("{e}"))
        })
    }
}

/// A delivery given up on: what was sent, and how it last failed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeadDelivery {
    pub delivery: Delivery,
    /// When its event was first queued.
    pub queued: Millis,
    /// When it was given up on.
    pub died: Millis,
    /// Why the last attempt failed.
    pub error: String,
}

fn encode<T: Serialize>(value: &T, what: &str) -> StoreResult<Vec<u8>> {
    rmp_serde::to_vec_named(value)
        .map_err(|e| StoreError::internal(format!("cannot encode a {what}"), e))
}

fn decode<T: for<'de> Deserialize<'de>>(
    body: &[u8],
    record: impl std::fmt::Display,
) -> StoreResult<T> {
    rmp_serde::from_slice(body).map_err(|e| StoreError::corrupt(record, e.to_string()))
}

/// The tenant's webhooks, in id order.
pub async fn list(store: &dyn Store, tenant: &str) -> StoreResult<Vec<Webhook>> {
    let found = store
        .records(RecordKind::Webhook, tenant, Keys::Under(""))
        .await?;
    found
        .into_iter()
        .map(|(key, stored)| {
            let mut hook: Webhook = decode(&stored.body, format_args!("webhook {tenant}/{key}"))?;
            hook.version = stored.version;
            Ok(hook)
        })
        .collect()
}

/// One webhook of the tenant, if there is one.
pub async fn get(store: &dyn Store, tenant: &str, id: &str) -> StoreResult<Option<Webhook>> {
    let Some(stored) = store.record(RecordKind::Webhook, tenant, id).await? else {
        return Ok(None);
    };
    let mut hook: Webhook = decode(&stored.body, format_args!("webhook {tenant}/{id}"))?;
    hook.version = stored.version;
    Ok(Some(hook))
}

/// Writes `hook` if its version is still the stored one (0: new). Returns
/// whether it was written; a false is a race lost.
pub async fn put(store: &dyn Store, tenant: &str, hook: &Webhook) -> StoreResult<bool> {
    let body = encode(hook, "webhook")?;
    store
        .put_record(
            RecordKind::Webhook,
            tenant,
            &hook.id,
            Some(body),
            Some(hook.version),
        )
        .await
}

/// Changes webhook `id` by `change`, read again if another writer won a
/// race. Returns it as written; none if there is no such webhook.
pub async fn change(
    store: &dyn Store,
    tenant: &str,
    id: &str,
    change: impl Fn(&mut Webhook),
) -> StoreResult<Option<Webhook>> {
    for _ in 0..crate::notify::RETRIES {
        let Some(mut hook) = get(store, tenant, id).await? else {
            return Ok(None);
        };
        change(&mut hook);
        if put(store, tenant, &hook).await? {
            hook.version += 1;
            return Ok(Some(hook));
        }
    }
    Err(StoreError::new(
        crate::store::ErrorKind::Unavailable,
        format!("webhook {id} is being changed by others; try again"),
    ))
}

/// Writes `hook` over whatever is stored under its id (an import).
pub async fn restore(store: &dyn Store, tenant: &str, hook: &Webhook) -> StoreResult<()> {
    let body = encode(hook, "webhook")?;
    store
        .put_record(RecordKind::Webhook, tenant, &hook.id, Some(body), None)
        .await
        .map(drop)
}

/// Checks an imported registration as registering checks it (its URL's
/// form and its secrets; the addresses are checked when it is sent to).
pub fn check(hook: &Webhook) -> Result<(), crate::model::limits::InputError> {
    let bad = |what: String| crate::model::limits::InputError::new(what);
    crate::model::limits::check_id("id", &hook.id)?;
    super::target::parse(&hook.url).map_err(bad)?;
    hook.secrets(i64::MIN).map_err(|e| bad(e.message)).map(drop)
}

/// A stored record of `kind` (webhook or dead delivery) as an archive
/// carries it.
pub fn archived(
    kind: RecordKind,
    tenant: &str,
    key: &str,
    stored: &crate::store::Stored,
) -> StoreResult<crate::store::Record> {
    let what = format!("{kind:?} {tenant}/{}", key.replace(SEPARATOR, "/"));
    let tenant = tenant.to_owned();
    match kind {
        RecordKind::Webhook => Ok(crate::store::Record::Webhook {
            tenant,
            webhook: decode(&stored.body, what)?,
        }),
        _ => Ok(crate::store::Record::DeadDelivery {
            tenant,
            dead: decode(&stored.body, what)?,
        }),
    }
}

fn dead_key(webhook: &str, message: &str) -> String {
    format!("{webhook}{SEPARATOR}{message}")
}

/// Keeps a delivery given up on, to list and replay.
pub async fn bury(store: &dyn Store, tenant: &str, dead: &DeadDelivery) -> StoreResult<()> {
    let key = dead_key(&dead.delivery.webhook, &dead.delivery.message);
    let body = encode(dead, "dead delivery")?;
    store
        .put_record(RecordKind::DeadDelivery, tenant, &key, Some(body), None)
        .await
        .map(drop)
}

/// The dead deliveries of a webhook, in message-id order; only `messages`
/// if given.
pub async fn dead(
    store: &dyn Store,
    tenant: &str,
    webhook: &str,
    messages: Option<&[String]>,
) -> StoreResult<Vec<DeadDelivery>> {
    let found = match messages {
        Some(ids) => {
            let keys: Vec<String> = ids.iter().map(|m| dead_key(webhook, m)).collect();
            store
                .records(RecordKind::DeadDelivery, tenant, Keys::These(&keys))
                .await?
        }
        None => {
            let prefix = format!("{webhook}{SEPARATOR}");
            store
                .records(RecordKind::DeadDelivery, tenant, Keys::Under(&prefix))
                .await?
        }
    };
    found
        .into_iter()
        .map(|(key, stored)| {
            decode(
                &stored.body,
                format_args!("dead delivery {tenant}/{}", key.replace(SEPARATOR, "/")),
            )
        })
        .collect()
}

/// Forgets a dead delivery (replayed).
pub async fn unbury(store: &dyn Store, tenant: &str, dead: &DeadDelivery) -> StoreResult<()> {
    let key = dead_key(&dead.delivery.webhook, &dead.delivery.message);
    store
        .put_record(RecordKind::DeadDelivery, tenant, &key, None, None)
        .await
        .map(drop)
}

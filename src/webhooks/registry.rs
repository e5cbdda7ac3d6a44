//! Webhook registrations and dead deliveries, as records of their tenant
//! ([`RecordKind::Webhook`], [`RecordKind::DeadDelivery`]), written whole
//! under their version, the same way on every backend.

use super::sign::Secret;
use crate::model::{DeadDelivery, Millis, Webhook};
use crate::store::records::{
    dead_delivery_key, decode_body, decode_webhook, encode_body, SEPARATOR,
};
use crate::store::{ErrorKind, Keys, RecordKind, Records, Store, StoreError, StoreResult, Stored};

/// Webhooks one tenant may register: every event is queued once per
/// endpoint that hears it.
pub const MAX_WEBHOOKS: usize = 16;

/// How long a rotated-out secret still signs deliveries, beside the new
/// one, so a receiver can switch over without refusing any.
pub const ROTATION_GRACE_MS: Millis = 24 * 60 * 60 * 1000;

/// The secrets a delivery at `now` is signed with: the current one, and
/// the one rotated out while its grace lasts.
pub fn secrets(hook: &Webhook, now: Millis) -> StoreResult<Vec<Secret>> {
    let parse = |text: &str| {
        Secret::parse(text).map_err(|e| StoreError::corrupt(format_args!("webhook {}", hook.id), e))
    };
    let mut out = vec![parse(&hook.secret)?];
    if let Some((old, until)) = &hook.previous {
        if now < *until {
            out.push(parse(old)?);
        }
    }
    Ok(out)
}

/// The tenant's webhooks, in id order.
pub async fn list(store: &dyn Store, tenant: &str) -> StoreResult<Vec<Webhook>> {
    let found = store
        .records(RecordKind::Webhook, tenant, Keys::Under(""))
        .await?;
    found
        .into_iter()
        .map(|(key, stored)| decode_webhook(&stored, tenant, &key))
        .collect()
}

/// One webhook of the tenant, if there is one.
pub async fn get(store: &dyn Store, tenant: &str, id: &str) -> StoreResult<Option<Webhook>> {
    let stored = store.record(RecordKind::Webhook, tenant, id).await?;
    stored.map(|s| decode_webhook(&s, tenant, id)).transpose()
}

/// Writes `hook` if its version is still the stored one (0: new). Returns
/// whether it was written; a false is a race lost.
pub async fn put(store: &dyn Store, tenant: &str, hook: &Webhook) -> StoreResult<bool> {
    let body = encode_body(hook, "webhook")?;
    let expect = Some(hook.version);
    store
        .put_record(RecordKind::Webhook, tenant, &hook.id, Some(body), expect)
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
        ErrorKind::Unavailable,
        format!("webhook {id} is being changed by others; try again"),
    ))
}

/// Keeps a delivery given up on, to list and replay.
pub async fn bury(store: &dyn Store, tenant: &str, dead: &DeadDelivery) -> StoreResult<()> {
    let key = dead_delivery_key(&dead.delivery.webhook, &dead.delivery.message);
    let body = encode_body(dead, "dead delivery")?;
    store
        .put_record(RecordKind::DeadDelivery, tenant, &key, Some(body), None)
        .await
        .map(drop)
}

/// A page of a webhook's dead deliveries, in message-id order: at most
/// `limit`, from the first past message `after`. Reads only those.
pub async fn dead(
    store: &dyn Store,
    tenant: &str,
    webhook: &str,
    after: Option<&str>,
    limit: usize,
) -> StoreResult<Vec<DeadDelivery>> {
    let under = format!("{webhook}{SEPARATOR}");
    let after = after.map(|m| dead_delivery_key(webhook, m));
    let keys = Keys::Page {
        under: &under,
        after: after.as_deref(),
        limit,
    };
    let found = store
        .records(RecordKind::DeadDelivery, tenant, keys)
        .await?;
    decode_dead(tenant, found)
}

/// The dead deliveries of `messages` of a webhook, those there are.
pub async fn dead_of(
    store: &dyn Store,
    tenant: &str,
    webhook: &str,
    messages: &[String],
) -> StoreResult<Vec<DeadDelivery>> {
    let keys: Vec<String> = messages
        .iter()
        .map(|m| dead_delivery_key(webhook, m))
        .collect();
    let found = store
        .records(RecordKind::DeadDelivery, tenant, Keys::These(&keys))
        .await?;
    decode_dead(tenant, found)
}

fn decode_dead(tenant: &str, found: Vec<(String, Stored)>) -> StoreResult<Vec<DeadDelivery>> {
    found
        .into_iter()
        .map(|(key, stored)| {
            let record = format!("dead delivery {tenant}/{}", key.replace(SEPARATOR, "/"));
            decode_body(&stored.body, record)
        })
        .collect()
}

/// Forgets a dead delivery (replayed).
pub async fn unbury(store: &dyn Store, tenant: &str, dead: &DeadDelivery) -> StoreResult<()> {
    let key = dead_delivery_key(&dead.delivery.webhook, &dead.delivery.message);
    store
        .put_record(RecordKind::DeadDelivery, tenant, &key, None, None)
        .await
        .map(drop)
}

//! Actions deleted lately, kept for as long as an answer is kept for
//! retries ([`RecordKind::Deletion`]): a retry under an `Idempotency-Key`
//! of the request that recorded an action deleted since does not store it
//! again, and one of the request that deleted it (its process killed
//! before it answered) answers as it would have. Each deletion is named
//! by an id the deleting request draws ([`Minter`](super::minted::Minter)),
//! which only its retries draw again.

use serde::{Deserialize, Serialize};

use crate::model::{Millis, ObjectId};
use crate::store::{Keys, RecordKind, Records, Store, StoreError, StoreResult};

/// Lapsed deletions a new one removes, at most (the oldest actions'
/// first, in id order).
const SWEEP: usize = 16;

#[derive(Serialize, Deserialize)]
struct Deletion {
    /// The deleting request's id of the deletion (hex).
    by: String,
    /// When it no longer counts.
    expires: Millis,
}

/// Keeps that `action` is deleted by the deletion `by`, until `expires`,
/// and removes lapsed ones. Written before the action goes: a process
/// killed between the two leaves the action, which the retry deletes.
pub async fn keep(
    store: &dyn Store,
    tenant: &str,
    action: ObjectId,
    by: ObjectId,
    now: Millis,
    expires: Millis,
) -> StoreResult<()> {
    let body = serde_json::to_vec(&Deletion {
        by: by.to_hex(),
        expires,
    })
    .map_err(|e| StoreError::internal("cannot encode a deletion", e))?;
    let key = action.to_hex();
    store
        .put_record(RecordKind::Deletion, tenant, &key, Some(body), None)
        .await?;
    let page = Keys::Page {
        under: "",
        after: None,
        limit: SWEEP,
    };
    for (key, stored) in store.records(RecordKind::Deletion, tenant, page).await? {
        if read(&stored.body).is_none_or(|d| d.expires <= now) {
            let expect = Some(stored.version);
            store
                .put_record(RecordKind::Deletion, tenant, &key, None, expect)
                .await?;
        }
    }
    Ok(())
}

/// The id of `action`'s deletion, if it was deleted and that is kept
/// still.
pub async fn of(
    store: &dyn Store,
    tenant: &str,
    action: ObjectId,
    now: Millis,
) -> StoreResult<Option<ObjectId>> {
    let found = store
        .record(RecordKind::Deletion, tenant, &action.to_hex())
        .await?;
    Ok(found
        .and_then(|stored| read(&stored.body))
        .filter(|d| d.expires > now)
        .and_then(|d| ObjectId::parse_str(&d.by).ok()))
}

fn read(body: &[u8]) -> Option<Deletion> {
    serde_json::from_slice(body).ok()
}

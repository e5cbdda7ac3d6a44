//! Export and import for the bucket layouts: each reader's entries leave
//! newest first (a hidden one as a tombstone at the epoch), and come back
//! replacing what the reader held of the same actions.

use std::collections::{HashMap, HashSet};

use bson::{doc, Bson, Document};
use futures_util::stream::{self, BoxStream, StreamExt, TryStreamExt};

use super::buckets::{Bucket, Buckets, Entry};
use super::Stored;
use crate::model::ObjectId;
use crate::store::mongo::{db_err, TOMBSTONE};
use crate::store::StoreResult;

impl Buckets {
    pub(super) async fn export_all(
        &self,
        tenant: Option<&str>,
    ) -> StoreResult<BoxStream<'static, StoreResult<Stored>>> {
        let filter = tenant.map_or_else(Document::new, |t| doc! { "tenant": t });
        let cursor = self
            .buckets
            .find(filter)
            .sort(doc! { "tenant": 1, "owner": 1 })
            .await
            .map_err(db_err)?;
        // Each reader's buckets come together: their entries leave sorted.
        let readers = cursor
            .map_err(db_err)
            .chain(stream::once(async { Ok(Bucket::end()) }))
            .scan(Vec::<Stored>::new(), |pending, bucket| {
                let out = match bucket {
                    Err(err) => vec![Err(err)],
                    Ok(bucket) => {
                        let next_reader = pending.first().is_some_and(|p| {
                            p.tenant != bucket.tenant || p.item.owner != bucket.owner
                        });
                        let mut out = Vec::new();
                        if next_reader || bucket.is_end() {
                            let mut done = std::mem::take(pending);
                            done.sort_by_key(|s| std::cmp::Reverse(s.item.position()));
                            let mut seen = HashSet::new();
                            done.retain(|s| seen.insert(s.item.action_id));
                            out.extend(done.into_iter().map(Ok));
                        }
                        // A hidden entry leaves as a tombstone: at the epoch.
                        pending.extend(bucket.e.iter().map(|e| {
                            let mut item = e.item(&bucket.tenant, &bucket.owner);
                            if e.h {
                                item.relevancy = TOMBSTONE;
                            }
                            Stored {
                                tenant: bucket.tenant.clone(),
                                item,
                                hidden: e.h,
                            }
                        }));
                        out
                    }
                };
                std::future::ready(Some(stream::iter(out)))
            })
            .flatten();
        Ok(readers.boxed())
    }

    pub(super) async fn import_all(&self, items: Vec<Stored>) -> StoreResult<()> {
        let mut by_tenant: HashMap<String, Vec<Stored>> = HashMap::new();
        for stored in items {
            by_tenant
                .entry(stored.tenant.clone())
                .or_default()
                .push(stored);
        }
        for (tenant, items) in by_tenant {
            // What the readers hold of these actions is replaced.
            let mut by_owner: HashMap<&str, Vec<ObjectId>> = HashMap::new();
            for s in &items {
                by_owner
                    .entry(&s.item.owner)
                    .or_default()
                    .push(s.item.action_id);
            }
            for (owner, ids) in &by_owner {
                self.pull(
                    doc! { "tenant": &tenant, "owner": *owner, "e.a": { "$in": ids } },
                    ids,
                    Document::new(),
                )
                .await?;
            }
            let (hidden, visible): (Vec<&Stored>, Vec<&Stored>) =
                items.iter().partition(|s| s.hidden);
            let entries = visible
                .iter()
                .map(|s| (s.item.owner.as_str(), Entry::of(&s.item, false)))
                .collect();
            self.append(&tenant, entries).await?;
            for s in hidden {
                self.lay_tombstone(&tenant, &s.item.owner, &s.item).await?;
            }
        }
        Ok(())
    }
}

impl Bucket {
    /// The mark after the last bucket of an export.
    fn end() -> Bucket {
        Bucket {
            id: Bson::Null,
            tenant: String::new(),
            owner: String::new(),
            hi: None,
            lo: None,
            e: Vec::new(),
        }
    }

    fn is_end(&self) -> bool {
        self.id == Bson::Null
    }
}

//! MongoDB: group feeds are records (see [`crate::store::group_feeds`]).
//! Earlier versions kept each group's ring in collections of its own
//! (`group_feeds`, one document per slot, and `group_counters`, each
//! group's last post number): it is moved into its record at open, once
//! (`groupFeeds` in `meta`), and the earlier collections dropped.

use std::collections::BTreeMap;

use bson::Document;

use super::records::record_id;
use super::MongoStore;
use crate::model::Position;
use crate::store::group_feeds::{Ring, Slot};
use crate::store::{RecordKind, StoreError, StoreResult};

/// The `meta` document noting the group feeds version reached.
const GROUP_FEEDS_VERSION_ID: &str = "groupFeeds";
const GROUP_FEEDS_VERSION: i32 = 1;

impl MongoStore {
    /// Moves the rings earlier versions kept in `group_feeds` and
    /// `group_counters` into their records, once. A move cut short is made
    /// again: what it moved already is kept.
    pub(super) async fn migrate_group_feeds(&self) -> StoreResult<()> {
        let noted = self.noted_version(GROUP_FEEDS_VERSION_ID).await?;
        if noted >= GROUP_FEEDS_VERSION {
            return Ok(());
        }
        let mut rings: BTreeMap<(String, String), Ring> = BTreeMap::new();
        for d in self.earlier("group_feeds").await? {
            let corrupt = || StoreError::corrupt(format_args!("group_feeds/{d}"), "not a slot");
            let field = |name: &str| d.get_i64(name).ok().and_then(|v| u64::try_from(v).ok());
            let (Some(slot), Some(n), Ok(relevancy), Ok(action_id)) = (
                field("slot"),
                field("n"),
                d.get_i64("r"),
                d.get_object_id("id"),
            ) else {
                return Err(corrupt());
            };
            let key = (text(&d, "tenant")?, text(&d, "group")?);
            let at = Position {
                relevancy,
                action_id,
            };
            rings
                .entry(key)
                .or_default()
                .slots
                .insert(slot, Slot { n, at });
        }
        for d in self.earlier("group_counters").await? {
            let n = d.get_i64("n").ok().and_then(|v| u64::try_from(v).ok());
            let key = (text(&d, "tenant")?, text(&d, "group")?);
            if let Some(ring) = rings.get_mut(&key) {
                ring.last = n.unwrap_or(0);
            }
        }
        for ((tenant, group), ring) in &mut rings {
            let newest = ring.slots.values().map(|s| s.n).max().unwrap_or(0);
            ring.last = ring.last.max(newest);
            let id = record_id(RecordKind::GroupFeed, tenant, group);
            self.keep(id, 1, ring.encode()).await?;
        }
        for earlier in ["group_feeds", "group_counters"] {
            self.db
                .collection::<Document>(earlier)
                .drop()
                .await
                .map_err(super::db_err)?;
        }
        self.note_version(GROUP_FEEDS_VERSION_ID, GROUP_FEEDS_VERSION)
            .await?;
        if !rings.is_empty() {
            tracing::info!(rings = rings.len(), "group feeds moved to records");
        }
        Ok(())
    }
}

/// A string field of an earlier ring's document.
fn text(d: &Document, field: &str) -> StoreResult<String> {
    d.get_str(field).map(str::to_owned).map_err(|_| {
        StoreError::corrupt(
            format_args!("earlier group feed {d}"),
            format_args!("no {field}"),
        )
    })
}

//! The descriptor file over stored data. A deployment keeps the
//! [`Signature`] of the file it last started with; a file that removes a
//! type, changes a field's type or adds a required field without a default
//! is judged against the stored actions, and refused if any would no longer
//! read, unless the operator allows it (they then read as
//! `UnknownDescriptor`).

use futures_util::StreamExt;

use super::catalog::{Catalog, Signature};
use crate::store::archive::Record;
use crate::store::{Records, Store};

/// Where the deployment keeps the signature of its descriptor file.
pub const META_KEY: &str = "descriptors";

/// Stored actions a refused file would break: at most this many are named.
const NAMED: usize = 10;

/// How a start with `catalog` over `store` went.
#[derive(Debug, PartialEq, Eq)]
pub enum Judged {
    /// The file is the one the store knew, or the store was new.
    Same,
    /// The file changed, and every stored action still reads.
    Changed(Vec<String>),
    /// The file changed in ways that break stored actions, which read as
    /// `UnknownDescriptor` (allowed).
    Broken { changes: Vec<String>, actions: u64 },
}

/// What changed from `old` to `new` that stored actions may not survive.
pub fn breaking_changes(old: &Signature, new: &Signature) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (ty, old_fields) in &old.0 {
        let Some(new_fields) = new.0.get(ty) else {
            out.push((ty.clone(), format!("type {ty} was removed")));
            continue;
        };
        for (field, old_type) in old_fields {
            match new_fields.get(field) {
                Some(new_type) if new_type != old_type => out.push((
                    ty.clone(),
                    format!("{ty}.{field} changed from {old_type} to {new_type}"),
                )),
                _ => {}
            }
        }
        for (field, new_type) in new_fields {
            if !old_fields.contains_key(field) && new_type.ends_with('!') {
                out.push((
                    ty.clone(),
                    format!("{ty}.{field} is new and required ({new_type})"),
                ));
            }
        }
    }
    out
}

/// Judges `catalog` against what `store` holds, and keeps its signature
/// when it is served. Refuses a file that would leave stored actions
/// unreadable, naming them, unless `allow_changes`.
pub async fn judge(
    store: &dyn Store,
    catalog: &Catalog,
    allow_changes: bool,
) -> anyhow::Result<Judged> {
    let new = catalog.signature();
    let encoded = serde_json::to_vec(&new)?;
    let kept = store.meta_or_insert(META_KEY, &encoded).await?;
    let old: Signature = serde_json::from_slice(&kept).unwrap_or_default();
    if old == new {
        return Ok(Judged::Same);
    }
    let changes = breaking_changes(&old, &new);
    let all: Vec<String> = changes.iter().map(|(_, c)| c.clone()).collect();
    if changes.is_empty() {
        store.set_meta(META_KEY, &encoded).await?;
        return Ok(Judged::Changed(all));
    }
    // The actions of the changed types that no longer read.
    let mut broken = 0u64;
    let mut named = Vec::new();
    let mut records = store.export(None);
    while let Some(record) = records.next().await {
        let Record::Action { action } = record? else {
            continue;
        };
        let ty = action.descriptor.type_name();
        if changes.iter().any(|(t, _)| t == ty) && !catalog.conforms(&action.descriptor) {
            broken += 1;
            if named.len() < NAMED {
                named.push(format!("{}/{} ({ty})", action.tenant, action.id));
            }
        }
    }
    drop(records);
    if broken > 0 && !allow_changes {
        anyhow::bail!(
            "the descriptor file does not fit {broken} stored action(s): {}. \
             Stored actions it breaks: {}{}. Keep the old types and fields (add new \
             fields as optional or with @default), or start with \
             --allow-descriptor-changes to serve them as UnknownDescriptor",
            all.join("; "),
            named.join(", "),
            if broken > named.len() as u64 {
                ", …"
            } else {
                ""
            },
        );
    }
    store.set_meta(META_KEY, &encoded).await?;
    Ok(if broken > 0 {
        Judged::Broken {
            changes: all,
            actions: broken,
        }
    } else {
        Judged::Changed(all)
    })
}

//! What the store holds behind a feed that lacks an action it should show,
//! read straight from the store once the processes are stopped and added
//! to the violation: the action's scope, readers and fan-out state, the
//! reader's item of it as the timeline holds it, and its fan-out job if one
//! is still queued. A rare violation then says where the item went, not
//! only that it is missing.

use crate::model::ObjectId;
use crate::store::{JobKind, QueuedRead, Store, Timelines};

use super::client::TENANT;

/// At most this many violations are looked into.
const PROBED: usize = 5;

/// One line per `(reader, action id)` of `lacking`, saying what the store
/// at `url` holds; a line saying why when it cannot be read.
pub async fn probe(url: &str, lacking: &[(String, String)]) -> Vec<String> {
    let store = match crate::store::open(url).await {
        Ok(store) => store,
        Err(err) => return vec![format!("the store could not be opened to look: {err}")],
    };
    let mut lines = Vec::new();
    for (reader, id) in lacking.iter().take(PROBED) {
        let line = match ObjectId::parse_str(id) {
            Ok(oid) => look(store.as_ref(), reader, oid)
                .await
                .unwrap_or_else(|err| format!("not read: {err}")),
            Err(_) => format!("{id} is not an action id"),
        };
        lines.push(line);
    }
    lines
}

async fn look(store: &dyn Store, reader: &str, id: ObjectId) -> anyhow::Result<String> {
    let action = store.get_actions(TENANT, &[id]).await?.pop();
    let action = match action {
        Some(a) => format!(
            "the store's action: {:?}, readers {:?}, groups {:?}, hidden {}, fan-out {:?}",
            a.scope, a.readers, a.scope_groups, a.hidden, a.fan_out.state
        ),
        None => "the store has no such action".to_owned(),
    };
    let item = match store.feed_item(TENANT, reader, id).await? {
        Some(item) => format!(
            "{reader}'s item: reason {:?} by {}, relevancy {}, changed {}",
            item.reason.kind, item.reason.actor_id, item.relevancy, item.changed
        ),
        None => format!("{reader} holds no visible item of it"),
    };
    let key = id.to_hex();
    let queued = store
        .queued(JobKind::FanOut, TENANT, QueuedRead::under(&key))
        .await?;
    let job = match queued.first() {
        Some(q) => format!("its fan-out is queued (lease {:?})", q.held),
        None => "no fan-out is queued for it".to_owned(),
    };
    Ok(format!("{action}; {item}; {job}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::descriptor::Descriptor;
    use crate::model::{Action, Counts, FanOut, Scope};

    #[tokio::test]
    async fn a_probe_says_what_the_store_holds_of_a_missing_item() {
        let dir = tempfile::tempdir().expect("dir");
        let url = format!("embedded:{}", dir.path().display());
        let id = ObjectId::new();
        {
            let store = crate::store::open(&url).await.expect("store");
            let action = Action {
                id,
                tenant: TENANT.into(),
                actor_id: "u2-2".into(),
                conducted: 1_000,
                hidden: false,
                scope: Scope::Restricted,
                readers: vec!["u0-1".into()],
                scope_groups: vec![],
                ref_ids: vec![],
                tags: vec![],
                descriptor: Descriptor::new("StatusPost", serde_json::json!({ "text": "hi" })),
                fan_out: FanOut::pending(),
                counts: Counts::default(),
                expires_at: None,
                to: Vec::new(),
                foreign: None,
            };
            store.insert_action(&action).await.expect("insert");
        }
        let lacking = [
            ("u0-1".to_owned(), id.to_hex()),
            ("u0-1".to_owned(), ObjectId::new().to_hex()),
        ];
        let lines = probe(&url, &lacking).await;
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(
            lines[0].contains("Restricted, readers [\"u0-1\"]")
                && lines[0].contains("u0-1 holds no visible item")
                && lines[0].contains("its fan-out is queued"),
            "{}",
            lines[0]
        );
        assert!(
            lines[1].contains("no such action") && lines[1].contains("no fan-out is queued"),
            "{}",
            lines[1]
        );
    }
}

//! What mutations tell live subscribers: feed items removed, an action
//! leaving feeds (hidden or deleted), slices and reactions.

use std::sync::Arc;

use super::error::ApiResultExt;
use super::AppState;
use crate::events::{ActionEvent, ActionEventKind, Event, FeedEventKind, Topic};
use crate::model::{Action, Comment, FeedItem};
use crate::timeline::audience;

pub(super) fn publish_removed(state: &AppState, tenant: &str, items: Vec<FeedItem>) {
    state
        .hub
        .publish_feed_items(FeedEventKind::Removed, tenant, None, items);
}

/// Tells the live readers an action left (hidden or deleted): those whose
/// items were `removed`, and those online who pulled it.
pub(super) async fn publish_action_removed(
    state: &AppState,
    action: &Action,
    removed: Vec<FeedItem>,
) -> async_graphql::Result<()> {
    let pulls = !state.model.pushes_all();
    audience::announce_removed(state.store.as_ref(), &state.hub, pulls, action, removed)
        .await
        .api()
}

/// Tells the live `sliceEvents` of each of the action's refs.
pub(super) fn publish_to_slices(state: &AppState, action: &Action) {
    let shared = Arc::new(action.clone());
    let renders = Arc::default();
    for ref_id in &action.ref_ids {
        let topic = Topic::Slice {
            tenant: action.tenant.clone(),
            ref_id: ref_id.clone(),
        };
        state
            .hub
            .publish(&topic, Event::Slice(shared.clone(), Arc::clone(&renders)));
    }
}

/// Tells the live `actionEvents` of an action about a reaction.
pub(super) fn publish_reaction(
    state: &AppState,
    action: &Action,
    kind: ActionEventKind,
    comment: Option<&Comment>,
    user: Option<&str>,
) {
    let topic = Topic::Action {
        tenant: action.tenant.clone(),
        action_id: action.id,
    };
    let event = ActionEvent {
        kind,
        action: Arc::new(action.clone()),
        comment: comment.cloned(),
        user: user.map(str::to_owned),
        shared: Arc::default(),
    };
    state.hub.publish(&topic, Event::Action(Arc::new(event)));
}

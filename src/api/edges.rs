//! Follows, friendships and follows of groups as mutations change them:
//! the edge, its cut and backfill, and on the way out the unfollow that
//! takes its items away (or the kept history), under whichever feed model
//! runs.

use async_graphql::{Context, ID};

use super::error::{bad_input, not_found, ApiResultExt};
use super::global_id::{opt_user_id_arg, user_id_arg};
use super::{acting_user, require_users, state, viewer};
use crate::model::limits::normalize_id;
use crate::model::EdgeKind;
use crate::store::{FollowJob, Graph, Records, Unfollow};
use crate::timeline::{follow, unfollow};
use crate::webhooks::outbox;

/// Adds or removes `kind` edge from the viewer (or `as_user_id`) to `to`
/// (a user's id, or for a group follow a group's). Returns whether
/// anything changed.
pub(super) async fn change(
    ctx: &Context<'_>,
    kind: EdgeKind,
    to: ID,
    as_user_id: Option<ID>,
    change: EdgeChange,
) -> async_graphql::Result<bool> {
    let viewer = viewer(ctx)?;
    let state = state(ctx)?;
    let me = opt_user_id_arg("asUserId", as_user_id.as_ref())?;
    let me = acting_user(viewer, me.as_deref())?;
    let other = if kind == EdgeKind::Group {
        normalize_id("groupId", &to).api()?
    } else {
        user_id_arg("userId", &to)?
    };
    if other == me && kind != EdgeKind::Group {
        return Err(bad_input("a user cannot follow or befriend themselves"));
    }
    let on = matches!(change, EdgeChange::On { .. });
    let backfill = match change {
        EdgeChange::On { backfill: None } => state.follow_backfill,
        EdgeChange::On { backfill: Some(n) } if (0..=follow::MAX_BACKFILL as i32).contains(&n) => {
            n as usize
        }
        EdgeChange::On { backfill: Some(n) } => {
            return Err(bad_input(format!(
                "`backfill` must be between 0 and {}, not {n}",
                follow::MAX_BACKFILL
            )))
        }
        EdgeChange::Off { .. } => 0,
    };
    if on && kind == EdgeKind::Group {
        require_group(state, &viewer.tenant, &other).await?;
    } else if on {
        require_users(state, viewer, std::slice::from_ref(&other)).await?;
    }
    // A friendship goes both ways; a follow one way.
    let pairs: Vec<(&str, &str)> = match kind {
        EdgeKind::Follows | EdgeKind::Group => vec![(&me, &other)],
        EdgeKind::Friend => vec![(&me, &other), (&other, &me)],
    };
    let store = state.store.as_ref();
    let tenant = viewer.tenant.as_str();
    if let EdgeChange::Off { keep_history } = change {
        return end_edge(state, tenant, kind, &me, &other, &pairs, keep_history).await;
    }
    // Each direction's backfill is queued before the edge is written, and
    // ended once it is in: a kill in between leaves it to the worker.
    let now = state.clock.now();
    let jobs: Vec<FollowJob> = pairs
        .iter()
        .map(|&(reader, actor)| FollowJob {
            tenant: tenant.to_owned(),
            reader: reader.to_owned(),
            actor: actor.to_owned(),
            kind,
            backfill,
            at: now,
        })
        .collect();
    let mut queued = Vec::with_capacity(jobs.len());
    for job in &jobs {
        queued.push(follow::start(store, job).await.api()?);
    }
    let changed = store
        .set_edge(tenant, kind, &me, &other, true)
        .await
        .api()?;
    if !changed {
        // It stood already. A job queued before this one is a follow under
        // way or cut off, which the worker finishes; this one's goes.
        for (job, queued) in jobs.iter().zip(queued) {
            if queued {
                follow::done(store, job).await.api()?;
            }
        }
        return Ok(false);
    }
    for job in &jobs {
        // Following again ends a pending unfollow (a no-op if none).
        let unfollow = Unfollow::edge(tenant, &job.reader, kind, &job.actor);
        unfollow::end(store, &unfollow).await.api()?;
        follow::show(store, &state.hub, &state.model, job)
            .await
            .api()?;
        // Before the job ends: a kill in between leaves the telling to the
        // worker, under the same message id.
        outbox::tell_followed(&state.outbox, job).await.api()?;
        follow::done(store, job).await.api()?;
    }
    Ok(true)
}

/// Ends the `kind` edge from `me` to `other` (both ways for a friendship:
/// `pairs`). What survives a crash between its writes is always a state
/// reads and the worker finish: the kept range, or the cleanup, is written
/// while the edge still stands (a cleanup that then finds the edge standing
/// does nothing, see `clean_unfollow`), and the cut goes last.
async fn end_edge(
    state: &super::AppState,
    tenant: &str,
    kind: EdgeKind,
    me: &str,
    other: &str,
    pairs: &[(&str, &str)],
    keep_history: bool,
) -> async_graphql::Result<bool> {
    let store = state.store.as_ref();
    let standing = store
        .edges_among(tenant, kind, &[me.to_owned()], other)
        .await
        .api()?;
    if standing.is_empty() {
        return Ok(false);
    }
    let now = state.clock.now();
    for &(reader, actor) in pairs {
        if keep_history {
            // Whatever reads the reader's sources meanwhile (a read, a
            // river being built) finds what came by it, by the edge or by
            // the range.
            follow::keep_history(store, tenant, reader, actor, kind, now)
                .await
                .api()?;
        } else {
            // Reads leave the items out from now on; the worker takes them
            // out of storage.
            let unfollow = Unfollow::edge(tenant, reader, kind, actor);
            unfollow::start(store, &unfollow, now).await.api()?;
        }
    }
    // Two ending it at once both finish it: each saw it standing.
    let changed = store.set_edge(tenant, kind, me, other, false).await.api()?;
    if keep_history {
        return Ok(changed);
    }
    for &(reader, actor) in pairs {
        if !state.model.pushes_all() {
            follow::announce_unfollow(store, &state.hub, tenant, reader, actor, kind)
                .await
                .api()?;
        }
        store.clear_cut(tenant, reader, kind, actor).await.api()?;
    }
    state.wake.notify_one();
    Ok(changed)
}

/// A group exists once someone joins it: it can be followed and its feed
/// read; any other id is `NOT_FOUND`.
pub(super) async fn require_group(
    state: &super::AppState,
    tenant: &str,
    group: &str,
) -> async_graphql::Result<()> {
    let members = state
        .store
        .group_members(tenant, group, None, 1)
        .await
        .api()?;
    if members.is_empty() {
        return Err(not_found(format!(
            "no group {group}: a group exists once someone joins it"
        )));
    }
    Ok(())
}

/// What a follow-like mutation does to its edge.
#[derive(Clone, Copy)]
pub(super) enum EdgeChange {
    /// Add it, showing `backfill` recent actions (the server's default when
    /// not given).
    On { backfill: Option<i32> },
    /// Remove it; the items that came by it leave the feed unless
    /// `keep_history`.
    Off { keep_history: bool },
}

//! The GraphQL API: schema, per-request session (who asks, and the loaders), and
//! the roots in [`query`], [`mutation`] and [`subscription`].
//!
//! The API knows the store only through the `Store` trait, so it runs unchanged
//! on every backend.

mod access;
mod cursor;
pub mod error;
mod feed;
mod loader;
mod mutation;
mod page;
mod query;
mod subscription;
mod types;

use std::sync::Arc;
use std::time::Duration;

use async_graphql::dataloader::DataLoader;
use async_graphql::{Context, Schema};
use tokio::sync::Notify;

use self::error::{coded, UNAUTHENTICATED};
use self::loader::{ActionLoader, UserLoader};
pub use self::mutation::MutationRoot;
pub use self::query::QueryRoot;
pub use self::subscription::SubscriptionRoot;
use crate::clock::Clock;
use crate::events::Hub;
use crate::model::limits::check_id;
use crate::store::Store;

/// The Riverfeed schema.
pub type RiverfeedSchema = Schema<QueryRoot, MutationRoot, SubscriptionRoot>;

/// Deepest query accepted.
pub const MAX_DEPTH: usize = 16;
/// Most complex query accepted: a point per field, times the page size for
/// the fields inside a page (so nested pages multiply, as their cost does).
pub const MAX_COMPLEXITY: usize = 50_000;
/// Most operations in one batched HTTP request.
pub const MAX_BATCH: usize = 16;

/// Cost of a paged field: its children once per item of the largest page it
/// may return (an absent or bad size counts as the default, which the
/// resolver then refuses if bad).
pub(crate) fn page_cost(size: Option<i32>, child_complexity: usize) -> usize {
    let items = size
        .filter(|n| (0..=crate::model::limits::MAX_PAGE as i32).contains(n))
        .map_or(crate::model::limits::DEFAULT_PAGE, |n| n as usize);
    items
        .max(1)
        .saturating_mul(child_complexity)
        .saturating_add(1)
}

/// What the API shares across requests.
#[derive(Clone)]
pub struct AppState {
    pub store: Arc<dyn Store>,
    pub hub: Arc<Hub>,
    pub clock: Arc<dyn Clock>,
    /// Wakes the fan-out worker when an action is recorded.
    pub wake: Arc<Notify>,
}

/// Builds the schema around the shared state.
pub fn schema(state: AppState) -> RiverfeedSchema {
    Schema::build(QueryRoot, MutationRoot, SubscriptionRoot)
        .data(state)
        .extension(error::ErrorCodes)
        .limit_depth(MAX_DEPTH)
        .limit_complexity(MAX_COMPLEXITY)
        .finish()
}

/// The SDL of the schema, as `riverfeed schema` prints it.
pub fn sdl() -> String {
    Schema::build(QueryRoot, MutationRoot, SubscriptionRoot)
        .finish()
        .sdl()
}

/// The user on whose behalf a request runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Viewer {
    pub tenant: String,
    pub user: String,
}

/// Who a request says it comes from.
#[derive(Clone, Debug)]
pub enum Identity {
    Anonymous,
    Invalid(String),
    Viewer(Viewer),
}

/// Header (and `connection_init` key) naming the tenant in dev mode.
pub const TENANT_HEADER: &str = "x-riverfeed-tenant";
/// Header (and `connection_init` key) naming the user in dev mode.
pub const USER_HEADER: &str = "x-riverfeed-user";

impl Identity {
    /// Dev-mode identity: a tenant and a user id, as given by headers.
    pub fn dev(tenant: Option<&str>, user: Option<&str>) -> Self {
        match (tenant, user) {
            (None, None) => Identity::Anonymous,
            (Some(tenant), Some(user)) => {
                match check_id(TENANT_HEADER, tenant).and_then(|_| check_id(USER_HEADER, user)) {
                    Ok(()) => Identity::Viewer(Viewer {
                        tenant: tenant.to_owned(),
                        user: user.to_owned(),
                    }),
                    Err(err) => Identity::Invalid(err.0),
                }
            }
            _ => Identity::Invalid(format!(
                "send both {TENANT_HEADER} and {USER_HEADER}, not just one"
            )),
        }
    }
}

/// What one request (or one websocket connection) carries: its identity and,
/// once it has one, its tenant-scoped loaders.
pub struct Session {
    identity: Identity,
    loaders: Option<Loaders>,
}

pub(crate) struct Loaders {
    pub actions: DataLoader<ActionLoader>,
    pub users: DataLoader<UserLoader>,
}

impl Session {
    pub fn new(identity: Identity, state: &AppState) -> Self {
        let loaders = match &identity {
            // No batching window: pages hand a loader all their keys at once
            // (`load_many`), so waiting for more keys would only add latency.
            Identity::Viewer(viewer) => Some(Loaders {
                actions: DataLoader::new(
                    ActionLoader {
                        store: state.store.clone(),
                        tenant: viewer.tenant.clone(),
                    },
                    tokio::spawn,
                )
                .delay(Duration::ZERO),
                users: DataLoader::new(
                    UserLoader {
                        store: state.store.clone(),
                        tenant: viewer.tenant.clone(),
                    },
                    tokio::spawn,
                )
                .delay(Duration::ZERO),
            }),
            _ => None,
        };
        Self { identity, loaders }
    }
}

/// The viewer of this request, or `UNAUTHENTICATED`.
pub(crate) fn viewer<'a>(ctx: &Context<'a>) -> async_graphql::Result<&'a Viewer> {
    match &ctx.data::<Session>()?.identity {
        Identity::Viewer(viewer) => Ok(viewer),
        Identity::Invalid(reason) => Err(coded(UNAUTHENTICATED, reason.clone())),
        Identity::Anonymous => Err(coded(
            UNAUTHENTICATED,
            format!("no identity: send the {TENANT_HEADER} and {USER_HEADER} headers"),
        )),
    }
}

/// The viewer's loaders (only sessions with a viewer have them).
pub(crate) fn loaders<'a>(ctx: &Context<'a>) -> async_graphql::Result<&'a Loaders> {
    viewer(ctx)?;
    ctx.data::<Session>()?
        .loaders
        .as_ref()
        .ok_or_else(|| coded(UNAUTHENTICATED, "no identity"))
}

pub(crate) fn state<'a>(ctx: &Context<'a>) -> async_graphql::Result<&'a AppState> {
    ctx.data::<AppState>()
}

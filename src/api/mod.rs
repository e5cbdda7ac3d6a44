//! The GraphQL API: schema, per-request session (who asks, and the loaders), and
//! the roots in [`query`], [`mutation`] and [`subscription`].
//!
//! The API knows the store only through the `Store` trait, so it runs unchanged
//! on every backend.

mod access;
mod aggregate;
mod comments;
mod cost;
pub mod cursor;
mod deletions;
mod deliveries;
mod edges;
pub mod error;
pub mod federation;
mod feed;
mod global_id;
mod graph_mutation;
pub mod live;
mod loader;
pub mod minted;
mod mutation;
mod node;
mod notifications;
mod page;
pub mod plan;
mod publish;
mod query;
pub mod rate_limit;
mod shape;
mod subscription;
mod telemetry;
mod types;
mod user_node;
mod values;
mod webhooks;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_graphql::dataloader::DataLoader;
use async_graphql::{Context, Schema};
use tokio::sync::Notify;

use self::cursor::CursorKey;
use self::error::{coded, ApiResultExt, FORBIDDEN, UNAUTHENTICATED};
use self::loader::{ActionLoader, UserLoader};
pub use self::mutation::MutationRoot;
pub use self::query::QueryRoot;
pub use self::subscription::SubscriptionRoot;
pub use crate::auth::{Identity, Role, Viewer};
use crate::clock::Clock;
use crate::events::Hub;
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

/// What the API shares across requests.
#[derive(Clone)]
pub struct AppState {
    pub store: Arc<dyn Store>,
    pub hub: Arc<Hub>,
    pub clock: Arc<dyn Clock>,
    /// Wakes the fan-out worker when an action is recorded.
    pub wake: Arc<Notify>,
    /// Actions a new follow or friendship shows at once by default.
    pub follow_backfill: usize,
    /// What is materialised ahead of time and what is merged at read.
    pub model: crate::timeline::FeedModel,
    /// Seals cursors.
    pub cursors: Arc<CursorKey>,
    /// `--item-ttl`: actions older than this are not shown.
    pub item_ttl: Option<crate::model::Millis>,
    /// `--group-feed-size`: the posts a group's feed keeps.
    pub group_feed_size: usize,
    /// How aggregated feed items group (`feed_group_by`).
    pub notice_rules: Arc<crate::notify::NoticeRules>,
    /// What `/metrics` reports (requests are counted into it).
    pub metrics: Arc<crate::metrics::Metrics>,
    /// The descriptor types served (`--descriptors`).
    pub descriptors: Arc<crate::descriptor::Catalog>,
    /// Where webhook deliveries are queued; told when a webhook changes.
    pub outbox: Arc<crate::webhooks::Outbox>,
    /// `--webhooks-allow-private`: endpoints may be loopback or private.
    pub webhooks_allow_private: bool,
    /// `--planned-reads`: whether plans answer the queries they cover.
    pub planner: Arc<plan::Planner>,
    /// Where dormant readers' reads ask for their rivers (rivers).
    pub river_builds: Arc<crate::timeline::builds::RiverBuilds>,
    /// `--idempotency-ttl`: how long an answer is kept for the retries
    /// of its request (and what they must see, a deletion, with it).
    pub idempotency_ttl: std::time::Duration,
}

impl AppState {
    /// Until when what is kept for retries from `now` on counts.
    pub fn kept_for_retries(&self, now: crate::model::Millis) -> crate::model::Millis {
        let ttl = crate::model::Millis::try_from(self.idempotency_ttl.as_millis());
        now.saturating_add(ttl.unwrap_or(crate::model::Millis::MAX))
    }

    /// What expiry is judged by now.
    pub fn expiry(&self) -> crate::timeline::Expiry {
        crate::timeline::Expiry {
            now: self.clock.now(),
            item_ttl: self.item_ttl,
        }
    }

    /// Home feeds as readers see them, read through this state's store,
    /// model and clock.
    pub fn feeds(&self) -> crate::timeline::home::Feeds<'_> {
        crate::timeline::home::Feeds {
            store: self.store.as_ref(),
            model: self.model,
            clock: self.clock.as_ref(),
            item_ttl: self.item_ttl,
            builds: &self.river_builds,
        }
    }
}

/// Builds the schema around the shared state; a subgraph of a federated
/// supergraph with `federation`.
pub fn schema(
    state: AppState,
    introspection: bool,
    rate_limiter: Option<Arc<rate_limit::RateLimiter>>,
    federation: Option<Arc<federation::Federation>>,
) -> RiverfeedSchema {
    let metrics = state.metrics.clone();
    let descriptors = state.descriptors.clone();
    let planner = state.planner.clone();
    let mut builder = build(&descriptors, federation.as_ref())
        .data(descriptors)
        .data(state)
        // Outermost, so that it sees every error with its code and the
        // validation result even when the shape check answers it from its
        // cache.
        .extension(telemetry::RequestMetrics(metrics))
        .extension(error::ErrorCodes);
    // Outside the query shape's: that one answers repeated documents'
    // validation from its cache, and every request must still be charged.
    if let Some(limiter) = rate_limiter {
        builder = builder.extension(rate_limit::RateLimit(limiter));
    }
    if let Some(federation) = federation {
        builder = builder.data(federation);
    }
    let builder = builder
        .extension(shape::QueryShape(planner.clone()))
        // Inside the shape check's cache, which keeps only what validated.
        .extension(values::InputValues)
        // Innermost: a planned response passes every extension above.
        .extension(plan::Planned(planner))
        // async-graphql's own "did you mean" compares every unknown field
        // and argument of a document with every name of its type, even for
        // errors past the few answered; ours (see `error`) looks for the
        // answered ones only, among names of about the same length.
        .disable_suggestions()
        .limit_depth(MAX_DEPTH)
        .limit_complexity(MAX_COMPLEXITY);
    if introspection {
        builder.finish()
    } else {
        builder
            .disable_introspection()
            .extension(error::NoIntrospection)
            .finish()
    }
}

/// The SDL of the schema served with `descriptors`, as `riverfeed schema`
/// prints it.
pub fn sdl(descriptors: &Arc<crate::descriptor::Catalog>) -> String {
    build(descriptors, None).finish().sdl()
}

/// The subgraph SDL a gateway composes (`_service { sdl }`), as
/// `riverfeed schema --federation` prints it.
pub fn subgraph_sdl(
    descriptors: &Arc<crate::descriptor::Catalog>,
    federation: &Arc<federation::Federation>,
) -> String {
    build(descriptors, Some(federation))
        .finish()
        .sdl_with_options(async_graphql::SDLExportOptions::new().federation())
}

/// The schema's builder, its descriptor types read from `descriptors`,
/// as a federated subgraph with `federation`.
fn build(
    descriptors: &Arc<crate::descriptor::Catalog>,
    federation: Option<&Arc<federation::Federation>>,
) -> async_graphql::SchemaBuilder<QueryRoot, MutationRoot, SubscriptionRoot> {
    let roots = || {
        Schema::build(
            QueryRoot::default(),
            MutationRoot::default(),
            SubscriptionRoot::default(),
        )
    };
    let builder = crate::descriptor::with_catalog(descriptors, || match federation {
        // Shaped once every type is in (see `federation::shape`).
        Some(federation) => federation::federated(federation, || {
            roots().register_output_type::<federation::SubgraphShape>()
        }),
        None => roots(),
    });
    if federation.is_some() {
        builder
            .enable_federation()
            .enable_subscription_in_federation()
    } else {
        builder
    }
}

/// Reads a descriptor file, refusing one with an error (with its line and
/// column) or with a type whose name the rest of the schema holds.
pub fn load_descriptors(
    path: &std::path::Path,
    replace: bool,
) -> anyhow::Result<crate::descriptor::Catalog> {
    let source = std::fs::read_to_string(path)
        .map_err(|e| anyhow::anyhow!("cannot read the descriptor file {}: {e}", path.display()))?;
    let at = |e: crate::descriptor::CatalogError| anyhow::anyhow!("{}:{e}", path.display());
    let catalog = crate::descriptor::Catalog::parse(&source).map_err(at)?;
    catalog.check_names(&schema_names()).map_err(at)?;
    if replace {
        return Ok(catalog);
    }
    crate::descriptor::Catalog::builtin()
        .beside(catalog)
        .map_err(at)
}

/// The type names of the schema besides the descriptor types: what a
/// descriptor file may not define.
pub fn schema_names() -> std::collections::HashSet<String> {
    use async_graphql::parser::types::TypeSystemDefinition;
    let builtin = crate::descriptor::Catalog::builtin();
    let document = async_graphql::parser::parse_schema(sdl(&builtin)).expect("the schema parses");
    let mut names: std::collections::HashSet<String> = document
        .definitions
        .into_iter()
        .filter_map(|d| match d {
            TypeSystemDefinition::Type(t) => Some(t.node.name.node.to_string()),
            _ => None,
        })
        .collect();
    for ty in builtin.types() {
        names.remove(&ty.name);
        names.remove(&ty.input_name());
    }
    for e in builtin.enums() {
        names.remove(&e.name);
    }
    names
}

/// What one request (or one websocket connection) carries: its identity and,
/// once it has one, its tenant-scoped loaders.
pub struct Session {
    pub identity: Identity,
    loaders: Option<Loaders>,
    /// Live subscriptions of this connection, and how many it may hold.
    subscriptions: Option<(Arc<AtomicUsize>, usize)>,
}

/// A place among a connection's live subscriptions, freed when dropped.
pub(crate) struct SubscriptionPermit(Option<Arc<AtomicUsize>>);

impl Drop for SubscriptionPermit {
    fn drop(&mut self) {
        if let Some(active) = &self.0 {
            active.fetch_sub(1, Ordering::AcqRel);
        }
    }
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
        Self {
            identity,
            loaders,
            subscriptions: None,
        }
    }

    /// Caps the subscriptions this session (a websocket connection) may hold.
    pub fn with_subscription_limit(mut self, max: usize) -> Self {
        self.subscriptions = Some((Arc::new(AtomicUsize::new(0)), max));
        self
    }

    /// Takes a place for one more subscription, or `TOO_MANY_SUBSCRIPTIONS`.
    pub(crate) fn subscription_permit(&self) -> async_graphql::Result<SubscriptionPermit> {
        let Some((active, max)) = &self.subscriptions else {
            return Ok(SubscriptionPermit(None));
        };
        active
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < *max).then_some(n + 1)
            })
            .map(|_| SubscriptionPermit(Some(active.clone())))
            .map_err(|_| {
                coded(
                    error::TOO_MANY_SUBSCRIPTIONS,
                    format!("a connection holds at most {max} subscriptions"),
                )
            })
    }
}

pub(crate) fn session<'a>(ctx: &Context<'a>) -> async_graphql::Result<&'a Session> {
    ctx.data::<Session>()
}

/// The viewer of this request: `UNAUTHENTICATED` without a valid identity,
/// `FORBIDDEN` with one that holds no role Riverfeed knows.
pub(crate) fn viewer<'a>(ctx: &Context<'a>) -> async_graphql::Result<&'a Viewer> {
    ctx.data::<Session>()?.viewer()
}

impl Session {
    /// The viewer of this session: `UNAUTHENTICATED` without a valid
    /// identity, `FORBIDDEN` with one that holds no role Riverfeed knows.
    pub(crate) fn viewer(&self) -> async_graphql::Result<&Viewer> {
        match &self.identity {
            Identity::Viewer(viewer) if viewer.expired() => Err(coded(
                UNAUTHENTICATED,
                "the token has expired; connect again with a fresh one",
            )),
            Identity::Viewer(viewer) if viewer.has_any_role() => Ok(viewer),
            Identity::Viewer(_) => Err(coded(
                FORBIDDEN,
                "the token holds no role Riverfeed knows (user, service, admin)",
            )),
            Identity::Invalid(reason) => Err(coded(UNAUTHENTICATED, reason.clone())),
            Identity::Anonymous => Err(coded(
                UNAUTHENTICATED,
                "no identity: send `Authorization: Bearer <token>` (in dev mode, the \
                 x-riverfeed-tenant and x-riverfeed-user headers)",
            )),
        }
    }
}

/// The user an operation acts for: the viewer, or `as_user` when the viewer
/// may act for others (`service`, `admin`); `FORBIDDEN` otherwise.
pub(crate) fn acting_user(viewer: &Viewer, as_user: Option<&str>) -> async_graphql::Result<String> {
    match as_user {
        None => Ok(viewer.user.clone()),
        Some(user) => {
            let user = crate::model::limits::normalize_id("user id", user)
                .map_err(|e| error::bad_input(e.0))?;
            if user == viewer.user || viewer.acts_for_others() {
                Ok(user)
            } else {
                Err(error::forbidden(
                    "acting for another user needs the service or admin role",
                ))
            }
        }
    }
}

/// `FORBIDDEN` unless the viewer may act for others.
pub(crate) fn require_service(viewer: &Viewer, what: &str) -> async_graphql::Result<()> {
    if viewer.acts_for_others() {
        Ok(())
    } else {
        Err(error::forbidden(format!(
            "{what} needs the service or admin role"
        )))
    }
}

/// Fails with `BAD_USER_INPUT` unless every id names a user the tenant has.
pub(crate) async fn require_users(
    state: &AppState,
    viewer: &Viewer,
    ids: &[String],
) -> async_graphql::Result<()> {
    let found = state.store.get_users(&viewer.tenant, ids).await.api()?;
    let missing: Vec<&str> = ids
        .iter()
        .filter(|id| !found.iter().any(|u| &u.id == *id))
        .map(String::as_str)
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(error::bad_input(format!(
            "unknown user(s): {}; upsert them first",
            missing.join(", ")
        )))
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

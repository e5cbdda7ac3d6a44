//! The server's settings, from flags and environment: [`ServeArgs`], which
//! `serve` and `worker` run with, and which `bench`, `export` and `import`
//! open their stores with (the commands are in [`cli`](crate::cli)).
//! Every flag has an environment twin; the defaults run on one machine with no setup.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use std::sync::Arc;

use anyhow::Context as _;

use crate::auth::{Authenticator, JwtVerifier};
use crate::duration::parse_duration;
use crate::fanout::WorkerConfig;
use crate::http::WsLimits;
use crate::model::BumpRule;
use crate::notify::rules::{parse_group_by, NoticeRules};
use crate::relevancy::BumpRules;
use crate::server::{ServeOptions, DEMO_NEEDS_DEV_MODE};
use crate::timeline::{FeedModel, FeedModelKind};

#[derive(Clone, Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(
        long,
        env = "RIVERFEED_LISTEN",
        default_value = "127.0.0.1:8080",
        global = true
    )]
    pub listen: SocketAddr,
    /// Directory of the embedded store.
    #[arg(
        long,
        env = "RIVERFEED_DATA_DIR",
        default_value = "./riverfeed-data",
        global = true
    )]
    pub data_dir: PathBuf,
    /// Where to keep everything: `embedded:<dir>` (by default the data
    /// directory) or a `mongodb://…` / `mongodb+srv://…` URI (database from the
    /// URI's path, `riverfeed` by default).
    #[arg(long, env = "RIVERFEED_STORE", global = true)]
    pub store: Option<String>,
    /// Block cache of the embedded store, shared by all its data: bytes, or
    /// with a unit (`512MiB`, `1GiB`).
    #[arg(long, env = "RIVERFEED_CACHE_SIZE", default_value = "1GiB", global = true,
          value_parser = parse_size)]
    pub cache_size: usize,
    /// Seconds a fan-out claim stays with a worker that makes no progress.
    #[arg(long, env = "RIVERFEED_FANOUT_LEASE_SECS", default_value_t = 30, global = true,
          value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub fanout_lease_secs: u64,
    /// Feed items written per store transaction by the fan-out worker.
    #[arg(long, env = "RIVERFEED_FANOUT_BATCH", default_value_t = 10_000, global = true,
          value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub fanout_batch: u32,
    /// How feeds are materialised: `push` (an item per reader at fan-out),
    /// `pull` (merged from followees' outboxes at read), `rivers` (kept only
    /// for readers active lately, pulled below) or `hybrid` (push, except
    /// actors above the celebrity threshold, merged at read).
    #[arg(long, env = "RIVERFEED_FEED_MODEL", value_enum, default_value_t = FeedModelKind::Rivers,
          global = true)]
    pub feed_model: FeedModelKind,
    /// Items a reader's river keeps (rivers).
    #[arg(long, env = "RIVERFEED_RIVER_SIZE", default_value_t = 800, global = true,
          value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub river_size: u32,
    /// A river not read for this long is dropped (rivers): `24h`, `7d`…
    #[arg(long, env = "RIVERFEED_RIVER_IDLE", default_value = "24h", global = true,
          value_parser = parse_duration)]
    pub river_idle: Duration,
    /// Rivers built at once, in the background, for readers who read and
    /// have none (rivers); `0` builds none (they read as under `pull`).
    #[arg(long, env = "RIVERFEED_RIVER_BUILDS",
          default_value_t = crate::timeline::feed_model::DEFAULT_RIVER_BUILDS as u32, global = true,
          value_parser = clap::value_parser!(u32).range(0..=64))]
    pub river_builds: u32,
    /// Actions older than this leave every feed, slice and `action(actionId)`:
    /// `30d`, `12h`…; off by default.
    #[arg(long, env = "RIVERFEED_ITEM_TTL", global = true, value_parser = parse_duration)]
    pub item_ttl: Option<Duration>,
    /// How long the answer to a request sent with an `Idempotency-Key` is
    /// kept: a retry within it gets the same answer.
    #[arg(long, env = "RIVERFEED_IDEMPOTENCY_TTL", default_value = "24h", global = true,
          value_parser = parse_duration)]
    pub idempotency_ttl: Duration,
    /// The posts a group's feed keeps (a ring: the oldest give way).
    #[arg(long, env = "RIVERFEED_GROUP_FEED_SIZE", default_value_t = 1_000, global = true,
          value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub group_feed_size: u32,
    /// How MongoDB keeps the timelines push and rivers write: `items`,
    /// `time_buckets` or `sized_buckets`; by default the database's own
    /// (items for a new one). A database keeps the layout it began with.
    #[arg(long, env = "RIVERFEED_TIMELINE_LAYOUT", global = true, value_enum)]
    pub timeline_layout: Option<crate::store::mongo::TimelineLayout>,
    /// Entries per sized bucket (`--timeline-layout sized_buckets`).
    #[arg(long, env = "RIVERFEED_BUCKET_SIZE", default_value_t = 100, global = true,
          value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub bucket_size: u32,
    /// MongoDB: timeline entries carry a copy of their action and its
    /// actor's name, so a page that shows no more is one query.
    #[arg(long, env = "RIVERFEED_EMBED_ACTIONS", global = true)]
    pub embed_actions: bool,
    /// Actors with more followers than this are not fanned out (hybrid).
    #[arg(long, env = "RIVERFEED_CELEBRITY_THRESHOLD", default_value_t = 10_000, global = true,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub celebrity_threshold: u32,
    /// Run the API without the in-process fan-out worker.
    #[arg(long, env = "RIVERFEED_NO_WORKER", global = true)]
    pub no_worker: bool,
    /// Relevancy rules: a TOML file with a `[boost]` table (`assigned`,
    /// `supervisor`, `participated`, `department`), each a boost like "4h" or
    /// "off". Rules it leaves out keep their defaults.
    #[arg(long, env = "RIVERFEED_BUMP_RULES", global = true)]
    pub bump_rules: Option<PathBuf>,
    /// Boost for readers assigned to one of a commented action's refIds
    /// (default 4h; "off" disables). Overrides the rules file.
    #[arg(long, env = "RIVERFEED_BUMP_ASSIGNED", global = true)]
    pub bump_assigned: Option<String>,
    /// Boost for readers whose supervisor commented (default 2h).
    #[arg(long, env = "RIVERFEED_BUMP_SUPERVISOR", global = true)]
    pub bump_supervisor: Option<String>,
    /// Boost for readers who did the action or commented on it (default 1h).
    #[arg(long, env = "RIVERFEED_BUMP_PARTICIPATED", global = true)]
    pub bump_participated: Option<String>,
    /// Boost for readers in the commenter's departments (default 0s: up to now).
    #[arg(long, env = "RIVERFEED_BUMP_DEPARTMENT", global = true)]
    pub bump_department: Option<String>,
    /// Notification rules: a TOML file with a `[notify]` table (`off`,
    /// `group_by`, `feed_group_by`, `groups_kept`). What it leaves out keeps
    /// its default.
    #[arg(long, env = "RIVERFEED_NOTIFY_RULES", global = true)]
    pub notify_rules: Option<PathBuf>,
    /// Notification reasons that notify nobody, comma separated (comment,
    /// like, reply, assigned, rating_requested, hired), or "none".
    /// Overrides the rules file.
    #[arg(long, env = "RIVERFEED_NOTIFY_OFF", global = true)]
    pub notify_off: Option<String>,
    /// What notifications group by, comma separated parts of reason, verb,
    /// object, actor, day, hour, notice (default reason,object,day).
    #[arg(long, env = "RIVERFEED_NOTIFY_GROUP_BY", global = true)]
    pub notify_group_by: Option<String>,
    /// What `aggregatedFeed` groups home-feed items by (default
    /// verb,object,day).
    #[arg(long, env = "RIVERFEED_FEED_GROUP_BY", global = true)]
    pub feed_group_by: Option<String>,
    /// Notification groups a user keeps; beyond them the oldest go.
    #[arg(long, env = "RIVERFEED_NOTIFICATION_GROUPS", global = true)]
    pub notification_groups: Option<usize>,
    /// Feed events a reader's live subscription may fall behind before it is
    /// told it lagged (and resumes from its cursor). Memory goes with the
    /// backlog, 8 bytes an event: a subscriber that keeps up holds none.
    #[arg(long, env = "RIVERFEED_EVENT_BUFFER", default_value_t = 128, global = true,
          value_parser = clap::value_parser!(u32).range(1..=65_536))]
    pub event_buffer: u32,
    /// Actions a new follow or friendship shows at once (the other user's most
    /// recent ones the reader may see); 0 shows only what comes after. A
    /// request's `backfill` argument overrides it.
    #[arg(long, env = "RIVERFEED_FOLLOW_BACKFILL", default_value_t = 100, global = true,
          value_parser = clap::value_parser!(u32).range(0..=1_000))]
    pub follow_backfill: u32,
    /// Dev mode (identity from headers, no tokens) listens on loopback only;
    /// this lets it listen anywhere. Anyone who reaches the port can then act
    /// as any user.
    #[arg(long, env = "RIVERFEED_INSECURE_DEV", global = true)]
    pub insecure_dev: bool,
    /// Web origins whose pages may call the API (CORS), comma separated and
    /// exact (https://app.example.com,http://localhost:5173), or `*` for any
    /// origin without credentials. In dev mode pages on this machine
    /// (localhost, 127.0.0.1, [::1], any port) may call too; with tokens
    /// none but these and the server's own. Websockets follow the same rule.
    #[arg(long, env = "RIVERFEED_CORS_ORIGINS", global = true)]
    pub cors_origins: Option<String>,
    /// Check HS256 tokens with this shared secret (leaves dev mode).
    #[arg(
        long,
        env = "RIVERFEED_JWT_SECRET",
        global = true,
        hide_env_values = true,
        conflicts_with = "jwt_public_key"
    )]
    pub jwt_secret: Option<String>,
    /// Check RS256 / ES256 tokens with this PEM public key (leaves dev mode).
    #[arg(long, env = "RIVERFEED_JWT_PUBLIC_KEY", global = true)]
    pub jwt_public_key: Option<PathBuf>,
    /// Accept only tokens with this `iss`.
    #[arg(long, env = "RIVERFEED_JWT_ISSUER", global = true)]
    pub jwt_issuer: Option<String>,
    /// Accept only tokens with this `aud`.
    #[arg(long, env = "RIVERFEED_JWT_AUDIENCE", global = true)]
    pub jwt_audience: Option<String>,
    /// Schema introspection: on in dev mode, off with tokens, unless set.
    #[arg(long, env = "RIVERFEED_INTROSPECTION", global = true)]
    pub introspection: Option<bool>,
    /// Secret cursors are sealed with (32 bytes or more). By default the
    /// deployment draws a key at its first start and keeps it in its store,
    /// so cursors survive restarts and open on every process; a new key
    /// (setting or changing this) makes earlier cursors invalid.
    #[arg(
        long,
        env = "RIVERFEED_CURSOR_KEY",
        global = true,
        hide_env_values = true
    )]
    pub cursor_key: Option<String>,
    /// Live connections open at once: websockets (once their
    /// `connection_init` is accepted), event streams and multipart responses
    /// together.
    #[arg(long, env = "RIVERFEED_MAX_CONNECTIONS", default_value_t = 10_000, global = true,
          value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub max_connections: u32,
    /// Subscriptions at once on one websocket connection.
    #[arg(long, env = "RIVERFEED_MAX_SUBSCRIPTIONS", default_value_t = 16, global = true,
          value_parser = clap::value_parser!(u32).range(1..=1_000))]
    pub max_subscriptions: u32,
    /// How long a new websocket may take to send `connection_init` before it
    /// is closed with 4408.
    #[arg(long, env = "RIVERFEED_WS_INIT_TIMEOUT", default_value = "5s", global = true,
          value_parser = parse_duration)]
    pub ws_init_timeout: Duration,
    /// How often the server pings each websocket (graphql-transport-ws
    /// `ping`); two unanswered pings end the connection.
    #[arg(long, env = "RIVERFEED_WS_PING_INTERVAL", default_value = "15s", global = true,
          value_parser = parse_duration)]
    pub ws_ping_interval: Duration,
    /// Websockets open at once that have not had their `connection_init`
    /// accepted; beyond it an upgrade is refused (503 TOO_MANY_CONNECTIONS).
    #[arg(long, env = "RIVERFEED_MAX_PENDING_CONNECTIONS", default_value_t = 1_000,
          global = true, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub max_pending_connections: u32,
    /// Of those, from one client address (an IPv6 /64 counts as one).
    #[arg(long, env = "RIVERFEED_MAX_PENDING_CONNECTIONS_PER_ADDRESS", default_value_t = 32,
          global = true, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub max_pending_connections_per_address: u32,
    /// How long a request's headers may take to arrive, from the
    /// connection's opening or, kept alive, from their first byte; then the
    /// connection is closed.
    #[arg(long, env = "RIVERFEED_HEADER_TIMEOUT", default_value = "10s", global = true,
          value_parser = parse_duration)]
    pub header_timeout: Duration,
    /// How long a request's whole body may take to arrive after its
    /// headers; then it is answered 408 REQUEST_TIMEOUT.
    #[arg(long, env = "RIVERFEED_BODY_TIMEOUT", default_value = "30s", global = true,
          value_parser = parse_duration)]
    pub body_timeout: Duration,
    /// How long a kept-alive connection may wait for its next request
    /// before it is closed.
    #[arg(long, env = "RIVERFEED_IDLE_TIMEOUT", default_value = "60s", global = true,
          value_parser = parse_duration)]
    pub idle_timeout: Duration,
    /// HTTP connections open at once (live ones included); beyond it a new
    /// connection is closed at accept. Default: --max-connections plus
    /// --max-pending-connections plus 1024 for plain requests.
    #[arg(long, env = "RIVERFEED_MAX_HTTP_CONNECTIONS", global = true,
          value_parser = clap::value_parser!(u32).range(1..=10_000_000))]
    pub max_http_connections: Option<u32>,
    /// HTTP connections open at once from one client address (an IPv6 /64
    /// counts as one).
    #[arg(long, env = "RIVERFEED_MAX_HTTP_CONNECTIONS_PER_ADDRESS", default_value_t = 256,
          global = true, value_parser = clap::value_parser!(u32).range(1..=10_000_000))]
    pub max_http_connections_per_address: u32,
    /// A role's budget of query cost: `ROLE=COST/WINDOW`, as in
    /// `user=20000/1m`. Repeat for each role (user, service, admin); a
    /// caller pays at its highest role's budget, and roles without one are
    /// not limited. Off by default.
    #[arg(long = "rate-limit", env = "RIVERFEED_RATE_LIMITS", value_delimiter = ',',
          global = true, value_parser = crate::api::rate_limit::parse_budget)]
    pub rate_limits: Vec<(crate::auth::Role, crate::api::rate_limit::Budget)>,
    /// A manifest of trusted documents (id → document, as Relay's compiler,
    /// GraphQL Codegen or Apollo's manifest generator write it); requests
    /// name them by `documentId` or `doc_id`.
    #[arg(long, env = "RIVERFEED_TRUSTED_DOCUMENTS", global = true)]
    pub trusted_documents: Option<PathBuf>,
    /// What happens to an operation outside the trusted documents: `enforce`
    /// refuses it (TRUSTED_DOCUMENT_REQUIRED), `log` runs it and logs it.
    #[arg(
        long,
        env = "RIVERFEED_TRUSTED_DOCUMENTS_MODE",
        value_enum,
        default_value = "enforce",
        global = true
    )]
    pub trusted_documents_mode: crate::http::persisted::TrustMode,
    /// Bytes of query text kept for automatic persisted queries (their
    /// hashes answer from it), in all; the oldest go first. A query is kept
    /// only once its request was authenticated and its document validated.
    #[arg(long, env = "RIVERFEED_APQ_CACHE_BYTES", default_value = "8MiB", global = true,
          value_parser = parse_bytes)]
    pub apq_cache_bytes: usize,
    /// Longest GraphQL document a request may send as text (trusted
    /// documents aside); a longer one is refused with PAYLOAD_TOO_LARGE.
    #[arg(long, env = "RIVERFEED_MAX_DOCUMENT_BYTES", default_value = "64KiB", global = true,
          value_parser = parse_bytes)]
    pub max_document_bytes: usize,
    /// Send a span per GraphQL operation (named and tagged as OpenTelemetry's
    /// GraphQL conventions say; the document, never its variables) to this
    /// OTLP/HTTP collector: its base URL, as `http://127.0.0.1:4318`, spans
    /// going to `/v1/traces` under it. `serve` and `worker`; off by default.
    #[arg(long, env = "RIVERFEED_OTLP_ENDPOINT", global = true)]
    pub otlp_endpoint: Option<String>,
    /// Serve `/metrics` on this address (`127.0.0.1:9100`) instead of beside
    /// the API (`serve`) or `/healthz` (`worker`).
    #[arg(long, env = "RIVERFEED_METRICS_LISTEN", global = true)]
    pub metrics_listen: Option<SocketAddr>,
    /// A scrape of `/metrics` must send `Authorization: Bearer <token>`
    /// (16 bytes or more); without it, 401 `UNAUTHENTICATED`.
    #[arg(
        long,
        env = "RIVERFEED_METRICS_TOKEN",
        global = true,
        hide_env_values = true
    )]
    pub metrics_token: Option<String>,
    /// Action types of your own: an SDL file of `type … @descriptor`
    /// definitions (see the README's "Your own action types"), served
    /// beside the built-in status and recruiting types.
    #[arg(long, env = "RIVERFEED_DESCRIPTORS", global = true)]
    pub descriptors: Option<PathBuf>,
    /// Serve only the `--descriptors` file's types, without the built-in
    /// ones (refused at start while stored actions use a built-in type,
    /// unless `--allow-descriptor-changes`).
    #[arg(
        long,
        env = "RIVERFEED_DESCRIPTORS_REPLACE",
        global = true,
        requires = "descriptors"
    )]
    pub descriptors_replace: bool,
    /// Serve a descriptor file even though stored actions no longer fit it
    /// (a type removed, a field's type changed): they read as
    /// `UnknownDescriptor`. Without it such a file is refused at start.
    #[arg(long, env = "RIVERFEED_ALLOW_DESCRIPTOR_CHANGES", global = true)]
    pub allow_descriptor_changes: bool,
    /// Serve as a subgraph of an Apollo Federation v2 supergraph: `_service`
    /// and `_entities`, with `User` and `Action` as entities (keyed by
    /// `userId` and `actionId`). `riverfeed schema --federation` prints the
    /// subgraph SDL a gateway composes.
    #[arg(long, env = "RIVERFEED_FEDERATION", global = true)]
    pub federation: bool,
    /// With `--federation`: a type of the product's own subgraph that
    /// actions refer to by id, as `TYPE=KEYFIELD` (`Applicant=id`), made an
    /// entity here too with its `activity` (the slice of actions that
    /// refer to it). Repeat, or comma-separate, for several.
    #[arg(
        long = "federation-entity",
        env = "RIVERFEED_FEDERATION_ENTITIES",
        global = true,
        value_delimiter = ',',
        requires = "federation"
    )]
    pub federation_entities: Vec<crate::api::federation::RefEntity>,
    /// With `--federation`: whose `Node` the supergraph has. `own`:
    /// Riverfeed's subgraph declares `Node`, `node`, `nodes` and `User.id`;
    /// `none`: it leaves them to a Relay-style product subgraph that has its
    /// own (users join by `userId`).
    #[arg(
        long = "federation-node",
        env = "RIVERFEED_FEDERATION_NODE",
        value_enum,
        default_value_t = crate::api::federation::FederationNode::Own,
        global = true,
        requires = "federation"
    )]
    pub federation_node: crate::api::federation::FederationNode,
    /// Let webhooks go to loopback and private addresses (a receiver on
    /// this machine or a closed network). Without it such endpoints are
    /// refused when registered and when sent to.
    #[arg(long, env = "RIVERFEED_WEBHOOKS_ALLOW_PRIVATE", global = true)]
    pub webhooks_allow_private: bool,
    /// Send webhooks through this HTTP proxy (`http://proxy.internal:3128`).
    /// Without it the environment's proxy variables (`HTTP_PROXY`,
    /// `HTTPS_PROXY`, `ALL_PROXY`) are ignored and deliveries connect
    /// directly, each address checked; through a proxy, the proxy decides
    /// which addresses are reached.
    #[arg(long, env = "RIVERFEED_WEBHOOKS_PROXY", global = true, value_parser = proxy_url)]
    pub webhooks_proxy: Option<String>,
    /// Whether queries over the read types run from plans made once per
    /// document (`on`), or every operation on the general executor (`off`:
    /// for comparing, or for an operator who suspects the planned path).
    #[arg(long, env = "RIVERFEED_PLANNED_READS", global = true, default_value = "on", value_parser = on_off)]
    pub planned_reads: bool,
    /// Bytes of query documents kept, parsed with their plans, so that a
    /// document sent again is planned once; only documents that validated
    /// for a caller with an identity are kept, and when full, older ones
    /// make room.
    #[arg(long, env = "RIVERFEED_DOCUMENT_CACHE_BYTES", default_value = "8MiB", global = true,
          value_parser = parse_bytes)]
    pub document_cache_bytes: usize,
    /// Seed the `demo` tenant with a recruiting organisation (once, when it
    /// is empty) for the web demo at /demo/. Dev mode only.
    #[arg(long, env = "RIVERFEED_DEMO", global = true)]
    pub demo: bool,
}

/// Refuses an HS256 secret short enough to guess, as `--jwt-secret`; a
/// token minted with it (`riverfeed token`) is refused alike.
pub fn check_hs256_secret(secret: &str) -> anyhow::Result<()> {
    anyhow::ensure!(
        secret.len() >= 32,
        "--jwt-secret must be at least 32 bytes long"
    );
    Ok(())
}

impl ServeArgs {
    /// How callers prove who they are, from the token flags.
    pub fn authenticator(&self) -> anyhow::Result<Authenticator> {
        let (issuer, audience) = (self.jwt_issuer.as_deref(), self.jwt_audience.as_deref());
        if let Some(secret) = &self.jwt_secret {
            check_hs256_secret(secret)?;
            return Ok(Authenticator::Jwt(Box::new(JwtVerifier::hs256(
                secret.as_bytes(),
                issuer,
                audience,
            ))));
        }
        if let Some(path) = &self.jwt_public_key {
            let pem = std::fs::read(path)
                .with_context(|| format!("cannot read --jwt-public-key {}", path.display()))?;
            let verifier = JwtVerifier::from_public_key_pem(&pem, issuer, audience)
                .map_err(anyhow::Error::msg)
                .with_context(|| format!("--jwt-public-key {}", path.display()))?;
            return Ok(Authenticator::Jwt(Box::new(verifier)));
        }
        Ok(Authenticator::Dev)
    }

    /// The relevancy rules: defaults, then the rules file, then the flags.
    pub fn bump_rules(&self) -> anyhow::Result<BumpRules> {
        let mut rules = BumpRules::default();
        if let Some(path) = &self.bump_rules {
            rules.load(path).map_err(anyhow::Error::msg)?;
        }
        for (rule, flag) in [
            (BumpRule::Assigned, &self.bump_assigned),
            (BumpRule::Supervisor, &self.bump_supervisor),
            (BumpRule::Participated, &self.bump_participated),
            (BumpRule::Department, &self.bump_department),
        ] {
            if let Some(written) = flag {
                rules
                    .set(rule, written)
                    .map_err(|e| anyhow::anyhow!("--bump-{e}"))?;
            }
        }
        Ok(rules)
    }

    /// The notification rules: defaults, then the rules file, then the flags.
    pub fn notice_rules(&self) -> anyhow::Result<NoticeRules> {
        let mut rules = NoticeRules::default();
        if let Some(path) = &self.notify_rules {
            rules.load(path).map_err(anyhow::Error::msg)?;
        }
        if let Some(off) = &self.notify_off {
            rules
                .set_off(off)
                .map_err(|e| anyhow::anyhow!("--notify-off: {e}"))?;
        }
        if let Some(parts) = &self.notify_group_by {
            rules.group_by =
                parse_group_by(parts).map_err(|e| anyhow::anyhow!("--notify-group-by: {e}"))?;
        }
        if let Some(parts) = &self.feed_group_by {
            rules.feed_group_by =
                parse_group_by(parts).map_err(|e| anyhow::anyhow!("--feed-group-by: {e}"))?;
        }
        if let Some(kept) = self.notification_groups {
            rules
                .set_groups_kept(kept)
                .map_err(|e| anyhow::anyhow!("--notification-groups: {e}"))?;
        }
        Ok(rules)
    }

    /// The descriptor types `--descriptors` names, or the built-in ones.
    pub fn descriptors(&self) -> anyhow::Result<std::sync::Arc<crate::descriptor::Catalog>> {
        match &self.descriptors {
            None => Ok(crate::descriptor::Catalog::builtin()),
            Some(path) => crate::api::load_descriptors(path, self.descriptors_replace)
                .map(std::sync::Arc::new),
        }
    }

    /// How the schema is federated (`--federation`, `--federation-entity`,
    /// `--federation-node`),
    /// its entities checked against the types `descriptors` serves.
    pub fn federation(
        &self,
        descriptors: &crate::descriptor::Catalog,
    ) -> anyhow::Result<Option<std::sync::Arc<crate::api::federation::Federation>>> {
        if !self.federation {
            return Ok(None);
        }
        let federation = crate::api::federation::Federation {
            entities: self.federation_entities.clone(),
            node: self.federation_node,
        };
        let mut taken = crate::api::schema_names();
        for ty in descriptors.types() {
            taken.insert(ty.name.clone());
            taken.insert(ty.input_name());
        }
        federation.check(&taken).map_err(anyhow::Error::msg)?;
        Ok(Some(std::sync::Arc::new(federation)))
    }

    /// The store URL: `--store`, or the embedded store in the data directory.
    pub fn store_url(&self) -> String {
        self.store
            .clone()
            .unwrap_or_else(|| format!("embedded:{}", self.data_dir.display()))
    }

    /// The feed model with its settings.
    pub fn feed_model(&self) -> FeedModel {
        FeedModel {
            kind: self.feed_model,
            river_size: self.river_size as usize,
            river_idle: self.river_idle,
            river_builds: self.river_builds as usize,
            celebrity_threshold: self.celebrity_threshold as usize,
            pulled_below: None,
        }
    }

    /// The backends' settings these flags give.
    pub fn store_settings(&self) -> crate::store::StoreSettings {
        let mut settings = crate::store::StoreSettings::default();
        settings.embedded.cache_bytes = self.cache_size;
        settings.mongo = crate::store::mongo::MongoSettings {
            layout: self.timeline_layout,
            bucket_size: self.bucket_size as usize,
            embed_actions: self.embed_actions,
            ..crate::store::mongo::MongoSettings::default()
        };
        settings
    }

    pub fn options(&self) -> anyhow::Result<ServeOptions> {
        let mut options = ServeOptions::new(self.store_url());
        options.listen = self.listen;
        options.event_buffer = self.event_buffer as usize;
        options.follow_backfill = self.follow_backfill as usize;
        options.model = self.feed_model();
        options.item_ttl = self.item_ttl;
        options.idempotency_ttl = self.idempotency_ttl;
        options.group_feed_size = self.group_feed_size as usize;
        options.notice_rules = self.notice_rules()?;
        options.descriptors = self.descriptors()?;
        options.allow_descriptor_changes = self.allow_descriptor_changes;
        options.federation = self.federation(&options.descriptors)?;
        options.webhooks_allow_private = self.webhooks_allow_private;
        options.webhooks_proxy = self.webhooks_proxy.clone();
        options.planned_reads = self.planned_reads;
        options.document_cache_bytes = self.document_cache_bytes;
        options.insecure_dev = self.insecure_dev;
        options.cors_origins = self
            .cors_origins
            .as_deref()
            .map(crate::http::cors::Origins::parse)
            .transpose()?;
        let bump_rules = self.bump_rules()?;
        options.worker = (!self.no_worker).then(|| WorkerConfig {
            lease_ms: self.fanout_lease_secs as i64 * 1000,
            batch_size: self.fanout_batch as usize,
            poll_interval: Duration::from_millis(500),
            bump_rules,
            ..WorkerConfig::default()
        });
        options.auth = Arc::new(self.authenticator()?);
        options.demo = self.demo;
        options.store_settings = self.store_settings();
        anyhow::ensure!(!self.demo || options.auth.is_dev(), DEMO_NEEDS_DEV_MODE);
        options.introspection = self.introspection;
        if let Some(key) = &self.cursor_key {
            anyhow::ensure!(
                key.len() >= 32,
                "--cursor-key must be at least 32 bytes long"
            );
        }
        options.cursor_secret = self.cursor_key.as_ref().map(|key| key.as_bytes().to_vec());
        options.ws_limits = WsLimits {
            max_connections: self.max_connections as usize,
            max_pending: self.max_pending_connections as usize,
            max_pending_per_address: self.max_pending_connections_per_address as usize,
            max_subscriptions: self.max_subscriptions as usize,
            init_timeout: self.ws_init_timeout,
            ping_interval: self.ws_ping_interval,
        };
        anyhow::ensure!(
            !self.ws_init_timeout.is_zero() && !self.ws_ping_interval.is_zero(),
            "--ws-init-timeout and --ws-ping-interval must be longer than zero"
        );
        options.listen_limits = self.listen_limits()?;
        options.rate_limits = self.rate_limits.clone();
        let trusted = self
            .trusted_documents
            .as_deref()
            .map(|path| {
                crate::http::persisted::TrustedDocuments::load(path, self.trusted_documents_mode)
            })
            .transpose()?;
        if let Some(trusted) = &trusted {
            tracing::info!(
                documents = trusted.len(),
                mode = ?trusted.mode(),
                "trusted documents loaded"
            );
        }
        anyhow::ensure!(
            (1024..=crate::http::MAX_BODY_BYTES).contains(&self.max_document_bytes),
            "--max-document-bytes must be from 1KiB to the body limit, {} bytes",
            crate::http::MAX_BODY_BYTES
        );
        let limits = crate::http::persisted::Limits {
            apq_cache_bytes: self.apq_cache_bytes,
            max_document_bytes: self.max_document_bytes,
        };
        options.persisted = Arc::new(crate::http::persisted::Persisted::new(trusted, limits));
        if let Some(token) = &self.metrics_token {
            anyhow::ensure!(
                token.len() >= 16,
                "--metrics-token must be at least 16 bytes long"
            );
        }
        options.metrics_access = crate::http::MetricsAccess {
            listen: self.metrics_listen,
            token: self.metrics_token.as_deref().map(Arc::from),
        };
        Ok(options)
    }
}

impl ServeArgs {
    /// The timeouts and caps of HTTP connections.
    fn listen_limits(&self) -> anyhow::Result<crate::http::listen::ListenLimits> {
        let live = self.max_connections as u64 + self.max_pending_connections as u64;
        if let Some(total) = self.max_http_connections {
            anyhow::ensure!(
                total as u64 > live,
                "--max-http-connections ({total}) must be larger than --max-connections plus \
                 --max-pending-connections ({live}): each live or pending connection holds an \
                 HTTP connection, and plain requests need room beside them"
            );
        }
        Ok(crate::http::listen::ListenLimits {
            header_timeout: self.header_timeout,
            body_timeout: self.body_timeout,
            idle_timeout: self.idle_timeout,
            max_connections: self.max_http_connections.map(|n| n as usize),
            max_connections_per_address: self.max_http_connections_per_address as usize,
        })
    }
}

/// A cache size: a byte count ([`parse_bytes`]) of 8 MiB or more.
pub(crate) fn parse_size(text: &str) -> Result<usize, String> {
    let bytes = parse_bytes(text)?;
    if bytes < 8 << 20 {
        return Err(format!("{} is out of range: at least 8MiB", text.trim()));
    }
    Ok(bytes)
}

/// A byte count, bare or with a binary unit (`KiB`, `MiB`, `GiB`).
pub(crate) fn parse_bytes(text: &str) -> Result<usize, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: usize = number
        .parse()
        .map_err(|_| format!("{text:?} is not a size such as 1GiB or 268435456"))?;
    let scale: usize = match unit.trim() {
        "" | "B" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        other => return Err(format!("unknown unit {other:?}; use KiB, MiB or GiB")),
    };
    number
        .checked_mul(scale)
        .ok_or_else(|| format!("{text} is out of range"))
}

/// `--webhooks-proxy`: an `http` or `https` URL with a host.
fn proxy_url(text: &str) -> Result<String, String> {
    let url = reqwest::Url::parse(text).map_err(|e| format!("not a URL: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err("a proxy is an http:// or https:// URL with a host".to_owned());
    }
    Ok(text.to_owned())
}

/// `on` or `off`.
fn on_off(value: &str) -> Result<bool, String> {
    match value {
        "on" => Ok(true),
        "off" => Ok(false),
        other => Err(format!("`{other}` is neither `on` nor `off`")),
    }
}

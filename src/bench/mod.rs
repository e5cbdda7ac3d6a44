//! `riverfeed bench`: starts the real server in-process on a loopback port and
//! measures it the way clients use it — recording actions and reading feeds over
//! HTTP GraphQL, receiving live events over graphql-transport-ws — then writes
//! `results.json`, `report.md` and SVG plots.
//!
//! Bulk setup (follow graphs) goes straight to the store, for speed; everything
//! measured goes through the server.
//!
//! One file per workload ([`load`], [`ramp`], [`sustained`], [`reads`],
//! [`live`], [`notifications`], [`soak`]); [`graph`] builds the data they share
//! ([`readers`]: who reads, cold and warm), [`client`] speaks to the server,
//! [`report`] and [`plot`] write the results (the reads', the model and layout
//! comparisons' sections in [`reads_report`], [`models_report`] and
//! [`layouts_report`]), all from the parts in [`figures`].

pub mod client;
pub mod figures;
pub mod graph;
pub mod history;
pub mod layouts;
pub mod layouts_report;
pub mod live;
pub mod load;
pub mod models;
pub mod models_report;
pub mod notifications;
pub mod plot;
pub mod ramp;
pub mod readers;
pub mod reads;
pub mod reads_report;
pub mod relay;
pub mod report;
pub mod soak;
pub mod stats;
pub mod sustained;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use clap::{Args, ValueEnum};

use crate::duration::parse_duration;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::{Deserialize, Serialize};

use crate::auth::Authenticator;
use crate::config::ServeArgs;
use crate::server::{self, Server};
use crate::store::embedded::EmbeddedStore;
use crate::store::mongo::{redact, MongoStore};
use crate::store::{Footprint, Measure, Stats, Store};

/// The tenant every workload runs in.
pub const TENANT: &str = "bench";

/// What `riverfeed bench` measures. The store comes from the global `--store`
/// (a fresh temporary embedded directory when it is not given).
#[derive(Clone, Debug, Args)]
pub struct BenchArgs {
    /// Directory for results.json, report.md and the plots.
    #[arg(long, default_value = "bench-results")]
    pub out: PathBuf,
    /// Users in the load graph.
    #[arg(long, default_value_t = 50_000)]
    pub users: usize,
    /// Most users one user follows (follow counts and popularity are Zipf).
    #[arg(long, default_value_t = 100)]
    pub max_follows: usize,
    /// Actions recorded by the load workload: at the default sizes, enough
    /// that about a quarter of the users have more than a page of feed,
    /// and the reads workload reads them.
    #[arg(long, default_value_t = 40_000)]
    pub actions: usize,
    /// Follower counts of the fan-out ramp, one action each.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "1000,10000,100000,1000000"
    )]
    pub ramp: Vec<usize>,
    /// How long each timed phase runs (warm feed reads at each concurrency,
    /// and cold ones at most, under the run's model, and half of it under
    /// push and from memory; sustained posting; notification counts and
    /// pages half of it each): "10s", "500ms".
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub duration: Duration,
    /// Feed-read concurrencies.
    #[arg(long, value_delimiter = ',', default_value = "1,64")]
    pub concurrency: Vec<usize>,
    /// Live subscriber counts (one websocket each).
    #[arg(long, value_delimiter = ',', default_value = "1000,10000")]
    pub live: Vec<usize>,
    /// Actions timed per live subscriber count.
    #[arg(long, default_value_t = 10)]
    pub live_repeats: usize,
    /// The program that runs the clients in a process of their own, as
    /// `<program> live-subscribers …` (the live subscribers' connections)
    /// and `<program> read-load …` (the reads' load generator): this
    /// `riverfeed` binary by default. Apart, the server's CPU time, memory
    /// and open-files limit are the server's own.
    #[arg(long, hide = true)]
    pub client_program: Option<PathBuf>,
    /// Most deliveries the sustained workload queues before it stops posting.
    #[arg(long, default_value_t = 4_000_000)]
    pub sustained_deliveries: u64,
    /// Which workloads run.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "load,ramp,sustained,reads,live,notifications,soak"
    )]
    pub workloads: Vec<Workload>,
    /// How long the soak holds its subscribers under hostile requests.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub soak: Duration,
    /// Live subscribers the soak holds.
    #[arg(long, default_value_t = 1_000)]
    pub soak_subscribers: usize,
    /// Users whose posts the notifications workload likes and comments on
    /// (2 posts each, 5 likes and 4 comments on each post).
    #[arg(long, default_value_t = 100)]
    pub notice_owners: usize,
    /// Notification groups each reader of the notifications workload has
    /// (at most the groups a user keeps).
    #[arg(long, default_value_t = 250)]
    pub notice_groups: usize,
    /// Compare feed models instead of the workloads: the same graph and
    /// load on each, on a fresh store each (`push,pull,rivers,hybrid`).
    #[arg(long, value_delimiter = ',', value_enum)]
    pub models: Vec<crate::timeline::FeedModelKind>,
    /// Compare MongoDB timeline layouts instead of the workloads
    /// (`items,time_buckets,sized_buckets`), each with and without copies
    /// of actions in the entries, on a fresh database each (`--store
    /// mongodb://…`).
    #[arg(long, value_delimiter = ',', value_enum)]
    pub layouts: Vec<crate::store::mongo::TimelineLayout>,
    /// With `--models`: the percentage of readers who never read.
    #[arg(long, default_value_t = 80, value_parser = clap::value_parser!(u32).range(0..=99))]
    pub dormant: u32,
    /// Measure live delivery across processes instead of the workloads:
    /// two servers on one MongoDB database (`--store mongodb://…`), the
    /// actor recording through the one that runs the worker, subscribers
    /// on both (`--relay-subscribers` each, `--live-repeats` actions).
    #[arg(long)]
    pub relay: bool,
    /// With `--relay`: subscribers on each server.
    #[arg(long, default_value_t = 100)]
    pub relay_subscribers: usize,
    /// With `--models`: followers of the star whose actions are timed.
    #[arg(long, default_value_t = 1_000_000)]
    pub star_followers: usize,
    /// How long the history workload runs on each backend, in minutes of
    /// clients and kills (the embedded store always; MongoDB too when
    /// `--store` names one).
    #[arg(long, default_value_t = 5.0)]
    pub history_minutes: f64,
    /// Seed of the generated graph and mix.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// No progress bars or summary table.
    #[arg(long)]
    pub quiet: bool,
}

/// One workload of the bench.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Workload {
    Load,
    Ramp,
    Sustained,
    Reads,
    Live,
    Notifications,
    Soak,
    /// Not in the default set: the history checker's long run, with
    /// processes killed (see the `history` module).
    History,
}

/// Everything a run measured; `results.json` is this, serialised.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Results {
    pub meta: report::Meta,
    pub load: Option<load::LoadResult>,
    pub ramp: Option<Vec<ramp::RampPoint>>,
    pub sustained: Option<sustained::SustainedResult>,
    pub reads: Option<Vec<reads::ReadsResult>>,
    /// Readers whose feeds fill a page, of the load's users.
    #[serde(default)]
    pub full_readers: Option<usize>,
    /// The operations the server ran during the reads, by executor.
    #[serde(default)]
    pub read_executions: Option<readers::Executions>,
    pub live: Option<Vec<live::LiveResult>>,
    #[serde(default)]
    pub notifications: Option<notifications::NotificationsResult>,
    #[serde(default)]
    pub soak: Option<soak::SoakResult>,
    #[serde(default)]
    pub models: Option<Vec<models::ModelResult>>,
    #[serde(default)]
    pub layouts: Option<Vec<layouts::LayoutResult>>,
    #[serde(default)]
    pub history: Option<Vec<history::HistoryResult>>,
    pub targets: Vec<figures::TargetCheck>,
}

/// The server under test and the handles the workloads share.
pub struct Bench {
    pub server: Server,
    pub store: Arc<dyn Store>,
    /// The same store, when embedded: bulk setup writes through it directly.
    pub embedded: Option<Arc<EmbeddedStore>>,
    pub client: client::Gql,
    pub ui: Ui,
    /// The rules the server's worker writes notices by.
    pub notice_rules: crate::notify::NoticeRules,
    /// What the server's `/bench/reference` answers.
    pub reference: Arc<crate::http::ReferencePage>,
    /// Deliveries the worker writes in one batch (`--fanout-batch`).
    pub fanout_batch: usize,
}

impl BenchArgs {
    /// The program that runs clients in their own process
    /// (`--client-program`, else this one).
    pub fn client_program(&self) -> anyhow::Result<PathBuf> {
        match &self.client_program {
            Some(program) => Ok(program.clone()),
            None => std::env::current_exe().context("cannot find this program to run clients"),
        }
    }
}

impl Bench {
    /// What the store holds now, and the backend's counters.
    pub async fn stats(&self) -> anyhow::Result<(Footprint, Stats)> {
        let stats = self.store.stats(Measure::Footprint).await?;
        let footprint = stats.footprint.context("the store measured no footprint")?;
        Ok((footprint, stats))
    }

    /// What the store holds now.
    pub async fn footprint(&self) -> anyhow::Result<Footprint> {
        Ok(self.stats().await?.0)
    }
}

/// Progress bars, or nothing when quiet.
#[derive(Clone, Copy)]
pub struct Ui {
    pub quiet: bool,
}

impl Ui {
    /// A bar over `len` steps.
    pub fn bar(&self, len: u64, message: &str) -> ProgressBar {
        let bar = ProgressBar::new(len);
        self.dress(
            &bar,
            "{msg:28} [{bar:40}] {human_pos}/{human_len} {per_sec} eta {eta}",
        );
        bar.set_message(message.to_owned());
        bar
    }

    /// A spinner for a phase of unknown length (a timed one, or a drain).
    pub fn spinner(&self, message: &str) -> ProgressBar {
        let bar = ProgressBar::new_spinner();
        self.dress(&bar, "{spinner} {msg:28} {elapsed_precise} {human_pos}");
        bar.set_message(message.to_owned());
        bar.enable_steady_tick(Duration::from_millis(100));
        bar
    }

    fn dress(&self, bar: &ProgressBar, template: &str) {
        if self.quiet {
            bar.set_draw_target(ProgressDrawTarget::hidden());
        }
        if let Ok(style) = ProgressStyle::with_template(template) {
            bar.set_style(style.progress_chars("=> "));
        }
    }

    pub fn say(&self, line: &str) {
        if !self.quiet {
            eprintln!("{line}");
        }
    }
}

/// Where the run stores its data, and how to clean it up.
enum Backing {
    /// A temporary directory, removed when this is dropped.
    Embedded { _dir: tempfile::TempDir },
    /// A user-given embedded directory, kept.
    EmbeddedAt,
    /// A fresh MongoDB database, dropped afterwards.
    Mongo(String),
}

/// `uri` with its database replaced by a fresh one for this run.
pub fn fresh_database(uri: &str) -> String {
    let (head, query) = match uri.split_once('?') {
        Some((head, query)) => (head, Some(query)),
        None => (uri, None),
    };
    let scheme_end = head.find("://").map_or(0, |i| i + 3);
    let hosts_end = head[scheme_end..]
        .find('/')
        .map_or(head.len(), |i| scheme_end + i);
    let database = format!("riverfeed_bench_{}", bson::oid::ObjectId::new().to_hex());
    match query {
        Some(query) => format!("{}/{database}?{query}", &head[..hosts_end]),
        None => format!("{}/{database}", &head[..hosts_end]),
    }
}

/// Runs the selected workloads and writes the results under `args.out`.
pub async fn run(args: &BenchArgs, serve: &ServeArgs) -> anyhow::Result<Results> {
    anyhow::ensure!(
        !serve.no_worker,
        "bench measures fan-out: it needs the in-process worker (drop --no-worker)"
    );
    anyhow::ensure!(args.users >= 2, "--users must be at least 2");
    let ui = Ui { quiet: args.quiet };
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create {}", args.out.display()))?;
    let wants = |w: Workload| args.workloads.contains(&w);

    let most_live = if wants(Workload::Live) {
        args.live.iter().copied().max().unwrap_or(0)
    } else {
        0
    };
    // The soak's subscribers, and the connections its hostile clients hold.
    let most_live = if wants(Workload::Soak) {
        most_live.max(args.soak_subscribers + 2 * 256)
    } else {
        most_live
    };
    // The server holds one socket per live subscriber; the subscribers' own
    // ends are in a child process, which raises its own limit.
    let wanted_fds = most_live as u64 + 1024;
    let fds = stats::raise_fd_limit(wanted_fds);
    anyhow::ensure!(
        fds >= wanted_fds,
        "--live {most_live} needs {wanted_fds} open files for the server's sockets \
         but the limit is {fds}; ask for fewer subscribers"
    );

    if !args.layouts.is_empty() {
        return compare_layouts(args, serve, ui, fds).await;
    }
    if wants(Workload::History) {
        let ran = run_history(args, serve).await?;
        let alone = args.workloads.iter().all(|w| *w == Workload::History);
        if alone {
            return Ok(Results {
                history: Some(ran),
                ..Results::default()
            });
        }
    }
    if args.relay {
        let repeats = args.live_repeats.max(1);
        let result = relay::run(serve, args.relay_subscribers.max(1), repeats).await?;
        let table = relay::markdown(&result);
        std::fs::write(args.out.join("relay.md"), &table)?;
        std::fs::write(
            args.out.join("relay.json"),
            serde_json::to_string_pretty(&result)?,
        )?;
        if !args.quiet {
            println!("{table}");
        }
        return Ok(Results::default());
    }
    if args.models.is_empty() {
        let (bench, backing, url) = start(serve, ui, most_live, None).await?;
        let mut results = Results {
            meta: report::Meta::collect(&url, args, fds),
            ..Results::default()
        };
        let outcome = run_workloads(&bench, args, serve, &mut results).await;
        if outcome.is_err() {
            // Keep what was measured before the failure.
            let _ = report::write(&args.out, &results);
        }
        let stopped = stop(bench, backing).await;
        outcome?;
        stopped?;
        return finish(args, results);
    }
    let mut results = Results::default();
    let mut compared = Vec::new();
    for model in models::models(args, serve.feed_model()) {
        // A store of its own for each model (a directory each, if given one).
        let mut serve = serve.clone();
        if let Some(dir) = serve
            .store
            .as_deref()
            .and_then(|u| u.strip_prefix("embedded:"))
        {
            serve.store = Some(format!("embedded:{dir}/{}", model.kind));
        }
        let (bench, backing, url) = start(&serve, ui, 1, Some(model)).await?;
        results.meta = report::Meta::collect(&url, args, fds);
        let outcome = models::run(&bench, args, &model).await;
        let stopped = stop(bench, backing).await;
        compared.push(outcome?);
        stopped?;
        results.models = Some(compared.clone());
        report::write(&args.out, &results)?;
    }
    finish(args, results)
}

/// The history workload: a long run on the embedded store, and on MongoDB
/// when `--store` names one (a fresh database, dropped afterwards);
/// writes `history.md` and `history.json`.
async fn run_history(
    args: &BenchArgs,
    serve: &ServeArgs,
) -> anyhow::Result<Vec<history::HistoryResult>> {
    use history::{Backend as On, HistoryConfig};
    let program = args.client_program()?;
    let duration = Duration::from_secs_f64((args.history_minutes * 60.0).max(1.0));
    let logs = args.out.join("history-logs");
    let data = tempfile::tempdir().context("cannot create a temporary directory")?;
    let mut backends = vec![On::Embedded(data.path().to_owned())];
    if let Some(url) = serve.store.as_deref().filter(|u| u.starts_with("mongodb")) {
        backends.push(On::Mongo(fresh_database(url)));
    }
    let mut results = Vec::new();
    for backend in backends {
        let mut config = HistoryConfig::new(program.clone(), backend, args.seed, logs.clone());
        config.duration = duration;
        // What a long run queued may take a while to work off at its end
        // on a slow server: the drain gives up only when the backlog stops
        // going down for this long.
        config.drain = config.drain.max(duration);
        if !args.quiet {
            eprintln!(
                "history on {} for {:.1} min (seed {})",
                config.backend.name(),
                args.history_minutes,
                args.seed
            );
        }
        let ran = history::run(&config).await;
        // The figures first: dropping a large database can be slow.
        let ran = ran.with_context(|| format!("the history on {}", config.backend.name()));
        if let Ok(done) = &ran {
            results.push(done.clone());
        }
        let text = history::report::markdown(&results);
        std::fs::write(args.out.join("history.md"), &text)?;
        std::fs::write(
            args.out.join("history.json"),
            serde_json::to_string_pretty(&results)?,
        )?;
        if !args.quiet {
            println!("{text}");
        }
        if let On::Mongo(uri) = &config.backend {
            let dropped = async {
                MongoStore::connect(uri, &Default::default())
                    .await?
                    .database()
                    .drop()
                    .await?;
                anyhow::Ok(())
            };
            if tokio::time::timeout(Duration::from_secs(60), dropped)
                .await
                .is_err()
            {
                eprintln!("the history's database was not dropped within a minute");
            }
        }
        ran?;
    }
    Ok(results)
}

/// Judges, writes and prints the results.
/// `--layouts`: each layout, without and with copies of actions, on a
/// fresh MongoDB database each, under push.
async fn compare_layouts(
    args: &BenchArgs,
    serve: &ServeArgs,
    ui: Ui,
    fds: u64,
) -> anyhow::Result<Results> {
    anyhow::ensure!(
        serve
            .store
            .as_deref()
            .is_some_and(|u| u.starts_with("mongodb")),
        "--layouts compares MongoDB's timeline layouts: pass --store mongodb://…"
    );
    let mut results = Results::default();
    let mut compared = Vec::new();
    let push = crate::timeline::FeedModel {
        kind: crate::timeline::FeedModelKind::Push,
        ..serve.feed_model()
    };
    for &layout in &args.layouts {
        for embed in [false, true] {
            let mut serve = serve.clone();
            serve.timeline_layout = Some(layout);
            serve.embed_actions = embed;
            let (bench, backing, url) = start(&serve, ui, 1, Some(push)).await?;
            results.meta = report::Meta::collect(&url, args, fds);
            let outcome = layouts::run(&bench, args, layout.name(), embed).await;
            let stopped = stop(bench, backing).await;
            compared.push(outcome?);
            stopped?;
            results.layouts = Some(compared.clone());
            report::write(&args.out, &results)?;
        }
    }
    finish(args, results)
}

fn finish(args: &BenchArgs, mut results: Results) -> anyhow::Result<Results> {
    results.targets = report::check_targets(&results);
    report::write(&args.out, &results)?;
    plot::write_all(&args.out, &results)?;
    if !args.quiet {
        println!("{}", report::table(&results));
        println!("results in {}", args.out.display());
    }
    Ok(results)
}

/// Opens the run's store (a fresh one: a temporary directory, or a fresh
/// database on a MongoDB URL) and starts the server on it, under `model`
/// if given (else the model the flags say).
async fn start(
    serve: &ServeArgs,
    ui: Ui,
    most_live: usize,
    model: Option<crate::timeline::FeedModel>,
) -> anyhow::Result<(Bench, Backing, String)> {
    let (url, backing) = match serve.store.as_deref() {
        Some(url) if url.starts_with("mongodb") => {
            let url = fresh_database(url);
            (url.clone(), Backing::Mongo(url))
        }
        Some(url) => (url.to_owned(), Backing::EmbeddedAt),
        None => {
            let dir = tempfile::tempdir().context("cannot create a temporary directory")?;
            let url = format!("embedded:{}", dir.path().display());
            (url, Backing::Embedded { _dir: dir })
        }
    };
    let mut options = serve.options()?;
    if let Some(model) = model {
        options.model = model;
    }
    let (store, embedded): (Arc<dyn Store>, Option<Arc<EmbeddedStore>>) =
        match url.strip_prefix("embedded:") {
            Some(dir) => {
                let store = Arc::new(EmbeddedStore::open_with(
                    std::path::Path::new(dir),
                    &options.store_settings.embedded,
                )?);
                (store.clone(), Some(store))
            }
            None => (
                crate::store::open_with(&url, &options.settings_for_model())
                    .await
                    .with_context(|| format!("cannot open store {}", redact(&url)))?,
                None,
            ),
        };

    options.store = url.clone();
    options.listen = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
    options.auth = Arc::new(Authenticator::Dev);
    options.insecure_dev = false;
    options.ws_limits.max_connections = options.ws_limits.max_connections.max(most_live + 64);
    // Every simulated client comes from loopback: one address may hold them all.
    let live = options.ws_limits.max_connections;
    options.ws_limits.max_pending_per_address = options.ws_limits.max_pending;
    options.listen_limits.max_connections_per_address =
        options.listen_limits.total(&options.ws_limits).max(live);
    if let Some(model) = model {
        options.model = model;
    }
    let notice_rules = options.notice_rules.clone();
    let reference = Arc::new(crate::http::ReferencePage::default());
    options.reference_page = Some(reference.clone());
    let server = server::start_with_store(options, store.clone()).await?;
    let client = client::Gql::new(server.addr, TENANT)?;
    let bench = Bench {
        server,
        store,
        embedded,
        client,
        ui,
        notice_rules,
        reference,
        fanout_batch: serve.fanout_batch as usize,
    };

    Ok((bench, backing, url))
}

/// The reads under `push`, beside the run's own: a server of its own on a
/// fresh store (a temporary directory for the embedded store) with the
/// same graph and, if the load ran, the same actions; phases half as long.
async fn beside_push(
    serve: &ServeArgs,
    args: &BenchArgs,
    ui: Ui,
    graph: &graph::Graph,
    readers: &readers::Readers,
    run: &[reads::ReadsResult],
    loaded: bool,
) -> anyhow::Result<Vec<reads::ReadsResult>> {
    let mut serve = serve.clone();
    if serve
        .store
        .as_deref()
        .is_some_and(|u| u.starts_with("embedded:"))
    {
        serve.store = None;
    }
    let push = crate::timeline::FeedModel {
        kind: crate::timeline::FeedModelKind::Push,
        ..serve.feed_model()
    };
    let (bench, backing, _) = start(&serve, ui, 1, Some(push)).await?;
    let outcome = async {
        graph::load_follows(&bench, graph).await?;
        if loaded {
            load::run(&bench, graph, args).await?;
        }
        let mut read = reads::run(&bench, readers, args, "push", args.duration / 2, false).await?;
        reads::beside(&mut read, run);
        anyhow::Ok(read)
    }
    .await;
    let stopped = stop(bench, backing).await;
    let read = outcome?;
    stopped?;
    Ok(read)
}

/// Stops the server and drops what the run stored.
async fn stop(bench: Bench, backing: Backing) -> anyhow::Result<()> {
    let ui = bench.ui;
    let stopped = bench.server.stop().await;
    if let Backing::Mongo(url) = &backing {
        let dropped = async {
            MongoStore::connect(url, &Default::default())
                .await?
                .database()
                .drop()
                .await?;
            anyhow::Ok(())
        };
        if let Err(err) = dropped.await {
            ui.say(&format!("could not drop the bench database: {err:#}"));
        }
    }
    drop(backing);
    stopped
}

async fn run_workloads(
    bench: &Bench,
    args: &BenchArgs,
    serve: &ServeArgs,
    results: &mut Results,
) -> anyhow::Result<()> {
    let wants = |w: Workload| args.workloads.contains(&w);
    let needs_graph = wants(Workload::Load) || wants(Workload::Sustained) || wants(Workload::Reads);
    let graph = if needs_graph {
        let graph = graph::Graph::generate(args.users, args.max_follows, args.seed);
        graph::load_follows(bench, &graph).await?;
        Some(graph)
    } else {
        None
    };
    if let (true, Some(graph)) = (wants(Workload::Load), &graph) {
        results.load = Some(load::run(bench, graph, args).await?);
    }
    if wants(Workload::Ramp) {
        results.ramp = Some(ramp::run(bench, &args.ramp).await?);
    }
    if let (true, Some(graph)) = (wants(Workload::Sustained), &graph) {
        results.sustained = Some(sustained::run(bench, graph, args).await?);
    }
    if let (true, Some(graph)) = (wants(Workload::Reads), &graph) {
        let loaded = wants(Workload::Load);
        let actors: Vec<usize> = match loaded {
            true => load::planned(graph, args)
                .into_iter()
                .map(|(a, _)| a)
                .collect(),
            false => Vec::new(),
        };
        let readers = readers::Readers::choose(graph, &actors, args.concurrency.len(), args.seed);
        results.full_readers = Some(readers.full);
        let model = serve.feed_model().kind;
        let before = reads::executions(bench).await?;
        let mut read = reads::run(bench, &readers, args, model.name(), args.duration, true).await?;
        results.read_executions = Some(reads::executions(bench).await?.since(before));
        if model != crate::timeline::FeedModelKind::Push {
            let push = beside_push(serve, args, bench.ui, graph, &readers, &read, loaded).await?;
            read.extend(push);
        }
        results.reads = Some(read);
    }
    if wants(Workload::Live) {
        results.live = Some(live::run(bench, args).await?);
    }
    if wants(Workload::Notifications) {
        results.notifications = Some(notifications::run(bench, args).await?);
    }
    if wants(Workload::Soak) {
        results.soak = Some(soak::run(bench, args).await?);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fresh_database_keeps_hosts_and_options() {
        let uri = fresh_database("mongodb://a:1,b:2/app?replicaSet=rs");
        assert!(
            uri.starts_with("mongodb://a:1,b:2/riverfeed_bench_"),
            "{uri}"
        );
        assert!(uri.ends_with("?replicaSet=rs"), "{uri}");
        let bare = fresh_database("mongodb://127.0.0.1:27999");
        assert!(bare.starts_with("mongodb://127.0.0.1:27999/riverfeed_bench_"));
    }
}

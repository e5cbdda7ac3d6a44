//! What a run says: the machine and backend it ran on, each figure next to its
//! target, as a terminal table, `report.md` and `results.json`.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Context as _;
use serde::{Deserialize, Serialize};

use super::figures::{check, TargetCheck};
use super::{BenchArgs, Results, Workload};
use crate::store::mongo::redact;

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Meta {
    /// `embedded` or `mongodb`.
    pub backend: String,
    /// The store URL, credentials hidden.
    pub store: String,
    /// `release` or `debug`.
    pub profile: String,
    pub cpu: String,
    pub cores: usize,
    pub memory_gib: f64,
    pub os: String,
    pub started: String,
    pub open_files_limit: u64,
    pub workloads: Vec<Workload>,
    pub users: usize,
    pub max_follows: usize,
    pub actions: usize,
    pub duration_secs: f64,
    pub seed: u64,
}

impl Meta {
    pub fn collect(store: &str, args: &BenchArgs, open_files_limit: u64) -> Self {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu = cpuinfo
            .lines()
            .find_map(|l| l.strip_prefix("model name"))
            .map(|l| l.trim_start_matches([' ', '\t', ':']).to_owned())
            .unwrap_or_else(|| "unknown".into());
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let memory_kib: f64 = meminfo
            .lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|l| l.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0.0);
        let os = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|r| format!("Linux {}", r.trim()))
            .unwrap_or_else(|_| std::env::consts::OS.into());
        Self {
            backend: if store.starts_with("mongodb") {
                "mongodb".into()
            } else {
                "embedded".into()
            },
            store: redact(store),
            profile: if cfg!(debug_assertions) {
                "debug".into()
            } else {
                "release".into()
            },
            cpu,
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            memory_gib: memory_kib / 1024.0 / 1024.0,
            os,
            started: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            open_files_limit,
            workloads: args.workloads.clone(),
            users: args.users,
            max_follows: args.max_follows,
            actions: args.actions,
            duration_secs: args.duration.as_secs_f64(),
            seed: args.seed,
        }
    }
}

/// The figures the targets name, each judged. The targets are for the embedded
/// store in a release build on a 2-core machine, load generator included.
pub fn check_targets(r: &Results) -> Vec<TargetCheck> {
    if let Some(models) = &r.models {
        return super::models_report::targets(models);
    }
    if let Some(layouts) = &r.layouts {
        return super::layouts_report::targets(layouts);
    }
    let most_live = r
        .live
        .as_ref()
        .and_then(|live| live.iter().max_by_key(|x| x.subscribers));
    let mut checks = vec![
        check(
            "sustained fan-out",
            ">= 350,000 deliveries/s",
            r.sustained.as_ref().map(|s| {
                (
                    format!("{:.0} deliveries/s", s.deliveries_per_sec),
                    s.deliveries_per_sec >= 350_000.0,
                )
            }),
        ),
        check(
            "1M-follower action fully delivered",
            "<= 2.5 s",
            r.ramp
                .as_ref()
                .and_then(|ramp| ramp.iter().find(|p| p.followers == 1_000_000))
                .map(|p| (format!("{:.2} s", p.secs), p.secs <= 2.5)),
        ),
        check(
            "live delivery to 10,000, p99 to the last",
            "<= 200 ms",
            most_live.map(|x| {
                (
                    format!(
                        "{:.1} ms ({} subscribers)",
                        x.last_latency.p99_ms, x.subscribers
                    ),
                    x.last_latency.p99_ms <= 200.0 && x.missed == 0 && x.subscribers >= 10_000,
                )
            }),
        ),
        check(
            "idle subscriber resident memory",
            "<= 12 KiB each",
            most_live.map(|x| {
                (
                    format!(
                        "{:.1} KiB (server, {} subscribers)",
                        x.bytes_per_subscriber / 1024.0,
                        x.subscribers
                    ),
                    x.bytes_per_subscriber <= 12.0 * 1024.0,
                )
            }),
        ),
    ];
    let live_at = checks.len() - 2;
    checks.splice(
        live_at..live_at,
        super::reads_report::targets(r.reads.as_deref()),
    );
    // Below a thousand subscribers the growth is within the allocator's noise.
    if most_live.is_some_and(|x| x.subscribers < 1_000) {
        if let Some(memory) = checks.last_mut() {
            memory.pass = None;
            memory.value.push_str(", too few to judge");
        }
    }
    checks.push(check(
        "notices written from a queued burst",
        ">= 20,000 notices/s",
        r.notifications
            .as_ref()
            .and_then(|n| n.queued.as_ref())
            .map(|q| {
                (
                    format!("{:.0} notices/s", q.notices_per_sec),
                    q.notices_per_sec >= 20_000.0,
                )
            }),
    ));
    use super::notifications::{NoticeReadResult, NotificationsResult};
    let notices = r.notifications.as_ref();
    for (name, limit_ms, read) in [
        (
            "notifications(first: 20), p50",
            1.0,
            (|n| &n.page) as fn(&NotificationsResult) -> &NoticeReadResult,
        ),
        ("notificationCounts, p50", 0.2, |n| &n.counts),
    ] {
        checks.push(check(
            name,
            &format!("<= {limit_ms} ms"),
            notices.map(|n| {
                let p50 = read(n).latency.p50_ms;
                (format!("{p50:.3} ms"), p50 <= limit_ms)
            }),
        ));
    }
    checks.extend(soak_targets(r.soak.as_ref()));
    checks
}

/// The soak's targets: health answered promptly, memory flat, and every
/// subscriber still served, while hostile requests come in.
fn soak_targets(soak: Option<&super::soak::SoakResult>) -> Vec<TargetCheck> {
    vec![
        check(
            "/healthz under hostile requests, p99",
            "<= 50 ms",
            soak.map(|x| {
                (
                    format!(
                        "{:.1} ms (max {:.1} ms, {} subscribers, {:.0} s)",
                        x.healthz.p99_ms, x.healthz.max_ms, x.subscribers, x.secs
                    ),
                    x.healthz.p99_ms <= 50.0 && x.delivered == x.subscribers,
                )
            }),
        ),
        check(
            "resident memory through the soak's second half",
            "flat: grows <= 5%",
            soak.map(|x| {
                let grew = x.rss_end_bytes as f64 / x.rss_half_bytes.max(1) as f64 - 1.0;
                (
                    format!(
                        "{:+.1}% ({} MiB at the start, {} MiB half-way, {} MiB at the end, at most {} MiB)",
                        grew * 100.0,
                        x.rss_start_bytes >> 20,
                        x.rss_half_bytes >> 20,
                        x.rss_end_bytes >> 20,
                        x.rss_max_bytes >> 20
                    ),
                    grew <= 0.05,
                )
            }),
        ),
    ]
}

fn verdict(pass: Option<bool>) -> &'static str {
    match pass {
        Some(true) => "PASS",
        Some(false) => "FAIL",
        None => "-",
    }
}

/// Rows of `(workload, figure, value)` for every measured figure.
fn figures(r: &Results) -> Vec<(String, String, String)> {
    let mut rows = Vec::new();
    let mut row = |w: &str, f: String, v: String| rows.push((w.to_owned(), f, v));
    for m in r.models.iter().flatten() {
        row(
            "models",
            format!("{}: fan-out", m.model),
            format!(
                "{:.1} deliveries/action, {:.0}/s; {} items stored, {:.0} bytes/user",
                m.deliveries_per_action, m.deliveries_per_sec, m.feed_items, m.bytes_per_user
            ),
        );
        row(
            "models",
            format!("{}: pages", m.model),
            format!(
                "dormant first p50 {:.2} ms; active c=1 p50 {:.2} ms, c=16 p50 {:.2} / p99 {:.2} ms",
                m.dormant_first_page.p50_ms,
                m.active_c1.p50_ms,
                m.active_c16.p50_ms,
                m.active_c16.p99_ms
            ),
        );
        row(
            "models",
            format!("{}: star ({} followers)", m.model, m.star_followers),
            format!(
                "done p50 {:.1} ms, seen live p50 {:.1} ms / p99 {:.1} ms",
                m.star_done.p50_ms, m.star_seen.p50_ms, m.star_seen.p99_ms
            ),
        );
    }
    if let Some(l) = &r.load {
        row(
            "load",
            "graph".into(),
            format!(
                "{} users, {} follows, most followed has {}",
                l.users, l.edges, l.max_followers
            ),
        );
        row(
            "load",
            format!("recordAction x{} (concurrency 16)", l.actions),
            format!(
                "{:.0} actions/s, p50 {:.2} ms, p99 {:.2} ms",
                l.actions_per_sec, l.record_latency.p50_ms, l.record_latency.p99_ms
            ),
        );
        row(
            "load",
            format!("fan-out of {} deliveries", l.deliveries),
            format!(
                "{:.2} s, {:.0} deliveries/s",
                l.delivered_secs, l.deliveries_per_sec
            ),
        );
    }
    for p in r.ramp.iter().flatten() {
        row(
            "ramp",
            format!("1 action, {} followers", p.followers),
            format!("{:.3} s, {:.0} deliveries/s", p.secs, p.deliveries_per_sec),
        );
    }
    if let Some(s) = &r.sustained {
        row(
            "sustained",
            format!(
                "{} actions, {} deliveries, {} posters + {} readers",
                s.actions, s.deliveries, s.posters, s.readers
            ),
            format!(
                "{:.0} deliveries/s ({:.2} s); reads meanwhile p50 {:.2} ms, p99 {:.2} ms",
                s.deliveries_per_sec,
                s.delivered_secs,
                s.reader_latency.p50_ms,
                s.reader_latency.p99_ms
            ),
        );
        if let Some(engine) = s.engine_per_sec {
            row(
                "sustained",
                "the engine alone: a delivery's keys in the worker's batches".to_owned(),
                format!(
                    "{engine:.0} deliveries/s; the worker reached {:.0}% of it",
                    100.0 * s.deliveries_per_sec / engine.max(f64::MIN_POSITIVE)
                ),
            );
        }
    }
    super::reads_report::figures(
        r.reads.as_deref().unwrap_or_default(),
        r.full_readers,
        r.read_executions.as_ref(),
        &mut row,
    );
    for x in r.live.iter().flatten() {
        row(
            "live",
            format!("{} subscribers, to the last", x.subscribers),
            format!(
                "p50 {:.1} ms, p99 {:.1} ms over {} actions; {} missed",
                x.last_latency.p50_ms, x.last_latency.p99_ms, x.repeats, x.missed
            ),
        );
        row(
            "live",
            format!("{} subscribers, idle memory", x.subscribers),
            format!(
                "{:.1} KiB each in the server (connected in {:.2} s)",
                x.bytes_per_subscriber / 1024.0,
                x.connect_secs
            ),
        );
    }
    if let Some(n) = &r.notifications {
        let w = &n.write;
        row(
            "notifications",
            format!(
                "{} likes + {} comments on {} posts (concurrency 16)",
                w.likes, w.comments, w.actions
            ),
            format!(
                "{:.0} mutations/s, p50 {:.2} ms, p95 {:.2} ms, p99 {:.2} ms",
                w.mutations_per_sec,
                w.mutation_latency.p50_ms,
                w.mutation_latency.p95_ms,
                w.mutation_latency.p99_ms
            ),
        );
        row(
            "notifications",
            format!(
                "{} notices written ({} like, {} comment, {} reply) to {} users",
                w.notices, w.like_notices, w.comment_notices, w.reply_notices, w.recipients
            ),
            format!(
                "{:.2} s from the first mutation, {:.0} notices/s",
                w.written_secs, w.notices_per_sec
            ),
        );
        if let Some(q) = &n.queued {
            row(
                "notifications",
                format!(
                    "the same, queued at once: {} likes + {} comments, {} notices",
                    q.likes, q.comments, q.notices
                ),
                format!(
                    "{:.2} s from the import ({:.2} s of it), {:.0} notices/s",
                    q.written_secs, q.queue_secs, q.notices_per_sec
                ),
            );
        }
        for (what, x) in [
            ("notificationCounts", &n.counts),
            ("notifications(first: 20)", &n.page),
        ] {
            row(
                "notifications",
                format!(
                    "{what}, {} readers x {:.0} groups, {} clients",
                    x.readers, x.groups_per_reader, x.clients
                ),
                format!(
                    "{:.0} requests/s, p50 {:.3} ms, p95 {:.3} ms, p99 {:.3} ms, {} failures{}",
                    x.requests_per_sec,
                    x.latency.p50_ms,
                    x.latency.p95_ms,
                    x.latency.p99_ms,
                    x.failures,
                    if x.items_per_answer > 0.0 {
                        format!(", {:.1} groups/page", x.items_per_answer)
                    } else {
                        String::new()
                    }
                ),
            );
        }
    }
    if let Some(x) = &r.soak {
        row(
            "soak",
            format!(
                "{} subscribers for {:.0} s under hostile requests",
                x.subscribers, x.secs
            ),
            format!(
                "/healthz p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms; RSS {} MiB, {} MiB half-way, {} MiB at the end (at most {} MiB); {} of {} subscribers served after",
                x.healthz.p50_ms,
                x.healthz.p99_ms,
                x.healthz.max_ms,
                x.rss_start_bytes >> 20,
                x.rss_half_bytes >> 20,
                x.rss_end_bytes >> 20,
                x.rss_max_bytes >> 20,
                x.delivered,
                x.subscribers
            ),
        );
        for hostile in &x.hostile {
            row(
                "soak",
                hostile.kind.clone(),
                format!(
                    "{} sent, {} refused or closed by the server",
                    hostile.sent, hostile.refused
                ),
            );
        }
    }
    rows
}

/// The summary printed on the terminal.
pub fn table(r: &Results) -> String {
    let mut out = String::new();
    let m = &r.meta;
    let _ = writeln!(
        out,
        "\nriverfeed bench: {} store ({}), {} build, {} x {}, {:.0} GiB",
        m.backend, m.store, m.profile, m.cores, m.cpu, m.memory_gib
    );
    let rows = figures(r);
    let w0 = rows.iter().map(|r| r.0.len()).max().unwrap_or(0).max(9);
    let w1 = rows.iter().map(|r| r.1.len()).max().unwrap_or(0).max(6);
    let _ = writeln!(out, "{:w0$}  {:w1$}  result", "workload", "figure");
    for (w, f, v) in &rows {
        let _ = writeln!(out, "{w:w0$}  {f:w1$}  {v}");
    }
    let _ = writeln!(out, "\ntargets:");
    for t in &r.targets {
        let _ = writeln!(
            out,
            "  [{:4}] {:42} {:26} {}",
            verdict(t.pass),
            t.name,
            t.target,
            t.value
        );
    }
    out
}

/// `report.md`: the same, for people.
pub fn markdown(r: &Results) -> String {
    let m = &r.meta;
    let mut out = String::from("# Riverfeed benchmark\n\n");
    let server = if m.backend == "mongodb" {
        format!(
            "MongoDB at `{}` (a fresh database, dropped afterwards)",
            m.store
        )
    } else {
        "the embedded store (RocksDB) in a fresh temporary directory".to_owned()
    };
    let _ = writeln!(
        out,
        "Figures from {server}; {} build; {} cores of {}, {:.0} GiB, {}; started {}. \
         The server ran in-process on a loopback port, with the load generator in \
         the same process, except the live subscribers, held by a child process on \
         the same machine.\n",
        m.profile, m.cores, m.cpu, m.memory_gib, m.os, m.started
    );
    out.push_str("## Targets\n\n| figure | target | result | |\n|---|---|---|---|\n");
    for t in &r.targets {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} |",
            t.name,
            t.target,
            t.value,
            verdict(t.pass)
        );
    }
    if m.backend != "embedded" || m.profile != "release" {
        out.push_str(
            "\nThe targets are set for the embedded store in a release build; \
             this run is judged against them all the same.\n",
        );
    }
    if let Some(models) = &r.models {
        out.push_str("\n## Feed models\n\n");
        out.push_str(&super::models_report::markdown(models));
    }
    if let Some(layouts) = &r.layouts {
        out.push_str("\n## Timeline layouts\n\n");
        out.push_str(&super::layouts_report::markdown(layouts));
    }
    out.push_str("\n## Figures\n\n| workload | figure | result |\n|---|---|---|\n");
    for (w, f, v) in figures(r) {
        let _ = writeln!(out, "| {w} | {f} | {v} |");
    }
    out.push_str(
        "\n## How it was measured\n\n\
         - **load**: `recordAction` over HTTP at concurrency 16 from actors drawn uniformly; \
         fan-out time runs from the first request until every action reads `fanOut.state = DONE`.\n\
         - **ramp**: one action per follower count; time from sending `recordAction` until the \
         action reads `DONE` (polled every millisecond), which the worker sets after the last \
         feed item is committed.\n\
         - **sustained**: 8 posting tasks record actions from actors drawn by popularity \
         (Zipf) for the set duration or until the delivery budget is queued, while 4 tasks read \
         feeds; deliveries are the actors' followers plus themselves, over the time from the \
         first post to the last action done. The engine alone is then timed writing as many \
         deliveries' keys (at least 100,000, at most 1,000,000) in the worker's batches \
         (`--fanout-batch`), unsynced, with nothing else running (embedded store).\n\
         - **reads**: `feed(first: 25)` with actions, actors, descriptors and counts, by the \
         users whose feeds hold more than a page after the load (known from the graph and the \
         load's actions). Warm pages: a quarter of them (at most 1,000) read once, unmeasured \
         (under rivers, their rivers are then built), then drawn at random for the set \
         duration. Cold pages: a dormant reader's first page, each of the rest read once \
         (split between the concurrencies; rivers they got earlier in the run dropped first), \
         for at most the set duration. The same again under `push` on a server and store of \
         its own, with the same graph and load, for half the duration. \
         Latency is the whole HTTP round trip, with the response read whole and parsed as JSON \
         (edges counted, errors kept, the rest skipped as a rendering client would); a response \
         with `errors` is a failure. The load comes from a process of its own \
         (`riverfeed read-load`), on the same cores; the cores each kept busy are its CPU time \
         and the server process's over the run. The reference is that process reading \
         `/bench/reference`, which answers the median of 64 sampled warm pages' bodies from \
         memory through the same HTTP stack, for half the duration. The share of operations \
         the planned executor ran is the server's `riverfeed_graphql_executions_total` over \
         the run's own reads (0% where it counts none).\n\
         - **live**: one websocket per subscriber (graphql-transport-ws, `feedEvents`); time from \
         sending `recordAction` to the `ADDED` event read by the last subscriber, which the \
         subscribers' process stamps with the wall clock both processes share. Memory per \
         subscriber is the server process's resident-set growth while they connect and \
         subscribe, divided by their number.\n\
         - **notifications**: owners' status posts each get 5 likes and 4 comments from \
         different fans, sent one after the other per post and 16 posts at a time; the \
         notices owed (a `LIKE` per like and a `COMMENT` per comment to the owner, a `REPLY` \
         to every earlier commenter) are counted exactly, and the time runs from the first \
         mutation until every user has exactly what is owed, read from the store; more or \
         fewer fails the run. Then 32 readers get their groups (1 to 5 notices each, over \
         past days, 70% of those older than a day read, all but the last two hours seen) \
         written straight to the store, each reader's counts and first page are read once \
         and checked, and `notificationCounts`, then `notifications(first: 20)` with each \
         group's counts, 3 actors and its action, are read by 4 clients as random readers \
         for half the set duration each.\n\
         - **models**: per model a fresh store and server; the follow graph and the star's \
         followers written straight to the store; every active reader reads one page; the load's \
         actions recorded at concurrency 32 until all are `DONE`; deliveries are the feed items \
         the load added; a sample of dormant readers then reads one page each; active readers \
         read for the set duration at concurrency 1 and 16; the star records actions while one \
         follower listens on a websocket.\n",
    );
    out.push_str(
        "\n## What bounds them\n\n\
         From profiles (`perf record --call-graph dwarf`) of this version:\n\n\
         - **fan-out** (ramp, sustained, load): RocksDB's memtable inserts. A delivery is three \
         keys (the reader's timeline entry, the action's item entry, the reader's change entry); \
         a write group is applied on one thread, and the skip-list search and key comparisons \
         of the two keys that land at random readers are the largest single cost (about a fifth \
         of all samples in the sustained run, most of the ramp). The engine is built without \
         SSE4.2, so checksums run in software (about 2%).\n\
         - **sustained**: the same writer, sharing two cores with the posters' HTTP requests and \
         the 4 readers' GraphQL, which take about a third of the samples meanwhile.\n\
         - **reads**: GraphQL work per field and the HTTP round trip, not the store: the feed \
         range and the page's actions (from the in-memory cache) are about 6% of a page. Each \
         field of each item passes through the schema's extension chain (which keeps parsed and \
         validated documents, worth more than the chain costs), and the kernel's loopback TCP \
         and thread wake-ups take about a quarter of the samples, on two cores shared with the \
         load generator.\n\
         - **live**: one websocket write per subscriber in the server and one read in the \
         subscriber process, through the kernel's loopback TCP (about half of the server's \
         samples), both on the same two cores, and the subscription's selection resolved and \
         serialised for each subscriber, whose events all differ (each carries its reader's \
         cursor).\n\
         - **idle memory**: per subscriber, the websocket read buffer (1 KiB), the \
         connection's task and subscription stream state, and an inbox that allocates only \
         for a backlog; the figure also takes in whatever the engine allocates in the \
         background while the subscribers connect.\n\
         - **notices written**: over HTTP, the mutations: the worker keeps up with them. \
         Queued at once, the worker's syncs and its own work: it runs a claim of jobs \
         together, a group's notices in one write and many owners' groups side by side, \
         so their synced commits share the engine's syncs (about one for three notices \
         in a debug build).\n\
         - **notification pages**: GraphQL work per field (a page of 20 groups resolves some \
         400 fields, with 3 actors and the action for each group), reading the 20 groups \
         whole, and the reader's position index scanned twice: to the end for the page, \
         though it needs 21 entries, and whole again for the counts every page carries.\n",
    );
    if let Some(plots) = super::plot::names(r) {
        out.push_str("\n## Plots\n\n");
        for name in plots {
            let _ = writeln!(out, "![{name}]({name})");
        }
    }
    out
}

/// Writes `results.json` and `report.md` into `dir`.
pub fn write(dir: &Path, r: &Results) -> anyhow::Result<()> {
    let json = serde_json::to_string_pretty(r)?;
    std::fs::write(dir.join("results.json"), json).context("cannot write results.json")?;
    std::fs::write(dir.join("report.md"), markdown(r)).context("cannot write report.md")?;
    Ok(())
}

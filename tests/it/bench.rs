//! `riverfeed bench` end to end at toy sizes, on the embedded store: every
//! workload runs through the real server and leaves its files. Speed is not
//! asserted here; the figures belong in the benchmark report.

use clap::Parser;
use riverfeed::cli::{Cli, Command};
use serde_json::Value;

/// Runs the bench the parsed command line asks for.
async fn run(cli: Cli) -> riverfeed::bench::Results {
    let Some(Command::Bench(args)) = cli.command else {
        panic!("parsed as the bench command");
    };
    riverfeed::bench::run(&args, &cli.serve)
        .await
        .expect("the bench runs")
}

#[tokio::test]
async fn a_tiny_bench_runs_every_workload_and_writes_its_report() {
    let out = tempfile::tempdir().expect("tempdir");
    let out_path = out.path().display().to_string();
    let cli = Cli::try_parse_from([
        "riverfeed",
        "bench",
        "--users",
        "50",
        "--max-follows",
        "10",
        "--actions",
        "100",
        "--ramp",
        "100",
        "--duration",
        "300ms",
        "--concurrency",
        "1,4",
        "--live",
        "20",
        "--live-repeats",
        "2",
        "--sustained-deliveries",
        "2000",
        "--notice-owners",
        "4",
        "--notice-groups",
        "30",
        "--soak",
        "1s",
        "--soak-subscribers",
        "20",
        "--quiet",
        // The clients' processes are this package's binary: the test
        // harness is not `riverfeed`.
        "--client-program",
        env!("CARGO_BIN_EXE_riverfeed"),
        "--out",
        &out_path,
    ])
    .expect("bench flags parse");
    let results = run(cli).await;
    assert_eq!(results.meta.backend, "embedded");

    for file in [
        "results.json",
        "report.md",
        "ramp.svg",
        "reads.svg",
        "live.svg",
    ] {
        let path = out.path().join(file);
        let len = std::fs::metadata(&path)
            .unwrap_or_else(|e| panic!("{file} written: {e}"))
            .len();
        assert!(len > 0, "{file} is empty");
    }
    let json: Value = serde_json::from_str(
        &std::fs::read_to_string(out.path().join("results.json")).expect("read results.json"),
    )
    .expect("results.json parses");
    for workload in [
        "load",
        "ramp",
        "sustained",
        "reads",
        "live",
        "notifications",
        "soak",
    ] {
        assert!(
            !json[workload].is_null(),
            "{workload} missing from results.json"
        );
    }

    // What each workload measured is what it was asked to do.
    assert_eq!(json["load"]["actions"], 100);
    assert_eq!(json["ramp"][0]["followers"], 100);
    assert_eq!(json["ramp"][0]["deliveries"], 101);
    // Warm and cold pages at each concurrency, under the run's model
    // (rivers) and push beside it.
    let reads = json["reads"].as_array().expect("reads");
    let kinds: Vec<(&str, &str, u64)> = reads
        .iter()
        .map(|r| {
            let model = r["model"].as_str().expect("model");
            let page = r["page"].as_str().expect("page");
            (model, page, r["concurrency"].as_u64().expect("concurrency"))
        })
        .collect();
    let mut expected = Vec::new();
    for model in ["rivers", "push"] {
        for c in [1, 4] {
            expected.push((model, "warm", c));
            expected.push((model, "cold", c));
        }
    }
    assert_eq!(kinds, expected);
    assert!(json["full_readers"].as_u64().is_some());
    // No planned executor may be counted yet, but the counts are read.
    assert!(json["read_executions"]["planned"].as_u64().is_some());
    for read in reads {
        assert!(read["pages"].as_u64() > Some(0), "{read}");
        assert_eq!(read["failures"], 0, "{read}");
        assert!(read["items_per_page"].as_f64() > Some(0.0), "{read}");
        // The in-memory reference of a page's size, measured beside it.
        assert!(read["reference_per_sec"].as_f64() > Some(0.0), "{read}");
        assert!(read["reference_bytes"].as_u64() > Some(100), "{read}");
        // The load came from a process of its own, which used the CPU
        // time it reports, and so did the server.
        assert!(read["load_cores"].as_f64() > Some(0.0), "{read}");
        assert!(read["server_cores"].as_f64() > Some(0.0), "{read}");
    }
    // The engine's own rate, measured beside the worker's.
    let engine = json["sustained"]["engine_per_sec"].as_f64();
    assert!(engine > Some(0.0), "{}", json["sustained"]);
    let live = &json["live"][0];
    assert_eq!(live["subscribers"], 20);
    assert_eq!(live["missed"], 0, "every subscriber got every event");
    assert_eq!(live["last_latency"]["count"], 2);
    assert_eq!(json["notifications"]["write"]["notices"], 4 * 2 * 15);
    assert_eq!(json["notifications"]["page"]["failures"], 0);
    let soak = &json["soak"];
    assert_eq!(
        soak["delivered"], 20,
        "every subscriber served after the soak"
    );
    let hostile = soak["hostile"].as_array().expect("hostile kinds");
    assert_eq!(hostile.len(), 5);
    for kind in hostile {
        assert!(kind["sent"].as_u64() > Some(0), "{kind}");
    }
    assert!(soak["healthz"]["count"].as_u64() > Some(0), "{soak}");
    assert_eq!(json["targets"].as_array().expect("targets").len(), 17);
    let report = std::fs::read_to_string(out.path().join("report.md")).expect("report.md");
    assert!(report.contains("embedded store"), "{report}");
}

/// `--models` runs the same graph and load on each feed model and judges
/// them side by side: a row per model, with what each writes telling them
/// apart.
#[tokio::test]
async fn a_tiny_models_bench_compares_every_model() {
    let out = tempfile::tempdir().expect("tempdir");
    let out_path = out.path().display().to_string();
    let cli = Cli::try_parse_from([
        "riverfeed",
        "bench",
        "--models",
        "push,pull,rivers,hybrid",
        "--users",
        "60",
        "--max-follows",
        "10",
        "--actions",
        "80",
        "--star-followers",
        "300",
        "--celebrity-threshold",
        "100",
        "--duration",
        "200ms",
        "--quiet",
        "--out",
        &out_path,
    ])
    .expect("bench flags parse");
    let results = run(cli).await;
    let models = results.models.expect("the models were compared");
    let names: Vec<&str> = models.iter().map(|m| m.model.as_str()).collect();
    assert_eq!(names, ["push", "pull", "rivers", "hybrid"]);
    let of = |name: &str| models.iter().find(|m| m.model == name).expect("a row");
    for m in &models {
        assert_eq!(m.actions, 80, "{}: the whole load", m.model);
        assert_eq!(m.star_done.count, 5, "{}: the star's actions", m.model);
        assert!(m.active_c1.count > 0 && m.dormant_first_page.count > 0);
    }
    // Pull writes the actor's own item only; push writes for every follower
    // and stores the star's action for each of its 301 followers.
    assert_eq!(of("pull").deliveries_per_action, 1.0);
    assert!(of("push").deliveries_per_action > 1.0);
    assert!(of("push").feed_items > 5 * 301);
    assert!(of("rivers").feed_items < of("push").feed_items);
    // The star is a celebrity under hybrid: never fanned out.
    assert!(of("hybrid").feed_items + 5 * 300 <= of("push").feed_items);
    assert_eq!(results.targets.len(), 5, "the models' targets");
    for file in ["results.json", "report.md", "models.svg"] {
        let len = std::fs::metadata(out.path().join(file))
            .unwrap_or_else(|e| panic!("{file} written: {e}"))
            .len();
        assert!(len > 0, "{file} is empty");
    }
    let report = std::fs::read_to_string(out.path().join("report.md")).expect("report.md");
    assert!(report.contains("## Feed models"), "{report}");
}

/// The notifications workload alone: every notice a burst of likes and
/// comments owes is written (the workload fails otherwise), and readers
/// with many groups read their counts and first page without a failure.
#[tokio::test]
async fn a_tiny_notifications_bench_writes_what_is_owed_and_reads_it() {
    let out = tempfile::tempdir().expect("tempdir");
    let out_path = out.path().display().to_string();
    let cli = Cli::try_parse_from([
        "riverfeed",
        "bench",
        "--workloads",
        "notifications",
        "--notice-owners",
        "6",
        "--notice-groups",
        "40",
        "--duration",
        "400ms",
        "--quiet",
        "--out",
        &out_path,
    ])
    .expect("bench flags parse");
    let results = run(cli).await;
    let n = results
        .notifications
        .expect("the notifications workload ran");
    let w = &n.write;
    // 6 owners, 2 posts each, 5 likes and 4 comments on each post: a like
    // and a comment notice each to the owner, and 3 + 2 + 1 replies.
    assert_eq!((w.owners, w.actions, w.likes, w.comments), (6, 12, 60, 48));
    assert_eq!(
        (w.like_notices, w.comment_notices, w.reply_notices),
        (60, 48, 72)
    );
    assert_eq!(w.notices, 180);
    assert_eq!(w.mutation_latency.count, 108);
    assert!(w.notices_per_sec > 0.0);
    // The same burst queued at once, on other owners' posts: every notice
    // owed written (the workload fails otherwise), one like sent by HTTP.
    let q = n.queued.as_ref().expect("the queued burst ran");
    assert_eq!((q.likes, q.comments, q.notices), (60, 48, 180));
    assert!(q.written_secs >= q.queue_secs && q.notices_per_sec > 0.0);
    for (what, x) in [("counts", &n.counts), ("page", &n.page)] {
        assert_eq!(x.failures, 0, "{what}");
        assert!(x.requests > 0, "{what}");
        assert_eq!(x.groups_per_reader, 40.0, "{what}");
        assert!(
            x.unread_per_reader > 0.0 && x.unread_per_reader < 40.0,
            "{what}"
        );
        assert!(x.latency.p95_ms >= x.latency.p50_ms, "{what}");
    }
    assert_eq!(n.page.items_per_answer, 20.0);
    let report = std::fs::read_to_string(out.path().join("report.md")).expect("report.md");
    assert!(report.contains("notices written"), "{report}");
    assert!(report.contains("queued at once"), "{report}");
    assert!(report.contains("notifications(first: 20)"), "{report}");
}

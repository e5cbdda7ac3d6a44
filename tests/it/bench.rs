//! `riverfeed bench` end to end at toy sizes, on the embedded store: every
//! workload runs through the real server and leaves its files. Speed is not
//! asserted here; the figures belong in the benchmark report.

use clap::Parser;
use riverfeed::config::{Cli, Command};
use serde_json::Value;

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
        "--quiet",
        // The subscribers' process is this package's binary: the test
        // harness is not `riverfeed`.
        "--subscribers-program",
        env!("CARGO_BIN_EXE_riverfeed"),
        "--out",
        &out_path,
    ])
    .expect("bench flags parse");
    let Some(Command::Bench(args)) = cli.command else {
        panic!("parsed as the bench command");
    };
    let results = riverfeed::bench::run(&args, &cli.serve)
        .await
        .expect("the bench runs");
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
    for workload in ["load", "ramp", "sustained", "reads", "live"] {
        assert!(
            !json[workload].is_null(),
            "{workload} missing from results.json"
        );
    }

    // What each workload measured is what it was asked to do.
    assert_eq!(json["load"]["actions"], 100);
    assert_eq!(json["ramp"][0]["followers"], 100);
    assert_eq!(json["ramp"][0]["deliveries"], 101);
    let reads = json["reads"].as_array().expect("reads");
    assert_eq!(reads.len(), 2);
    for read in reads {
        assert!(read["pages"].as_u64() > Some(0), "{read}");
        assert_eq!(read["failures"], 0, "{read}");
        assert!(read["items_per_page"].as_f64() > Some(0.0), "{read}");
    }
    let live = &json["live"][0];
    assert_eq!(live["subscribers"], 20);
    assert_eq!(live["missed"], 0, "every subscriber got every event");
    assert_eq!(live["last_latency"]["count"], 2);
    assert_eq!(json["targets"].as_array().expect("targets").len(), 7);
    let report = std::fs::read_to_string(out.path().join("report.md")).expect("report.md");
    assert!(report.contains("embedded store"), "{report}");
}

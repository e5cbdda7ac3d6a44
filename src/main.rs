//! The `riverfeed` binary: parse the command line, start logging (and traces),
//! hand over to the library.

use riverfeed::cli::{Cli, Command};
use riverfeed::config::ServeArgs;
use riverfeed::observe::{Observe, Tracing};

/// Rust's allocations go to mimalloc: under a long-running server's mix of
/// small, short-lived request allocations, glibc's allocator spent a fifth of
/// a feed page's CPU time in its own bookkeeping (`malloc_consolidate`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse_args();
    match cli.command {
        Some(Command::Schema) => {
            let descriptors = cli.serve.descriptors()?;
            match cli.serve.federation(&descriptors)? {
                Some(federation) => {
                    print!(
                        "{}",
                        riverfeed::api::subgraph_sdl(&descriptors, &federation)
                    )
                }
                None => print!("{}", riverfeed::api::sdl(&descriptors)),
            }
            Ok(())
        }
        Some(Command::Token(args)) => {
            println!("{}", args.mint()?);
            Ok(())
        }
        Some(Command::Bench(args)) => {
            quiet_logs();
            riverfeed::bench::run(&args, &cli.serve).await.map(drop)
        }
        Some(Command::Export(args)) => {
            quiet_logs();
            let settings = cli.serve.store_settings();
            riverfeed::archive_cmd::run_export(&args, &cli.serve.store_url(), &settings)
                .await
                .map(drop)
        }
        Some(Command::Import(args)) => {
            quiet_logs();
            let size = cli.serve.group_feed_size as usize;
            let settings = cli.serve.store_settings();
            riverfeed::archive_cmd::run_import(&args, &cli.serve.store_url(), size, &settings)
                .await
                .map(drop)
        }
        Some(Command::LiveSubscribers(args)) => riverfeed::bench::live::subscribers(&args).await,
        Some(Command::ReadLoad(args)) => {
            quiet_logs();
            riverfeed::bench::reads::read_load(&args).await
        }
        Some(Command::Worker) => worker(cli.serve).await,
        Some(Command::Serve) | None => serve(cli.serve).await,
    }
}

/// Warnings and errors only: these commands share stderr with progress bars.
fn quiet_logs() {
    let logs = Observe {
        default_level: "warn",
        stderr: true,
        otlp_endpoint: None,
    };
    // Only fails when a subscriber is installed already.
    let _ = logs.init();
}

async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let tracing = info_logs(&args)?;
    let served = match args.options() {
        Ok(options) => riverfeed::server::run(options, shutdown_signal()).await,
        Err(err) => Err(err),
    };
    tracing.shutdown().await;
    served
}

async fn worker(args: ServeArgs) -> anyhow::Result<()> {
    let tracing = info_logs(&args)?;
    let ran = async {
        anyhow::ensure!(
            !args.no_worker,
            "`riverfeed worker` is the worker: --no-worker does not go with it"
        );
        riverfeed::server::run_worker(args.options()?, shutdown_signal()).await
    }
    .await;
    tracing.shutdown().await;
    ran
}

/// Info and above on stdout, and the operation spans to `--otlp-endpoint`.
fn info_logs(args: &ServeArgs) -> anyhow::Result<Tracing> {
    Observe {
        default_level: "info",
        stderr: false,
        otlp_endpoint: args.otlp_endpoint.clone(),
    }
    .init()
}

/// Resolves on Ctrl-C or SIGTERM.
async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(err) = tokio::signal::ctrl_c().await {
            tracing::error!(cause = %err, "cannot listen for Ctrl-C");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(err) => {
                tracing::error!(cause = %err, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {}
        _ = terminate => {}
    }
}

//! The `riverfeed` binary: parse the command line, start logging, hand over to
//! the library.

use clap::Parser;
use riverfeed::config::{Cli, Command};
use tracing_subscriber::EnvFilter;

/// Rust's allocations go to mimalloc: under a long-running server's mix of
/// small, short-lived request allocations, glibc's allocator spent a fifth of
/// a feed page's CPU time in its own bookkeeping (`malloc_consolidate`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Some(Command::Schema) => {
            print!("{}", riverfeed::api::sdl());
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
        Some(Command::Migrate) => {
            quiet_logs();
            let size = cli.serve.group_feed_size as usize;
            riverfeed::archive_cmd::run_migrate(&cli.serve.data_dir, size)
                .await
                .map(drop)
        }
        Some(Command::LiveSubscribers(args)) => riverfeed::bench::live::subscribers(&args).await,
        Some(Command::Worker) => worker(cli.serve).await,
        Some(Command::Serve) | None => serve(cli.serve).await,
    }
}

/// Warnings and errors only: these commands share stderr with progress bars.
fn quiet_logs() {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn")),
        )
        .init();
}

async fn serve(args: riverfeed::config::ServeArgs) -> anyhow::Result<()> {
    info_logs();
    riverfeed::server::run(args.options()?, shutdown_signal()).await
}

async fn worker(args: riverfeed::config::ServeArgs) -> anyhow::Result<()> {
    info_logs();
    anyhow::ensure!(
        !args.no_worker,
        "`riverfeed worker` is the worker: --no-worker does not go with it"
    );
    riverfeed::server::run_worker(args.options()?, shutdown_signal()).await
}

fn info_logs() {
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .init();
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

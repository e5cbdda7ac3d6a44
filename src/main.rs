//! The `riverfeed` binary: parse the command line, start logging, hand over to
//! the library.

use clap::Parser;
use riverfeed::config::{Cli, Command};
use tracing_subscriber::EnvFilter;

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
            // Quiet logs: the server shares the terminal with progress bars.
            tracing_subscriber::fmt()
                .with_env_filter(
                    EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn")),
                )
                .init();
            riverfeed::bench::run(&args, &cli.serve).await.map(drop)
        }
        Some(Command::LiveSubscribers(args)) => riverfeed::bench::live::subscribers(&args).await,
        Some(Command::Serve) | None => serve(cli.serve).await,
    }
}

async fn serve(args: riverfeed::config::ServeArgs) -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .init();
    riverfeed::server::run(args.options()?, shutdown_signal()).await
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

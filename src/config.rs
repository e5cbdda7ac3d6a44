//! Command line and environment: `riverfeed [serve] [flags]`, `riverfeed schema`.
//! Every flag has an environment twin; the defaults run on one machine with no setup.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::fanout::WorkerConfig;
use crate::server::ServeOptions;

#[derive(Debug, Parser)]
#[command(
    name = "riverfeed",
    version,
    about = "Activity feeds over GraphQL, with live subscriptions"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    /// Flags of `serve` (which also runs with no subcommand); they may stand
    /// before or after it.
    #[command(flatten)]
    pub serve: ServeArgs,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the GraphQL API and run the fan-out worker (the default).
    Serve,
    /// Print the GraphQL schema (SDL).
    Schema,
}

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
    /// Seconds a fan-out claim stays with a worker that makes no progress.
    #[arg(long, env = "RIVERFEED_FANOUT_LEASE_SECS", default_value_t = 30, global = true,
          value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub fanout_lease_secs: u64,
    /// Feed items written per store transaction by the fan-out worker.
    #[arg(long, env = "RIVERFEED_FANOUT_BATCH", default_value_t = 10_000, global = true,
          value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub fanout_batch: u32,
    /// Run the API without the in-process fan-out worker.
    #[arg(long, env = "RIVERFEED_NO_WORKER", global = true)]
    pub no_worker: bool,
    /// Feed events a reader's live subscription may fall behind before it is
    /// told it lagged.
    #[arg(long, env = "RIVERFEED_EVENT_BUFFER", default_value_t = 256, global = true,
          value_parser = clap::value_parser!(u32).range(1..=65_536))]
    pub event_buffer: u32,
    /// Dev mode (identity from headers, no tokens) listens on loopback only;
    /// this lets it listen anywhere. Anyone who reaches the port can then act
    /// as any user.
    #[arg(long, env = "RIVERFEED_INSECURE_DEV", global = true)]
    pub insecure_dev: bool,
}

impl ServeArgs {
    pub fn options(&self) -> ServeOptions {
        let store = self
            .store
            .clone()
            .unwrap_or_else(|| format!("embedded:{}", self.data_dir.display()));
        let mut options = ServeOptions::new(store);
        options.listen = self.listen;
        options.event_buffer = self.event_buffer as usize;
        options.insecure_dev = self.insecure_dev;
        options.worker = (!self.no_worker).then(|| WorkerConfig {
            lease_ms: self.fanout_lease_secs as i64 * 1000,
            batch_size: self.fanout_batch as usize,
            poll_interval: Duration::from_millis(500),
            ..WorkerConfig::default()
        });
        options
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[test]
    fn serve_flags_go_before_or_after_the_subcommand() {
        for args in [
            vec![
                "riverfeed",
                "--listen",
                "127.0.0.1:9",
                "--data-dir",
                "d",
                "serve",
            ],
            vec![
                "riverfeed",
                "serve",
                "--listen",
                "127.0.0.1:9",
                "--data-dir",
                "d",
            ],
        ] {
            let cli = Cli::try_parse_from(&args).expect("parses");
            assert!(matches!(cli.command, Some(Command::Serve)));
            assert_eq!(cli.serve.listen.port(), 9, "{args:?}");
            assert_eq!(cli.serve.options().store, "embedded:d");
        }
    }

    #[test]
    fn out_of_range_values_are_refused() {
        for bad in [
            vec!["riverfeed", "--fanout-lease-secs", "0"],
            vec!["riverfeed", "--fanout-lease-secs", "99999999999999"],
            vec!["riverfeed", "--fanout-batch", "0"],
            vec!["riverfeed", "--event-buffer", "100000000"],
        ] {
            assert!(Cli::try_parse_from(&bad).is_err(), "{bad:?}");
        }
    }
}

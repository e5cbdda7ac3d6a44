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
    /// Flags of `serve`, which is also what runs with no subcommand.
    #[command(flatten)]
    pub serve: ServeArgs,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the GraphQL API and run the fan-out worker (the default).
    Serve(ServeArgs),
    /// Print the GraphQL schema (SDL).
    Schema,
}

#[derive(Clone, Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, env = "RIVERFEED_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// Directory of the embedded store.
    #[arg(long, env = "RIVERFEED_DATA_DIR", default_value = "./riverfeed-data")]
    pub data_dir: PathBuf,
    /// Where to keep everything: `embedded:<dir>` (by default the data
    /// directory) or a `mongodb://…` / `mongodb+srv://…` URI (database from the
    /// URI's path, `riverfeed` by default).
    #[arg(long, env = "RIVERFEED_STORE")]
    pub store: Option<String>,
    /// Seconds a fan-out claim stays with a worker that makes no progress.
    #[arg(long, env = "RIVERFEED_FANOUT_LEASE_SECS", default_value_t = 30)]
    pub fanout_lease_secs: u64,
    /// Feed items written per store transaction by the fan-out worker.
    #[arg(long, env = "RIVERFEED_FANOUT_BATCH", default_value_t = 10_000)]
    pub fanout_batch: usize,
    /// Run the API without the in-process fan-out worker.
    #[arg(long, env = "RIVERFEED_NO_WORKER")]
    pub no_worker: bool,
    /// Feed events a reader's live subscription may fall behind before it is
    /// told it lagged.
    #[arg(long, env = "RIVERFEED_EVENT_BUFFER", default_value_t = 256)]
    pub event_buffer: usize,
}

impl ServeArgs {
    pub fn options(&self) -> ServeOptions {
        let store = self
            .store
            .clone()
            .unwrap_or_else(|| format!("embedded:{}", self.data_dir.display()));
        let mut options = ServeOptions::new(store);
        options.listen = self.listen;
        options.event_buffer = self.event_buffer.max(1);
        options.worker = (!self.no_worker).then(|| WorkerConfig {
            lease_ms: (self.fanout_lease_secs.max(1) * 1000) as i64,
            batch_size: self.fanout_batch.max(1),
            poll_interval: Duration::from_millis(500),
            ..WorkerConfig::default()
        });
        options
    }
}

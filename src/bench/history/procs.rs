//! The processes under test and the hand that kills them: real `riverfeed`
//! children (`serve`, and on MongoDB `serve --no-worker` and `worker`),
//! each on a fixed loopback port so clients find it again after a restart,
//! killed with SIGKILL and started again on the same store.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use tokio::process::{Child, Command};

/// How long a process may take to answer `/healthz` after a start.
const START_PATIENCE: Duration = Duration::from_secs(60);

/// What a process is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// `serve` with its worker: the embedded store's one process.
    Whole,
    /// `serve --no-worker`: an API process on MongoDB.
    Api,
    /// `worker`: a worker process on MongoDB.
    Worker,
}

impl Role {
    pub fn name(self) -> &'static str {
        match self {
            Role::Whole => "server",
            Role::Api => "api",
            Role::Worker => "worker",
        }
    }
}

/// One `riverfeed` child, started again on its port after each kill.
pub struct Proc {
    pub role: Role,
    pub port: u16,
    program: PathBuf,
    store: String,
    flags: Vec<String>,
    log: PathBuf,
    child: Option<Child>,
    http: reqwest::Client,
}

impl Proc {
    /// A process not started yet; its log goes to `logs/<role>-<port>.log`.
    pub fn new(
        role: Role,
        program: &Path,
        store: &str,
        flags: Vec<String>,
        logs: &Path,
    ) -> anyhow::Result<Proc> {
        let port = free_port()?;
        Ok(Proc {
            role,
            port,
            program: program.to_owned(),
            store: store.to_owned(),
            flags,
            log: logs.join(format!("{}-{port}.log", role.name())),
            child: None,
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(5))
                .build()?,
        })
    }

    pub fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Starts the process (under `model`) and waits for its `/healthz`.
    pub async fn start(&mut self, model: &str) -> anyhow::Result<()> {
        let command = match self.role {
            Role::Whole | Role::Api => "serve",
            Role::Worker => "worker",
        };
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .with_context(|| format!("cannot open {}", self.log.display()))?;
        let mut cmd = Command::new(&self.program);
        cmd.arg(command)
            .args(["--listen", &format!("127.0.0.1:{}", self.port)])
            .args(["--store", &self.store, "--feed-model", model])
            .args(&self.flags);
        if self.role == Role::Api {
            cmd.arg("--no-worker");
        }
        // Warnings only, unless `RIVERFEED_HISTORY_LOG` asks for more (a
        // filter as `RUST_LOG` takes) to follow a failure.
        let filter = std::env::var("RIVERFEED_HISTORY_LOG").unwrap_or_else(|_| "warn".into());
        let child = cmd
            .env("RUST_LOG", filter)
            .env("RUST_BACKTRACE", "0")
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("cannot start {}", self.program.display()))?;
        self.child = Some(child);
        self.wait_healthy().await
    }

    async fn wait_healthy(&mut self) -> anyhow::Result<()> {
        let deadline = Instant::now() + START_PATIENCE;
        let url = format!("{}/healthz", self.base());
        loop {
            if let Ok(response) = self.http.get(&url).send().await {
                if response.status().is_success() {
                    return Ok(());
                }
            }
            if let Some(child) = self.child.as_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    anyhow::bail!(
                        "the {} on port {} exited with {status}: see {}",
                        self.role.name(),
                        self.port,
                        self.log.display()
                    );
                }
            }
            anyhow::ensure!(
                Instant::now() < deadline,
                "the {} on port {} never answered /healthz: see {}",
                self.role.name(),
                self.port,
                self.log.display()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// SIGKILL: the process gets no chance to finish anything.
    pub async fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.start_kill();
            let _ = child.wait().await;
        }
    }

    /// The series of `/metrics` (name with labels, and value), if the
    /// process answers: one scrape for every series the caller reads, since
    /// each scrape costs the store a read of every queue's backlog.
    pub async fn metrics(&self) -> Option<Vec<(String, f64)>> {
        let text = self
            .http
            .get(format!("{}/metrics", self.base()))
            .send()
            .await
            .ok()?
            .text()
            .await
            .ok()?;
        let series = text.lines().filter_map(|line| {
            let (key, value) = line.rsplit_once(' ')?;
            Some((key.to_owned(), value.parse().ok()?))
        });
        Some(series.collect())
    }
}

/// A loopback port free now.
fn free_port() -> anyhow::Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").context("no free port")?;
    Ok(listener.local_addr()?.port())
}

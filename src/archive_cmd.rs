//! `riverfeed export` and `riverfeed import`: whole stores
//! moved as JSON Lines, one [`Record`] per line, streamed both ways (neither
//! side ever holds a store or a file in memory), with progress on stderr.
//!
//! - `export` writes every record of a store (or of one tenant) to a file or
//!   stdout.
//! - `import` reads records and writes them in batches; each batch is parsed
//!   and checked whole before any of it is written, so a bad line stops the
//!   import with nothing of its batch written, and names the line.
//!
//! The functions that do the work take a store, a stream or a reader and
//! answer [`StoreError`]s; the `run_*` functions are the command-line edges.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context as _;
use clap::Args;
use futures_util::stream::BoxStream;
use futures_util::StreamExt;
use indicatif::{ProgressBar, ProgressStyle};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWrite, AsyncWriteExt, BufReader, BufWriter};

use crate::model::{FanOutState, Position};
use crate::store::GroupFeeds;
use crate::store::{self, ErrorKind, Record, Store, StoreError, StoreResult};

/// Records per import batch unless `--batch` says otherwise.
pub const DEFAULT_BATCH: usize = 1000;

#[derive(Clone, Debug, Args)]
pub struct ExportArgs {
    /// Only this tenant's records (every tenant's by default).
    #[arg(long)]
    pub tenant: Option<String>,
    /// Where to write the records (JSON Lines): a file, or `-` for stdout.
    /// A file is written under a `.partial` name and renamed when complete.
    #[arg(long, default_value = "-")]
    pub out: PathBuf,
}

#[derive(Clone, Debug, Args)]
pub struct ImportArgs {
    /// Where to read the records (JSON Lines) from: a file, or `-` for stdin.
    #[arg(long = "in", default_value = "-")]
    pub input: PathBuf,
    /// Records written per store call; each batch is checked whole first.
    #[arg(long, default_value_t = DEFAULT_BATCH as u32,
          value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub batch: u32,
}

/// Records moved, by kind.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    by_kind: BTreeMap<&'static str, u64>,
    total: u64,
}

impl Tally {
    fn add(&mut self, record: &Record) {
        *self.by_kind.entry(record.kind()).or_default() += 1;
        self.total += 1;
    }

    /// Every record counted.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Records of one kind (see [`Record::kind`]).
    pub fn of(&self, kind: &str) -> u64 {
        self.by_kind.get(kind).copied().unwrap_or(0)
    }
}

impl fmt::Display for Tally {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} records", self.total)?;
        if !self.by_kind.is_empty() {
            let kinds: Vec<String> = self
                .by_kind
                .iter()
                .map(|(kind, n)| format!("{kind}: {n}"))
                .collect();
            write!(f, " ({})", kinds.join(", "))?;
        }
        Ok(())
    }
}

/// A spinner on stderr: records so far and their rate. Drawn only when
/// stderr is a terminal (indicatif hides it otherwise), so piped runs and
/// logs stay clean.
pub fn spinner(verb: &str) -> ProgressBar {
    let bar = ProgressBar::new_spinner();
    if let Ok(style) = ProgressStyle::with_template(&format!(
        "{{spinner}} {verb} {{human_pos}} records ({{per_sec}}) {{elapsed}} {{msg}}"
    )) {
        bar.set_style(style);
    }
    bar.enable_steady_tick(Duration::from_millis(120));
    bar
}

fn io_err(what: String) -> impl FnOnce(std::io::Error) -> StoreError {
    move |err| StoreError::from_source(ErrorKind::Unavailable, what, err)
}

/// Writes records as JSON Lines to `out`, in stream order, and flushes it.
pub async fn write_records<W: AsyncWrite + Unpin>(
    mut records: BoxStream<'_, StoreResult<Record>>,
    out: W,
    progress: &ProgressBar,
) -> StoreResult<Tally> {
    let mut out = BufWriter::new(out);
    let mut tally = Tally::default();
    let mut line = Vec::new();
    while let Some(record) = records.next().await {
        let record = record?;
        line.clear();
        serde_json::to_writer(&mut line, &record)
            .map_err(|e| StoreError::internal("cannot encode a record as JSON", e))?;
        line.push(b'\n');
        out.write_all(&line)
            .await
            .map_err(io_err("cannot write the export".into()))?;
        tally.add(&record);
        progress.inc(1);
    }
    out.flush()
        .await
        .map_err(io_err("cannot write the export".into()))?;
    Ok(tally)
}

/// Reads one line of an import: a record, checked as the API checks input.
pub fn parse_line(line: &str, number: u64) -> StoreResult<Record> {
    let record: Record = serde_json::from_str(line).map_err(|e| {
        // serde_json ends its message with the position in the text it was
        // given, which is this one line: say the file's line and the column.
        let text = e.to_string();
        let suffix = format!(" at line {} column {}", e.line(), e.column());
        let cause = text.strip_suffix(&suffix).unwrap_or(&text);
        StoreError::invalid(format!(
            "line {number}, column {}: not a record: {cause}",
            e.column()
        ))
    })?;
    record
        .check()
        .map_err(|e| StoreError::invalid(format!("line {number}: {e}")))?;
    Ok(record)
}

/// Imports JSON Lines from `input` into `store`, `batch` records per call.
/// Blank lines are skipped. A line that is not a valid record fails the
/// import before anything of its batch is written; the batches before it
/// stay written (importing the whole file again is safe: records replace
/// themselves).
pub async fn import_lines<R: AsyncBufRead + Unpin>(
    store: &dyn Store,
    input: R,
    batch: usize,
    group_feed_size: usize,
    progress: &ProgressBar,
) -> StoreResult<Tally> {
    let batch = batch.max(1);
    let mut lines = input.lines();
    let mut number = 0u64;
    let mut pending = Vec::with_capacity(batch);
    // The first line of the batch being gathered, for messages.
    let mut batch_start = 1u64;
    let mut tally = Tally::default();
    loop {
        let next = lines.next_line().await.map_err(|e| {
            StoreError::from_source(
                ErrorKind::InvalidInput,
                format!("line {}: cannot read it", number + 1),
                e,
            )
        })?;
        let Some(line) = next else { break };
        number += 1;
        if line.trim().is_empty() {
            continue;
        }
        let record = parse_line(&line, number).map_err(|err| StoreError {
            message: format!(
                "{}; nothing from line {batch_start} on was imported ({} records before it were)",
                err.message,
                tally.total()
            ),
            ..err
        })?;
        pending.push(record);
        if pending.len() >= batch {
            write_batch(
                store,
                &mut pending,
                &mut tally,
                progress,
                group_feed_size,
                batch_start,
            )
            .await?;
            batch_start = number + 1;
        }
    }
    write_batch(
        store,
        &mut pending,
        &mut tally,
        progress,
        group_feed_size,
        batch_start,
    )
    .await?;
    Ok(tally)
}

/// Imports records from a stream (an export) into `store`, `batch` per call.
pub async fn import_stream(
    store: &dyn Store,
    mut records: BoxStream<'_, StoreResult<Record>>,
    batch: usize,
    group_feed_size: usize,
    progress: &ProgressBar,
) -> StoreResult<Tally> {
    let batch = batch.max(1);
    let mut pending = Vec::with_capacity(batch);
    let mut tally = Tally::default();
    while let Some(record) = records.next().await {
        pending.push(record?);
        if pending.len() >= batch {
            let start = tally.total() + 1;
            write_batch(
                store,
                &mut pending,
                &mut tally,
                progress,
                group_feed_size,
                start,
            )
            .await?;
        }
    }
    let start = tally.total() + 1;
    write_batch(
        store,
        &mut pending,
        &mut tally,
        progress,
        group_feed_size,
        start,
    )
    .await?;
    Ok(tally)
}

async fn write_batch(
    store: &dyn Store,
    pending: &mut Vec<Record>,
    tally: &mut Tally,
    progress: &ProgressBar,
    group_feed_size: usize,
    from: u64,
) -> StoreResult<()> {
    if pending.is_empty() {
        return Ok(());
    }
    store.import(pending).await.map_err(|err| StoreError {
        message: format!(
            "importing the batch from record {from}: {} ({} records before it were imported)",
            err.message,
            tally.total()
        ),
        ..err
    })?;
    // Group feeds are rebuilt, not carried: each action whose fan-out was
    // done is posted to its groups again, in the order of the archive (a
    // pending one is posted by the worker's fan-out).
    for record in pending.iter() {
        if let Record::Action { action } = record {
            if action.fan_out.state != FanOutState::Done || action.hidden {
                continue;
            }
            let at = Position {
                relevancy: action.conducted,
                action_id: action.id,
            };
            for group in action.group_feeds() {
                store
                    .post_to_group(&action.tenant, group, at, group_feed_size)
                    .await?;
            }
        }
    }
    for record in pending.iter() {
        tally.add(record);
    }
    progress.inc(pending.len() as u64);
    pending.clear();
    Ok(())
}

/// `riverfeed export`: the store at `store_url` to `--out`.
pub async fn run_export(
    args: &ExportArgs,
    store_url: &str,
    settings: &store::StoreSettings,
) -> anyhow::Result<Tally> {
    let tenant = args.tenant.clone();
    let progress = spinner("exported");
    let store = store::open_to_read(store_url, settings)
        .await
        .with_context(|| format!("cannot open the store {}", store::mongo::redact(store_url)))?;
    let tally = write_out(store.export(tenant.as_deref()), &args.out, &progress).await?;
    progress.finish_and_clear();
    eprintln!("exported {tally}");
    Ok(tally)
}

async fn write_out(
    records: BoxStream<'_, StoreResult<Record>>,
    out: &Path,
    progress: &ProgressBar,
) -> anyhow::Result<Tally> {
    if out == Path::new("-") {
        return Ok(write_records(records, tokio::io::stdout(), progress).await?);
    }
    let mut partial = out.as_os_str().to_owned();
    partial.push(".partial");
    let partial = PathBuf::from(partial);
    let file = tokio::fs::File::create(&partial)
        .await
        .with_context(|| format!("cannot create {}", partial.display()))?;
    let tally = write_records(records, file, progress)
        .await
        .with_context(|| format!("export left incomplete in {}", partial.display()))?;
    tokio::fs::rename(&partial, out)
        .await
        .with_context(|| format!("cannot rename {} to {}", partial.display(), out.display()))?;
    Ok(tally)
}

/// `riverfeed import`: `--in` into the store at `store_url`.
pub async fn run_import(
    args: &ImportArgs,
    store_url: &str,
    group_feed_size: usize,
    settings: &store::StoreSettings,
) -> anyhow::Result<Tally> {
    let store = store::open_with(store_url, settings)
        .await
        .with_context(|| format!("cannot open the store {}", store::mongo::redact(store_url)))?;
    let progress = spinner("imported");
    let batch = args.batch as usize;
    let tally = if args.input == Path::new("-") {
        import_lines(
            &*store,
            BufReader::new(tokio::io::stdin()),
            batch,
            group_feed_size,
            &progress,
        )
        .await
    } else {
        let file = tokio::fs::File::open(&args.input)
            .await
            .with_context(|| format!("cannot open {}", args.input.display()))?;
        let input = BufReader::new(file);
        import_lines(&*store, input, batch, group_feed_size, &progress).await
    };
    progress.finish_and_clear();
    let tally = tally.with_context(|| format!("import of {}", args.input.display()))?;
    eprintln!("imported {tally}");
    Ok(tally)
}

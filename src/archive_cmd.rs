//! `riverfeed export` and `riverfeed import`: whole stores
//! moved as JSON Lines, one [`Record`] per line, streamed both ways (neither
//! side ever holds a store or a file in memory), with progress on stderr.
//!
//! - `export` writes every record of a store (or of one tenant) to a file or
//!   stdout.
//!   The last line counts the records ([`lines`]), so an archive cut short
//!   is told from a whole one.
//! - `import` is all or nothing: it reads the whole archive once to check
//!   it (every line a record the API would have accepted, no line past
//!   [`MAX_LINE_BYTES`], the end line there and its count right, no tenant
//!   that holds data already unless `--merge`, no action whose actor holds
//!   its foreign id under another action the archive does not move it away
//!   from ([`foreign`])), and only then reads it again to write it, in
//!   batches (the actions moving a foreign id away first). A refusal names
//!   the line and the reason, and nothing is written. Neither pass holds
//!   more than a batch of records in memory (and 16 bytes per foreign id
//!   met, and the records of the actions moving one); stdin, which cannot
//!   be read twice, is kept in a temporary file meanwhile.
//!
//! The functions that do the work take a store, a stream or a reader and
//! answer [`StoreError`]s; the `run_*` functions are the command-line edges.

mod foreign;
mod lines;

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context as _;
use clap::Args;
use futures_util::stream::BoxStream;
use futures_util::StreamExt;
use indicatif::{ProgressBar, ProgressStyle};
use tokio::io::{AsyncBufRead, AsyncSeekExt, AsyncWrite, AsyncWriteExt, BufReader, BufWriter};

pub use self::lines::{cursor_key_line, parse_line, Line, Lines, MAX_LINE_BYTES};

use crate::api::cursor::CursorKey;
use crate::model::{FanOutState, Position};
use crate::store::archive::holds_tenant;
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
    /// Records written per store call (the whole archive is checked first).
    #[arg(long, default_value_t = DEFAULT_BATCH as u32,
          value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub batch: u32,
    /// Import into tenants that hold data in the store already: records of
    /// the same key are replaced, the others kept. Without it, such an
    /// archive is refused and nothing is written.
    #[arg(long)]
    pub merge: bool,
    /// Accept an archive without the end line exports write (one written
    /// before they did): whether it was cut short cannot then be told.
    #[arg(long)]
    pub no_end_line: bool,
    /// Take the archive's cursor key in place of the one this store keeps
    /// (a store without one takes it anyway): cursors issued before the
    /// export then open here, and those issued by this store no longer do.
    #[arg(long)]
    pub replace_cursor_key: bool,
}

impl ImportArgs {
    /// How to import, with `group_feed_size` from the server's flags.
    pub fn options(&self, group_feed_size: usize) -> ImportOptions {
        ImportOptions {
            batch: self.batch as usize,
            group_feed_size,
            merge: self.merge,
            no_end_line: self.no_end_line,
            replace_cursor_key: self.replace_cursor_key,
        }
    }
}

/// How an import writes, and what it accepts.
#[derive(Clone, Debug)]
pub struct ImportOptions {
    /// Records per store call.
    pub batch: usize,
    /// Items kept per group feed, as `serve --group-feed-size`.
    pub group_feed_size: usize,
    /// Write into tenants that hold data already (`--merge`).
    pub merge: bool,
    /// Accept an archive without its end line (`--no-end-line`).
    pub no_end_line: bool,
    /// Take the archive's cursor key over the store's
    /// (`--replace-cursor-key`).
    pub replace_cursor_key: bool,
}

impl ImportOptions {
    /// Batches of `batch`, other settings at their defaults: a whole
    /// archive, into tenants that hold nothing.
    pub fn new(batch: usize, group_feed_size: usize) -> Self {
        Self {
            batch,
            group_feed_size,
            merge: false,
            no_end_line: false,
            replace_cursor_key: false,
        }
    }
}

/// Records moved, by kind, and what became of the archive's cursor key.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    by_kind: BTreeMap<&'static str, u64>,
    total: u64,
    /// Set by an import of an archive that carries a cursor key.
    pub cursor_key: Option<CursorKeyTaken>,
}

/// What an import did with the archive's cursor key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CursorKeyTaken {
    /// The store had none, or was told to replace its own: cursors issued
    /// before the export open here.
    Taken,
    /// The store's key is the archive's already.
    Same,
    /// The store keeps its own: cursors issued before the export are
    /// refused here (`OTHER_KEY`) unless `--replace-cursor-key`.
    Kept,
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

    /// Whether `other` counts the same records.
    fn same_records(&self, other: &Tally) -> bool {
        self.total == other.total && self.by_kind == other.by_kind
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
        match self.cursor_key {
            Some(CursorKeyTaken::Taken) => write!(f, "; the archive's cursor key taken")?,
            Some(CursorKeyTaken::Same) => write!(f, "; the cursor key is the archive's")?,
            Some(CursorKeyTaken::Kept) => write!(
                f,
                "; this store's own cursor key kept: cursors issued before the export \
                 are refused here (import again with --merge --replace-cursor-key to take it)"
            )?,
            None => {}
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

/// Writes an archive to `out`: the cursor key line if there is a key, the
/// records as JSON Lines in stream order, then the end line that counts
/// them, and flushes it. A stream that fails leaves no end line, so what
/// was written is not taken for a whole archive.
pub async fn write_records<W: AsyncWrite + Unpin>(
    cursor_key: Option<&[u8]>,
    mut records: BoxStream<'_, StoreResult<Record>>,
    out: W,
    progress: &ProgressBar,
) -> StoreResult<Tally> {
    let mut out = BufWriter::new(out);
    let mut tally = Tally::default();
    if let Some(secret) = cursor_key {
        out.write_all(&cursor_key_line(secret)?)
            .await
            .map_err(io_err("cannot write the export".into()))?;
    }
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
    out.write_all(&lines::end_line(tally.total())?)
        .await
        .map_err(io_err("cannot write the export".into()))?;
    out.flush()
        .await
        .map_err(io_err("cannot write the export".into()))?;
    Ok(tally)
}

/// Imports an archive from `input`, all or nothing (see the module's
/// docs). `input` is read once, and kept in a temporary file meanwhile to
/// be read again; [`import_file`] reads a file twice instead.
pub async fn import_lines<R: AsyncBufRead + Unpin>(
    store: &dyn Store,
    input: R,
    options: &ImportOptions,
    progress: &ProgressBar,
) -> StoreResult<Tally> {
    let spool = tempfile::tempfile().map_err(io_err(
        "cannot create a temporary file to keep the archive in while it is checked".into(),
    ))?;
    let mut spool = BufWriter::new(tokio::fs::File::from_std(spool));
    let (checked, moves) = check(store, input, options, Some(&mut spool), progress).await?;
    let mut spool = spool.into_inner();
    spool
        .seek(std::io::SeekFrom::Start(0))
        .await
        .map_err(io_err(
            "cannot read the archive kept while it was checked".into(),
        ))?;
    write(
        store,
        BufReader::new(spool),
        options,
        (&checked, moves),
        progress,
    )
    .await
}

/// Imports the archive in the file at `path`, all or nothing (see the
/// module's docs): it is read once to be checked and again to be written.
pub async fn import_file(
    store: &dyn Store,
    path: &Path,
    options: &ImportOptions,
    progress: &ProgressBar,
) -> StoreResult<Tally> {
    let open = || async {
        tokio::fs::File::open(path)
            .await
            .map(BufReader::new)
            .map_err(io_err(format!("cannot open {}", path.display())))
    };
    let (checked, moves) = check(store, open().await?, options, None, progress).await?;
    write(store, open().await?, options, (&checked, moves), progress).await
}

/// The first pass: every line read and checked, nothing written. Each line
/// is copied to `spool` when one is given. Answers what the archive holds,
/// and the actions to write first (those moving a foreign id away).
async fn check<R: AsyncBufRead + Unpin>(
    store: &dyn Store,
    input: R,
    options: &ImportOptions,
    mut spool: Option<&mut BufWriter<tokio::fs::File>>,
    progress: &ProgressBar,
) -> StoreResult<(Tally, foreign::Moves)> {
    let refused = |err: StoreError| StoreError {
        message: format!("{}; nothing was imported", err.message),
        ..err
    };
    progress.set_message("(checking the archive: nothing written yet)");
    let mut lines = Lines::new(input);
    let mut tally = Tally::default();
    // The tenants met so far: each is looked up in the store once. A
    // tenant's id is at most 256 bytes, and an archive holds few tenants.
    let mut tenants = HashSet::new();
    let mut foreign = foreign::ForeignIds::new(options.batch);
    let mut end = None;
    while let Some((number, line)) = lines.next_line().await.map_err(refused)? {
        if let Some(spool) = spool.as_mut() {
            let copied = async {
                spool.write_all(line.as_bytes()).await?;
                spool.write_all(b"\n").await
            };
            copied.await.map_err(io_err(
                "cannot keep the archive in a temporary file while it is checked".into(),
            ))?;
        }
        if line.trim().is_empty() {
            continue;
        }
        if let Some(at) = end {
            return Err(refused(StoreError::invalid(format!(
                "line {number}: a line after the end line (line {at}): the archive was changed"
            ))));
        }
        match parse_line(line, number).map_err(refused)? {
            Line::CursorKey { .. } if number == 1 => {}
            Line::CursorKey { .. } => {
                return Err(refused(StoreError::invalid(format!(
                    "line {number}: a cursor key line comes first in an archive, if at all: \
                     the archive was changed"
                ))))
            }
            Line::End { records } if records == tally.total() => end = Some(number),
            Line::End { records } => {
                return Err(refused(StoreError::invalid(format!(
                    "line {number}: the end line counts {records} records, but {} come before \
                     it: the archive was changed",
                    tally.total()
                ))))
            }
            Line::Record(record) => {
                let tenant = record.tenant();
                if !options.merge && !tenants.contains(tenant) {
                    if holds_tenant(store, tenant).await.map_err(refused)? {
                        return Err(refused(StoreError::invalid(format!(
                            "line {number}: the tenant {tenant:?} holds data in this store \
                             already, and the archive would be merged into it; to merge it \
                             (records of the same key replaced, others kept), import it again \
                             with --merge"
                        ))));
                    }
                    tenants.insert(tenant.to_owned());
                }
                if let Record::Action { action } = &record {
                    foreign.meet(store, number, action).await.map_err(refused)?;
                }
                tally.add(&record);
            }
        }
    }
    if let Some(spool) = spool {
        spool.flush().await.map_err(io_err(
            "cannot keep the archive in a temporary file while it is checked".into(),
        ))?;
    }
    if end.is_none() && !options.no_end_line {
        let last = lines.number();
        return Err(refused(StoreError::invalid(match last {
            0 => "line 1: the archive is empty, without even its end line: it was cut short"
                .to_owned(),
            _ => format!(
                "line {last}: the archive ends there without its end line: it was cut short \
                 (or written before exports wrote one: if it is whole, import it with \
                 --no-end-line)"
            ),
        })));
    }
    let moves = foreign.finish(store).await.map_err(refused)?;
    progress.set_message("");
    Ok((tally, moves))
}

/// The second pass: the checked archive written in batches. Only a store
/// that fails (or an archive changed since it was checked) stops it midway.
async fn write<R: AsyncBufRead + Unpin>(
    store: &dyn Store,
    input: R,
    options: &ImportOptions,
    (checked, moves): (&Tally, foreign::Moves),
    progress: &ProgressBar,
) -> StoreResult<Tally> {
    let batch = options.batch.max(1);
    let mut lines = Lines::new(input);
    let mut tally = Tally::default();
    // The actions moving a foreign id away go first, in a batch of their
    // own, so those taking the ids find them free.
    let mut pending: Vec<(u64, Record)> = moves.first.values().cloned().collect();
    pending.sort_by_key(|(line, _)| *line);
    write_batch(store, &mut pending, &mut tally, progress, options).await?;
    let partly = |err: StoreError, tally: &Tally| StoreError {
        message: format!(
            "{}; {} records before it were imported, so the store holds part of the \
             archive: once the cause is mended, import the archive again with --merge \
             (records replace themselves)",
            err.message,
            tally.total()
        ),
        ..err
    };
    while let Some((number, line)) = lines.next_line().await.map_err(|e| partly(e, &tally))? {
        if line.trim().is_empty() {
            continue;
        }
        match parse_line(line, number).map_err(|e| partly(e, &tally))? {
            Line::End { .. } => break,
            Line::CursorKey { secret } => {
                let taken = take_cursor_key(store, &secret, options.replace_cursor_key);
                tally.cursor_key = Some(taken.await?);
            }
            // Written first: skipped, and counted unless it is the line
            // written (an action the archive gives twice is written once,
            // as its last line, as a batch would).
            Line::Record(record) if moves.written_first(&record) => {
                if !moves.written_from(number) {
                    tally.add(&record);
                    progress.inc(1);
                }
            }
            Line::Record(record) => pending.push((number, record)),
        }
        if pending.len() >= batch {
            write_batch(store, &mut pending, &mut tally, progress, options)
                .await
                .map_err(|e| partly(e, &tally))?;
        }
    }
    write_batch(store, &mut pending, &mut tally, progress, options)
        .await
        .map_err(|e| partly(e, &tally))?;
    if !tally.same_records(checked) {
        return Err(partly(
            StoreError::invalid(format!(
                "the archive changed while it was imported: {tally} written, {checked} checked"
            )),
            &tally,
        ));
    }
    Ok(tally)
}

/// Keeps the archive's cursor key `secret` as the store's where it has none
/// (or is told to replace its own), so cursors issued before the export
/// open here.
async fn take_cursor_key(
    store: &dyn Store,
    secret: &[u8],
    replace: bool,
) -> StoreResult<CursorKeyTaken> {
    match CursorKey::kept_secret(store).await? {
        Some(own) if own == secret => Ok(CursorKeyTaken::Same),
        Some(_) if !replace => Ok(CursorKeyTaken::Kept),
        _ => {
            CursorKey::keep_secret(store, secret).await?;
            Ok(CursorKeyTaken::Taken)
        }
    }
}

/// Writes one batch (records with their line numbers), and the group feeds
/// its actions stand in.
async fn write_batch(
    store: &dyn Store,
    pending: &mut Vec<(u64, Record)>,
    tally: &mut Tally,
    progress: &ProgressBar,
    options: &ImportOptions,
) -> StoreResult<()> {
    let Some(&(from, _)) = pending.first() else {
        return Ok(());
    };
    // Checked again as it is written: another process may have recorded
    // one of its foreign ids since the archive was checked.
    let actions = pending.iter().filter_map(|(line, record)| match record {
        Record::Action { action } => Some((*line, action)),
        _ => None,
    });
    foreign::check_batch(store, actions).await?;
    let records: Vec<Record> = pending.drain(..).map(|(_, record)| record).collect();
    store.import(&records).await.map_err(|err| StoreError {
        message: format!("importing the batch from line {from}: {}", err.message),
        ..err
    })?;
    // Group feeds are rebuilt, not carried: each action whose fan-out was
    // done is posted to its groups again, in the order of the archive (a
    // pending one is posted by the worker's fan-out).
    for record in &records {
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
                    .post_to_group(&action.tenant, group, at, options.group_feed_size)
                    .await?;
            }
        }
    }
    for record in &records {
        tally.add(record);
    }
    progress.inc(records.len() as u64);
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
    let cursor_key = CursorKey::kept_secret(&*store).await?;
    let records = store.export(tenant.as_deref());
    let tally = write_out(cursor_key.as_deref(), records, &args.out, &progress).await?;
    progress.finish_and_clear();
    eprintln!("exported {tally}");
    Ok(tally)
}

async fn write_out(
    cursor_key: Option<&[u8]>,
    records: BoxStream<'_, StoreResult<Record>>,
    out: &Path,
    progress: &ProgressBar,
) -> anyhow::Result<Tally> {
    if out == Path::new("-") {
        let stdout = tokio::io::stdout();
        return Ok(write_records(cursor_key, records, stdout, progress).await?);
    }
    let mut partial = out.as_os_str().to_owned();
    partial.push(".partial");
    let partial = PathBuf::from(partial);
    let file = tokio::fs::File::create(&partial)
        .await
        .with_context(|| format!("cannot create {}", partial.display()))?;
    let tally = write_records(cursor_key, records, file, progress)
        .await
        .with_context(|| format!("export left incomplete in {}", partial.display()))?;
    tokio::fs::rename(&partial, out)
        .await
        .with_context(|| format!("cannot rename {} to {}", partial.display(), out.display()))?;
    Ok(tally)
}

/// `riverfeed import`: `--in` into the store at `store_url`, all or
/// nothing.
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
    let options = args.options(group_feed_size);
    let tally = if args.input == Path::new("-") {
        let stdin = BufReader::new(tokio::io::stdin());
        import_lines(&*store, stdin, &options, &progress).await
    } else {
        import_file(&*store, &args.input, &options, &progress).await
    };
    progress.finish_and_clear();
    let tally = tally.with_context(|| format!("import of {}", args.input.display()))?;
    eprintln!("imported {tally}");
    Ok(tally)
}

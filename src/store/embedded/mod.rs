//! The embedded backend: RocksDB under the data directory.
//!
//! Fan-out on write is random inserts across many readers' feeds, the case
//! log-structured trees are built for: a delivery is three small appends to
//! the write-ahead log and the memtable, where a B-tree rewrites a page per
//! reader. Column families (see [`families`]) keep each concern's keys
//! together and give the feed families a prefix bloom filter on
//! `(tenant, owner)`; all of them share one block cache.
//!
//! Atomicity: RocksDB applies a `WriteBatch` atomically but has no
//! read-modify-write of its own. Every step that reads, decides and writes
//! (leases, counts, idempotent delivery, bumps, tombstones) holds a lock for
//! the key range it decides on: one of [`STRIPES`] mutexes picked by the
//! action (or, for the graph, by the relation or user). Everything a
//! fan-out batch writes belongs to one action, so a batch of ten thousand
//! deliveries takes one lock, where a transaction database would lock and
//! check ten thousand keys. Reads take no lock and see whole batches only.
//!
//! Durability: a call that answers a mutation syncs the write-ahead log
//! before it answers. A fan-out's intermediate batches are written without a
//! sync: the last batch's synced write covers them (the log is one file), and
//! a crash before it leaves the lease as it was, so the action is claimed and
//! delivered again, skipping readers already written.
//!
//! RocksDB calls block; writes (which may wait for a sync) run on tokio's
//! blocking pool, and reads bounded by a page run in place.

mod actions;
mod archive;
mod cache;
mod cleanups;
mod group_feeds;
mod jobs;
mod keys;
mod notices;
mod queues;
mod reactions;
mod records;
mod recovery;
mod reference;
mod relations;
mod rivers;
mod sources;
mod store;
mod timelines;
mod users;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use rocksdb::{
    BlockBasedOptions, Cache, ColumnFamily, ColumnFamilyDescriptor, DBCompressionType, Options,
    ReadOptions, SliceTransform, WriteBatch, WriteOptions, DB,
};

use self::cache::{Profile, Versioned};
use super::{ErrorKind, StoreError, StoreResult};

/// The column families, each one concern. Families marked "tagged" hold
/// several kinds of record, each key starting with its kind's tag (see
/// `keys.rs`: `graph`, `queue`, `reaction`).
pub mod families {
    /// The store's format (`format`) and markers of one-time rebuilds and
    /// moves done at open.
    pub const META: &str = "meta";
    /// `(kind, tenant, key)` → version and body: the
    /// [records](crate::store::records) (cuts, celebrities, inboxes, groups'
    /// kinds, the deployment's own values).
    pub const RECORDS: &str = "records";
    /// Tagged: users; [relations](crate::store::relations) (follows,
    /// friendships, group follows, memberships, assignments, supervisors),
    /// each from both ends; notice groups (by key, by id, in reading order).
    pub const GRAPH: &str = "graph";
    /// `(tenant, reader)` → the reader's river record. A family of its own:
    /// a fan-out asks it about every follower, most of whom have none, and
    /// those misses stay in a small family's memtable and filters rather
    /// than in the files of the whole graph.
    pub const RIVERS: &str = "rivers";
    /// `(tenant, actionId)` → the action.
    pub const ACTIONS: &str = "actions";
    /// `(tenant, refId, actionId)`: slices.
    pub const REFS: &str = "refs";
    /// Tagged: the work still to do on the queues not yet moved onto the
    /// job queue, each with its lease: fan-outs; the expiry sweeper's
    /// indexes (actions by expiry, actions by age for `--item-ttl`); and
    /// actions by their actor's foreign id.
    pub const QUEUE: &str = "queue";
    /// The job queue: jobs with their leases (a comment's bump, a notice
    /// job, a cleanup, which is also the pending unfollow reads apply), and
    /// the due index (tagged; see `jobs.rs`).
    pub const JOBS: &str = "jobs";
    /// `(tenant, owner, relevancy desc, actionId desc)` → change stamp and
    /// reason: a reader's feed in the order it is read.
    pub const TIMELINE: &str = "timeline";
    /// `(tenant, actionId, owner)` → relevancy, change stamp, hidden: who has
    /// an action, for idempotent delivery, bumps, tombstones and cascades.
    pub const ITEMS: &str = "items";
    /// `(tenant, owner, changed, actionId)`: a reader's feed in the order it
    /// changed, for resuming live subscriptions.
    pub const CHANGES: &str = "changes";
    /// Tagged: comments, likes, and each action's discussion participants
    /// (with where their discussions entry stands).
    pub const REACTIONS: &str = "reactions";
    /// `(tenant, owner, conducted desc, actionId desc)`: outboxes, newest
    /// first by when the actions happened: an actor's actions (owner: the
    /// actor), and those shared with a group, naming a reader or sent to a
    /// group (owner: a control character, then the group or reader).
    pub const OUTBOX: &str = "outbox";
    /// `(tenant, user, latest comment desc, actionId desc)`: the actions a
    /// user commented on, the latest discussed first.
    pub const DISCUSSIONS: &str = "discussions";

    pub const ALL: [&str; 14] = [
        META,
        RECORDS,
        GRAPH,
        RIVERS,
        ACTIONS,
        REFS,
        QUEUE,
        JOBS,
        TIMELINE,
        ITEMS,
        CHANGES,
        REACTIONS,
        OUTBOX,
        DISCUSSIONS,
    ];
}

/// How many locks guard read-modify-write steps. Two steps on unrelated keys
/// share a lock with probability 1/STRIPES; that costs waiting, never
/// correctness.
pub const STRIPES: usize = 1024;

/// Decoded actions and profiles kept in memory.
const ACTIONS_CACHED: usize = 128 * 1024;
const PROFILES_CACHED: usize = 64 * 1024;

/// The format this version writes, kept under `meta`.
const FORMAT: &[u8] = b"riverfeed-rocksdb-1";
/// Where the RocksDB files live, under the data directory.
const ENGINE_DIR: &str = "rocksdb";

/// Settings of the embedded store.
#[derive(Clone, Debug)]
pub struct EmbeddedOptions {
    /// Bytes of block cache shared by every column family.
    pub cache_bytes: usize,
}

impl Default for EmbeddedOptions {
    fn default() -> Self {
        Self {
            cache_bytes: 1 << 30,
        }
    }
}

/// The RocksDB-backed store. Cheap to clone: one database behind an `Arc`,
/// reopened in place after a storage fault (see [`recovery`]).
#[derive(Clone)]
pub struct EmbeddedStore {
    engine: Arc<recovery::Engine>,
}

pub(crate) struct Inner {
    db: DB,
    /// Where a write the disk refused is reported.
    health: Arc<recovery::Health>,
    /// A view of a store another engine writes (or wrote): every write is
    /// refused.
    read_only: bool,
    locks: Box<[Mutex<()>]>,
    actions: Versioned<crate::model::Action>,
    profiles: Versioned<Profile>,
    synced: WriteOptions,
    unsynced: WriteOptions,
    /// Jobs waiting or leased, by kind, in the whole store: while there
    /// are no cleanups (nearly always), a feed page need not look for the
    /// reader's.
    queued_jobs: [std::sync::atomic::AtomicUsize; crate::store::JobKind::ALL.len()],
    /// Where claims start reading the job queue's due index.
    due_floors: jobs::Floors,
    /// A snapshot's own directory (see [`EmbeddedStore::open_snapshot`]),
    /// removed once the engine is closed.
    _scratch: Option<tempfile::TempDir>,
}

impl Inner {
    fn new(
        db: DB,
        scratch: Option<tempfile::TempDir>,
        health: Arc<recovery::Health>,
        read_only: bool,
    ) -> Self {
        let mut synced = WriteOptions::default();
        synced.set_sync(true);
        Inner {
            db,
            health,
            read_only,
            locks: (0..STRIPES).map(|_| Mutex::new(())).collect(),
            actions: Versioned::new(ACTIONS_CACHED),
            profiles: Versioned::new(PROFILES_CACHED),
            synced,
            unsynced: WriteOptions::default(),
            queued_jobs: Default::default(),
            due_floors: Default::default(),
            _scratch: scratch,
        }
    }
}

/// Classifies an engine error: the disk refusing (full, failing, or the
/// engine stopped after it refused a write, which it then answers every
/// write with) is `Unavailable`; anything else `Internal`.
pub(crate) fn db_err(err: rocksdb::Error) -> StoreError {
    match err.kind() {
        rocksdb::ErrorKind::IOError => StoreError::from_source(
            ErrorKind::Unavailable,
            "embedded store: the disk refused",
            err,
        ),
        _ => StoreError::internal("embedded store", err),
    }
}

impl EmbeddedStore {
    /// Opens (or creates) the store in `dir` with default settings.
    pub fn open(dir: &Path) -> StoreResult<Self> {
        Self::open_with(dir, &EmbeddedOptions::default())
    }

    /// Opens (or creates) the store in `dir`, creating the directory.
    pub fn open_with(dir: &Path, options: &EmbeddedOptions) -> StoreResult<Self> {
        std::fs::create_dir_all(dir).map_err(|e| {
            StoreError::from_source(
                ErrorKind::Unavailable,
                format!("cannot create data directory {}", dir.display()),
                e,
            )
        })?;
        Self::open_engine(dir, options)
    }

    /// Opens the store in `dir` to read it whole (an export): itself, or,
    /// while a server holds it, a view of it as it stands now
    /// ([`Self::open_snapshot`]).
    pub fn open_to_read(dir: &Path, options: &EmbeddedOptions) -> StoreResult<Self> {
        match Self::open_with(dir, options) {
            Err(e) if e.message.ends_with(IN_USE) => Self::open_snapshot(dir, options),
            opened => opened,
        }
    }

    /// Opens a read-only view of the store in `dir` as it stands now,
    /// beside a server that may be writing it: what `riverfeed export`
    /// reads from a live data directory. The view is the engine's state at
    /// open (every batch written by then, none after), so an export from it
    /// is consistent as of one moment while the server goes on serving.
    /// Every file the view needs is held open, so the server's compactions
    /// cannot take it away. The store must have been opened by this version
    /// before (a view makes no one-time moves).
    pub fn open_snapshot(dir: &Path, options: &EmbeddedOptions) -> StoreResult<Self> {
        let health = Arc::new(recovery::Health::default());
        let view = Self::open_view(dir, options, health.clone())?;
        Ok(Self {
            engine: recovery::Engine::start(view, health, None, options.clone()),
        })
    }

    /// The engine of a read-only view of the store in `dir`.
    fn open_view(
        dir: &Path,
        options: &EmbeddedOptions,
        health: Arc<recovery::Health>,
    ) -> StoreResult<Inner> {
        let path = dir.join(ENGINE_DIR);
        if !path.join("CURRENT").exists() {
            return Err(StoreError::new(
                ErrorKind::Unavailable,
                format!("{} holds no riverfeed store", dir.display()),
            ));
        }
        let scratch = tempfile::tempdir().map_err(|e| {
            StoreError::from_source(
                ErrorKind::Unavailable,
                "cannot create a temporary directory",
                e,
            )
        })?;
        let (mut db_opts, descriptors) = engine_options(options);
        db_opts.set_max_open_files(-1);
        let db = DB::open_cf_descriptors_as_secondary(
            &db_opts,
            &path,
            &scratch.path().to_path_buf(),
            descriptors,
        )
        .and_then(|db| db.try_catch_up_with_primary().map(|()| db))
        .map_err(|e| {
            StoreError::from_source(
                ErrorKind::Unavailable,
                format!("cannot read {} beside the process using it", path.display()),
                e,
            )
        })?;
        Self::check_format(&db, &path, false)?;
        Ok(Inner::new(db, Some(scratch), health, true))
    }

    /// Refuses a store of another format; writes ours into a new one.
    fn check_format(db: &DB, path: &Path, writable: bool) -> StoreResult<()> {
        let meta = db.cf_handle(families::META).ok_or_else(missing_family)?;
        match db.get_cf(meta, b"format").map_err(db_err)? {
            Some(format) if format == FORMAT => Ok(()),
            Some(other) => Err(StoreError::new(
                ErrorKind::Unavailable,
                format!(
                    "{} holds store format {:?}, which this version does not read",
                    path.display(),
                    String::from_utf8_lossy(&other)
                ),
            )),
            None if writable => {
                let mut sync = WriteOptions::default();
                sync.set_sync(true);
                db.put_cf_opt(meta, b"format", FORMAT, &sync)
                    .map_err(db_err)
            }
            None => Err(StoreError::new(
                ErrorKind::Unavailable,
                format!("{} holds no riverfeed store", path.display()),
            )),
        }
    }

    fn open_engine(dir: &Path, options: &EmbeddedOptions) -> StoreResult<Self> {
        let health = Arc::new(recovery::Health::default());
        let inner = Self::open_inner(dir, options, health.clone(), true)?;
        Ok(Self {
            engine: recovery::Engine::start(
                inner,
                health,
                Some(dir.to_path_buf()),
                options.clone(),
            ),
        })
    }

    /// Opens the engine in `dir`: at start (`fresh`), when jobs a killed
    /// process held are released, or again after a storage fault, when the
    /// workers of this process still hold theirs (their leases run out as
    /// they would).
    fn open_inner(
        dir: &Path,
        options: &EmbeddedOptions,
        health: Arc<recovery::Health>,
        fresh: bool,
    ) -> StoreResult<Inner> {
        let path = dir.join(ENGINE_DIR);
        let db = open_db(&path, options)?;
        Self::check_format(&db, &path, true)?;
        let inner = Inner::new(db, None, health, false);
        inner.index_outboxes()?;
        inner.migrate_jobs()?;
        inner.migrate_records()?;
        inner.migrate_relations()?;
        inner.migrate_group_feeds()?;
        inner.move_rivers()?;
        inner.count_jobs()?;
        if fresh {
            let released = inner.release_jobs()?;
            if released > 0 {
                tracing::info!(
                    released,
                    "jobs a killed process had under way are taken up again"
                );
            }
        }
        Ok(inner)
    }

    /// The engine as it is now (`Unavailable` for the moment it is being
    /// reopened).
    pub(crate) fn inner(&self) -> StoreResult<Arc<Inner>> {
        self.engine.current()
    }

    /// Runs blocking work off the async threads.
    async fn blocking<T, F>(&self, work: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&Inner) -> StoreResult<T> + Send + 'static,
    {
        let inner = self.inner()?;
        tokio::task::spawn_blocking(move || work(&inner))
            .await
            .map_err(|e| StoreError::internal("embedded store task failed", e))?
    }
}

fn missing_family() -> StoreError {
    StoreError::new(
        ErrorKind::Internal,
        "embedded store: a column family is missing",
    )
}

/// The engine's options and its families' descriptors.
fn engine_options(options: &EmbeddedOptions) -> (Options, Vec<ColumnFamilyDescriptor>) {
    let cache = Cache::new_lru_cache(options.cache_bytes.max(8 << 20));
    let mut db_opts = Options::default();
    db_opts.create_if_missing(true);
    db_opts.create_missing_column_families(true);
    // A group's log write overlaps the previous group's memtable inserts:
    // an API write does not wait for a large fan-out batch to be applied.
    db_opts.set_enable_pipelined_write(true);
    db_opts.increase_parallelism(2);
    db_opts.set_max_background_jobs(2);
    // One budget for all memtables, so many families do not multiply it.
    db_opts.set_db_write_buffer_size(256 << 20);
    db_opts.set_max_total_wal_size(512 << 20);
    db_opts.set_bytes_per_sync(1 << 20);
    let descriptors = families::ALL.iter().map(|&name| {
        let mut table = BlockBasedOptions::default();
        table.set_block_cache(&cache);
        table.set_bloom_filter(10.0, false);
        table.set_cache_index_and_filter_blocks(true);
        table.set_pin_l0_filter_and_index_blocks_in_cache(true);
        let mut cf = Options::default();
        cf.set_compression_type(DBCompressionType::Lz4);
        cf.set_bottommost_compression_type(DBCompressionType::Lz4);
        match name {
            families::TIMELINE | families::CHANGES | families::OUTBOX | families::DISCUSSIONS => {
                // Feed and outbox ranges are read by owner: bloom filters on
                // the `(tenant, owner)` prefix let a seek skip files that hold
                // none of the owner's keys.
                cf.set_prefix_extractor(SliceTransform::create(
                    "riverfeed.owner",
                    owner_prefix,
                    Some(has_owner_prefix),
                ));
                cf.set_memtable_prefix_bloom_ratio(0.1);
                table.set_whole_key_filtering(false);
                cf.set_write_buffer_size(64 << 20);
            }
            families::GRAPH => {
                cf.set_merge_operator_associative("riverfeed.user", users::merge_user);
                cf.set_write_buffer_size(16 << 20);
            }
            _ => cf.set_write_buffer_size(32 << 20),
        }
        cf.set_block_based_table_factory(&table);
        ColumnFamilyDescriptor::new(name, cf)
    });
    (db_opts, descriptors.collect())
}

/// What an open of a data directory that another process holds says.
const IN_USE: &str = " (another riverfeed process is using this data directory)";

fn open_db(path: &PathBuf, options: &EmbeddedOptions) -> StoreResult<DB> {
    let (db_opts, descriptors) = engine_options(options);
    DB::open_cf_descriptors(&db_opts, path, descriptors).map_err(|e| {
        let text = e.to_string();
        let hint = if text.contains("LOCK") { IN_USE } else { "" };
        StoreError::from_source(
            ErrorKind::Unavailable,
            format!("cannot open {}{hint}", path.display()),
            e,
        )
    })
}

fn owner_prefix(key: &[u8]) -> &[u8] {
    match keys::owner_prefix_len(key) {
        Some(len) => &key[..len],
        None => key,
    }
}

fn has_owner_prefix(key: &[u8]) -> bool {
    keys::owner_prefix_len(key).is_some()
}

/// A lock on one or more stripes, released on drop.
pub(crate) struct Locked<'a> {
    _guards: Vec<MutexGuard<'a, ()>>,
}

impl Inner {
    pub(crate) fn cf(&self, name: &str) -> &ColumnFamily {
        // Every family is created at open, so the handle is always there.
        self.db
            .cf_handle(name)
            .unwrap_or_else(|| panic!("column family {name} was created at open"))
    }

    fn stripe(key: &[u8]) -> usize {
        use std::hash::{BuildHasher, Hasher};
        let mut hasher = rustc_hash::FxBuildHasher.build_hasher();
        hasher.write(key);
        (hasher.finish() as usize) % STRIPES
    }

    /// Locks the stripes of `keys`, in stripe order so that two callers never
    /// wait on each other crosswise.
    pub(crate) fn lock<K: AsRef<[u8]>>(&self, keys: &[K]) -> Locked<'_> {
        let mut stripes: Vec<usize> = keys.iter().map(|k| Self::stripe(k.as_ref())).collect();
        stripes.sort_unstable();
        stripes.dedup();
        let guards = stripes
            .into_iter()
            .map(|s| {
                self.locks[s]
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
            })
            .collect();
        Locked { _guards: guards }
    }

    /// Writes a batch, synced to disk before it returns.
    pub(crate) fn commit(&self, batch: WriteBatch) -> StoreResult<()> {
        self.write(batch, true)
    }

    /// Writes a batch whose loss in a crash is repaired by redoing its work.
    pub(crate) fn commit_unsynced(&self, batch: WriteBatch) -> StoreResult<()> {
        self.write(batch, false)
    }

    fn write(&self, batch: WriteBatch, synced: bool) -> StoreResult<()> {
        if self.read_only {
            let err = StoreError::new(
                ErrorKind::Unavailable,
                "the embedded store is open read-only until it can be reopened",
            );
            self.health.fail(&err);
            return Err(err);
        }
        let options = if synced { &self.synced } else { &self.unsynced };
        let done = self.db.write_opt(batch, options).map_err(db_err);
        self.due_floors.settle(done.is_ok());
        if let Err(err) = &done {
            if err.kind == ErrorKind::Unavailable {
                self.health.fail(err);
            }
        }
        done
    }

    /// Whether the engine takes a synced write now.
    fn probe(&self) -> StoreResult<()> {
        let mut batch = WriteBatch::default();
        batch.put_cf(self.cf(families::META), b"probe", b"");
        self.commit(batch)
    }

    /// Values of every key in `[lower, upper)` of a family, in key order, at
    /// most `limit`, as `(key, value)`.
    pub(crate) fn scan(
        &self,
        family: &str,
        lower: &[u8],
        upper: Option<Vec<u8>>,
        limit: usize,
        mut each: impl FnMut(&[u8], &[u8]) -> StoreResult<()>,
    ) -> StoreResult<()> {
        let mut opts = ReadOptions::default();
        if let Some(upper) = upper {
            opts.set_iterate_upper_bound(upper);
        }
        let mut it = self.db.raw_iterator_cf_opt(self.cf(family), opts);
        it.seek(lower);
        let mut n = 0;
        while it.valid() && n < limit {
            if let (Some(k), Some(v)) = (it.key(), it.value()) {
                each(k, v)?;
            }
            n += 1;
            it.next();
        }
        it.status().map_err(db_err)
    }

    /// Every key under `prefix`, from `lower` (at or after the prefix).
    pub(crate) fn scan_prefix(
        &self,
        family: &str,
        prefix: &[u8],
        lower: &[u8],
        limit: usize,
        each: impl FnMut(&[u8], &[u8]) -> StoreResult<()>,
    ) -> StoreResult<()> {
        self.scan(family, lower, keys::successor(prefix), limit, each)
    }

    /// How many keys lie under `prefix` in `family` (for tests that check
    /// a migration left nothing behind).
    #[cfg(test)]
    pub(crate) fn count_under(&self, family: &str, prefix: &[u8]) -> StoreResult<usize> {
        let mut n = 0;
        self.scan_prefix(family, prefix, prefix, usize::MAX, |_, _| {
            n += 1;
            Ok(())
        })?;
        Ok(n)
    }

    /// Timeline entries, counted, and the bytes of every family's files
    /// and memtables.
    fn footprint(&self) -> StoreResult<crate::store::Footprint> {
        let mut feed_items = 0u64;
        self.scan(families::TIMELINE, &[], None, usize::MAX, |_, _| {
            feed_items += 1;
            Ok(())
        })?;
        let mut bytes = 0u64;
        for family in families::ALL {
            for property in [
                "rocksdb.total-sst-files-size",
                "rocksdb.size-all-mem-tables",
            ] {
                bytes += self
                    .db
                    .property_int_value_cf(self.cf(family), property)
                    .map_err(db_err)?
                    .unwrap_or(0);
            }
        }
        Ok(crate::store::Footprint {
            feed_items,
            bytes,
            documents: 0,
        })
    }

    pub(crate) fn get(&self, family: &str, key: &[u8]) -> StoreResult<Option<Vec<u8>>> {
        self.db.get_cf(self.cf(family), key).map_err(db_err)
    }

    pub(crate) fn exists(&self, family: &str, key: &[u8]) -> StoreResult<bool> {
        Ok(self
            .db
            .get_pinned_cf(self.cf(family), key)
            .map_err(db_err)?
            .is_some())
    }
}

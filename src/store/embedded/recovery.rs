//! Storage faults: a full disk, a failing device. RocksDB stops taking
//! writes after a write to its log fails (every later write answers the
//! error that stopped it) while reads go on. Its own recovery from a full
//! disk waits for as much free space as its largest write buffer, which a
//! small or nearly full disk may never have; so the store watches for
//! itself: once a write has failed, a thread tries every second whether
//! the engine takes writes again (it may have recovered by itself), and
//! once there is room, closes it and opens it again. Opening replays the
//! write-ahead log, which holds every write the store acknowledged (each
//! was synced before its answer), and ends at the write that failed, which
//! was never acknowledged. Should the open itself fail, a read-only view of
//! the store serves reads until a later try succeeds.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, RwLock, Weak};
use std::time::{Duration, Instant};

use tracing::{info, warn};

use super::{EmbeddedOptions, EmbeddedStore, Inner};
use crate::store::{ErrorKind, StoreError, StoreResult};

/// How often a store refusing writes tries whether it can go on.
const POLL: Duration = Duration::from_secs(1);
/// The longest wait between reopens that failed.
const MOST_BETWEEN_REOPENS: Duration = Duration::from_secs(30);
/// Free space a reopen waits for: the engine writes what it replays from
/// its log into new files, and a new log and manifest.
const REOPEN_ROOM: u64 = 4 << 20;
/// How long a reopen waits for calls under way to let go of the engine
/// before it tries again later.
const RELEASE_WAIT: Duration = Duration::from_secs(5);

/// Whether the store takes writes, shared by the engine (which reports a
/// failed write) and the thread that watches it.
#[derive(Default)]
pub(crate) struct Health {
    state: Mutex<State>,
    /// Signalled when a fault is reported or the store closes.
    changed: Condvar,
}

#[derive(Default)]
struct State {
    /// Why writes are refused, while they are.
    fault: Option<String>,
    /// The store was dropped: the watcher ends.
    closed: bool,
}

impl Health {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Reports a write the disk refused.
    pub(crate) fn fail(&self, err: &StoreError) {
        let mut state = self.state();
        if state.fault.is_none() {
            let reason = reason(err);
            warn!(cause = %err.chain(), reason, "the embedded store refuses writes");
            state.fault = Some(reason.to_owned());
            self.changed.notify_all();
        }
    }

    fn clear(&self) {
        self.state().fault = None;
    }

    /// Why the store refuses writes now, if it does.
    pub(crate) fn fault(&self) -> Option<String> {
        self.state().fault.clone()
    }

    fn close(&self) {
        self.state().closed = true;
        self.changed.notify_all();
    }

    /// Waits until there is a fault to mend (`true`) or the store closed.
    fn until_faulty(&self) -> bool {
        let mut state = self.state();
        loop {
            if state.closed {
                return false;
            }
            if state.fault.is_some() {
                return true;
            }
            state = self.changed.wait(state).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Waits `time`, or less if the store closes (then `false`).
    fn pause(&self, time: Duration) -> bool {
        let state = self.state();
        let (state, _) = self
            .changed
            .wait_timeout_while(state, time, |s| !s.closed)
            .unwrap_or_else(|e| e.into_inner());
        !state.closed
    }
}

/// What an operator reads in `/healthz`: the kind of fault, never a path.
fn reason(err: &StoreError) -> &'static str {
    let chain = err.chain();
    if chain.contains("No space left") || chain.contains("NoSpace") {
        "no space left on device"
    } else if err.kind == ErrorKind::Unavailable && chain.contains("read-only") {
        "the store is open read-only until it can be reopened"
    } else {
        "the disk refused a write (I/O error)"
    }
}

/// The engine as it is now: replaced when it is reopened.
pub(crate) struct Engine {
    /// `None` only while the engine is being reopened.
    current: RwLock<Option<Arc<Inner>>>,
    health: Arc<Health>,
    /// The data directory, for reopening: `None` for a read-only view.
    dir: Option<PathBuf>,
    options: EmbeddedOptions,
}

impl Drop for Engine {
    fn drop(&mut self) {
        self.health.close();
    }
}

impl Engine {
    /// An engine over `inner`; a writable one (`dir` given) is watched and
    /// reopened after a storage fault.
    pub(crate) fn start(
        inner: Inner,
        health: Arc<Health>,
        dir: Option<PathBuf>,
        options: EmbeddedOptions,
    ) -> Arc<Self> {
        let watched = dir.is_some();
        let engine = Arc::new(Engine {
            current: RwLock::new(Some(Arc::new(inner))),
            health: health.clone(),
            dir,
            options,
        });
        if watched {
            let weak = Arc::downgrade(&engine);
            let spawned = std::thread::Builder::new()
                .name("store-recovery".into())
                .spawn(move || watch(weak, health));
            if let Err(err) = spawned {
                warn!(cause = %err, "cannot start the embedded store's recovery thread");
            }
        }
        engine
    }

    /// The engine to call, or `Unavailable` while it is being reopened.
    pub(crate) fn current(&self) -> StoreResult<Arc<Inner>> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .ok_or_else(|| {
                StoreError::new(
                    ErrorKind::Unavailable,
                    "the embedded store is being reopened after a storage fault",
                )
            })
    }

    pub(crate) fn fault(&self) -> Option<String> {
        self.health.fault()
    }

    /// One try at taking writes again: `Err` when a reopen was tried and
    /// failed (the next waits longer).
    fn recover(&self) -> StoreResult<()> {
        let Some(dir) = &self.dir else {
            return Ok(());
        };
        if let Ok(inner) = self.current() {
            if !inner.read_only && inner.probe().is_ok() {
                self.health.clear();
                info!("the embedded store takes writes again");
                return Ok(());
            }
        }
        match free_space(dir) {
            Some(free) if free < REOPEN_ROOM => return Ok(()),
            _ => {}
        }
        self.reopen(dir)
    }

    /// Closes the engine and opens it again; on failure, leaves a
    /// read-only view serving reads.
    fn reopen(&self, dir: &Path) -> StoreResult<()> {
        let taken = self
            .current
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(mut old) = taken {
            // Calls under way hold the engine; new ones wait for the new
            // one (answered `Unavailable`). The files' lock is released
            // only when the last holder lets go.
            let deadline = Instant::now() + RELEASE_WAIT;
            loop {
                match Arc::try_unwrap(old) {
                    Ok(inner) => {
                        drop(inner);
                        break;
                    }
                    Err(held) if Instant::now() >= deadline => {
                        *self.current.write().unwrap_or_else(|e| e.into_inner()) = Some(held);
                        return Err(StoreError::new(
                            ErrorKind::Unavailable,
                            "calls under way held the embedded store past the reopen's wait",
                        ));
                    }
                    Err(held) => {
                        old = held;
                        std::thread::sleep(Duration::from_millis(5));
                    }
                }
            }
        }
        let opened = EmbeddedStore::open_inner(dir, &self.options, self.health.clone(), false);
        let (now, result) = match opened {
            Ok(inner) => {
                self.health.clear();
                info!("the embedded store was reopened and takes writes again");
                (Some(inner), Ok(()))
            }
            Err(err) => {
                warn!(cause = %err.chain(), "cannot reopen the embedded store yet; reads go on from a read-only view");
                let view = EmbeddedStore::open_view(dir, &self.options, self.health.clone())
                    .inspect_err(|e| warn!(cause = %e.chain(), "cannot open a read-only view of the embedded store"))
                    .ok();
                (view, Err(err))
            }
        };
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = now.map(Arc::new);
        result
    }
}

/// The watcher: sleeps until a write fails, then tries each [`POLL`] (or
/// longer after failed reopens) until the store takes writes again. Holds
/// the engine only while it tries, so that dropping the store closes it.
fn watch(engine: Weak<Engine>, health: Arc<Health>) {
    let mut wait = POLL;
    while health.until_faulty() {
        if !health.pause(wait) {
            return;
        }
        let Some(engine) = engine.upgrade() else {
            return;
        };
        wait = match engine.recover() {
            Ok(()) => POLL,
            Err(_) => (wait * 2).min(MOST_BETWEEN_REOPENS),
        };
    }
}

/// Bytes free to an unprivileged writer on the filesystem of `dir`.
fn free_space(dir: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    let mut stats: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `path` is a valid C string and `stats` a struct statvfs
    // the call fills in.
    let done = unsafe { libc::statvfs(path.as_ptr(), &mut stats) };
    // The fields are 32 bits wide on some targets.
    #[allow(clippy::unnecessary_cast)]
    let free = (stats.f_bavail as u64).saturating_mul(stats.f_frsize as u64);
    (done == 0).then_some(free)
}

//! A store layer that counts and times every call made through it, for
//! `/metrics` (`riverfeed_store_calls_total` and
//! `riverfeed_store_call_duration_seconds`, labelled `op` by the method's
//! name) and for tests that prove a feed page costs a fixed number of round
//! trips.
//!
//! Nothing here is written per method. Each trait of the port is declared
//! through [`port!`], which emits the `#[async_trait]` trait as written and,
//! beside it, its implementation for [`Metered`]: every `async fn` (required
//! or provided) forwards to the wrapped store, counted and timed under an
//! [`Op`] named after it; a plain `fn` forwards untimed. Provided methods are
//! forwarded too, so a backend's own version of one is the one that runs.
//!
//! # Metering a new trait
//!
//! 1. Declare it through the macro, in its own file:
//!    ```ignore
//!    crate::store::metered::port! {
//!        /// What it is for.
//!        pub trait JobStore: Send + Sync {
//!            async fn claim(&self, kind: JobKind, now: Millis) -> StoreResult<Vec<Job>>;
//!        }
//!    }
//!    ```
//! 2. Add it to [`Store`]'s supertraits, and its name to the [`ports!`] list
//!    below (which orders `/metrics` and numbers the counters). Forgetting
//!    the list does not compile: `dyn JobStore` lacks `Slots`.
//!
//! Method names become `op` labels and `Op::<name>` constants, so they are
//! unique across the port (a repeated one does not compile). The macro takes
//! methods of the form `async fn name(&self, arg: Type, …) -> Type` (`;` or
//! a default body); one with generics or lifetimes of its own (such as
//! [`Archive::export`]) is written by hand here, as `Archive` is.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use async_trait::async_trait;
use futures_util::stream::BoxStream;
use prometheus_client::metrics::histogram::Histogram;

use super::{
    ActionStore, Archive, JobStore, NoticeStore, QueueStore, ReactionStore, Record, RecordStore,
    RelationStore, RiverStore, SourceStore, Store, StoreResult, TimelineStore, UserStore,
};
use crate::metrics::Metrics;

/// Declares a trait of the storage port and meters it: see the
/// [module docs](self).
macro_rules! port {
    // The supertraits: every token up to the body.
    (@sup [$($head:tt)*] $name:ident [$($sup:tt)*] { $($body:tt)* }) => {
        $crate::store::metered::port!(@items [$($head)*] $name [$($sup)*] [] [] [] $($body)*);
    };
    (@sup [$($head:tt)*] $name:ident [$($sup:tt)*] $t:tt $($rest:tt)*) => {
        $crate::store::metered::port!(@sup [$($head)*] $name [$($sup)* $t] $($rest)*);
    };

    // One method at a time, into the trait's items, the metered forwards
    // (written out here: `async_trait` does not look into a macro call) and
    // the names of the timed operations.
    (@items $head:tt $name:ident $sup:tt [$($decl:tt)*] [$($fwd:tt)*] [$($op:ident)*]
        $(#[$m:meta])*
        async fn $f:ident(&$self:ident $(, $a:ident: $t:ty)* $(,)?) -> $r:ty;
        $($rest:tt)*
    ) => {
        $crate::store::metered::port!(@items $head $name $sup
            [$($decl)* $(#[$m])* async fn $f(&$self $(, $a: $t)*) -> $r;]
            [$($fwd)*
                async fn $f(&$self $(, $a: $t)*) -> $r {
                    $self
                        .timed($crate::store::metered::Op::$f, $self.inner.$f($($a),*))
                        .await
                }
            ]
            [$($op)* $f]
            $($rest)*);
    };
    (@items $head:tt $name:ident $sup:tt [$($decl:tt)*] [$($fwd:tt)*] [$($op:ident)*]
        $(#[$m:meta])*
        async fn $f:ident(&$self:ident $(, $a:ident: $t:ty)* $(,)?) -> $r:ty { $($body:tt)* }
        $($rest:tt)*
    ) => {
        $crate::store::metered::port!(@items $head $name $sup
            [$($decl)* $(#[$m])* async fn $f(&$self $(, $a: $t)*) -> $r { $($body)* }]
            [$($fwd)*
                async fn $f(&$self $(, $a: $t)*) -> $r {
                    $self
                        .timed($crate::store::metered::Op::$f, $self.inner.$f($($a),*))
                        .await
                }
            ]
            [$($op)* $f]
            $($rest)*);
    };
    (@items $head:tt $name:ident $sup:tt [$($decl:tt)*] [$($fwd:tt)*] $ops:tt
        $(#[$m:meta])*
        fn $f:ident(&$self:ident $(, $a:ident: $t:ty)* $(,)?) -> $r:ty;
        $($rest:tt)*
    ) => {
        $crate::store::metered::port!(@items $head $name $sup
            [$($decl)* $(#[$m])* fn $f(&$self $(, $a: $t)*) -> $r;]
            [$($fwd)* fn $f(&$self $(, $a: $t)*) -> $r { $self.inner.$f($($a),*) }]
            $ops
            $($rest)*);
    };
    (@items $head:tt $name:ident $sup:tt [$($decl:tt)*] [$($fwd:tt)*] $ops:tt
        $(#[$m:meta])*
        fn $f:ident(&$self:ident $(, $a:ident: $t:ty)* $(,)?) -> $r:ty { $($body:tt)* }
        $($rest:tt)*
    ) => {
        $crate::store::metered::port!(@items $head $name $sup
            [$($decl)* $(#[$m])* fn $f(&$self $(, $a: $t)*) -> $r { $($body)* }]
            [$($fwd)* fn $f(&$self $(, $a: $t)*) -> $r { $self.inner.$f($($a),*) }]
            $ops
            $($rest)*);
    };

    // Every method read: the trait, its metered forwards, its operations.
    (@items [$($head:tt)*] $name:ident [$($sup:tt)*] [$($decl:tt)*] [$($fwd:tt)*] [$($op:ident)*]) => {
        #[::async_trait::async_trait]
        $($head)* $name $($sup)* {
            $($decl)*
        }

        #[::async_trait::async_trait]
        impl $name for $crate::store::metered::Metered {
            $($fwd)*
        }

        impl $crate::store::metered::Port for dyn $name {
            const OPS: &'static [&'static str] = &[$(stringify!($op)),*];
        }

        #[allow(non_upper_case_globals)]
        impl $crate::store::metered::Op {
            $(
                #[doc = concat!("Calls of `", stringify!($name), "::", stringify!($op), "`.")]
                pub const $op: $crate::store::metered::Op =
                    $crate::store::metered::Op::of::<dyn $name>(stringify!($op));
            )*
        }
    };

    ($(#[$attr:meta])* $vis:vis trait $name:ident $($rest:tt)*) => {
        $crate::store::metered::port!(@sup [$(#[$attr])* $vis trait] $name [] $($rest)*);
    };
}
pub(crate) use port;

/// The traits metered, in the order `/metrics` lists their operations. Each
/// gets the number of its first counter.
macro_rules! ports {
    ($first:ident $(, $rest:ident)* $(,)?) => {
        impl Slots for dyn $first {
            const FIRST: usize = 0;
        }
        ports!(@after $first $(, $rest)*);
        /// Every metered trait's operations, in order.
        const PORTS: &[&[&str]] = &[<dyn $first as Port>::OPS $(, <dyn $rest as Port>::OPS)*];
    };
    (@after $prev:ident, $next:ident $(, $rest:ident)*) => {
        impl Slots for dyn $next {
            const FIRST: usize = <dyn $prev as Slots>::FIRST + <dyn $prev as Port>::OPS.len();
        }
        ports!(@after $next $(, $rest)*);
    };
    (@after $last:ident) => {};
}

ports!(
    Store,
    UserStore,
    RelationStore,
    ActionStore,
    ReactionStore,
    QueueStore,
    TimelineStore,
    SourceStore,
    RiverStore,
    NoticeStore,
    JobStore,
    RecordStore,
    Archive,
);

/// The timed operations of one metered trait (written by [`port!`]).
pub trait Port {
    const OPS: &'static [&'static str];
}

/// Where one metered trait's counters begin (written by [`ports!`]).
#[diagnostic::on_unimplemented(
    message = "`{Self}` is metered but not listed",
    label = "add the trait to `ports!` in src/store/metered.rs"
)]
pub trait Slots {
    const FIRST: usize;
}

/// One counted store operation: `Op::deliver`, `Op::get_actions`, … (one
/// constant per timed method, named after it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Op {
    index: usize,
    name: &'static str,
}

impl Op {
    /// The operation `name` of the metered trait `T`.
    pub const fn of<T: Port + Slots + ?Sized>(name: &'static str) -> Op {
        let mut at = 0;
        while at < T::OPS.len() {
            if same(T::OPS[at], name) {
                return Op {
                    index: T::FIRST + at,
                    name,
                };
            }
            at += 1;
        }
        panic!("not an operation of the trait")
    }

    /// Its name: the method's, and the `op` label in `/metrics`.
    pub fn name(self) -> &'static str {
        self.name
    }

    /// Every operation, in the order `/metrics` lists them.
    pub fn all() -> impl Iterator<Item = Op> {
        PORTS
            .iter()
            .flat_map(|ops| ops.iter())
            .enumerate()
            .map(|(index, &name)| Op { index, name })
    }
}

const fn same(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// Wraps a store and counts and times every call made through it.
pub struct Metered {
    pub(crate) inner: Arc<dyn Store>,
    calls: Box<[AtomicU64]>,
    metrics: Arc<Metrics>,
    /// Each operation's latency histogram, made at its first call.
    latency: Box<[OnceLock<Histogram>]>,
}

impl Metered {
    pub fn new(inner: Arc<dyn Store>) -> Self {
        Self::with_metrics(inner, Arc::default())
    }

    /// Times calls into `metrics`' store latency histograms.
    pub fn with_metrics(inner: Arc<dyn Store>, metrics: Arc<Metrics>) -> Self {
        Self {
            inner,
            calls: Op::all().map(|_| AtomicU64::new(0)).collect(),
            metrics,
            latency: Op::all().map(|_| OnceLock::new()).collect(),
        }
    }

    /// Counts a call of `op` and times it.
    pub(crate) async fn timed<T>(&self, op: Op, call: impl std::future::Future<Output = T>) -> T {
        // Relaxed: counters are statistics, read without ordering guarantees.
        self.calls[op.index].fetch_add(1, Ordering::Relaxed);
        let started = std::time::Instant::now();
        let out = call.await;
        self.latency[op.index]
            .get_or_init(|| self.metrics.store_histogram(op.name))
            .observe(started.elapsed().as_secs_f64());
        out
    }

    /// Calls so far of one operation.
    pub fn calls(&self, op: Op) -> u64 {
        self.calls[op.index].load(Ordering::Relaxed)
    }

    /// Calls so far of every operation, in the order of [`Op::all`].
    pub fn snapshot(&self) -> Vec<(Op, u64)> {
        Op::all().map(|op| (op, self.calls(op))).collect()
    }
}

// `Archive::export` has a lifetime of its own and returns a stream, which
// `port!` does not take: the trait is metered by hand.
impl Port for dyn Archive {
    const OPS: &'static [&'static str] = &["import"];
}

#[allow(non_upper_case_globals)]
impl Op {
    /// Calls of `Archive::import`.
    pub const import: Op = Op::of::<dyn Archive>("import");
}

#[async_trait]
impl Archive for Metered {
    fn export<'a>(&'a self, tenant: Option<&'a str>) -> BoxStream<'a, StoreResult<Record>> {
        self.inner.export(tenant)
    }

    async fn import(&self, records: &[Record]) -> StoreResult<()> {
        self.timed(Op::import, self.inner.import(records)).await
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    #[test]
    fn every_operation_has_one_counter_and_a_unique_name() {
        let all: Vec<Op> = Op::all().collect();
        assert!(all.iter().enumerate().all(|(i, op)| op.index == i));
        let names: BTreeSet<&str> = all.iter().map(|op| op.name()).collect();
        assert_eq!(names.len(), all.len(), "op labels repeat");
        // Each constant is the operation the list has at its place.
        for op in [
            Op::stats,
            Op::relate,
            Op::put_user,
            Op::deliver,
            Op::write_timeline,
            Op::outboxes,
            Op::write_notice_group,
            Op::claim,
            Op::backlog,
            Op::put_record,
            Op::import,
        ] {
            assert_eq!(all[op.index], op);
        }
        assert_eq!(Op::deliver.name(), "deliver");
    }
}

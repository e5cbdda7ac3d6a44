//! Small measuring tools: exact latency percentiles, a seeded random source,
//! resident memory, and the open-files limit.

pub use crate::rng::Rng;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Latencies in microseconds, kept whole so percentiles are exact.
#[derive(Clone, Debug, Default)]
pub struct Latencies {
    micros: Vec<u64>,
}

/// Percentiles of a set of latencies, in milliseconds.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Summary {
    pub count: u64,
    pub p50_ms: f64,
    /// Absent from results written before it was measured.
    #[serde(default)]
    pub p95_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub max_ms: f64,
    pub mean_ms: f64,
}

impl Latencies {
    pub fn record(&mut self, latency: Duration) {
        self.micros.push(latency.as_micros() as u64);
    }

    pub fn extend(&mut self, other: Latencies) {
        self.micros.extend(other.micros);
    }

    pub fn len(&self) -> usize {
        self.micros.len()
    }

    pub fn is_empty(&self) -> bool {
        self.micros.is_empty()
    }

    /// Nearest-rank percentiles: the smallest value with at least `q` of all
    /// values at or below it.
    pub fn summary(&mut self) -> Summary {
        if self.micros.is_empty() {
            return Summary::default();
        }
        self.micros.sort_unstable();
        let n = self.micros.len();
        let at = |q: f64| {
            let rank = ((q * n as f64).ceil() as usize).clamp(1, n);
            self.micros[rank - 1] as f64 / 1000.0
        };
        Summary {
            count: n as u64,
            p50_ms: at(0.50),
            p95_ms: at(0.95),
            p99_ms: at(0.99),
            p999_ms: at(0.999),
            max_ms: self.micros[n - 1] as f64 / 1000.0,
            mean_ms: self.micros.iter().sum::<u64>() as f64 / n as f64 / 1000.0,
        }
    }

    /// The sorted values in milliseconds (call after [`Latencies::summary`]).
    pub fn sorted_ms(&self) -> Vec<f64> {
        self.micros.iter().map(|&m| m as f64 / 1000.0).collect()
    }
}

/// What one client task of a timed read measured: each answer's round
/// trip, the failures, the items in the answers, and why the first
/// failure failed.
#[derive(Debug, Default)]
pub struct Tally {
    pub latencies: Latencies,
    pub failures: u64,
    pub items: u64,
    pub first_failure: Option<String>,
}

impl Tally {
    /// Counts one read: its round trip and items, or why it failed.
    /// Whether it succeeded.
    pub fn record(&mut self, read: Result<(Duration, usize), String>) -> bool {
        match read {
            Ok((latency, items)) => {
                self.latencies.record(latency);
                self.items += items as u64;
                true
            }
            Err(why) => {
                self.failures += 1;
                self.first_failure.get_or_insert(why);
                false
            }
        }
    }

    /// Adds another task's tally, keeping the first failure either saw.
    pub fn merge(mut self, other: Tally) -> Tally {
        self.latencies.extend(other.latencies);
        self.failures += other.failures;
        self.items += other.items;
        self.first_failure = self.first_failure.or(other.first_failure);
        self
    }
}

/// Ranks `0..n` drawn with probability proportional to `1 / (rank + 1)^s`.
#[derive(Clone, Debug)]
pub struct Zipf {
    cdf: Vec<f64>,
}

impl Zipf {
    pub fn new(n: usize, s: f64) -> Self {
        let mut total = 0.0;
        let mut cdf = Vec::with_capacity(n);
        for k in 1..=n {
            total += 1.0 / (k as f64).powf(s);
            cdf.push(total);
        }
        for c in &mut cdf {
            *c /= total;
        }
        Self { cdf }
    }

    pub fn sample(&self, rng: &mut Rng) -> usize {
        let u = rng.unit();
        self.cdf.partition_point(|&c| c < u).min(self.cdf.len() - 1)
    }
}

/// This process's resident memory, in bytes (Linux; 0 elsewhere).
pub fn resident_bytes() -> u64 {
    let Ok(statm) = std::fs::read_to_string("/proc/self/statm") else {
        return 0;
    };
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    // SAFETY: sysconf only reads a system constant.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    pages * page.max(0) as u64
}

/// CPU time this process has used so far, user and system, in seconds.
pub fn cpu_seconds() -> f64 {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage fills the struct it is given, which is zeroed first
    // so that it is initialised even if the call fails.
    let usage = unsafe {
        libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr());
        usage.assume_init()
    };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(usage.ru_utime) + secs(usage.ru_stime)
}

/// Raises the open-files limit to at least `wanted` where the system lets us
/// (the hard limit too, when privileged). Returns the soft limit now in force.
pub fn raise_fd_limit(wanted: u64) -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit / setrlimit read and write the struct we own.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return 0;
        }
        if limit.rlim_cur >= wanted {
            return limit.rlim_cur;
        }
        let raised = libc::rlimit {
            rlim_cur: wanted,
            rlim_max: limit.rlim_max.max(wanted),
        };
        if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
            return wanted;
        }
        // Unprivileged: go as far as the hard limit.
        let capped = libc::rlimit {
            rlim_cur: limit.rlim_max,
            rlim_max: limit.rlim_max,
        };
        if libc::setrlimit(libc::RLIMIT_NOFILE, &capped) == 0 {
            return limit.rlim_max;
        }
        limit.rlim_cur
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let mut l = Latencies::default();
        for ms in 1..=1000u64 {
            l.record(Duration::from_millis(ms));
        }
        let s = l.summary();
        assert_eq!(s.count, 1000);
        assert_eq!(s.p50_ms, 500.0);
        assert_eq!(s.p95_ms, 950.0);
        assert_eq!(s.p99_ms, 990.0);
        assert_eq!(s.p999_ms, 999.0);
        assert_eq!(s.max_ms, 1000.0);
    }

    #[test]
    fn zipf_favours_low_ranks_and_stays_in_range() {
        let zipf = Zipf::new(100, 1.0);
        let mut rng = Rng::new(7);
        let mut counts = [0usize; 100];
        for _ in 0..100_000 {
            counts[zipf.sample(&mut rng)] += 1;
        }
        assert!(counts[0] > counts[9] && counts[9] > counts[99]);
        // Rank 1 has probability 1 / H(100), about 19%.
        assert!((17_000..21_000).contains(&counts[0]), "{}", counts[0]);
    }
}

//! What a run tells: its figures, and for each violation the seed and the
//! shortest part of the history that shows it — the operations on the
//! entities the violation names, up to the last of them.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use super::check::Violation;
use super::ops::Entry;

/// Violations told in full: the first few of each kind; the rest are
/// listed by their line.
const TOLD_PER_KIND: usize = 2;

/// A violation's kind: its text with names and numbers taken out.
fn kind(what: &str) -> String {
    what.split(' ')
        .map(|w| {
            if w.chars().any(|c| c.is_ascii_digit()) {
                "#"
            } else {
                w
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The history that shows `v`: the operations touching its entities, up to
/// the last of them.
pub fn evidence<'h>(v: &Violation, history: &'h [Entry]) -> Vec<&'h Entry> {
    let wanted: BTreeSet<&str> = v.entities.iter().map(String::as_str).collect();
    let mut touching: Vec<&Entry> = history
        .iter()
        .filter(|e| e.op.entities().iter().any(|x| wanted.contains(x.as_str())))
        .collect();
    touching.sort_by_key(|e| e.seq);
    touching
}

/// The violations, each with its history, as text.
pub fn violations(
    seed: u64,
    backend: &str,
    violations: &[Violation],
    history: &[Entry],
    kills: &[(u64, String)],
) -> String {
    let mut out = String::new();
    let mut sorted: Vec<&Entry> = history.iter().collect();
    sorted.sort_by_key(|e| e.seq);
    let mut kinds: std::collections::BTreeMap<String, usize> = Default::default();
    let mut rest = Vec::new();
    for (i, v) in violations.iter().enumerate() {
        let told = kinds.entry(kind(&v.what)).or_default();
        if *told >= TOLD_PER_KIND {
            rest.push(v);
            continue;
        }
        *told += 1;
        let shown = evidence(v, history);
        let _ = writeln!(
            out,
            "violation {} of {} on {backend} (seed {seed}): {}",
            i + 1,
            violations.len(),
            v.what
        );
        let _ = writeln!(
            out,
            "  history on {} ({} of {} operations):",
            v.entities.join(" "),
            shown.len(),
            sorted.len()
        );
        let mut told = kills.iter().peekable();
        for e in shown {
            while let Some((at, what)) = told.next_if(|(at, _)| *at <= e.done) {
                let _ = writeln!(out, "    -- {what} killed at {at} ms");
            }
            let _ = writeln!(out, "    {e}");
        }
    }
    if !rest.is_empty() {
        let _ = writeln!(out, "… and {} more of the same kinds:", rest.len());
        for v in rest {
            let _ = writeln!(out, "  {}", v.what);
        }
    }
    out
}

/// The long run's report: per backend, what ran and what was found.
pub fn markdown(results: &[super::HistoryResult]) -> String {
    let mut out = String::from(
        "# History under kills\n\n\
         Clients run a seeded mix of operations through the API while processes are killed \
         with SIGKILL and started again; the final state is checked against a model of the \
         acknowledged history (docs/performance.md, \"The history checker\").\n\n\
         | backend | seed | minutes | operations | acknowledged | failed | cut off | kills | feeds checked under | violations |\n\
         |---|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in results {
        let kills: Vec<String> = r
            .kills_by_role
            .iter()
            .map(|(role, n)| format!("{n} {role}"))
            .collect();
        let _ = writeln!(
            out,
            "| {} | {} | {:.1} | {} | {} | {} | {} | {} ({}) | {} | {} |",
            r.backend,
            r.seed,
            r.seconds / 60.0,
            r.operations,
            r.acknowledged,
            r.failed,
            r.cut_off,
            r.kills,
            kills.join(", "),
            r.models.join(", "),
            r.violations
        );
    }
    for r in results.iter().filter(|r| r.violations > 0) {
        let _ = writeln!(
            out,
            "\n## Violations on {}\n\n```\n{}```",
            r.backend, r.report
        );
    }
    out
}

//! A reader's pulled sources: the accounts they follow or befriend, each
//! from its cut, and reading many of their outboxes as one ranked list.

use std::collections::BTreeMap;

use crate::model::{EdgeKind, FeedItem, Position, Reason, ReasonKind};
use crate::store::{Cut, Direction, FeedRange, Store, StoreResult};

/// Edges read per store call while listing a reader's sources.
const EDGE_PAGE: usize = 10_000;

/// Where one edge to a source begins, and when it was made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Edge {
    /// Actions strictly newer than this came by the edge.
    pub since: Position,
    /// Actions strictly newer than this were fanned out while it stood;
    /// older ones came by its backfill.
    pub began: Position,
    /// An edge that ended keeping its history: only what lies strictly
    /// below this came by it.
    pub until: Option<Position>,
}

impl Edge {
    /// An edge with no cut: there since the start.
    pub const ALWAYS: Edge = Edge {
        since: Position::MIN,
        began: Position::MIN,
        until: None,
    };

    pub fn of(cut: &Cut) -> Edge {
        Edge {
            since: cut.since,
            began: cut.began,
            until: cut.until,
        }
    }

    /// Whether an action at `p` came by this edge.
    pub fn covers(&self, p: Position) -> bool {
        p > self.since && self.until.is_none_or(|u| p < u)
    }
}

/// One account a reader pulls from, by a follow, a friendship or both.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Source {
    pub actor: String,
    pub follows: Option<Edge>,
    pub friend: Option<Edge>,
}

impl Source {
    /// Where the source begins: the older of its edges' cuts.
    pub fn since(&self) -> Position {
        [self.follows, self.friend]
            .into_iter()
            .flatten()
            .map(|e| e.since)
            .min()
            .unwrap_or(Position::MAX)
    }

    /// Where the source ends, if every edge to it ended keeping history.
    pub fn until(&self) -> Option<Position> {
        let edges = || [self.follows, self.friend].into_iter().flatten();
        if edges().any(|e| e.until.is_none()) {
            return None;
        }
        edges().filter_map(|e| e.until).max()
    }

    /// Why an action at `p` reaches the reader, as materialising it would
    /// have said: by the edges that stood when it was fanned out (the
    /// friendship before the follow), else by the first edge made after it
    /// whose backfill reached it.
    pub fn reason(&self, p: Position) -> Option<ReasonKind> {
        let covering = [
            (ReasonKind::Friend, self.friend),
            (ReasonKind::Follows, self.follows),
        ]
        .into_iter()
        .filter_map(|(kind, edge)| edge.filter(|e| e.covers(p)).map(|e| (kind, e)));
        let mut first: Option<(ReasonKind, Edge)> = None;
        for (kind, edge) in covering {
            if p > edge.began {
                return Some(kind);
            }
            if first.is_none_or(|(_, f)| edge.began < f.began) {
                first = Some((kind, edge));
            }
        }
        first.map(|(kind, _)| kind)
    }
}

/// Every source of `reader`: whom they follow and befriend, with their cuts
/// (an edge without one begins at the start), ordered by actor.
pub async fn load(store: &dyn Store, tenant: &str, reader: &str) -> StoreResult<Vec<Source>> {
    let (follows, friends, cuts) = tokio::join!(
        all_edges(store, tenant, EdgeKind::Follows, reader),
        all_edges(store, tenant, EdgeKind::Friend, reader),
        store.cuts(tenant, reader),
    );
    let mut by_actor: BTreeMap<String, Source> = BTreeMap::new();
    for (kind, actors) in [(EdgeKind::Follows, follows?), (EdgeKind::Friend, friends?)] {
        for actor in actors {
            let source = by_actor.entry(actor.clone()).or_insert(Source {
                actor,
                follows: None,
                friend: None,
            });
            match kind {
                EdgeKind::Follows => source.follows = Some(Edge::ALWAYS),
                EdgeKind::Friend => source.friend = Some(Edge::ALWAYS),
            }
        }
    }
    for cut in cuts? {
        // An edge that stands takes its cut; one that ended keeping its
        // history stays a source up to where it ended.
        match by_actor.get_mut(&cut.actor) {
            Some(source) => {
                let edge = match cut.kind {
                    EdgeKind::Follows => &mut source.follows,
                    EdgeKind::Friend => &mut source.friend,
                };
                if edge.is_some() || cut.until.is_some() {
                    *edge = Some(Edge::of(&cut));
                }
            }
            None if cut.until.is_some() => {
                let mut source = Source {
                    actor: cut.actor.clone(),
                    follows: None,
                    friend: None,
                };
                match cut.kind {
                    EdgeKind::Follows => source.follows = Some(Edge::of(&cut)),
                    EdgeKind::Friend => source.friend = Some(Edge::of(&cut)),
                }
                by_actor.insert(cut.actor.clone(), source);
            }
            None => {}
        }
    }
    Ok(by_actor.into_values().collect())
}

async fn all_edges(
    store: &dyn Store,
    tenant: &str,
    kind: EdgeKind,
    reader: &str,
) -> StoreResult<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    loop {
        let after = out.last().cloned();
        let page = store
            .edges(
                tenant,
                kind,
                Direction::Out,
                reader,
                after.as_deref(),
                EDGE_PAGE,
            )
            .await?;
        let done = page.len() < EDGE_PAGE;
        out.extend(page);
        if done {
            return Ok(out);
        }
    }
}

/// A range of the merged outboxes of `sources`, as `reader`'s items, newest
/// first; at most `range.limit`. Each outbox is read from its cut.
pub async fn pull(
    store: &dyn Store,
    tenant: &str,
    reader: &str,
    sources: &[Source],
    range: FeedRange,
) -> StoreResult<Vec<FeedItem>> {
    let mut reads = Vec::with_capacity(sources.len());
    let mut readers = Vec::with_capacity(sources.len());
    for source in sources {
        let since = source.since();
        let newer_than = Some(range.newer_than.map_or(since, |n| n.max(since)));
        if range.older_than.is_some_and(|o| o <= since) {
            continue;
        }
        reads.push((
            source.actor.clone(),
            FeedRange {
                newer_than,
                ..range
            },
        ));
        readers.push(source);
    }
    if reads.is_empty() {
        return Ok(Vec::new());
    }
    let answers = store.outboxes(tenant, &reads).await?;
    let mut items: Vec<FeedItem> = Vec::new();
    for (source, positions) in readers.into_iter().zip(answers) {
        items.extend(positions.into_iter().filter_map(|p| {
            Some(FeedItem {
                owner: reader.to_owned(),
                action_id: p.action_id,
                relevancy: p.relevancy,
                reason: Reason::new(source.reason(p)?, &source.actor),
                changed: p.relevancy,
            })
        }));
    }
    Ok(newest_first_within(items, range))
}

/// Sorts newest first and keeps the `range.limit` the range asks for: the
/// newest, or with `from_oldest` the oldest.
pub fn newest_first_within(mut items: Vec<FeedItem>, range: FeedRange) -> Vec<FeedItem> {
    items.sort_by_key(|i| std::cmp::Reverse(i.position()));
    if items.len() > range.limit {
        if range.from_oldest {
            items.drain(..items.len() - range.limit);
        } else {
            items.truncate(range.limit);
        }
    }
    items
}

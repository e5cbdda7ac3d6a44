//! A reader's pulled sources: the accounts they follow or befriend and
//! the groups they follow (each from its cut), their TEAM / DEPARTMENT
//! groups (each from when they joined), and the RESTRICTED actions naming
//! them; and reading many of their outboxes as one ranked list.

use std::collections::{BTreeMap, HashMap};

use crate::model::{
    Action, EdgeKind, FeedItem, GroupKind, Membership, ObjectId, Position, Reason, ReasonKind,
    Scope,
};
use crate::store::Graph;
use crate::store::Records;
use crate::store::{Cut, Direction, FeedRange, Outbox, Posted, Store, StoreResult};

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

/// Why an action at `p` reaches the reader by `edges` (most specific kind
/// first), as materialising it would have said: by the first edge that
/// stood when it was fanned out, else by the first edge made after it
/// whose backfill reached it (a backfill leaves an item it finds alone).
pub fn first_reason<'e>(
    edges: impl IntoIterator<Item = (ReasonKind, &'e Edge)>,
    p: Position,
) -> Option<ReasonKind> {
    let mut first: Option<(ReasonKind, Position)> = None;
    for (kind, edge) in edges.into_iter().filter(|(_, e)| e.covers(p)) {
        if p > edge.began {
            return Some(kind);
        }
        if first.is_none_or(|(_, began)| edge.began < began) {
            first = Some((kind, edge.began));
        }
    }
    first.map(|(kind, _)| kind)
}

/// One account a reader pulls from, by a follow, a friendship or both:
/// for each kind, the standing edge (no `until`) and the ranges ended
/// edges kept.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Source {
    pub actor: String,
    pub follows: Vec<Edge>,
    pub friend: Vec<Edge>,
}

impl Source {
    pub fn new(actor: &str) -> Source {
        Source {
            actor: actor.to_owned(),
            ..Source::default()
        }
    }

    /// The edges of one kind between users (none for a group follow).
    fn edges_mut(&mut self, kind: EdgeKind) -> Option<&mut Vec<Edge>> {
        match kind {
            EdgeKind::Follows => Some(&mut self.follows),
            EdgeKind::Friend => Some(&mut self.friend),
            EdgeKind::Group => None,
        }
    }

    /// Notes that the `kind` edge stands (with no cut yet: since always).
    pub fn stands(&mut self, kind: EdgeKind) {
        self.edges_mut(kind)
            .into_iter()
            .for_each(|e| e.push(Edge::ALWAYS));
    }

    /// Applies one of the reader's cuts: a standing edge's takes its place
    /// (ignored if the edge no longer stands), a kept range adds itself.
    pub fn apply(&mut self, cut: &Cut) {
        if let Some(edges) = self.edges_mut(cut.kind) {
            apply(edges, cut);
        }
    }

    /// The edges, most specific kind first.
    pub fn all(&self) -> impl Iterator<Item = (ReasonKind, &Edge)> {
        // The friendship before the follow.
        let friend = self.friend.iter().map(|e| (ReasonKind::Friend, e));
        friend.chain(self.follows.iter().map(|e| (ReasonKind::Follows, e)))
    }

    pub fn is_empty(&self) -> bool {
        self.follows.is_empty() && self.friend.is_empty()
    }

    /// Where the source begins: the oldest of its edges' cuts.
    pub fn since(&self) -> Position {
        self.all()
            .map(|(_, e)| e.since)
            .min()
            .unwrap_or(Position::MAX)
    }

    /// Why an action at `p` reaches the reader by this account alone
    /// ([`first_reason`]).
    pub fn reason(&self, p: Position) -> Option<ReasonKind> {
        first_reason(self.all(), p)
    }
}

/// Applies a cut to the edges of one kind to one source.
fn apply(edges: &mut Vec<Edge>, cut: &Cut) {
    match cut.until {
        None => {
            if let Some(standing) = edges.iter_mut().find(|e| e.until.is_none()) {
                *standing = Edge::of(cut);
            }
        }
        Some(_) => edges.push(Edge::of(cut)),
    }
}

/// A group a reader follows: the `PUBLIC` actions sent to it, by the
/// standing follow and the ranges ended follows kept.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Followed {
    pub group: String,
    pub edges: Vec<Edge>,
}

impl Followed {
    /// A standing follow of `group` with no cut yet: since always.
    pub fn standing(group: &str) -> Followed {
        Followed {
            group: group.to_owned(),
            edges: vec![Edge::ALWAYS],
        }
    }

    /// Where the source begins: the oldest of its edges' cuts.
    pub fn since(&self) -> Position {
        self.edges
            .iter()
            .map(|e| e.since)
            .min()
            .unwrap_or(Position::MAX)
    }
}

/// A group a reader pulls from: the `TEAM` / `DEPARTMENT` actions shared
/// with it, strictly newer than `since` (when the reader joined).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupSource {
    pub group: String,
    /// `TEAM` or `DEPARTMENT`, as the group's kind.
    pub reason: ReasonKind,
    pub since: Position,
}

impl GroupSource {
    pub fn of(membership: &Membership) -> GroupSource {
        GroupSource {
            group: membership.group_id.clone(),
            reason: match membership.kind {
                GroupKind::Team => ReasonKind::Team,
                GroupKind::Department => ReasonKind::Department,
            },
            since: joined(membership.since),
        }
    }
}

/// A membership that began at `since`, as a position: actions at that
/// millisecond or later lie above it.
pub fn joined(since: crate::model::Millis) -> Position {
    Position {
        relevancy: since,
        action_id: ObjectId::from_bytes([0; 12]),
    }
}

/// Everything a reader pulls from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Sources {
    /// Whom they follow or befriend, ordered by actor.
    pub actors: Vec<Source>,
    /// The groups they follow, ordered by group.
    pub followed: Vec<Followed>,
    /// Accounts they follow or befriend whose outboxes are not read (their
    /// actions are written), ordered by actor: known so that an action a
    /// followed group also brings is given the reason all edges give.
    pub known: Vec<Source>,
    /// The groups they are members of.
    pub groups: Vec<GroupSource>,
    /// The `RESTRICTED` actions naming the reader.
    pub named: bool,
}

impl Sources {
    /// Only some actors (hybrid's celebrities).
    pub fn actors(actors: Vec<Source>) -> Sources {
        Sources {
            actors,
            ..Sources::default()
        }
    }

    pub fn is_empty(&self) -> bool {
        self.actors.is_empty() && self.followed.is_empty() && self.groups.is_empty() && !self.named
    }

    /// The account `actor` as a source, read or only known.
    fn account(&self, actor: &str) -> Option<&Source> {
        let find = |list: &'_ [Source]| list.binary_search_by(|s| s.actor.as_str().cmp(actor)).ok();
        find(&self.actors)
            .map(|i| &self.actors[i])
            .or_else(|| find(&self.known).map(|i| &self.known[i]))
    }

    /// Applies one of the reader's cuts of a group follow (as
    /// [`Source::apply`] does for an account), adding the group for a kept
    /// range.
    pub fn follow_cut(&mut self, cut: &Cut) {
        match self.followed.iter_mut().find(|f| f.group == cut.actor) {
            Some(followed) => apply(&mut followed.edges, cut),
            None if cut.until.is_some() => self.followed.push(Followed {
                group: cut.actor.clone(),
                edges: vec![Edge::of(cut)],
            }),
            None => {}
        }
    }

    /// Why a `PUBLIC` action reaches the reader by the accounts and groups
    /// they follow or befriend ([`first_reason`] over all their edges that
    /// could bring it), if it does.
    pub fn public_reason(&self, action: &Action) -> Option<ReasonKind> {
        if action.scope != Scope::Public {
            return None;
        }
        let at = Position {
            relevancy: action.conducted,
            action_id: action.id,
        };
        let actor = self.account(&action.actor_id);
        let groups = self
            .followed
            .iter()
            .filter(|f| action.to.contains(&f.group))
            .flat_map(|f| f.edges.iter().map(|e| (ReasonKind::Group, e)));
        first_reason(actor.into_iter().flat_map(Source::all).chain(groups), at)
    }
}

/// Every source of `reader`: whom they follow and befriend, with their cuts
/// (an edge without one begins at the start), their groups, and the
/// actions naming them.
pub async fn load(store: &dyn Store, tenant: &str, reader: &str) -> StoreResult<Sources> {
    let (edges, memberships) = tokio::join!(
        followed(store, tenant, reader),
        store.memberships(tenant, reader),
    );
    let (actors, followed) = edges?;
    Ok(Sources {
        actors,
        followed,
        groups: memberships?.iter().map(GroupSource::of).collect(),
        named: true,
        known: Vec::new(),
    })
}

/// Whom `reader` follows and befriends, and which groups they follow,
/// with their cuts, ordered by actor and by group.
pub async fn followed(
    store: &dyn Store,
    tenant: &str,
    reader: &str,
) -> StoreResult<(Vec<Source>, Vec<Followed>)> {
    let (follows, friends, followed, cuts) = tokio::join!(
        all_edges(store, tenant, EdgeKind::Follows, reader),
        all_edges(store, tenant, EdgeKind::Friend, reader),
        all_edges(store, tenant, EdgeKind::Group, reader),
        store.cuts(tenant, reader),
    );
    let mut by_actor: BTreeMap<String, Source> = BTreeMap::new();
    for (kind, actors) in [(EdgeKind::Follows, follows?), (EdgeKind::Friend, friends?)] {
        for actor in actors {
            by_actor
                .entry(actor.clone())
                .or_insert_with(|| Source::new(&actor))
                .stands(kind);
        }
    }
    let mut groups = Sources {
        followed: groups_followed(followed?),
        ..Sources::default()
    };
    for cut in cuts? {
        // An edge that stands takes its cut; one that ended keeping its
        // history stays a source up to where it ended.
        if cut.kind == EdgeKind::Group {
            groups.follow_cut(&cut);
            continue;
        }
        match by_actor.get_mut(&cut.actor) {
            Some(source) => source.apply(&cut),
            None if cut.until.is_some() => {
                let mut source = Source::new(&cut.actor);
                source.apply(&cut);
                by_actor.insert(cut.actor.clone(), source);
            }
            None => {}
        }
    }
    groups.followed.sort_by(|a, b| a.group.cmp(&b.group));
    Ok((by_actor.into_values().collect(), groups.followed))
}

/// Standing follows of `groups`, with no cuts yet.
fn groups_followed(groups: Vec<String>) -> Vec<Followed> {
    groups.iter().map(|g| Followed::standing(g)).collect()
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

/// An action as the reader's edges bring it: where it stands, its actor,
/// and the edges (of every account and group followed) that list it.
type Brought<'s> = (Position, &'s str, Vec<(ReasonKind, &'s Edge)>);

/// How the entries of one outbox read become the reader's items.
enum Via<'s> {
    Actor(&'s Source),
    Followed(&'s Followed),
    Group(ReasonKind),
    Named,
}

/// A range of the merged outboxes of `sources`, as `reader`'s items, newest
/// first; at most `range.limit`. Each outbox is read from where the source
/// begins; an action that comes by several is given once: for the reason
/// its edges give it ([`first_reason`]: an account's and groups' the
/// reader follows), or its most specific reason (a group's and another's).
///
/// With many sources, each is read a few entries deep first (a page of 25
/// from a hundred sources takes one or two from most of them), then only
/// the sources that may hold more of the page are read further
/// ([`Merge`]): the answer is the same as reading each a page deep.
pub async fn pull(
    store: &dyn Store,
    tenant: &str,
    reader: &str,
    sources: &Sources,
    range: FeedRange,
) -> StoreResult<Vec<FeedItem>> {
    let mut reads = Vec::new();
    let mut vias: Vec<Via<'_>> = Vec::new();
    let mut read = |outbox: Outbox, since: Position, via| {
        if range.older_than.is_some_and(|o| o <= since) {
            return;
        }
        let newer_than = Some(range.newer_than.map_or(since, |n| n.max(since)));
        reads.push((
            outbox,
            FeedRange {
                newer_than,
                ..range
            },
        ));
        vias.push(via);
    };
    for source in &sources.actors {
        read(
            Outbox::Actor(source.actor.clone()),
            source.since(),
            Via::Actor(source),
        );
    }
    for followed in &sources.followed {
        read(
            Outbox::Sent(followed.group.clone()),
            followed.since(),
            Via::Followed(followed),
        );
    }
    for group in &sources.groups {
        read(
            Outbox::Group(group.group.clone()),
            group.since,
            Via::Group(group.reason),
        );
    }
    if sources.named {
        read(Outbox::Named(reader.to_owned()), Position::MIN, Via::Named);
    }
    if reads.is_empty() {
        return Ok(Vec::new());
    }
    let mut merge = Merge::new(reads, range);
    let mut asked = merge.first_reads();
    loop {
        let answers = store.outboxes(tenant, &asked).await?;
        merge.take(answers);
        let items = resolve(reader, sources, &vias, &merge.answers);
        let items = newest_first_within(items, range);
        asked = merge.further(&items);
        if asked.is_empty() {
            return Ok(items);
        }
    }
}

/// Outboxes read only as deep as a page needs. Every source is read
/// `first` entries deep; once the reads are merged into the page, a source
/// whose read may have stopped short (it gave all it was asked for) and
/// whose oldest entry is newer than the page's last item may hold more of
/// the page, and only those are read further, a page deep below what they
/// gave, until none may. Entries below the page's last item cannot change
/// the page, nor the reason of an item on it: every source that may list
/// an item on the page has been read past it.
struct Merge {
    reads: Vec<(Outbox, FeedRange)>,
    range: FeedRange,
    /// Each source's entries read so far, newest first.
    answers: Vec<Vec<Posted>>,
    /// Which of `reads` the last reads asked, and how deep.
    asked: Vec<(usize, usize)>,
    /// Sources whose last read gave all it was asked for.
    open: Vec<bool>,
}

impl Merge {
    fn new(reads: Vec<(Outbox, FeedRange)>, range: FeedRange) -> Self {
        let n = reads.len();
        Merge {
            reads,
            range,
            answers: vec![Vec::new(); n],
            asked: Vec::new(),
            open: vec![false; n],
        }
    }

    /// How deep every source is read first: a whole page with few sources
    /// (or read oldest first), else twice a source's share of the page.
    fn first_depth(&self) -> usize {
        let (n, limit) = (self.reads.len(), self.range.limit);
        if n <= 4 || self.range.from_oldest {
            return limit;
        }
        (2 * limit.div_ceil(n) + 1).min(limit)
    }

    fn first_reads(&mut self) -> Vec<(Outbox, FeedRange)> {
        let depth = self.first_depth();
        self.asked = (0..self.reads.len()).map(|i| (i, depth)).collect();
        self.reads
            .iter()
            .map(|(outbox, range)| {
                (
                    outbox.clone(),
                    FeedRange {
                        limit: depth,
                        ..*range
                    },
                )
            })
            .collect()
    }

    /// Adds the answers to the reads last asked.
    fn take(&mut self, answers: Vec<Vec<Posted>>) {
        for (&(i, depth), posted) in self.asked.iter().zip(answers) {
            self.open[i] = posted.len() >= depth;
            self.answers[i].extend(posted);
        }
    }

    /// The reads still needed for `page` (merged from what was read) to be
    /// the range's: none when every source that may hold more of it has
    /// been read past its last item.
    fn further(&mut self, page: &[FeedItem]) -> Vec<(Outbox, FeedRange)> {
        // A page short of its limit may be filled from any open source.
        let last = (page.len() >= self.range.limit)
            .then(|| page.last().map(FeedItem::position))
            .flatten();
        let mut further = Vec::new();
        self.asked.clear();
        for (i, (outbox, range)) in self.reads.iter().enumerate() {
            let oldest = self.answers[i].last().map(|p| p.position);
            let (true, Some(oldest)) = (self.open[i], oldest) else {
                continue;
            };
            if last.is_some_and(|last| oldest <= last) {
                continue;
            }
            let depth = self.range.limit;
            self.asked.push((i, depth));
            further.push((
                outbox.clone(),
                FeedRange {
                    older_than: Some(oldest),
                    limit: depth,
                    ..*range
                },
            ));
        }
        further
    }
}

/// The items the entries read from each source (`answers`, in the order of
/// `vias`) give `reader`, each action once for its reason, in no order.
fn resolve(
    reader: &str,
    sources: &Sources,
    vias: &[Via<'_>],
    answers: &[Vec<Posted>],
) -> Vec<FeedItem> {
    // The edges that bring each action, gathered across outboxes.
    let mut by_edges: HashMap<ObjectId, Brought<'_>> = HashMap::new();
    let mut given: Vec<(Position, &str, ReasonKind)> = Vec::new();
    for (via, posted) in vias.iter().zip(answers) {
        for entry in posted {
            let p = entry.position;
            let edges: Vec<(ReasonKind, &Edge)> = match via {
                Via::Actor(source) => source.all().collect(),
                Via::Followed(followed) => {
                    // With the edges of its actor (read, or only known).
                    let groups = followed.edges.iter().map(|e| (ReasonKind::Group, e));
                    let actor = sources.account(&entry.actor).into_iter();
                    groups.chain(actor.flat_map(Source::all)).collect()
                }
                Via::Group(kind) => {
                    given.push((p, &entry.actor, *kind));
                    continue;
                }
                Via::Named => {
                    given.push((p, &entry.actor, ReasonKind::Restricted));
                    continue;
                }
            };
            by_edges
                .entry(p.action_id)
                .or_insert_with(|| (p, &entry.actor, Vec::new()))
                .2
                .extend(edges);
        }
    }
    let mut items: HashMap<ObjectId, FeedItem> = HashMap::new();
    let resolved = by_edges.into_values().filter_map(|(p, actor, mut edges)| {
        edges.sort_by_key(|(kind, _)| std::cmp::Reverse(kind.priority()));
        Some((p, actor, first_reason(edges, p)?))
    });
    for (p, actor, kind) in resolved.chain(given) {
        if items
            .get(&p.action_id)
            .is_some_and(|kept| kept.reason.kind.priority() >= kind.priority())
        {
            continue;
        }
        let item = FeedItem {
            owner: reader.to_owned(),
            action_id: p.action_id,
            relevancy: p.relevancy,
            reason: Reason::new(kind, actor),
            changed: p.relevancy,
            copy: None,
        };
        items.insert(p.action_id, item);
    }
    items.into_values().collect()
}

/// Sorts newest first and keeps the `range.limit` the range asks for: the
/// newest, or with `from_oldest` the oldest.
pub fn newest_first_within(mut items: Vec<FeedItem>, range: FeedRange) -> Vec<FeedItem> {
    range.cut(&mut items, FeedItem::position);
    items
}

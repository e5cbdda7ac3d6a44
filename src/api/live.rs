//! Feed and slice events written once per selection, not once per
//! subscriber.
//!
//! A fan-out sends one event to each of its readers, and the readers' events
//! differ only in what is the reader's own: the item's `ownerId`, `id` and
//! `cursor`, the stream's `resumeCursor`, and whether the reader may read
//! the item's `action`. The first of the event's subscribers with a
//! selection writes the event's response as a template with a hole where
//! each of those values goes (see [`crate::events::shared`]); every
//! subscriber with the same selection then fills its own values into the
//! template, and its transport sends those bytes (see [`Splice`]) instead
//! of the result of an execution.
//!
//! With planned reads on, a subscription's selection is compiled when it
//! subscribes ([`EventPlan`]) and the template is written from the event's
//! rows by the field writers the planned queries run, its action written
//! once for every reader who may read it. A selection no plan covers (an
//! action's `viewerHasLiked`, say), and every selection with planned reads
//! off, is executed by async-graphql as before: when it asks for nothing
//! else that could differ between readers (see [`Plan::of`]), once per
//! selection, its result serialised into a template; otherwise for each
//! subscriber. An execution (or a plan's read) that fails or reports an
//! error makes no template: its subscriber gets its own result, and the
//! others execute theirs. A slice's events are planned the same way
//! ([`LiveEvent`]): the action, which reaches only those who may read
//! it, is all they share. `/metrics` counts the events each way
//! (`riverfeed_live_events_total{executor}`).

use std::borrow::Cow;
use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::{Arc, Mutex, OnceLock};

use async_graphql::parser::types::{Field, Selection, SelectionSet};
use async_graphql::registry::Registry;
use async_graphql::{
    Context, ContextSelectionSet, Name, OutputType, Positioned, Response, ServerResult, Value,
};

use super::access::access;
use super::plan::{self, EventPlan, Executor, Whole};
use super::types::{ActionEventNode, ActionSlot, FeedEventNode, SliceEventNode};
use super::{loaders, viewer, AppState, Session};
use crate::events::shared::hole::{CURSOR, ID, OWNER_ID, RESUME_CURSOR};
use crate::events::shared::{Renders, Slot, Template};
use crate::model::Action;

/// The kinds of holes of a template made by an execution.
const HOLES: usize = 4;

/// Where a transport that sends serialised results takes them from: a
/// subscription's operation carries one among its request data, and an
/// event rendered from a template leaves its bytes here, its result (a
/// `null` in their place) to be passed over.
#[derive(Clone, Default)]
pub struct Splice(Arc<Mutex<Option<String>>>);

impl Splice {
    fn put(&self, json: String) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(json);
    }

    /// The serialised result (the whole response) of the event whose
    /// result just came, if it came from a template.
    pub fn take(&self) -> Option<String> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).take()
    }
}

/// A subscription's selection of `FeedEvent`, fit for templates.
pub struct Plan {
    /// The selection written out canonically (response keys, fields,
    /// fragments inlined), the root field's response key first: two plans
    /// with the same shape give the same result for the same event.
    shape: Arc<str>,
    /// Where the subscriber's own values are, by response keys from the
    /// event's object.
    holes: Vec<(Vec<Name>, usize)>,
}

/// What may be selected of each type, and which fields are holes.
fn allowed(ty: &str, field: &str) -> Option<(Option<&'static str>, Option<usize>)> {
    Some(match (ty, field) {
        (_, "__typename") => (None, None),
        ("FeedEvent", "kind") => (None, None),
        ("FeedEvent", "item") => (Some("FeedItem"), None),
        ("FeedEvent", "resumeCursor") => (None, Some(RESUME_CURSOR)),
        ("FeedItem", "id") => (None, Some(ID)),
        ("FeedItem", "ownerId") => (None, Some(OWNER_ID)),
        ("FeedItem", "cursor") => (None, Some(CURSOR)),
        ("FeedItem", "actionId" | "relevancy") => (None, None),
        ("FeedItem", "reason") => (Some("FeedReason"), None),
        ("FeedReason", "kind" | "actorId" | "rule" | "by" | "at") => (None, None),
        _ => return None,
    })
}

impl Plan {
    /// The plan of the `feedEvents` field being resolved, if its selection
    /// and its transport allow templates.
    pub fn of(ctx: &Context<'_>) -> Option<Arc<Plan>> {
        ctx.data_opt::<Splice>()?;
        let field = &ctx.item.node;
        let mut plan = Plan {
            shape: Arc::from(""),
            holes: Vec::new(),
        };
        let mut shape = String::from(field.response_key().node.as_str());
        let mut path = Vec::new();
        let fragments = &ctx.query_env.fragments;
        plan.walk(
            fragments,
            "FeedEvent",
            &field.selection_set.node,
            &mut path,
            &mut shape,
        )?;
        plan.shape = Arc::from(shape);
        Some(Arc::new(plan))
    }

    fn walk(
        &mut self,
        fragments: &std::collections::HashMap<
            Name,
            Positioned<async_graphql::parser::types::FragmentDefinition>,
        >,
        ty: &str,
        set: &SelectionSet,
        path: &mut Vec<Name>,
        shape: &mut String,
    ) -> Option<()> {
        shape.push('{');
        for selection in &set.items {
            match &selection.node {
                Selection::Field(field) => {
                    let field: &Field = &field.node;
                    if !field.arguments.is_empty() || !field.directives.is_empty() {
                        return None;
                    }
                    let (child, hole) = allowed(ty, field.name.node.as_str())?;
                    let key = field.response_key().node.clone();
                    shape.push_str(&key);
                    shape.push(':');
                    shape.push_str(&field.name.node);
                    shape.push(' ');
                    path.push(key);
                    if let Some(hole) = hole {
                        self.holes.push((path.clone(), hole));
                    }
                    if let Some(child) = child {
                        self.walk(fragments, child, &field.selection_set.node, path, shape)?;
                    }
                    path.pop();
                }
                Selection::FragmentSpread(spread) => {
                    if !spread.node.directives.is_empty() {
                        return None;
                    }
                    let fragment = &fragments.get(&spread.node.fragment_name.node)?.node;
                    if !fragment.directives.is_empty()
                        || fragment.type_condition.node.on.node.as_str() != ty
                    {
                        return None;
                    }
                    shape.push_str("...");
                    self.walk(fragments, ty, &fragment.selection_set.node, path, shape)?;
                }
                Selection::InlineFragment(inline) => {
                    let inline = &inline.node;
                    let on = inline
                        .type_condition
                        .as_ref()
                        .map(|c| c.node.on.node.as_str());
                    if !inline.directives.is_empty() || on.is_some_and(|on| on != ty) {
                        return None;
                    }
                    shape.push_str("...");
                    self.walk(fragments, ty, &inline.selection_set.node, path, shape)?;
                }
            }
        }
        shape.push('}');
        Some(())
    }
}

/// A per-process random prefix of the markers that stand for holes while a
/// template is serialised: no text of a result holds it but by a chance of
/// one in 2^128 (it needs no escaping in JSON, so it is found as written).
fn marker_prefix() -> &'static str {
    static PREFIX: OnceLock<String> = OnceLock::new();
    PREFIX.get_or_init(|| {
        let draw = || RandomState::new().build_hasher().finish();
        format!("\"hole-{:016x}{:016x}:", draw(), draw())
    })
}

/// How a stream's events are written without an execution each: from a
/// plan, or from a template one execution made.
#[derive(Clone)]
pub enum Writer {
    Planned(Arc<EventPlan>),
    Executed(Arc<Plan>),
}

impl Writer {
    /// The writer of the `feedEvents` field being resolved, with its
    /// transport's splice, if its events may be written from templates.
    pub fn of(ctx: &Context<'_>) -> Option<(Writer, Splice)> {
        let splice = ctx.data_opt::<Splice>()?.clone();
        if let Some(planned) = planned(ctx) {
            return Some((Writer::Planned(planned), splice));
        }
        Some((Writer::Executed(Plan::of(ctx)?), splice))
    }
}

/// The plan of the subscription field being resolved, when planned reads
/// are on, its transport takes bytes and a plan covers its selection.
pub fn planned(ctx: &Context<'_>) -> Option<Arc<EventPlan>> {
    ctx.data_opt::<Splice>()?;
    let state = ctx.data::<AppState>().ok()?;
    if !state.planner.enabled() {
        return None;
    }
    let env = &ctx.query_env;
    let definitions = env.operation.node.variable_definitions.iter();
    let planned = EventPlan::compile(
        ctx.item,
        &env.fragments,
        &env.variables,
        definitions.map(|v| v.node.clone()).collect(),
        &state.descriptors,
    );
    planned.map(Arc::new)
}

/// An event's node that a plan can write: how, for a subscriber of a
/// selection with `plan`, and the name its type has for async-graphql.
pub trait PlannedEvent: OutputType {
    const NAME: &'static str;

    /// The subscriber's response, whole (its transport sends it), or
    /// `None` when async-graphql is to execute it (a read failed).
    fn written(
        &self,
        plan: &EventPlan,
        renders: Option<&Renders>,
        state: &AppState,
        session: &Session,
    ) -> impl std::future::Future<Output = Option<String>> + Send;
}

/// One event of a `sliceEvents`, `actionEvents` or `notificationEvents`
/// stream: executed as usual, or written from its selection's plan (once
/// for every subscriber of the selection, where `renders` are the event's
/// shared ones).
pub struct LiveEvent<N> {
    pub node: N,
    /// The plan and the transport's splice, when the stream is planned.
    pub plan: Option<(Arc<EventPlan>, Splice)>,
    /// The templates the event's subscribers share, when the node does not
    /// carry them itself.
    pub renders: Option<Arc<Renders>>,
}

impl<N: PlannedEvent + Sync> OutputType for LiveEvent<N> {
    fn type_name() -> Cow<'static, str> {
        N::type_name()
    }

    fn create_type_info(registry: &mut Registry) -> String {
        N::create_type_info(registry)
    }

    async fn resolve(
        &self,
        ctx: &ContextSelectionSet<'_>,
        field: &Positioned<Field>,
    ) -> ServerResult<Value> {
        let written = match (&self.plan, ctx.data::<AppState>(), ctx.data::<Session>()) {
            (Some((plan, splice)), Ok(state), Ok(session)) => {
                let renders = self.renders.as_deref();
                let written = self.node.written(plan, renders, state, session);
                Box::pin(written).await.map(|json| splice.put(json))
            }
            _ => None,
        };
        count(ctx, written.is_some());
        match written {
            Some(()) => Ok(Value::Null),
            None => executed(&self.node, N::NAME, ctx, field).await,
        }
    }
}

impl PlannedEvent for SliceEventNode {
    const NAME: &'static str = "SliceEvent";

    async fn written(
        &self,
        plan: &EventPlan,
        renders: Option<&Renders>,
        state: &AppState,
        session: &Session,
    ) -> Option<String> {
        let action = &self.0.action;
        let template = slot(plan, renders)
            .get_or_init(|| async {
                let written = plan.template(state, session, None, Some(action));
                Box::pin(written).await.map(Arc::new)
            })
            .await
            .clone()?;
        // A slice event reaches only those who may read its action.
        Some(plan::fill(&template, None, &state.cursors, true))
    }
}

impl PlannedEvent for ActionEventNode {
    const NAME: &'static str = "ActionEvent";

    async fn written(
        &self,
        plan: &EventPlan,
        _: Option<&Renders>,
        state: &AppState,
        session: &Session,
    ) -> Option<String> {
        // The event carries the renders its subscribers share.
        let template = slot(plan, Some(&self.0.shared))
            .get_or_init(|| async {
                let written = plan.whole(state, session, Whole::Reaction(self));
                let json = Box::pin(written).await?;
                Some(Arc::new(Template::split(&json, &[], Vec::new())))
            })
            .await
            .clone()?;
        Some(template.fill(&[]))
    }
}

/// Where an event's template for `plan` is: shared by the event's
/// subscribers with the selection, or this subscriber's alone when the
/// selection asks what is each reader's own (or the event has no renders
/// to share).
fn slot(plan: &EventPlan, renders: Option<&Renders>) -> Slot {
    match renders {
        Some(renders) if plan.shared() => renders.slot(plan.shape()),
        _ => Slot::default(),
    }
}

/// Counts a live event written by a plan, or not.
fn count(ctx: &ContextSelectionSet<'_>, planned: bool) {
    if let Ok(state) = ctx.data::<AppState>() {
        let executor = if planned {
            Executor::Planned
        } else {
            Executor::Fallback
        };
        state.metrics.live_event(executor);
    }
}

/// An event executed by async-graphql for its subscriber, its fields put in
/// selection order (as a plan writes them, and as queries answer:
/// async-graphql writes each field as it finishes).
async fn executed<T: OutputType>(
    node: &T,
    type_name: &str,
    ctx: &ContextSelectionSet<'_>,
    field: &Positioned<Field>,
) -> ServerResult<Value> {
    let mut value = Box::pin(OutputType::resolve(node, ctx, field)).await?;
    let env = &ctx.query_env;
    plan::field_in_selection_order(
        &ctx.schema_env.registry,
        &env.fragments,
        &env.operation.node,
        &env.variables,
        (&field.node, type_name),
        &mut value,
    );
    Ok(value)
}

/// One event of a `feedEvents` stream: executed as usual, or filled into
/// its selection's template when it has one.
pub struct LiveFeedEvent {
    pub node: FeedEventNode,
    /// How the event is written, the transport's splice and the renders
    /// the event shares with the others of its publication (a fresh one
    /// for an event planned that shares them with none), when the event
    /// may be written from a template.
    pub shared: Option<(Writer, Splice, Arc<Renders>)>,
}

impl OutputType for LiveFeedEvent {
    fn type_name() -> Cow<'static, str> {
        FeedEventNode::type_name()
    }

    fn create_type_info(registry: &mut Registry) -> String {
        FeedEventNode::create_type_info(registry)
    }

    async fn resolve(
        &self,
        ctx: &ContextSelectionSet<'_>,
        field: &Positioned<Field>,
    ) -> ServerResult<Value> {
        let planned = match &self.shared {
            Some((Writer::Planned(plan), splice, renders)) => {
                Box::pin(self.planned(ctx, field, plan, renders))
                    .await
                    .map(|json| splice.put(json))
                    .is_some()
            }
            _ => false,
        };
        count(ctx, planned);
        if planned {
            return Ok(Value::Null);
        }
        let Some((Writer::Executed(plan), splice, renders)) = &self.shared else {
            return executed(&self.node, "FeedEvent", ctx, field).await;
        };
        let cell = renders.slot(&plan.shape);
        // The first subscriber renders the template with its own result,
        // which it keeps: it is this subscriber's answer.
        let mut own = None;
        let template = cell
            .get_or_init(|| async {
                let result = self.template(ctx, field, plan).await;
                let template = result.as_ref().ok().and_then(|(_, t)| t.clone());
                own = Some(result.map(|(value, _)| value));
                template
            })
            .await;
        if let Some(own) = own {
            return own;
        }
        let (Some(template), Ok(state)) = (template, ctx.data::<AppState>()) else {
            return executed(&self.node, "FeedEvent", ctx, field).await;
        };
        splice.put(plan::fill(
            template,
            Some(&self.node),
            &state.cursors,
            false,
        ));
        Ok(Value::Null)
    }
}

impl LiveFeedEvent {
    /// This subscriber's event written from its selection's plan: the
    /// template the first subscriber wrote, with this one's own values;
    /// `None` when async-graphql is to run it (a read failed, the action
    /// was not there for the first subscriber and is for this one).
    async fn planned(
        &self,
        ctx: &ContextSelectionSet<'_>,
        field: &Positioned<Field>,
        plan: &EventPlan,
        renders: &Renders,
    ) -> Option<String> {
        let (state, session) = (ctx.data::<AppState>().ok()?, ctx.data::<Session>().ok()?);
        let item = &self.node.item;
        // The action, and whether this subscriber may read it, decided as
        // the item's `action` field decides them.
        let mut action: Option<Cow<'_, Action>> = None;
        let mut readable = false;
        if plan.actions() > 0 {
            let ctx = ctx.with_field(field);
            action = match &item.action {
                ActionSlot::Loaded(node) => Some(Cow::Borrowed(&node.action)),
                ActionSlot::Shared(action) => Some(Cow::Borrowed(action.as_ref())),
                ActionSlot::Lazy => {
                    let load = loaders(&ctx).ok()?.actions.load_one(item.item.action_id);
                    load.await.ok()?.map(Cow::Owned)
                }
            };
            readable = match (&action, &item.action) {
                (_, ActionSlot::Loaded(_)) => true,
                (Some(action), _) => {
                    let viewer = viewer(&ctx).ok()?;
                    let access = Box::pin(access(&ctx, viewer, [action.as_ref()])).await;
                    access.ok()?.can_read(action)
                }
                (None, _) => false,
            };
        }
        let template = slot(plan, Some(renders))
            .get_or_init(|| async {
                let written = plan.template(state, session, Some(&self.node), action.as_deref());
                Box::pin(written).await.map(Arc::new)
            })
            .await
            .clone()?;
        if readable
            && template
                .common(crate::events::shared::hole::ACTION)
                .is_none()
        {
            return None;
        }
        Some(plan::fill(
            &template,
            Some(&self.node),
            &state.cursors,
            readable,
        ))
    }

    /// This subscriber's result, and the template made from it unless the
    /// execution reported an error.
    async fn template(
        &self,
        ctx: &ContextSelectionSet<'_>,
        field: &Positioned<Field>,
        plan: &Plan,
    ) -> ServerResult<(Value, Option<Arc<Template>>)> {
        let errors = |ctx: &ContextSelectionSet<'_>| {
            ctx.query_env
                .errors
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .len()
        };
        let before = errors(ctx);
        let value = executed(&self.node, "FeedEvent", ctx, field).await?;
        if errors(ctx) != before {
            return Ok((value, None));
        }
        let mut marked = value.clone();
        let prefix = marker_prefix();
        for (path, hole) in &plan.holes {
            if let Some(Value::String(text)) = at_path(&mut marked, path) {
                *text = format!("{}{hole}", &prefix[1..]);
            }
        }
        let mut data = async_graphql::indexmap::IndexMap::new();
        data.insert(field.node.response_key().node.clone(), marked);
        let response = Response::new(Value::Object(data));
        let template = serde_json::to_string(&response)
            .ok()
            .map(|json| Arc::new(Template::cut(&json, prefix, HOLES)));
        Ok((value, template))
    }
}

/// The value at `path` of object keys in `value`.
fn at_path<'v>(value: &'v mut Value, path: &[Name]) -> Option<&'v mut Value> {
    path.iter().try_fold(value, |value, key| match value {
        Value::Object(object) => object.get_mut(key),
        _ => None,
    })
}

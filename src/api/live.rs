//! Feed events executed and serialised once per selection, not once per
//! subscriber.
//!
//! A fan-out sends one event to each of its readers, and the readers' events
//! differ only in what is the reader's own: the item's `ownerId`, `id` and
//! `cursor`, and the stream's `resumeCursor`. When a subscription's
//! selection asks for nothing else that could differ between readers (see
//! [`Plan::of`]), the first of the event's subscribers with that selection
//! executes it as usual, and its result, serialised, becomes a template with
//! a hole where each of those values was (see [`crate::events::shared`]).
//! Every subscriber with the same selection then fills its own values into
//! the template: its transport sends those bytes (see [`Splice`]) instead of
//! the result of an execution.
//!
//! What a selection may ask for on this path is listed field by field; any
//! other field (an item's `action`, whose visibility and `viewerHasLiked`
//! are the viewer's), an argument, a directive, or a transport that takes no
//! bytes, and the event is executed for each subscriber as before. An
//! execution that fails or reports an error makes no template: its
//! subscriber gets its own result, and the others execute theirs.

use std::borrow::Cow;
use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::{Arc, Mutex, OnceLock};

use async_graphql::parser::types::{Field, Selection, SelectionSet};
use async_graphql::registry::Registry;
use async_graphql::{
    Context, ContextSelectionSet, Name, OutputType, Positioned, Response, ServerResult, Value,
};

use super::global_id::GlobalId;
use super::types::FeedEventNode;
use super::AppState;
use crate::events::shared::{Renders, Template};

/// The values that are each subscriber's own, by hole.
const OWNER_ID: usize = 0;
const ID: usize = 1;
const CURSOR: usize = 2;
const RESUME_CURSOR: usize = 3;
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

/// One event of a `feedEvents` stream: executed as usual, or filled into
/// its selection's template when it has one.
pub struct LiveFeedEvent {
    pub node: FeedEventNode,
    /// The plan, the transport's splice and the event's renders, when the
    /// event may be rendered from a template.
    pub shared: Option<(Arc<Plan>, Splice, Arc<Renders>)>,
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
        let Some((plan, splice, renders)) = &self.shared else {
            return Box::pin(OutputType::resolve(&self.node, ctx, field)).await;
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
            return Box::pin(OutputType::resolve(&self.node, ctx, field)).await;
        };
        let cursors = &state.cursors;
        let node = &self.node;
        let item = &node.item.item;
        let mut values: [Option<String>; HOLES] = Default::default();
        let json = |s: &str| serde_json::Value::from(s).to_string();
        if template.uses(OWNER_ID) {
            values[OWNER_ID] = Some(json(&item.owner));
        }
        if template.uses(ID) {
            let id = GlobalId::FeedItem {
                action: item.action_id,
                owner: item.owner.clone(),
            };
            values[ID] = Some(json(&id.encode()));
        }
        if template.uses(CURSOR) {
            values[CURSOR] = Some(json(&node.item.cursor.seal(cursors)));
        }
        if template.uses(RESUME_CURSOR) {
            values[RESUME_CURSOR] = Some(json(&node.resume_cursor.seal(cursors)));
        }
        splice.put(template.fill(&values));
        Ok(Value::Null)
    }
}

impl LiveFeedEvent {
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
        let value = Box::pin(OutputType::resolve(&self.node, ctx, field)).await?;
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

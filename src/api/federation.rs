//! Riverfeed as a subgraph of an Apollo Federation v2 supergraph
//! (`--federation`): `User` and `Action` are entities a gateway can join
//! with the product's own subgraphs, keyed by `userId` and `actionId`. A
//! user service that owns `User.email` then answers
//! `feed { … action { actor { email } } }` beside Riverfeed's fields.
//!
//! async-graphql serves `_service` and `_entities` whenever a type has a
//! key, so the keys are added only to a schema built for federation
//! ([`federated`]); a plain server's schema has neither field. The lookups
//! answer under the caller's identity, as the gateway forwards it, by the
//! rules of `user` and `action`.
//!
//! The product's own objects that actions refer to (an applicant, a
//! position) are entities of the product's subgraphs. Each one named with
//! `--federation-entity Applicant=id` is an entity here too, keyed by the
//! same field, to which Riverfeed adds `activity`: the slice of actions
//! whose `refIds` hold its id, as `slice(refId:)` answers it.
//!
//! Beside a Relay-style product subgraph ([`shape`]): `PageInfo` and the
//! connection and edge types are shareable value types, and with
//! `--federation-node none` the subgraph leaves `Node`, `node`, `nodes`
//! and `User.id` to the product's (whose `User.id` is its own global id).

use std::borrow::Cow;
use std::cell::RefCell;
use std::sync::Arc;

use async_graphql::indexmap::IndexMap;
use async_graphql::registry::{MetaType, MetaTypeId, MetaTypeName, Registry};
use async_graphql::{
    ContainerType, Context, ContextSelectionSet, ObjectType, OutputType, Positioned, ServerError,
    ServerResult, Value,
};

use super::access::access;
use super::error::{bad_input, ApiResultExt};
use super::types::{user_node, ActionConnection, ActionNode, UserNode};
use super::{feed, loaders, viewer, Viewer};
use crate::model::limits::normalize_id;
use crate::model::ObjectId;

/// A type a product's subgraph owns, which actions refer to by id: an
/// entity here too, keyed by the product's field, with its `activity`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RefEntity {
    pub name: String,
    /// The key field, as the product's subgraph names it (`id`).
    pub key: String,
}

impl std::str::FromStr for RefEntity {
    type Err = String;

    /// `Applicant=id`.
    fn from_str(text: &str) -> Result<RefEntity, String> {
        let (name, key) = text
            .split_once('=')
            .ok_or_else(|| format!("{text:?} is not TYPE=KEYFIELD (Applicant=id)"))?;
        let (name, key) = (name.trim(), key.trim());
        for part in [name, key] {
            let mut chars = part.chars();
            let named = chars
                .next()
                .is_some_and(|c| c == '_' || c.is_ascii_alphabetic())
                && chars.all(|c| c == '_' || c.is_ascii_alphanumeric());
            if !named || part.starts_with("__") {
                return Err(format!("{part:?} in {text:?} is not a GraphQL name"));
            }
        }
        Ok(RefEntity {
            name: name.to_owned(),
            key: key.to_owned(),
        })
    }
}

/// Whose `Node` a supergraph has (`--federation-node`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum FederationNode {
    /// Riverfeed's subgraph declares `Node`, `node(id:)`, `nodes(ids:)`
    /// and `User.id` (its global id): for a product without its own.
    #[default]
    Own,
    /// The subgraph leaves them out, to a product subgraph that has its
    /// own; `User` joins by `userId` alone.
    None,
}

/// How a federated schema is served: its ref entities, and whose `Node`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Federation {
    pub entities: Vec<RefEntity>,
    pub node: FederationNode,
}

impl Federation {
    /// Refuses an entity named like a type the schema has (`User`, a
    /// descriptor type…), or named twice.
    pub fn check(&self, taken: &std::collections::HashSet<String>) -> Result<(), String> {
        let mut seen = std::collections::HashSet::new();
        for e in &self.entities {
            if taken.contains(&e.name) {
                return Err(format!(
                    "--federation-entity {}: the schema has a type {} already",
                    e.name, e.name
                ));
            }
            if !seen.insert(&e.name) {
                return Err(format!("--federation-entity {} is given twice", e.name));
            }
        }
        Ok(())
    }
}

thread_local! {
    static FEDERATING: RefCell<Option<Arc<Federation>>> = const { RefCell::new(None) };
}

/// Runs `build` (a schema build) with the entities and their keys
/// registered.
pub fn federated<R>(federation: &Arc<Federation>, build: impl FnOnce() -> R) -> R {
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            FEDERATING.with(|f| f.borrow_mut().take());
        }
    }
    FEDERATING.with(|f| *f.borrow_mut() = Some(federation.clone()));
    let _reset = Reset;
    build()
}

/// Not a type: registered last (see `api::build`), it gives the built
/// subgraph its [`shape`].
pub struct SubgraphShape;

impl OutputType for SubgraphShape {
    fn type_name() -> Cow<'static, str> {
        Cow::Borrowed("SubgraphShape")
    }

    fn create_type_info(registry: &mut Registry) -> String {
        if let Some(federation) = FEDERATING.with(|f| f.borrow().clone()) {
            shape(registry, federation.node);
        }
        registry.query_type.clone()
    }

    async fn resolve(
        &self,
        _ctx: &ContextSelectionSet<'_>,
        field: &Positioned<async_graphql::parser::types::Field>,
    ) -> ServerResult<Value> {
        Err(ServerError::new(
            "SubgraphShape is no type",
            Some(field.pos),
        ))
    }
}

/// Shapes the subgraph to compose beside a Relay-style product's:
///
/// - `PageInfo`, every connection (an object with a `pageInfo`) and its
///   edge type are `@shareable`: value types a product may declare too,
///   which federation lets two subgraphs resolve when their fields agree.
/// - With [`FederationNode::None`], no `Node`: the interface, the fields
///   that answer it (`node`, `nodes`) and `User.id` are left to the
///   product, whose `User.id` is its own global id, not Riverfeed's. The
///   other types keep their `id` (still a Riverfeed global id, which every
///   argument that takes an id takes), no longer as a `Node`.
fn shape(registry: &mut Registry, node: FederationNode) {
    let base = |ty: &str| MetaTypeName::concrete_typename(ty).to_owned();
    let mut shared = vec!["PageInfo".to_owned()];
    for ty in registry.types.values() {
        if let MetaType::Object { name, fields, .. } = ty {
            if fields.contains_key("pageInfo") {
                shared.push(name.clone());
                shared.extend(fields.get("edges").map(|edges| base(&edges.ty)));
            }
        }
    }
    for name in &shared {
        if let Some(MetaType::Object { shareable, .. }) = registry.types.get_mut(name) {
            *shareable = true;
        }
    }
    if node == FederationNode::None {
        registry.types.remove("Node");
        for implements in registry.implements.values_mut() {
            implements.shift_remove("Node");
        }
        for ty in registry.types.values_mut() {
            if let MetaType::Object { name, fields, .. } = ty {
                fields.retain(|_, field| base(&field.ty) != "Node");
                if name == "User" {
                    fields.shift_remove("id");
                } else if let Some(id) = fields.get_mut("id") {
                    id.description = Some(
                        "Riverfeed's opaque global id: every argument of Riverfeed's that \
                         takes an id of this type takes it too. The supergraph's `node(id:)` \
                         is the product's, which does not know it."
                            .to_owned(),
                    );
                }
            }
        }
    }
}

/// The entity lookups `_entities` makes; no fields of `Query`.
#[derive(Default)]
pub struct FederationQuery;

impl FederationQuery {
    async fn entity(
        &self,
        ctx: &Context<'_>,
        params: &Value,
    ) -> async_graphql::Result<Option<Value>> {
        // A representation the gateway got wrong is the client's mistake:
        // refused with what `_entities` takes.
        let Value::Object(params) = params else {
            return Err(bad_input(
                "a representation is an object with its `__typename` and key fields",
            ));
        };
        let key = |name: &str| match params.get(name) {
            Some(Value::String(s)) => Some(s.as_str()),
            _ => None,
        };
        let set = ctx.with_selection_set(&ctx.item.node.selection_set);
        match key("__typename") {
            Some("User") => {
                viewer(ctx)?;
                let Some(id) = key("userId") else {
                    return Err(bad_input("a `User` representation needs its key `userId`"));
                };
                let id = normalize_id("userId", id).api()?;
                let user: UserNode = user_node(ctx, &id).await?;
                Ok(Some(OutputType::resolve(&user, &set, ctx.item).await?))
            }
            Some("Action") => {
                // Null, as `action(actionId:)` answers, for an action the
                // caller may not read (or that is gone).
                let viewer = viewer(ctx)?;
                let Some(id) = key("actionId").and_then(|id| ObjectId::parse_str(id).ok()) else {
                    return Ok(Some(Value::Null));
                };
                let Some(action) = loaders(ctx)?.actions.load_one(id).await.api()? else {
                    return Ok(Some(Value::Null));
                };
                let access = access(ctx, viewer, [&action]).await?;
                if !access.can_read(&action) {
                    return Ok(Some(Value::Null));
                }
                let node = ActionNode::new(action);
                Ok(Some(OutputType::resolve(&node, &set, ctx.item).await?))
            }
            Some(name) => {
                let federation = ctx.data_opt::<Arc<Federation>>();
                let entities = federation.map_or(&[][..], |f| f.entities.as_slice());
                let Some(entity) = entities.iter().find(|e| e.name == name) else {
                    let known: Vec<String> = ["User", "Action"]
                        .into_iter()
                        .chain(entities.iter().map(|e| e.name.as_str()))
                        .map(|n| format!("`{n}`"))
                        .collect();
                    return Err(bad_input(format!(
                        "no entity here is named `{name}`: `_entities` resolves {}",
                        known.join(", ")
                    )));
                };
                let viewer = viewer(ctx)?;
                let Some(id) = key(&entity.key) else {
                    return Err(bad_input(format!(
                        "a `{name}` representation needs its key `{}`",
                        entity.key
                    )));
                };
                Ok(Some(ref_entity(&set, viewer, entity, id).await?))
            }
            None => Err(bad_input("a representation needs its `__typename`")),
        }
    }
}

/// A ref entity's fields as the `_entities` selection asks them: its key,
/// and its `activity` resolved as `slice(refId:)` would be.
async fn ref_entity(
    set: &ContextSelectionSet<'_>,
    viewer: &Viewer,
    entity: &RefEntity,
    id: &str,
) -> async_graphql::Result<Value> {
    let mut fields = Vec::new();
    let applies = |on: &str| on == entity.name || on == "_Entity";
    crate::descriptor::selected_fields(set, &set.item.node, &applies, &mut |f| fields.push(f))
        .map_err(coded)?;
    let mut out = IndexMap::new();
    for field in fields {
        let value = match field.node.name.node.as_str() {
            "__typename" => Value::String(entity.name.clone()),
            "activity" => {
                let ctx = set.with_field(field);
                let (_, first) = ctx
                    .param_value::<Option<i32>>("first", None)
                    .map_err(coded)?;
                let (_, after) = ctx
                    .param_value::<Option<String>>("after", None)
                    .map_err(coded)?;
                let page: ActionConnection = feed::list(
                    &ctx,
                    viewer,
                    feed::ListOf::Slice(id.to_owned()),
                    (first, after, None),
                )
                .await?;
                let inner = ctx.with_selection_set(&field.node.selection_set);
                OutputType::resolve(&page, &inner, field)
                    .await
                    .map_err(coded)?
            }
            name if name == entity.key => Value::String(id.to_owned()),
            _ => Value::Null,
        };
        out.insert(field.node.response_key().node.clone(), value);
    }
    Ok(Value::Object(out))
}

/// A field's error as the lookup's, its code kept.
fn coded(e: ServerError) -> async_graphql::Error {
    async_graphql::Error {
        message: e.message,
        source: e.source,
        extensions: e.extensions,
    }
}

/// Registers a ref entity: its key and `activity`.
fn register(registry: &mut Registry, entity: &RefEntity) {
    use crate::descriptor::{meta_field, meta_input, meta_object};
    let connection = <ActionConnection as OutputType>::create_type_info(registry);
    let mut fields = IndexMap::new();
    let key = meta_field(
        &entity.key,
        Some(format!(
            "The {}'s id, as actions' `refIds` hold it.",
            entity.name
        )),
        "ID!".to_owned(),
    );
    fields.insert(entity.key.clone(), key);
    let mut activity = meta_field(
        "activity",
        Some(format!(
            "The actions that refer to this {} (whose `refIds` hold its id) that you may \
             see, newest first: `slice(refId:)` for it.",
            entity.name
        )),
        connection,
    );
    for (name, ty) in [("first", "Int"), ("after", "String")] {
        let arg = meta_input(name, None, ty.to_owned());
        activity.args.insert(name.to_owned(), arg);
    }
    fields.insert("activity".to_owned(), activity);
    let description = format!(
        "An object of the product's own subgraph ({}), which actions refer to by its id.",
        entity.name
    );
    registry.types.insert(
        entity.name.clone(),
        meta_object(&entity.name, Some(description), fields),
    );
    registry.add_keys(&entity.name, &entity.key);
}

impl ContainerType for FederationQuery {
    async fn resolve_field(&self, _ctx: &Context<'_>) -> ServerResult<Option<Value>> {
        Ok(None)
    }

    async fn find_entity(&self, ctx: &Context<'_>, params: &Value) -> ServerResult<Option<Value>> {
        self.entity(ctx, params)
            .await
            .map_err(|e| e.into_server_error(ctx.item.pos))
    }
}

impl OutputType for FederationQuery {
    fn type_name() -> Cow<'static, str> {
        Cow::Borrowed("FederationQuery")
    }

    fn create_type_info(registry: &mut Registry) -> String {
        if let Some(federation) = FEDERATING.with(|f| f.borrow().clone()) {
            <UserNode as OutputType>::create_type_info(registry);
            <ActionNode as OutputType>::create_type_info(registry);
            registry.add_keys("User", "userId");
            registry.add_keys("Action", "actionId");
            for entity in &federation.entities {
                register(registry, entity);
            }
        }
        registry.create_output_type::<Self, _>(MetaTypeId::Object, |_| {
            crate::descriptor::meta_object("FederationQuery", None, Default::default())
        })
    }

    async fn resolve(
        &self,
        _ctx: &ContextSelectionSet<'_>,
        field: &Positioned<async_graphql::parser::types::Field>,
    ) -> ServerResult<Value> {
        Err(ServerError::new(
            "FederationQuery has no fields",
            Some(field.pos),
        ))
    }
}

impl ObjectType for FederationQuery {}

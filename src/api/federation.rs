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

use std::borrow::Cow;
use std::cell::Cell;

use async_graphql::registry::{MetaTypeId, Registry};
use async_graphql::{
    ContainerType, Context, ContextSelectionSet, ObjectType, OutputType, Positioned, ServerError,
    ServerResult, Value,
};

use super::access::access;
use super::error::ApiResultExt;
use super::types::{user_node, ActionNode, UserNode};
use super::{loaders, viewer};
use crate::model::limits::normalize_id;
use crate::model::ObjectId;

thread_local! {
    static FEDERATING: Cell<bool> = const { Cell::new(false) };
}

/// Runs `build` (a schema build) with the entities' keys registered.
pub fn federated<R>(build: impl FnOnce() -> R) -> R {
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            FEDERATING.with(|f| f.set(false));
        }
    }
    FEDERATING.with(|f| f.set(true));
    let _reset = Reset;
    build()
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
        let Value::Object(params) = params else {
            return Ok(None);
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
                    return Ok(None);
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
            _ => Ok(None),
        }
    }
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
        if FEDERATING.with(Cell::get) {
            <UserNode as OutputType>::create_type_info(registry);
            <ActionNode as OutputType>::create_type_info(registry);
            registry.add_keys("User", "userId");
            registry.add_keys("Action", "actionId");
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

//! Access checks in requests: [`Access`] for the viewer.

use async_graphql::Context;

use super::error::ApiResultExt;
use super::{state, Viewer};
use crate::model::Action;
pub use crate::timeline::Access;

/// Prepares the access check for the viewer over `actions`.
pub async fn access<'v, 'a>(
    ctx: &Context<'_>,
    viewer: &'v Viewer,
    actions: impl IntoIterator<Item = &'a Action>,
) -> async_graphql::Result<Access<'v>> {
    access_for(state(ctx)?, viewer, actions).await
}

/// Prepares the access check for the viewer over `actions`, with `state`.
pub async fn access_for<'v, 'a>(
    state: &super::AppState,
    viewer: &'v Viewer,
    actions: impl IntoIterator<Item = &'a Action>,
) -> async_graphql::Result<Access<'v>> {
    Access::load(
        state.store.as_ref(),
        &viewer.tenant,
        &viewer.user,
        actions,
        state.expiry(),
    )
    .await
    .api()
}

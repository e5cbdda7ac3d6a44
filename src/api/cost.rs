//! What a field costs, for the complexity check and the rate limits: a
//! point for the field, and for a list its children once per item of the
//! longest list it may return. Every list field of the schema has a bound,
//! and every list of objects a cost (a test walks the schema for both).

use crate::model::limits::{DEFAULT_PAGE, MAX_PAGE};

/// Cost of a paged field: its children once per item of the largest page it
/// may return (an absent or bad size counts as the default, which the
/// resolver then refuses if bad).
pub(crate) fn page_cost(size: Option<i32>, child_complexity: usize) -> usize {
    let items = size
        .filter(|n| (0..=MAX_PAGE as i32).contains(n))
        .map_or(DEFAULT_PAGE, |n| n as usize);
    list_cost(items, child_complexity)
}

/// Cost of a list of at most `items` entries.
pub(crate) fn list_cost(items: usize, child_complexity: usize) -> usize {
    items
        .max(1)
        .saturating_mul(child_complexity.max(1))
        .saturating_add(1)
}

/// Cost of a list field with an optional `first`: `first` entries, or
/// `default` when absent; a `first` past `most` is refused by
/// [`bounded_first`] and costs `most` here.
pub(crate) fn first_cost(
    first: Option<i32>,
    default: usize,
    most: usize,
    child_complexity: usize,
) -> usize {
    let items = first.map_or(default, |n| usize::try_from(n).unwrap_or(0).min(most));
    list_cost(items, child_complexity)
}

/// How many entries a list field with `first` returns: `default` when
/// absent, refused when negative or past `most`.
pub(crate) fn bounded_first(
    first: Option<i32>,
    default: usize,
    most: usize,
) -> async_graphql::Result<usize> {
    match first {
        None => Ok(default),
        Some(n) if n < 0 => Err(super::error::bad_input("first must not be negative")),
        Some(n) if n as usize > most => Err(super::error::bad_input(format!(
            "first is {n}; this list returns at most {most}"
        ))),
        Some(n) => Ok(n as usize),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use async_graphql::extensions::{Extension, ExtensionContext, ExtensionFactory, NextRequest};
    use async_graphql::registry::{MetaType, MetaTypeName};
    use async_graphql::{Response, Schema};

    use crate::api::{MutationRoot, QueryRoot, SubscriptionRoot};

    /// Lists of leaves (scalars and enums) with the bound their writes
    /// keep them to; their entries cost nothing past the read of the
    /// object that holds them.
    const BOUNDED_LEAF_LISTS: &[(&str, &str)] = &[
        ("Action.to", "MAX_LIST_LEN recipients, checked at record"),
        ("Action.readers", "MAX_LIST_LEN readers, checked at record"),
        ("Action.refIds", "MAX_LIST_LEN ref ids, checked at record"),
        ("Action.tags", "MAX_LIST_LEN tags, checked at record"),
        (
            "ApplicationRating.tags",
            "MAX_LIST_LEN tags, checked at record",
        ),
        (
            "FeedItemGroup.actionIds",
            "the group's items, MAX_SCANNED a page",
        ),
        (
            "NotificationsChanged.removed",
            "the ids marked, MAX_LIST_LEN",
        ),
        (
            "NotificationPreferences.disabled",
            "the NoticeReason values",
        ),
        ("User.assignments", "MAX_LIST_LEN, as listed by assignments"),
        ("Webhook.events", "the WebhookEvent values, each once"),
    ];

    /// Lists whose length the field returning their parent bounds, and
    /// prices: a connection's `edges` and `nodes` are its page.
    fn priced_by_parent(ty: &str, field: &str) -> bool {
        ty.ends_with("Connection") && matches!(field, "edges" | "nodes")
    }

    /// Keeps the schema's registry when a request runs.
    struct Look(Arc<Mutex<Vec<String>>>);

    impl ExtensionFactory for Look {
        fn create(&self) -> Arc<dyn Extension> {
            Arc::new(Looking(self.0.clone()))
        }
    }

    struct Looking(Arc<Mutex<Vec<String>>>);

    #[async_trait::async_trait]
    impl Extension for Looking {
        async fn request(&self, ctx: &ExtensionContext<'_>, next: NextRequest<'_>) -> Response {
            let registry = &ctx.schema_env.registry;
            let mut found = Vec::new();
            for (name, ty) in &registry.types {
                let (MetaType::Object { fields, .. } | MetaType::Interface { fields, .. }) = ty
                else {
                    continue;
                };
                if name.starts_with("__") {
                    continue;
                }
                for field in fields.values() {
                    let item = MetaTypeName::concrete_typename(&field.ty);
                    let path = format!("{name}.{}", field.name);
                    // A connection is a list: the field returning it prices
                    // its page.
                    if item.ends_with("Connection") {
                        let priced = field.compute_complexity.is_some();
                        found.push(format!("{path} {}", if priced { "ok" } else { "UNPRICED" }));
                        continue;
                    }
                    if !is_list(&field.ty) {
                        continue;
                    }
                    let leaf = registry.types.get(item).is_some_and(|t| {
                        matches!(t, MetaType::Scalar { .. } | MetaType::Enum { .. })
                    });
                    let priced = field.compute_complexity.is_some()
                        || priced_by_parent(name, &field.name)
                        || (leaf && BOUNDED_LEAF_LISTS.iter().any(|(p, _)| *p == path));
                    found.push(format!("{path} {}", if priced { "ok" } else { "UNPRICED" }));
                }
            }
            *self.0.lock().unwrap() = found;
            next.run(ctx).await
        }
    }

    fn is_list(ty: &str) -> bool {
        match MetaTypeName::create(ty) {
            MetaTypeName::List(_) => true,
            MetaTypeName::NonNull(inner) => is_list(inner),
            MetaTypeName::Named(_) => false,
        }
    }

    #[tokio::test]
    async fn every_list_field_has_a_cost_or_a_bound() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let schema = Schema::build(
            QueryRoot::default(),
            MutationRoot::default(),
            SubscriptionRoot::default(),
        )
        .extension(Look(seen.clone()))
        .finish();
        schema.execute("{ __typename }").await;
        let seen = seen.lock().unwrap();
        assert!(seen.len() > 20, "the walk found the lists: {seen:?}");
        let unpriced: Vec<&String> = seen.iter().filter(|f| f.ends_with("UNPRICED")).collect();
        assert!(
            unpriced.is_empty(),
            "list fields with neither a cost nor a bound: {unpriced:?}"
        );
    }
}

//! The tenant's webhooks as an operator reads them, planned: `webhooks` and
//! `webhook(webhookId:)`, with each one's deliveries read as rows below the
//! page (see [`Below`](super::below::Below)). Both roots are for `service`
//! and `admin`: any error of theirs (a caller without the role, an id that
//! does not parse) leaves the request to async-graphql. The values come
//! from the same functions the async-graphql resolvers call.

use super::below::DeliveriesOf;
use super::bind::{enumerated, Bind, Fallback};
use super::compile::{arg, only, Arg, Compiler, Fields, Occurrences};
use super::connection::{Connection, Names};
use super::out::Out;
use super::run::Run;
use crate::api::deliveries::{DeliveryState, WebhookDelivery};
use crate::api::webhooks::{self, WebhookNode};
use crate::api::{AppState, Session};

const DELIVERIES: Names = ("WebhookDeliveryConnection", "WebhookDeliveryEdge");

#[derive(Debug)]
pub enum WebhookField {
    Typename,
    WebhookId,
    Url,
    Events,
    Enabled,
    CreatedAt,
    Paused,
    PausedReason,
    PausedAt,
    PreviousSecretExpiresAt,
    Deliveries(Box<Deliveries>),
}

/// A webhook's `deliveries(state:, first:, after:)`.
#[derive(Debug)]
pub struct Deliveries {
    state: Arg,
    first: Arg,
    after: Arg,
    fields: Fields<Connection<Fields<DeliveryField>>>,
}

#[derive(Debug)]
pub enum DeliveryField {
    Typename,
    MessageId,
    EventType,
    Payload,
    State,
    Attempts,
    LastError,
    LastStatus,
    NextAttemptAt,
    QueuedAt,
    DiedAt,
}

/// Which webhooks a root reads.
#[derive(Debug)]
pub enum Hooks {
    All(Fields<WebhookField>),
    One {
        id: Arg,
        fields: Fields<WebhookField>,
    },
}

impl<'a> Compiler<'a> {
    /// `webhooks` or `webhook(webhookId:)`.
    pub(super) fn webhooks(&self, name: &str, occ: &Occurrences<'a>) -> Option<Hooks> {
        let sets = Self::subsets(occ);
        let hooks = match name {
            "webhooks" => Hooks::All(Self::leaf(occ, ()).and_then(|()| self.webhook(&sets))?),
            _ if only(occ, &["webhookId"]) => Hooks::One {
                id: arg(occ[0], "webhookId"),
                fields: self.webhook(&sets)?,
            },
            _ => return None,
        };
        Some(hooks)
    }

    fn webhook(
        &self,
        sets: &[&'a async_graphql::parser::types::SelectionSet],
    ) -> Option<Fields<WebhookField>> {
        self.object(sets, "Webhook", |this, name, occ| match name {
            "__typename" => Some(WebhookField::Typename),
            "webhookId" => Self::leaf(occ, WebhookField::WebhookId),
            "url" => Self::leaf(occ, WebhookField::Url),
            "events" => Self::leaf(occ, WebhookField::Events),
            "enabled" => Self::leaf(occ, WebhookField::Enabled),
            "createdAt" => Self::leaf(occ, WebhookField::CreatedAt),
            "paused" => Self::leaf(occ, WebhookField::Paused),
            "pausedReason" => Self::leaf(occ, WebhookField::PausedReason),
            "pausedAt" => Self::leaf(occ, WebhookField::PausedAt),
            "previousSecretExpiresAt" => Self::leaf(occ, WebhookField::PreviousSecretExpiresAt),
            "deliveries" if only(occ, &["state", "first", "after"]) => {
                let fields =
                    this.plain_connection(&Self::subsets(occ), DELIVERIES, |this, sets| {
                        this.delivery(sets)
                    })?;
                this.reads_below();
                Some(WebhookField::Deliveries(Box::new(Deliveries {
                    state: arg(occ[0], "state"),
                    first: arg(occ[0], "first"),
                    after: arg(occ[0], "after"),
                    fields,
                })))
            }
            _ => None,
        })
    }

    fn delivery(
        &self,
        sets: &[&'a async_graphql::parser::types::SelectionSet],
    ) -> Option<Fields<DeliveryField>> {
        self.object(sets, "WebhookDelivery", |_, name, occ| {
            let kind = match name {
                "__typename" => DeliveryField::Typename,
                "messageId" => DeliveryField::MessageId,
                "eventType" => DeliveryField::EventType,
                "payload" => DeliveryField::Payload,
                "state" => DeliveryField::State,
                "attempts" => DeliveryField::Attempts,
                "lastError" => DeliveryField::LastError,
                "lastStatus" => DeliveryField::LastStatus,
                "nextAttemptAt" => DeliveryField::NextAttemptAt,
                "queuedAt" => DeliveryField::QueuedAt,
                "diedAt" => DeliveryField::DiedAt,
                _ => return None,
            };
            Self::leaf(occ, kind)
        })
    }
}

/// What a root read: the webhooks, or the one (none: null).
pub(super) enum Read {
    All(Vec<WebhookNode>),
    One(Option<WebhookNode>),
}

/// Reads what `hooks` names; any error is async-graphql's to answer.
pub(super) async fn read(
    state: &AppState,
    session: &Session,
    bind: &Bind<'_>,
    hooks: &Hooks,
) -> Result<Read, Fallback> {
    let viewer = session.viewer().map_err(|_| Fallback)?;
    match hooks {
        Hooks::All(_) => webhooks::list(state, viewer)
            .await
            .map(Read::All)
            .map_err(|_| Fallback),
        Hooks::One { id, .. } => {
            let id = bind.id(id)?.ok_or(Fallback)?;
            webhooks::find(state, viewer, &id)
                .await
                .map(Read::One)
                .map_err(|_| Fallback)
        }
    }
}

impl Run<'_> {
    /// Writes what a root read; whether it is not null.
    pub(super) fn webhooks(&self, out: &mut Out, hooks: &Hooks, read: &Read) -> bool {
        match (hooks, read) {
            (Hooks::All(fields), Read::All(all)) => {
                out.list(all, |out, hook| self.webhook(out, fields, hook));
                true
            }
            (Hooks::One { fields, .. }, Read::One(Some(hook))) => {
                self.webhook(out, fields, hook);
                true
            }
            _ => {
                out.null();
                false
            }
        }
    }

    fn webhook(&self, out: &mut Out, fields: &Fields<WebhookField>, hook: &WebhookNode) {
        out.open();
        for f in fields {
            out.key(&f.key);
            match &f.kind {
                WebhookField::Typename => out.string("Webhook"),
                WebhookField::WebhookId => out.string(&hook.0.id),
                WebhookField::Url => out.string(&hook.0.url),
                WebhookField::Events => out.list(&hook.0.events, |out, e| out.enumerated(*e)),
                WebhookField::Enabled => out.bool(hook.0.enabled),
                WebhookField::CreatedAt => out.time(&hook.created_time()),
                WebhookField::Paused => out.bool(hook.is_paused()),
                WebhookField::PausedReason => out.opt_string(hook.pause_reason()),
                WebhookField::PausedAt => match hook.paused_time() {
                    Some(at) => out.time(&at),
                    None => out.null(),
                },
                WebhookField::PreviousSecretExpiresAt => match hook.previous_expires(self.state) {
                    Some(at) => out.time(&at),
                    None => out.null(),
                },
                WebhookField::Deliveries(asked) => self.deliveries(out, asked, hook),
            }
        }
        out.close();
    }

    fn deliveries(&self, out: &mut Out, asked: &Deliveries, hook: &WebhookNode) {
        let bound = (
            self.bind
                .value(&asked.state)
                .and_then(enumerated::<DeliveryState>),
            self.bind.int(&asked.first),
            self.bind.string(&asked.after),
        );
        let (Ok(state), Ok(first), Ok(after)) = bound else {
            self.below.cannot_bind();
            return out.null();
        };
        let page = DeliveriesOf {
            webhook: hook.0.id.clone(),
            state,
            first,
            after,
        };
        let Some(c) = self.below.deliveries(page) else {
            return out.null();
        };
        self.plain_connection(
            out,
            &asked.fields,
            DELIVERIES,
            (&c.edges, &c.page_info),
            |out, delivery, edge| self::delivery(out, delivery, &edge.node),
        );
    }
}

fn delivery(out: &mut Out, fields: &Fields<DeliveryField>, d: &WebhookDelivery) {
    out.open();
    for f in fields {
        out.key(&f.key);
        match f.kind {
            DeliveryField::Typename => out.string("WebhookDelivery"),
            DeliveryField::MessageId => out.string(d.message()),
            DeliveryField::EventType => out.enumerated(d.event()),
            DeliveryField::Payload => out.string(d.body()),
            DeliveryField::State => out.enumerated(d.standing()),
            DeliveryField::Attempts => out.number(u64::from(d.attempts_made())),
            DeliveryField::LastError => out.opt_string(d.error_last()),
            DeliveryField::LastStatus => match d.status_last() {
                Some(status) => out.number(u64::from(status)),
                None => out.null(),
            },
            DeliveryField::NextAttemptAt => match d.next_at() {
                Some(at) => out.time(&at),
                None => out.null(),
            },
            DeliveryField::QueuedAt => out.time(&d.queued_time()),
            DeliveryField::DiedAt => match d.died_time() {
                Some(at) => out.time(&at),
                None => out.null(),
            },
        }
    }
    out.close();
}

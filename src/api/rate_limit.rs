//! Rate limits on query cost: a token bucket per caller.
//!
//! A caller is the token's tenant and `sub` (the client's address in dev
//! mode, where anyone may claim any identity). Each role has its budget
//! (`--rate-limit user=20000/1m`): a bucket that holds that much cost and
//! fills at that rate. An operation's cost is its complexity, as validation
//! computes it (a page of 25 items costs 25 times what one item does); it is
//! taken from the bucket before the operation runs, a subscription's once
//! when it starts. An operation the bucket cannot pay for is refused with
//! `RATE_LIMITED` and the seconds to wait, which HTTP answers as `429` with
//! `Retry-After`. A request that fails before it runs (it does not parse,
//! breaks a document limit or does not validate) has no complexity; it pays
//! by the size of its document instead ([`FAILED_BYTES_PER_UNIT`]), and a
//! caller whose bucket could not pay that much is refused before the server
//! reads the document at all. Every answer says where the caller stands in
//! `RateLimit-Policy` and `RateLimit` headers (the IETF draft's structured
//! form: the policy's quota `q` and window `w`, the remaining `r` and the
//! seconds `t` until the bucket is full).
//!
//! Buckets live in each process: behind a load balancer, a caller spread
//! over N API processes may spend up to N budgets.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use std::any::TypeId;

use async_graphql::extensions::{
    Extension, ExtensionContext, ExtensionFactory, NextParseQuery, NextPrepareRequest, NextRequest,
    NextValidation,
};
use async_graphql::parser::types::ExecutableDocument;
use async_graphql::{Request, Response, ServerError, ServerResult, ValidationResult, Variables};
use axum::http::{HeaderName, HeaderValue};
use tokio::sync::oneshot;

use super::error::{coded_server_error, RATE_LIMITED};
use crate::auth::Role;

/// Buckets kept before full ones are let go.
const PRUNE_EVERY: u64 = 4_096;

/// One role's budget: `cost` per `window`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Budget {
    pub cost: u64,
    pub window: Duration,
}

impl Budget {
    /// Cost units per second.
    fn rate(&self) -> f64 {
        self.cost as f64 / self.window.as_secs_f64()
    }

    /// `RateLimit-Policy` for this budget.
    fn policy(&self) -> String {
        format!(
            "\"cost\";q={};w={}",
            self.cost,
            self.window.as_secs().max(1)
        )
    }
}

/// Parses `ROLE=COST/WINDOW` (`user=20000/1m`), as `--rate-limit` takes it.
pub fn parse_budget(text: &str) -> Result<(Role, Budget), String> {
    let (role, budget) = text
        .split_once('=')
        .ok_or_else(|| format!("{text:?}: write ROLE=COST/WINDOW, as in user=20000/1m"))?;
    let role = Role::parse(role.trim())
        .ok_or_else(|| format!("{role:?} is not a role: user, service or admin"))?;
    let (cost, window) = budget
        .split_once('/')
        .ok_or_else(|| format!("{budget:?}: write COST/WINDOW, as in 20000/1m"))?;
    let cost: u64 = cost
        .trim()
        .parse()
        .map_err(|_| format!("{cost:?} is not a whole number of cost units"))?;
    let window = crate::duration::parse_duration(window.trim())?;
    if window.is_zero() {
        return Err("the window must be longer than zero".into());
    }
    let least = super::MAX_COMPLEXITY as u64;
    if cost < least {
        return Err(format!(
            "a budget of {cost} could never pay for the costliest query the API accepts ({least}): give at least {least}"
        ));
    }
    Ok((role, Budget { cost, window }))
}

/// Who pays for an operation: set on each request by the transport.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Caller {
    /// The bucket's key.
    pub key: String,
    /// The role whose budget applies: the caller's highest.
    pub role: Role,
}

/// Told, as the operation is charged, where its caller stands (`None`:
/// their role has no budget). Streaming transports put one in a request to
/// learn whether to answer `429` before the first result.
pub struct Admission(Mutex<Option<oneshot::Sender<Option<Standing>>>>);

impl Admission {
    pub fn new(sender: oneshot::Sender<Option<Standing>>) -> Self {
        Self(Mutex::new(Some(sender)))
    }

    fn tell(&self, standing: Option<Standing>) {
        let sender = self.0.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(sender) = sender {
            let _ = sender.send(standing);
        }
    }
}

/// The budgets, and the buckets of the callers seen.
pub struct RateLimiter {
    budgets: HashMap<Role, Budget>,
    buckets: Mutex<Buckets>,
}

#[derive(Default)]
struct Buckets {
    by_caller: HashMap<String, Bucket>,
    charges: u64,
}

#[derive(Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

/// Where a caller stands after a charge.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Standing {
    pub budget: Budget,
    /// Cost left in the bucket.
    pub remaining: u64,
    /// Seconds until the bucket is full.
    pub full_in: u64,
    /// Seconds until the refused operation could be paid for; `None` when
    /// it was paid for.
    pub retry_after: Option<u64>,
}

/// The headers that say where a caller stands (besides `Retry-After`).
pub const STANDING_HEADERS: [&str; 2] = ["ratelimit-policy", "ratelimit"];

impl Standing {
    /// The `RateLimit-Policy`, `RateLimit` (and `Retry-After`) headers.
    pub fn headers(&self) -> Vec<(HeaderName, HeaderValue)> {
        let mut headers = vec![
            (
                HeaderName::from_static(STANDING_HEADERS[0]),
                HeaderValue::from_str(&self.budget.policy()).ok(),
            ),
            (
                HeaderName::from_static(STANDING_HEADERS[1]),
                HeaderValue::from_str(&format!("\"cost\";r={};t={}", self.remaining, self.full_in))
                    .ok(),
            ),
        ];
        if let Some(after) = self.retry_after {
            headers.push((axum::http::header::RETRY_AFTER, Some(after.into())));
        }
        headers
            .into_iter()
            .filter_map(|(name, value)| Some((name, value?)))
            .collect()
    }
}

impl RateLimiter {
    pub fn new(budgets: impl IntoIterator<Item = (Role, Budget)>) -> Self {
        Self {
            budgets: budgets.into_iter().collect(),
            buckets: Mutex::default(),
        }
    }

    /// Takes `cost` from the caller's bucket if it holds that much; `None`
    /// when the caller's role has no budget.
    pub fn charge(&self, caller: &Caller, cost: u64, now: Instant) -> Option<Standing> {
        self.settle(caller, cost, now, Settle::Pay)
    }

    /// Where the caller stands against `cost`, the bucket as it is.
    fn settle(&self, caller: &Caller, cost: u64, now: Instant, how: Settle) -> Option<Standing> {
        let budget = *self.budgets.get(&caller.role)?;
        let capacity = budget.cost as f64;
        let rate = budget.rate();
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        buckets.charges += 1;
        if buckets.charges.is_multiple_of(PRUNE_EVERY) {
            buckets.by_caller.retain(|_, bucket| {
                bucket.tokens + now.duration_since(bucket.at).as_secs_f64() * rate < capacity
            });
        }
        let bucket = buckets
            .by_caller
            .entry(format!("{}\u{1f}{}", caller.role.name(), caller.key))
            .or_insert(Bucket {
                tokens: capacity,
                at: now,
            });
        let elapsed = now.saturating_duration_since(bucket.at).as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * rate).min(capacity);
        bucket.at = now;
        let cost = cost as f64;
        let short = bucket.tokens < cost;
        let retry_after = match how {
            Settle::Spent => {
                bucket.tokens = (bucket.tokens - cost).max(0.0);
                None
            }
            _ if short => Some(((cost - bucket.tokens) / rate).ceil().max(1.0) as u64),
            Settle::Pay => {
                bucket.tokens -= cost;
                None
            }
            Settle::Check => None,
        };
        Some(Standing {
            budget,
            remaining: bucket.tokens.floor() as u64,
            full_in: ((capacity - bucket.tokens) / rate).ceil() as u64,
            retry_after,
        })
    }
}

/// How a cost meets a bucket.
#[derive(Clone, Copy)]
enum Settle {
    /// Taken if the bucket holds it all, else refused.
    Pay,
    /// Refused if the bucket does not hold it, taken in no case.
    Check,
    /// Work already done: taken, down to an empty bucket.
    Spent,
}

/// What a request that fails before it runs (it does not parse, breaks a
/// limit or does not validate) costs: a unit per this many bytes of its
/// document. Its work grows with its text, and it has no complexity.
pub const FAILED_BYTES_PER_UNIT: usize = 64;

fn failed_cost(query: &str) -> u64 {
    (query.len() / FAILED_BYTES_PER_UNIT).max(1) as u64
}

/// The extension, installed on the schema when there are budgets.
pub struct RateLimit(pub Arc<RateLimiter>);

impl ExtensionFactory for RateLimit {
    fn create(&self) -> Arc<dyn Extension> {
        Arc::new(Charged {
            limiter: self.0.clone(),
            standing: Mutex::new(None),
            unpaid: Mutex::new(None),
        })
    }
}

/// One request's charge.
struct Charged {
    limiter: Arc<RateLimiter>,
    standing: Mutex<Option<Standing>>,
    /// Who pays, and what, if the request fails before it runs.
    unpaid: Mutex<Option<(Caller, u64)>>,
}

impl Charged {
    /// Charges a request that failed before it ran by the size of its
    /// document (once), and keeps where its caller stands for the headers.
    fn charge_failure(&self, ctx: &ExtensionContext<'_>) {
        let unpaid = self.unpaid.lock().unwrap_or_else(|e| e.into_inner()).take();
        let Some((caller, cost)) = unpaid else {
            return;
        };
        let standing = self
            .limiter
            .settle(&caller, cost, Instant::now(), Settle::Spent);
        if let Some(admission) = ctx.data_opt::<Admission>() {
            admission.tell(standing);
        }
        *self.standing.lock().unwrap_or_else(|e| e.into_inner()) = standing;
    }
}

/// The refusal of an operation its caller's bucket cannot pay for.
fn refusal(cost: u64, standing: &Standing, after: u64) -> ServerError {
    let mut error = coded_server_error(
        RATE_LIMITED,
        format!(
            "rate limit: this operation costs {cost} and {} is left of {} per {} s; retry in {after} s",
            standing.remaining,
            standing.budget.cost,
            standing.budget.window.as_secs().max(1),
        ),
    );
    if let Some(extensions) = error.extensions.as_mut() {
        extensions.set("retryAfter", after);
        extensions.set("cost", cost);
    }
    error
}

#[async_trait::async_trait]
impl Extension for Charged {
    /// Before any work on the document: a caller whose bucket could not pay
    /// for it failing is refused at once, and what it sent is noted so that
    /// a failure is charged by its size.
    async fn prepare_request(
        &self,
        ctx: &ExtensionContext<'_>,
        request: Request,
        next: NextPrepareRequest<'_>,
    ) -> ServerResult<Request> {
        let caller = request
            .data
            .get(&TypeId::of::<Caller>())
            .and_then(|data| data.downcast_ref::<Caller>())
            .cloned();
        if let Some(caller) = caller {
            let cost = failed_cost(&request.query);
            let standing = self
                .limiter
                .settle(&caller, cost, Instant::now(), Settle::Check);
            if let Some(standing) = standing {
                if let Some(after) = standing.retry_after {
                    *self.standing.lock().unwrap_or_else(|e| e.into_inner()) = Some(standing);
                    let admission = request
                        .data
                        .get(&TypeId::of::<Admission>())
                        .and_then(|data| data.downcast_ref::<Admission>());
                    if let Some(admission) = admission {
                        admission.tell(Some(standing));
                    }
                    return Err(refusal(cost, &standing, after));
                }
            }
            *self.unpaid.lock().unwrap_or_else(|e| e.into_inner()) = Some((caller, cost));
        }
        let prepared = next.run(ctx, request).await;
        if prepared.is_err() {
            self.charge_failure(ctx);
        }
        prepared
    }

    async fn parse_query(
        &self,
        ctx: &ExtensionContext<'_>,
        query: &str,
        variables: &Variables,
        next: NextParseQuery<'_>,
    ) -> ServerResult<ExecutableDocument> {
        let parsed = next.run(ctx, query, variables).await;
        if parsed.is_err() {
            self.charge_failure(ctx);
        }
        parsed
    }

    async fn validation(
        &self,
        ctx: &ExtensionContext<'_>,
        next: NextValidation<'_>,
    ) -> Result<ValidationResult, Vec<ServerError>> {
        let validated = match next.run(ctx).await {
            Ok(validated) => validated,
            Err(errors) => {
                self.charge_failure(ctx);
                return Err(errors);
            }
        };
        // It runs: its complexity is what it costs.
        self.unpaid.lock().unwrap_or_else(|e| e.into_inner()).take();
        let cost = validated.complexity.max(1) as u64;
        let standing = ctx
            .data_opt::<Caller>()
            .and_then(|caller| self.limiter.charge(caller, cost, Instant::now()));
        if let Some(admission) = ctx.data_opt::<Admission>() {
            admission.tell(standing);
        }
        let Some(standing) = standing else {
            return Ok(validated);
        };
        *self.standing.lock().unwrap_or_else(|e| e.into_inner()) = Some(standing);
        match standing.retry_after {
            None => Ok(validated),
            Some(after) => Err(vec![refusal(cost, &standing, after)]),
        }
    }

    async fn request(&self, ctx: &ExtensionContext<'_>, next: NextRequest<'_>) -> Response {
        let mut response = next.run(ctx).await;
        let standing = *self.standing.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(standing) = standing {
            for (name, value) in standing.headers() {
                response.http_headers.insert(name, value);
            }
        }
        response
    }
}

/// The retry delay of a response refused by the rate limit, if it was.
pub fn refused_for(response: &Response) -> Option<u64> {
    response.errors.iter().find_map(|error| {
        let extensions = error.extensions.as_ref()?;
        match extensions.get("code") {
            Some(async_graphql::Value::String(code)) if code == RATE_LIMITED => {
                match extensions.get("retryAfter") {
                    Some(async_graphql::Value::Number(n)) => n.as_u64(),
                    _ => Some(1),
                }
            }
            _ => None,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limiter() -> RateLimiter {
        RateLimiter::new([(
            Role::User,
            Budget {
                cost: 100,
                window: Duration::from_secs(10),
            },
        )])
    }

    fn caller(key: &str, role: Role) -> Caller {
        Caller {
            key: key.into(),
            role,
        }
    }

    #[test]
    fn a_bucket_pays_until_empty_then_refills() {
        let limiter = limiter();
        let alice = caller("acme/alice", Role::User);
        let t0 = Instant::now();
        let first = limiter.charge(&alice, 60, t0).expect("budget");
        assert_eq!((first.remaining, first.retry_after), (40, None));
        let refused = limiter.charge(&alice, 60, t0).expect("budget");
        // 20 short at 10 per second.
        assert_eq!((refused.remaining, refused.retry_after), (40, Some(2)));
        let later = limiter
            .charge(&alice, 60, t0 + Duration::from_secs(2))
            .expect("budget");
        assert_eq!((later.remaining, later.retry_after), (0, None));
        assert_eq!(later.full_in, 10);
    }

    #[test]
    fn callers_and_roles_have_their_own_buckets() {
        let limiter = limiter();
        let t0 = Instant::now();
        limiter.charge(&caller("a", Role::User), 100, t0);
        let other = limiter
            .charge(&caller("b", Role::User), 100, t0)
            .expect("budget");
        assert_eq!(other.retry_after, None);
        assert!(limiter
            .charge(&caller("a", Role::Service), 1_000_000, t0)
            .is_none());
    }

    #[test]
    fn budgets_parse_and_refuse_nonsense() {
        let (role, budget) = parse_budget("service=100000/1m").expect("parses");
        assert_eq!(role, Role::Service);
        assert_eq!(
            budget,
            Budget {
                cost: 100_000,
                window: Duration::from_secs(60)
            }
        );
        for bad in [
            "user",
            "user=5",
            "nobody=100000/1m",
            "user=x/1m",
            "user=100000/0s",
            "user=10/1m",
        ] {
            assert!(parse_budget(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn headers_say_where_the_caller_stands() {
        let limiter = limiter();
        let standing = limiter
            .charge(&caller("a", Role::User), 150, Instant::now())
            .expect("budget");
        let headers: HashMap<String, String> = standing
            .headers()
            .into_iter()
            .map(|(n, v)| (n.to_string(), v.to_str().unwrap().to_owned()))
            .collect();
        assert_eq!(headers["ratelimit-policy"], "\"cost\";q=100;w=10");
        assert_eq!(headers["ratelimit"], "\"cost\";r=100;t=0");
        assert_eq!(headers["retry-after"], "5");
    }
}

//! `Idempotency-Key`: a `POST /graphql` sent with one runs once per caller
//! and key. Its answer is kept (`--idempotency-ttl`, a day by default) and
//! a retry gets it again; a retry while it runs is refused (409), and the
//! key sent again with another body is refused (422). The key and its
//! answer are a record of the store ([`RecordKind::IdempotencyKey`]),
//! claimed under its version, so this holds across processes sharing a
//! MongoDB. The claim keeps a seed the request draws the ids of what it
//! creates from ([`Minter`]): a retry of a request that never answered
//! (its process killed, or a `5xx`) draws the same ids, and finds what
//! the first attempt wrote under them instead of writing it twice. The
//! claim names the process that runs the request ([`Liveness`]): a retry
//! takes over at once from one that died.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::Response;
use base64::Engine as _;
use serde::{Deserialize, Serialize};

use super::http_error;
use crate::api::minted::Minter;
use crate::clock::Clock;
use crate::liveness::Liveness;
use crate::model::Millis;
use crate::store::{ErrorKind, Keys, RecordKind, Store, StoreError};

/// How long an answer is kept for retries by default.
pub const DEFAULT_TTL: Duration = Duration::from_secs(24 * 3600);

/// The request header that names a request.
const HEADER: &str = "idempotency-key";
/// Said on an answer given again.
const REPLAYED: &str = "idempotent-replayed";
/// Longest key accepted.
const MAX_KEY_LEN: usize = 255;
/// How long a request under way holds its key at most: a retry after
/// that takes it over, with its seed, even from a process that still
/// runs (a request hung that long is taken for lost). A retry takes over
/// at once from a process that died.
const RUNNING_MS: Millis = 60_000;
/// Keys past their time that a new key's claim looks at (those that
/// follow it in key order) and removes, so a caller's old keys go as it
/// sends new ones.
const SWEEP: usize = 16;
/// Claims tried against others' writes before a request is refused as
/// running.
const CLAIMS: usize = 3;

/// A key's record: the request it names and its answer once there is one.
#[derive(Debug, Serialize, Deserialize)]
struct Kept {
    /// SHA-256 of the request's body, in hex.
    body: String,
    /// When the record no longer counts.
    expires: Millis,
    /// While the request runs: until when it holds the key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    running_until: Option<Millis>,
    /// While the request runs: the process running it ([`Liveness`]).
    /// A record without one (kept by an earlier version) is held until
    /// `running_until`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    holder: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    answer: Option<Answer>,
    /// What the request's ids are drawn from (hex), and the time it
    /// stamps: an attempt that takes over from one that did not answer
    /// draws the same, and finds what that one wrote.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    seed: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    at: Option<Millis>,
}

/// An answer as kept: its status, media type and body (base64).
#[derive(Debug, Serialize, Deserialize)]
struct Answer {
    status: u16,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    media: Option<String>,
    body: String,
}

/// The key a request names, if it names one; a malformed one is a 400.
#[allow(clippy::result_large_err)]
pub fn key_of(headers: &HeaderMap) -> Result<Option<String>, Response> {
    let Some(value) = headers.get(HEADER) else {
        return Ok(None);
    };
    match value.to_str() {
        Ok(key)
            if (1..=MAX_KEY_LEN).contains(&key.len())
                && key.bytes().all(|b| b.is_ascii_graphic()) =>
        {
            Ok(Some(key.to_owned()))
        }
        _ => Err(http_error(
            StatusCode::BAD_REQUEST,
            "BAD_REQUEST",
            format!(
                "the Idempotency-Key header must be 1 to {MAX_KEY_LEN} visible ASCII characters"
            ),
        )),
    }
}

/// One caller's request under one key.
pub struct Keyed {
    pub store: Arc<dyn Store>,
    pub clock: Arc<dyn Clock>,
    pub tenant: String,
    pub user: String,
    pub key: String,
    /// The request's body, whose digest the key is held to.
    pub body: axum::body::Bytes,
    pub ttl: Duration,
    /// This process, named on the key while its request runs.
    pub liveness: Arc<Liveness>,
}

/// What a claim of a key found.
enum Claim {
    /// The key is this request's, at this version of its record, with
    /// the seed and time its ids are drawn from.
    Mine(u64, [u8; 16], Millis),
    /// The key's answer, to give again.
    Answered(Answer),
    /// The key is not this request's to run (in use, or another body's).
    Refused(Response),
}

impl Keyed {
    fn record_key(&self) -> String {
        format!(
            "{}{}{}",
            self.user,
            crate::store::records::SEPARATOR,
            self.key
        )
    }

    fn digest(&self) -> String {
        hex(ring::digest::digest(&ring::digest::SHA256, &self.body).as_ref())
    }

    /// Runs `run` once for the key, with the ids the key's seed draws, or
    /// answers as the key's record says.
    pub async fn once<F>(self, run: impl FnOnce(Minter) -> F) -> Response
    where
        F: std::future::Future<Output = Response>,
    {
        let (version, seed, at) = match self.claim().await {
            Ok(Claim::Mine(version, seed, at)) => (version, seed, at),
            Ok(Claim::Answered(answer)) => return replay(answer),
            Ok(Claim::Refused(refused)) => return refused,
            Err(err) => return store_failed(&err),
        };
        let (parts, body) = run(Minter::seeded(seed, at)).await.into_parts();
        let bytes = axum::body::to_bytes(body, usize::MAX)
            .await
            .unwrap_or_default();
        // A fault of the server's is not an answer to keep: the key is let
        // go, and a retry runs again, with the same seed (it finds what
        // this attempt wrote before the fault).
        let kept = if parts.status.is_server_error() {
            Kept {
                body: self.digest(),
                expires: self.clock.now().saturating_add(self.ttl_ms()),
                running_until: None,
                holder: None,
                answer: None,
                seed: Some(hex(&seed)),
                at: Some(at),
            }
        } else {
            let answer = Answer {
                status: parts.status.as_u16(),
                media: parts
                    .headers
                    .get(header::CONTENT_TYPE)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned),
                body: base64::engine::general_purpose::STANDARD.encode(&bytes),
            };
            Kept {
                body: self.digest(),
                expires: self.clock.now().saturating_add(self.ttl_ms()),
                running_until: None,
                holder: None,
                answer: Some(answer),
                seed: None,
                at: None,
            }
        };
        #[cfg(debug_assertions)]
        crash_point(std::env::var_os("RIVERFEED_CRASH_BEFORE_KEEPING").is_some());
        let written = match serde_json::to_vec(&kept) {
            Ok(body) => self.put(Some(body), version).await,
            Err(err) => Err(StoreError::internal(
                "cannot encode an idempotency record",
                err,
            )),
        };
        if let Err(err) = written {
            // The request ran and is answered; a retry finds the key held
            // until its time runs out, then runs again.
            tracing::error!(cause = %err.chain(), "an Idempotency-Key's answer was not kept");
        }
        Response::from_parts(parts, Body::from(bytes))
    }

    fn ttl_ms(&self) -> Millis {
        Millis::try_from(self.ttl.as_millis()).unwrap_or(Millis::MAX)
    }

    async fn put(&self, body: Option<Vec<u8>>, expect: u64) -> Result<bool, StoreError> {
        let kind = RecordKind::IdempotencyKey;
        let key = self.record_key();
        self.store
            .put_record(kind, &self.tenant, &key, body, Some(expect))
            .await
    }

    async fn claim(&self) -> Result<Claim, StoreError> {
        let key = self.record_key();
        let digest = self.digest();
        for _ in 0..CLAIMS {
            let now = self.clock.now();
            let keys = [key.clone()];
            let found = self
                .store
                .records(RecordKind::IdempotencyKey, &self.tenant, Keys::These(&keys))
                .await?
                .pop();
            let (version, kept) = match found {
                Some((_, stored)) => (stored.version, read(&stored.body)?),
                None => (0, None),
            };
            // A seed of an attempt that did not answer is drawn from again.
            let mut drawn = None;
            match kept {
                Some(kept) if kept.expires > now => {
                    if kept.body != digest {
                        return Ok(Claim::Refused(http_error(
                            StatusCode::UNPROCESSABLE_ENTITY,
                            "IDEMPOTENCY_KEY_REUSED",
                            "this Idempotency-Key was sent with another request body; \
                             send a new key with a new request",
                        )));
                    }
                    if let Some(answer) = kept.answer {
                        return Ok(Claim::Answered(answer));
                    }
                    if kept.running_until.is_some_and(|until| until > now)
                        && self.holder_runs(kept.holder.as_deref()).await?
                    {
                        return Ok(Claim::Refused(in_use()));
                    }
                    drawn = kept.seed.as_deref().and_then(unhex).zip(kept.at);
                }
                _ => {}
            }
            let (seed, at) = match drawn {
                Some(drawn) => drawn,
                None => (new_seed()?, now),
            };
            let running = Kept {
                body: digest.clone(),
                expires: now.saturating_add(self.ttl_ms()),
                running_until: Some(now.saturating_add(RUNNING_MS)),
                holder: Some(self.liveness.id().to_owned()),
                answer: None,
                seed: Some(hex(&seed)),
                at: Some(at),
            };
            let body = serde_json::to_vec(&running)
                .map_err(|e| StoreError::internal("cannot encode an idempotency record", e))?;
            if self.put(Some(body), version).await? {
                if version == 0 {
                    self.sweep(&key, now).await?;
                }
                return Ok(Claim::Mine(version + 1, seed, at));
            }
        }
        Ok(Claim::Refused(in_use()))
    }

    /// Whether the process running a request still runs: a record that
    /// names none is taken as running.
    async fn holder_runs(&self, holder: Option<&str>) -> Result<bool, StoreError> {
        match holder {
            Some(holder) => self.liveness.alive(holder).await,
            None => Ok(true),
        }
    }

    /// Removes the caller's keys past their time among those that follow
    /// `after`.
    async fn sweep(&self, after: &str, now: Millis) -> Result<(), StoreError> {
        let under = format!("{}{}", self.user, crate::store::records::SEPARATOR);
        let page = Keys::Page {
            under: &under,
            after: Some(after),
            limit: SWEEP,
        };
        let kind = RecordKind::IdempotencyKey;
        for (key, stored) in self.store.records(kind, &self.tenant, page).await? {
            if read(&stored.body)?.is_none_or(|kept| kept.expires <= now) {
                let expect = Some(stored.version);
                self.store
                    .put_record(kind, &self.tenant, &key, None, expect)
                    .await?;
            }
        }
        Ok(())
    }
}

/// A new seed for a key's ids.
fn new_seed() -> Result<[u8; 16], StoreError> {
    let mut seed = [0; 16];
    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut seed)
        .map_err(|_| StoreError::new(ErrorKind::Internal, "no random bytes for a seed"))?;
    Ok(seed)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<[u8; 16]> {
    let mut out = [0; 16];
    if text.len() != 32 {
        return None;
    }
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(text.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

/// Debug builds only: the process kills itself (SIGKILL) if `set` (a
/// variable of the environment is), so the tests can cut a request off
/// exactly there: with `RIVERFEED_CRASH_BEFORE_KEEPING`, once a keyed
/// request has run and before its answer is kept; with
/// `RIVERFEED_CRASH_AFTER_CHANGE`, once `deleteAction` has removed its
/// action and before it answers.
#[cfg(debug_assertions)]
pub(crate) fn crash_point(set: bool) {
    if set {
        let _ = std::process::Command::new("kill")
            .args(["-9", &std::process::id().to_string()])
            .status();
        std::process::abort();
    }
}

/// A kept record; one that does not read counts as none.
fn read(body: &[u8]) -> Result<Option<Kept>, StoreError> {
    Ok(serde_json::from_slice(body).ok())
}

fn in_use() -> Response {
    http_error(
        StatusCode::CONFLICT,
        "IDEMPOTENCY_KEY_IN_USE",
        "a request with this Idempotency-Key is still running; retry once it has answered",
    )
}

/// A kept answer, given again.
fn replay(answer: Answer) -> Response {
    let body = base64::engine::general_purpose::STANDARD
        .decode(&answer.body)
        .unwrap_or_default();
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = StatusCode::from_u16(answer.status).unwrap_or(StatusCode::OK);
    if let Some(media) = answer.media.and_then(|m| HeaderValue::from_str(&m).ok()) {
        response.headers_mut().insert(header::CONTENT_TYPE, media);
    }
    response
        .headers_mut()
        .insert(REPLAYED, HeaderValue::from_static("true"));
    response
}

/// The answer when the key's record cannot be read or written.
fn store_failed(err: &StoreError) -> Response {
    tracing::error!(cause = %err.chain(), "an Idempotency-Key could not be claimed");
    match err.kind {
        ErrorKind::Unavailable => {
            let mut refused = http_error(
                StatusCode::SERVICE_UNAVAILABLE,
                "STORAGE_UNAVAILABLE",
                "the store cannot take this request now; try again shortly",
            );
            let after = crate::api::error::STORAGE_RETRY_AFTER.to_string();
            if let Ok(after) = HeaderValue::from_str(&after) {
                refused.headers_mut().insert(header::RETRY_AFTER, after);
            }
            refused
        }
        _ => http_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "INTERNAL_SERVER_ERROR",
            "internal error",
        ),
    }
}

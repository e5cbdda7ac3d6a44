//! Persisted operations: the document a request runs, from what it sent.
//!
//! - **Automatic persisted queries** (Apollo's protocol): a request carries
//!   `extensions.persistedQuery.sha256Hash`, with the query text the first
//!   time and without it after; a hash this process has not seen answers
//!   `PERSISTED_QUERY_NOT_FOUND`, and the client sends the text again.
//! - **Trusted documents** (`--trusted-documents FILE`): a manifest of id →
//!   document, as Relay's compiler, GraphQL Codegen or Apollo's manifest
//!   generator write it. A request names one by `documentId` (GraphQL over
//!   HTTP), `doc_id` (Relay) or its sha256 as an APQ hash. In `enforce` mode
//!   nothing else runs; in `log` mode anything runs and what is not in the
//!   manifest is logged.
//!
//! Every transport (POST, GET, server-sent events, multipart, websocket)
//! turns the JSON it received into a request here, so the rules hold on all.
//!
//! What a caller sends can cost the process memory only once it has proven
//! who it is: a query sent with its APQ hash is kept after the request was
//! authenticated and its document validated (see [`Registration`]), never
//! before, and the cache is bounded in bytes as well as entries. A document
//! sent as text is at most [`Limits::max_document_bytes`] long, far below
//! the body limit.

use std::collections::{HashMap, HashSet, VecDeque};
use std::path::Path;
use std::sync::{Arc, Mutex};

use anyhow::Context as _;
use serde_json::{Map, Value};

/// APQ documents kept per process; the oldest go first.
pub const APQ_CACHE_ENTRIES: usize = 10_000;
/// Bytes of APQ documents kept per process by default (`--apq-cache-bytes`).
pub const DEFAULT_APQ_CACHE_BYTES: usize = 8 * 1024 * 1024;
/// Longest document sent as text, by default (`--max-document-bytes`).
pub const DEFAULT_MAX_DOCUMENT_BYTES: usize = 64 * 1024;

/// The bounds of what callers send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Bytes of query text the APQ cache holds, in all.
    pub apq_cache_bytes: usize,
    /// Longest query text a request may send (trusted documents aside).
    pub max_document_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            apq_cache_bytes: DEFAULT_APQ_CACHE_BYTES,
            max_document_bytes: DEFAULT_MAX_DOCUMENT_BYTES,
        }
    }
}

/// What `--trusted-documents-mode` says to do with a document outside the
/// manifest.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum TrustMode {
    /// Run it, and log it.
    Log,
    /// Refuse it (`TRUSTED_DOCUMENT_REQUIRED`).
    Enforce,
}

/// Marks a request whose document is one of the trusted documents (its
/// operations are labelled by name in `/metrics`).
pub struct TrustedDocument;

/// Why a request has no document to run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refused {
    pub code: &'static str,
    pub message: String,
}

impl Refused {
    fn new(code: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    /// As a GraphQL response with this one request error.
    pub fn response(&self) -> async_graphql::Response {
        let mut error = async_graphql::ServerError::new(self.message.clone(), None);
        let mut extensions = async_graphql::ErrorExtensionValues::default();
        extensions.set("code", self.code);
        error.extensions = Some(extensions);
        async_graphql::Response::from_errors(vec![error])
    }
}

/// The documents of a manifest, by id and by the sha256 of their text.
pub struct TrustedDocuments {
    by_id: HashMap<String, Arc<str>>,
    hashes: HashSet<String>,
    mode: TrustMode,
}

impl TrustedDocuments {
    /// Reads a manifest: a JSON object of id → document (Relay's
    /// `persisted_queries.json`, GraphQL Codegen's `persisted-documents.json`)
    /// or Apollo's `{"format": "apollo-persisted-query-manifest", "operations":
    /// [{"id", "body"}]}`.
    pub fn load(path: &Path, mode: TrustMode) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read --trusted-documents {}", path.display()))?;
        Self::parse(&text, mode).with_context(|| format!("--trusted-documents {}", path.display()))
    }

    pub fn parse(text: &str, mode: TrustMode) -> anyhow::Result<Self> {
        let manifest: Value = serde_json::from_str(text).context("not JSON")?;
        let Value::Object(manifest) = manifest else {
            anyhow::bail!("a manifest is a JSON object of id → document");
        };
        let mut by_id = HashMap::new();
        if manifest.get("format").and_then(Value::as_str) == Some("apollo-persisted-query-manifest")
        {
            let operations = manifest
                .get("operations")
                .and_then(Value::as_array)
                .context("an Apollo manifest lists its `operations`")?;
            for (n, operation) in operations.iter().enumerate() {
                let (Some(id), Some(body)) = (
                    operation.get("id").and_then(Value::as_str),
                    operation.get("body").and_then(Value::as_str),
                ) else {
                    anyhow::bail!("operation {n} lacks a string `id` or `body`");
                };
                by_id.insert(id.to_owned(), Arc::from(body));
            }
        } else {
            for (id, document) in manifest {
                let Value::String(document) = document else {
                    anyhow::bail!("the document of {id:?} is not a string");
                };
                by_id.insert(id, Arc::from(document));
            }
        }
        anyhow::ensure!(!by_id.is_empty(), "the manifest holds no documents");
        let hashes = by_id.values().map(|d| sha256_hex(d)).collect();
        Ok(Self {
            by_id,
            hashes,
            mode,
        })
    }

    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    pub fn mode(&self) -> TrustMode {
        self.mode
    }

    /// The document with this id; a `sha256:` prefix (GraphQL over HTTP's
    /// form) is optional on either side.
    fn get(&self, id: &str) -> Option<Arc<str>> {
        self.by_id
            .get(id)
            .or_else(|| self.by_id.get(id.strip_prefix("sha256:")?))
            .or_else(|| self.by_id.get(&format!("sha256:{id}")))
            .cloned()
    }

    /// Whether this text is one of the manifest's documents.
    fn holds_text(&self, hash: &str) -> bool {
        self.hashes.contains(hash)
    }
}

/// A bounded map of APQ hash → query text: the oldest entry goes first
/// when it holds [`APQ_CACHE_ENTRIES`] entries or its bytes would pass
/// `max_bytes`.
#[derive(Default)]
struct ApqCache {
    entries: HashMap<String, Arc<str>>,
    order: VecDeque<String>,
    bytes: usize,
    max_bytes: usize,
}

impl ApqCache {
    fn new(max_bytes: usize) -> Self {
        Self {
            max_bytes,
            ..Self::default()
        }
    }

    fn get(&self, hash: &str) -> Option<Arc<str>> {
        self.entries.get(hash).cloned()
    }

    fn insert(&mut self, hash: String, query: Arc<str>) {
        let size = hash.len() + query.len();
        if self.entries.contains_key(&hash) || size > self.max_bytes {
            return;
        }
        while self.order.len() >= APQ_CACHE_ENTRIES || self.bytes + size > self.max_bytes {
            let Some(oldest) = self.order.pop_front() else {
                break;
            };
            if let Some(query) = self.entries.remove(&oldest) {
                self.bytes -= oldest.len() + query.len();
            }
        }
        self.bytes += size;
        self.order.push_back(hash.clone());
        self.entries.insert(hash, query);
    }
}

/// A query sent with its APQ hash, to keep once the request proved worth
/// it: its caller authenticated and its document valid. The request carries
/// it as data; the schema's validation step calls [`Registration::keep`].
pub struct Registration {
    cache: Arc<Mutex<ApqCache>>,
    hash: String,
    query: Arc<str>,
}

impl Registration {
    /// Keeps the query under its hash.
    pub fn keep(&self) {
        self.cache
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(self.hash.clone(), self.query.clone());
    }
}

/// A request's document: its text, whether the manifest holds it, and the
/// APQ registration to make if the request proves worth it.
type Document = (Arc<str>, bool, Option<Registration>);

/// Turns received JSON into the request to run.
pub struct Persisted {
    apq: Arc<Mutex<ApqCache>>,
    trusted: Option<TrustedDocuments>,
    limits: Limits,
}

impl Default for Persisted {
    fn default() -> Self {
        Self::new(None, Limits::default())
    }
}

impl Persisted {
    pub fn new(trusted: Option<TrustedDocuments>, limits: Limits) -> Self {
        Self {
            apq: Arc::new(Mutex::new(ApqCache::new(limits.apq_cache_bytes))),
            trusted,
            limits,
        }
    }

    /// The request `raw` (a GraphQL request as JSON: `query`, `variables`,
    /// `operationName`, `extensions`, and perhaps `documentId` / `doc_id`)
    /// asks to run, or why there is none.
    pub fn request(&self, raw: Value) -> Result<async_graphql::Request, Refused> {
        let Value::Object(mut raw) = raw else {
            return Err(Refused::new(
                "BAD_REQUEST",
                "a GraphQL request is a JSON object with a `query` string",
            ));
        };
        let (query, trusted, registration) = self.document(&mut raw)?;
        raw.insert("query".into(), Value::String(query.to_string()));
        let mut request: async_graphql::Request = serde_json::from_value(Value::Object(raw))
            .map_err(|err| {
                Refused::new("BAD_REQUEST", format!("the request is malformed: {err}"))
            })?;
        if let Some(registration) = registration {
            request = request.data(registration);
        }
        if trusted {
            request = request.data(TrustedDocument);
        } else {
            if let Some(manifest) = &self.trusted {
                let name = request.operation_name.as_deref().unwrap_or("(unnamed)");
                match manifest.mode {
                    TrustMode::Enforce => {
                        return Err(Refused::new(
                            "TRUSTED_DOCUMENT_REQUIRED",
                            "this server runs only its trusted documents: send `documentId` (or `doc_id`) from its manifest",
                        ))
                    }
                    TrustMode::Log => tracing::warn!(
                        operation = name,
                        sha256 = %sha256_hex(&request.query),
                        "an operation outside the trusted documents ran"
                    ),
                }
            }
        }
        Ok(request)
    }

    /// The request's document, whether the manifest holds it, and the APQ
    /// registration to make if the request proves worth it.
    fn document(&self, raw: &mut Map<String, Value>) -> Result<Document, Refused> {
        let named = ["documentId", "doc_id"]
            .iter()
            .find_map(|field| raw.remove(*field).map(|id| (*field, id)));
        if let Some((field, id)) = named {
            let Value::String(id) = id else {
                return Err(Refused::new(
                    "BAD_REQUEST",
                    format!("`{field}` must be a string"),
                ));
            };
            return match self.trusted.as_ref().and_then(|m| m.get(&id)) {
                Some(document) => Ok((document, true, None)),
                None => Err(Refused::new(
                    "TRUSTED_DOCUMENT_NOT_FOUND",
                    if self.trusted.is_some() {
                        format!("no trusted document has the id {id:?}")
                    } else {
                        "this server has no trusted documents (--trusted-documents): send the `query`".to_owned()
                    },
                )),
            };
        }
        let query = match raw.get("query") {
            None | Some(Value::Null) => None,
            Some(Value::String(query)) if query.is_empty() => None,
            Some(Value::String(query)) => {
                if query.len() > self.limits.max_document_bytes
                    && !self
                        .trusted
                        .as_ref()
                        .is_some_and(|m| m.holds_text(&sha256_hex(query)))
                {
                    return Err(Refused::new(
                        "PAYLOAD_TOO_LARGE",
                        format!(
                            "the query is {} bytes long; this server takes documents of at most {} bytes (--max-document-bytes)",
                            query.len(),
                            self.limits.max_document_bytes
                        ),
                    ));
                }
                Some(Arc::<str>::from(query.as_str()))
            }
            Some(_) => return Err(Refused::new("BAD_REQUEST", "`query` must be a string")),
        };
        let Some(hash) = apq_hash(raw)? else {
            let query = query.ok_or_else(|| {
                Refused::new(
                    "BAD_REQUEST",
                    "the request has no `query` (nor `documentId` or a persisted query hash)",
                )
            })?;
            let trusted = self
                .trusted
                .as_ref()
                .is_some_and(|m| m.holds_text(&sha256_hex(&query)));
            return Ok((query, trusted, None));
        };
        match query {
            Some(query) => {
                if sha256_hex(&query) != hash {
                    return Err(Refused::new(
                        "PERSISTED_QUERY_HASH_MISMATCH",
                        "the persisted query's sha256Hash is not the sha256 of its query",
                    ));
                }
                let trusted = self.trusted.as_ref().is_some_and(|m| m.holds_text(&hash));
                let registration = (trusted
                    || self
                        .trusted
                        .as_ref()
                        .is_none_or(|m| m.mode == TrustMode::Log))
                .then(|| Registration {
                    cache: self.apq.clone(),
                    hash,
                    query: query.clone(),
                });
                Ok((query, trusted, registration))
            }
            None => {
                if let Some(document) = self.trusted.as_ref().and_then(|m| m.get(&hash)) {
                    return Ok((document, true, None));
                }
                let cached = self
                    .apq
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .get(&hash);
                match cached {
                    Some(query) => {
                        let trusted = self.trusted.as_ref().is_some_and(|m| m.holds_text(&hash));
                        Ok((query, trusted, None))
                    }
                    // Apollo's clients look for this message, or this code.
                    None => Err(Refused::new(
                        "PERSISTED_QUERY_NOT_FOUND",
                        "PersistedQueryNotFound",
                    )),
                }
            }
        }
    }
}

/// The APQ hash of a request, if it carries one (lower-case hex).
fn apq_hash(raw: &Map<String, Value>) -> Result<Option<String>, Refused> {
    let Some(persisted) = raw.get("extensions").and_then(|e| e.get("persistedQuery")) else {
        return Ok(None);
    };
    if persisted.get("version").and_then(Value::as_i64) != Some(1) {
        return Err(Refused::new(
            "PERSISTED_QUERY_NOT_SUPPORTED",
            "persisted queries of version 1 only",
        ));
    }
    let hash = persisted
        .get("sha256Hash")
        .and_then(Value::as_str)
        .filter(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()))
        .ok_or_else(|| {
            Refused::new(
                "BAD_REQUEST",
                "`extensions.persistedQuery.sha256Hash` must be 64 hex digits",
            )
        })?;
    Ok(Some(hash.to_ascii_lowercase()))
}

/// The sha256 of `text`, as lower-case hex.
pub fn sha256_hex(text: &str) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, text.as_bytes());
    digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// A GET request's query string as the JSON a POST would carry:
/// `variables` and `extensions` are JSON-encoded in it.
pub fn from_query_string(query: &str) -> Result<Value, Refused> {
    let mut raw = Map::new();
    for (key, value) in form_urlencoded::parse(query.as_bytes()) {
        let (key, value) = (key.into_owned(), value.into_owned());
        let value = match key.as_str() {
            "variables" | "extensions" => serde_json::from_str(&value).map_err(|err| {
                Refused::new(
                    "BAD_REQUEST",
                    format!("`{key}` in the query string is not JSON: {err}"),
                )
            })?,
            _ => Value::String(value),
        };
        raw.insert(key, value);
    }
    Ok(Value::Object(raw))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const FEED: &str = "query Feed { feed { edges { cursor } } }";

    fn manifest(mode: TrustMode) -> TrustedDocuments {
        let text = json!({ "f1": FEED }).to_string();
        TrustedDocuments::parse(&text, mode).expect("manifest")
    }

    fn code(result: Result<async_graphql::Request, Refused>) -> &'static str {
        result.expect_err("refused").code
    }

    /// The registration a request would make, if it proved worth it.
    fn registration(persisted: &Persisted, raw: Value) -> Option<Registration> {
        let Value::Object(mut raw) = raw else {
            panic!("an object")
        };
        persisted.document(&mut raw).expect("a document").2
    }

    fn apq(query: &str) -> Value {
        json!({ "query": query, "extensions": { "persistedQuery": { "version": 1, "sha256Hash": sha256_hex(query) } } })
    }

    #[test]
    fn apq_registers_once_the_request_proves_worth_it_then_serves_by_hash() {
        let persisted = Persisted::default();
        let hash = sha256_hex(FEED);
        let by_hash =
            json!({ "extensions": { "persistedQuery": { "version": 1, "sha256Hash": hash } } });
        assert_eq!(
            code(persisted.request(by_hash.clone())),
            "PERSISTED_QUERY_NOT_FOUND"
        );
        // Sent with its text, the query runs, but is not kept yet.
        assert_eq!(persisted.request(apq(FEED)).expect("runs").query, FEED);
        assert_eq!(
            code(persisted.request(by_hash.clone())),
            "PERSISTED_QUERY_NOT_FOUND"
        );
        registration(&persisted, apq(FEED))
            .expect("a registration")
            .keep();
        assert_eq!(persisted.request(by_hash).expect("by hash").query, FEED);
    }

    #[test]
    fn the_apq_cache_is_bounded_in_bytes() {
        let limits = Limits {
            apq_cache_bytes: 64 * 1024,
            ..Limits::default()
        };
        let persisted = Persisted::new(None, limits);
        let queries: Vec<String> = (0..40)
            .map(|i| format!("{{ a{i}: __typename {} }}", "__typename ".repeat(400)))
            .collect();
        for query in &queries {
            registration(&persisted, apq(query)).expect("kept").keep();
        }
        let cache = persisted.apq.lock().unwrap();
        assert!(cache.bytes <= limits.apq_cache_bytes, "{}", cache.bytes);
        let kept: usize = cache.entries.iter().map(|(h, q)| h.len() + q.len()).sum();
        assert_eq!(kept, cache.bytes);
        // The newest stay, the oldest went.
        assert!(cache.get(&sha256_hex(&queries[39])).is_some());
        assert!(cache.get(&sha256_hex(&queries[0])).is_none());
        assert!(cache.entries.len() < queries.len());
    }

    #[test]
    fn a_document_longer_than_the_limit_is_refused() {
        let persisted = Persisted::new(
            None,
            Limits {
                max_document_bytes: 1024,
                ..Limits::default()
            },
        );
        let long = format!("{{ {} }}", "__typename ".repeat(200));
        let refused = persisted
            .request(json!({ "query": long }))
            .expect_err("too long");
        assert_eq!(refused.code, "PAYLOAD_TOO_LARGE");
        assert!(
            refused.message.contains("--max-document-bytes"),
            "{}",
            refused.message
        );
        assert!(persisted.request(json!({ "query": FEED })).is_ok());
        // A trusted document is the server's own, whatever its length.
        let manifest =
            TrustedDocuments::parse(&json!({ "big": long }).to_string(), TrustMode::Enforce)
                .expect("manifest");
        let persisted = Persisted::new(Some(manifest), persisted.limits);
        assert!(persisted.request(json!({ "documentId": "big" })).is_ok());
        assert!(persisted.request(json!({ "query": long })).is_ok());
    }

    #[test]
    fn apq_refuses_a_hash_of_other_text() {
        let persisted = Persisted::default();
        let wrong = json!({ "query": FEED, "extensions": { "persistedQuery": { "version": 1, "sha256Hash": "0".repeat(64) } } });
        assert_eq!(
            code(persisted.request(wrong)),
            "PERSISTED_QUERY_HASH_MISMATCH"
        );
    }

    #[test]
    fn enforce_runs_manifest_documents_only() {
        let persisted = Persisted::new(Some(manifest(TrustMode::Enforce)), Limits::default());
        for by_id in [
            json!({ "documentId": "f1" }),
            json!({ "doc_id": "f1" }),
            json!({ "documentId": "sha256:f1" }),
        ] {
            assert_eq!(persisted.request(by_id).expect("trusted").query, FEED);
        }
        // The same text, sent whole, is the same document.
        assert_eq!(
            persisted
                .request(json!({ "query": FEED }))
                .expect("text")
                .query,
            FEED
        );
        assert_eq!(
            code(persisted.request(json!({ "query": "{ viewer { id } }" }))),
            "TRUSTED_DOCUMENT_REQUIRED"
        );
        assert_eq!(
            code(persisted.request(json!({ "documentId": "nope" }))),
            "TRUSTED_DOCUMENT_NOT_FOUND"
        );
        // APQ cannot register what the manifest lacks.
        let other = "{ viewer { id } }";
        let register = json!({ "query": other, "extensions": { "persistedQuery": { "version": 1, "sha256Hash": sha256_hex(other) } } });
        assert_eq!(
            code(persisted.request(register)),
            "TRUSTED_DOCUMENT_REQUIRED"
        );
        let by_hash = json!({ "extensions": { "persistedQuery": { "version": 1, "sha256Hash": sha256_hex(other) } } });
        assert_eq!(
            code(persisted.request(by_hash)),
            "PERSISTED_QUERY_NOT_FOUND"
        );
    }

    #[test]
    fn log_mode_runs_anything() {
        let persisted = Persisted::new(Some(manifest(TrustMode::Log)), Limits::default());
        let request = persisted.request(json!({ "query": "{ viewer { id } }" }));
        assert_eq!(request.expect("runs").query, "{ viewer { id } }");
    }

    #[test]
    fn apollo_manifests_are_read() {
        let text = json!({
            "format": "apollo-persisted-query-manifest", "version": 1,
            "operations": [{ "id": "abc", "name": "Feed", "type": "query", "body": FEED }]
        });
        let persisted = Persisted::new(
            Some(TrustedDocuments::parse(&text.to_string(), TrustMode::Enforce).expect("manifest")),
            Limits::default(),
        );
        assert_eq!(
            persisted
                .request(json!({ "documentId": "abc" }))
                .expect("by id")
                .query,
            FEED
        );
        assert!(TrustedDocuments::parse("[]", TrustMode::Log).is_err());
        assert!(TrustedDocuments::parse("{\"a\": 1}", TrustMode::Log).is_err());
    }

    #[test]
    fn query_strings_become_requests() {
        let raw = from_query_string("query=%7B%20viewer%20%7B%20id%20%7D%20%7D&variables=%7B%22a%22%3A1%7D&operationName=X+Y")
            .expect("parsed");
        assert_eq!(
            raw,
            json!({ "query": "{ viewer { id } }", "variables": { "a": 1 }, "operationName": "X Y" })
        );
        assert_eq!(
            from_query_string("variables=%7B").expect_err("bad").code,
            "BAD_REQUEST"
        );
    }
}

//! Identity: who is asking, and in which roles.
//!
//! In production a request carries a JWT (`Authorization: Bearer …` on HTTP, the
//! same in the websocket `connection_init` payload, or `{"token": …}` there),
//! signed with a shared HS256 secret or an RS256 / ES256 key whose public half
//! Riverfeed holds. Claims: `sub` (the user), `tenant`, `roles`, `exp` (checked
//! with a small leeway), and `iss` / `aud` when configured.
//!
//! With no key configured Riverfeed runs in dev mode: identity comes from the
//! `x-riverfeed-tenant`, `x-riverfeed-user` and `x-riverfeed-roles` headers (or
//! the same keys in `connection_init`), and the server listens on loopback only.

use std::collections::BTreeSet;
use std::fmt;

use axum::http::HeaderMap;
use jsonwebtoken::errors::ErrorKind as JwtErrorKind;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};

use crate::model::limits::normalize_id;

/// Header (and `connection_init` key) naming the tenant in dev mode.
pub const TENANT_HEADER: &str = "x-riverfeed-tenant";
/// Header (and `connection_init` key) naming the user in dev mode.
pub const USER_HEADER: &str = "x-riverfeed-user";
/// Header (and `connection_init` key) listing roles in dev mode (`user` if absent).
pub const ROLES_HEADER: &str = "x-riverfeed-roles";

/// Seconds of clock skew tolerated on `exp`.
pub const LEEWAY_SECS: u64 = 30;

/// What a caller may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Role {
    /// Acts as itself.
    User,
    /// An application's backend: acts for any user of its tenant.
    Service,
    /// Support tooling: what `service` may, and reads any feed of its tenant.
    Admin,
}

impl Role {
    pub fn parse(name: &str) -> Option<Role> {
        match name.trim() {
            "user" => Some(Role::User),
            "service" => Some(Role::Service),
            "admin" => Some(Role::Admin),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Service => "service",
            Role::Admin => "admin",
        }
    }
}

/// The caller a request runs for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Viewer {
    pub tenant: String,
    pub user: String,
    pub roles: BTreeSet<Role>,
    /// When the token expires (seconds since the epoch); a websocket that
    /// outlives it stops being served.
    pub expires_at: Option<u64>,
}

impl Viewer {
    pub fn has(&self, role: Role) -> bool {
        self.roles.contains(&role)
    }

    /// `service` or `admin`: may act for other users of the tenant.
    pub fn acts_for_others(&self) -> bool {
        self.has(Role::Service) || self.has(Role::Admin)
    }

    /// Holds any role at all (a token whose roles are all unknown holds none).
    pub fn has_any_role(&self) -> bool {
        !self.roles.is_empty()
    }

    /// The token expired (beyond the leeway) since it was checked.
    pub fn expired(&self) -> bool {
        let now = chrono::Utc::now().timestamp().max(0) as u64;
        self.expires_at
            .is_some_and(|exp| exp.saturating_add(LEEWAY_SECS) < now)
    }
}

/// Who a request says it comes from.
#[derive(Clone, Debug)]
pub enum Identity {
    /// Nothing presented.
    Anonymous,
    /// Something presented and refused, with the reason.
    Invalid(String),
    Viewer(Viewer),
}

/// The claims of a Riverfeed token.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Claims {
    /// The user.
    pub sub: String,
    pub tenant: String,
    /// `user`, `service`, `admin`; `["user"]` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub roles: Option<Vec<String>>,
    /// Expiry, seconds since the epoch.
    pub exp: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iat: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iss: Option<String>,
    /// One audience or several, as issuers write it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aud: Option<Audience>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nbf: Option<u64>,
}

/// The `aud` claim: a string or a list of strings.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Audience {
    One(String),
    Many(Vec<String>),
}

impl From<&str> for Audience {
    fn from(audience: &str) -> Self {
        Audience::One(audience.to_owned())
    }
}

impl From<String> for Audience {
    fn from(audience: String) -> Self {
        Audience::One(audience)
    }
}

/// Turns a tenant, a user and role names into a viewer, checking the ids.
/// No role names means `user`; unknown names are ignored.
fn viewer(tenant: &str, user: &str, roles: Option<&[String]>) -> Result<Viewer, String> {
    let tenant = normalize_id("tenant", tenant).map_err(|e| e.0)?;
    let user = normalize_id("user", user).map_err(|e| e.0)?;
    let roles = match roles {
        None => BTreeSet::from([Role::User]),
        Some(names) => names.iter().filter_map(|n| Role::parse(n)).collect(),
    };
    Ok(Viewer {
        tenant,
        user,
        roles,
        expires_at: None,
    })
}

/// Checks tokens.
pub struct JwtVerifier {
    key: DecodingKey,
    validation: Validation,
    algorithm: Algorithm,
}

impl fmt::Debug for JwtVerifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JwtVerifier")
            .field("algorithm", &self.algorithm)
            .finish_non_exhaustive()
    }
}

fn validation(algorithm: Algorithm, issuer: Option<&str>, audience: Option<&str>) -> Validation {
    // Exactly one algorithm: a token signed any other way (`none`, or HS256
    // with the public key as its secret) is refused.
    let mut validation = Validation::new(algorithm);
    validation.leeway = LEEWAY_SECS;
    validation.validate_nbf = true;
    // A configured issuer or audience must be present, not merely right when
    // present: the library checks them only if the token carries them.
    let mut required = vec!["exp", "sub"];
    if let Some(issuer) = issuer {
        validation.set_issuer(&[issuer]);
        required.push("iss");
    }
    match audience {
        Some(audience) => {
            validation.set_audience(&[audience]);
            required.push("aud");
        }
        None => validation.validate_aud = false,
    }
    validation.set_required_spec_claims(&required);
    validation
}

impl JwtVerifier {
    /// HS256 with a shared secret.
    pub fn hs256(secret: &[u8], issuer: Option<&str>, audience: Option<&str>) -> Self {
        Self {
            key: DecodingKey::from_secret(secret),
            validation: validation(Algorithm::HS256, issuer, audience),
            algorithm: Algorithm::HS256,
        }
    }

    /// RS256 or ES256, from a PEM public key (RSA or P-256).
    pub fn from_public_key_pem(
        pem: &[u8],
        issuer: Option<&str>,
        audience: Option<&str>,
    ) -> Result<Self, String> {
        let (key, algorithm) = if let Ok(key) = DecodingKey::from_rsa_pem(pem) {
            (key, Algorithm::RS256)
        } else if let Ok(key) = DecodingKey::from_ec_pem(pem) {
            (key, Algorithm::ES256)
        } else {
            return Err("the public key is neither an RSA nor an EC (P-256) PEM key".into());
        };
        Ok(Self {
            key,
            validation: validation(algorithm, issuer, audience),
            algorithm,
        })
    }

    pub fn algorithm(&self) -> Algorithm {
        self.algorithm
    }

    /// The viewer a token names, or why it is refused.
    pub fn verify(&self, token: &str) -> Result<Viewer, String> {
        let data =
            jsonwebtoken::decode::<Claims>(token, &self.key, &self.validation).map_err(|err| {
                match err.kind() {
                    JwtErrorKind::ExpiredSignature => "the token has expired",
                    JwtErrorKind::InvalidSignature => "the token's signature does not verify",
                    JwtErrorKind::InvalidAlgorithm | JwtErrorKind::MissingAlgorithm => {
                        "the token is signed with an algorithm this server does not accept"
                    }
                    JwtErrorKind::InvalidAudience => "the token is for another audience",
                    JwtErrorKind::InvalidIssuer => "the token is from another issuer",
                    JwtErrorKind::MissingRequiredClaim(_) => "the token lacks a required claim",
                    JwtErrorKind::ImmatureSignature => "the token is not valid yet",
                    _ => "the token is malformed",
                }
                .to_owned()
            })?;
        let claims = data.claims;
        let mut viewer = viewer(&claims.tenant, &claims.sub, claims.roles.as_deref())
            .map_err(|e| format!("the token's claims are invalid: {e}"))?;
        viewer.expires_at = Some(claims.exp);
        Ok(viewer)
    }
}

/// How requests prove who they are.
#[derive(Debug)]
pub enum Authenticator {
    /// Identity from headers; loopback only.
    Dev,
    Jwt(Box<JwtVerifier>),
}

/// The token of an `Authorization: Bearer <token>` value (any case of the
/// scheme).
pub(crate) fn bearer(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim().split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

impl Authenticator {
    pub fn is_dev(&self) -> bool {
        matches!(self, Authenticator::Dev)
    }

    /// The identity of an HTTP request.
    pub fn from_headers(&self, headers: &HeaderMap) -> Identity {
        let value = |name: &str| headers.get(name).map(|v| v.to_str().map_err(|_| ()));
        match self {
            Authenticator::Jwt(verifier) => match value("authorization") {
                None => Identity::Anonymous,
                Some(Err(())) => Identity::Invalid("the Authorization header is not ASCII".into()),
                Some(Ok(header)) => match bearer(header) {
                    None => Identity::Invalid("send `Authorization: Bearer <token>`".into()),
                    Some(token) => verified(verifier, token),
                },
            },
            Authenticator::Dev => {
                let (tenant, user, roles) = (
                    value(TENANT_HEADER),
                    value(USER_HEADER),
                    value(ROLES_HEADER),
                );
                if [&tenant, &user, &roles]
                    .iter()
                    .any(|v| matches!(v, Some(Err(()))))
                {
                    return Identity::Invalid("identity headers must be visible ASCII".into());
                }
                dev(
                    tenant.and_then(Result::ok),
                    user.and_then(Result::ok),
                    roles.and_then(Result::ok),
                )
            }
        }
    }

    /// The identity of a websocket connection, from its `connection_init` payload.
    pub fn from_payload(&self, payload: &serde_json::Value) -> Identity {
        let field = |name: &str| payload.get(name);
        let text = |name: &str| -> Result<Option<&str>, String> {
            match field(name) {
                None | Some(serde_json::Value::Null) => Ok(None),
                Some(serde_json::Value::String(s)) => Ok(Some(s)),
                Some(_) => Err(format!("`{name}` in connection_init must be a string")),
            }
        };
        match self {
            Authenticator::Jwt(verifier) => {
                let token = match (text("Authorization"), text("authorization"), text("token")) {
                    (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => return Identity::Invalid(e),
                    (Ok(Some(header)), _, _) | (_, Ok(Some(header)), _) => match bearer(header) {
                        Some(token) => token,
                        None => {
                            return Identity::Invalid(
                                "send {\"Authorization\": \"Bearer <token>\"} or {\"token\": \"<token>\"}"
                                    .into(),
                            )
                        }
                    },
                    (_, _, Ok(Some(token))) => token,
                    _ => return Identity::Anonymous,
                };
                verified(verifier, token)
            }
            Authenticator::Dev => {
                match (text(TENANT_HEADER), text(USER_HEADER), text(ROLES_HEADER)) {
                    (Ok(tenant), Ok(user), Ok(roles)) => dev(tenant, user, roles),
                    (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => Identity::Invalid(e),
                }
            }
        }
    }
}

fn verified(verifier: &JwtVerifier, token: &str) -> Identity {
    match verifier.verify(token) {
        Ok(viewer) => Identity::Viewer(viewer),
        Err(reason) => Identity::Invalid(reason),
    }
}

/// Dev-mode identity from a tenant, a user and comma-separated roles.
fn dev(tenant: Option<&str>, user: Option<&str>, roles: Option<&str>) -> Identity {
    match (tenant, user) {
        (None, None) => Identity::Anonymous,
        (Some(tenant), Some(user)) => {
            let roles: Option<Vec<String>> =
                roles.map(|r| r.split(',').map(|s| s.trim().to_owned()).collect());
            match viewer(tenant, user, roles.as_deref()) {
                Ok(viewer) => Identity::Viewer(viewer),
                Err(reason) => Identity::Invalid(reason),
            }
        }
        _ => Identity::Invalid(format!(
            "send both {TENANT_HEADER} and {USER_HEADER}, not just one"
        )),
    }
}

/// Signs an HS256 token (for `riverfeed token` and tests).
pub fn mint_hs256(claims: &Claims, secret: &[u8]) -> Result<String, String> {
    jsonwebtoken::encode(
        &Header::new(Algorithm::HS256),
        claims,
        &EncodingKey::from_secret(secret),
    )
    .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claims(roles: Option<Vec<&str>>, exp: u64) -> Claims {
        Claims {
            sub: "alice".into(),
            tenant: "acme".into(),
            roles: roles.map(|r| r.into_iter().map(String::from).collect()),
            exp,
            iat: None,
            iss: None,
            aud: None,
            nbf: None,
        }
    }

    fn now() -> u64 {
        chrono::Utc::now().timestamp() as u64
    }

    #[test]
    fn tokens_round_trip_and_roles_default_to_user() {
        let verifier = JwtVerifier::hs256(b"secret", None, None);
        let token = mint_hs256(&claims(None, now() + 60), b"secret").unwrap();
        let viewer = verifier.verify(&token).unwrap();
        assert_eq!(viewer.user, "alice");
        assert_eq!(viewer.roles, BTreeSet::from([Role::User]));
        let token = mint_hs256(
            &claims(Some(vec!["service", "bogus"]), now() + 60),
            b"secret",
        )
        .unwrap();
        assert_eq!(
            verifier.verify(&token).unwrap().roles,
            BTreeSet::from([Role::Service])
        );
    }

    #[test]
    fn expiry_has_a_small_leeway() {
        let verifier = JwtVerifier::hs256(b"secret", None, None);
        let within = mint_hs256(&claims(None, now() - LEEWAY_SECS / 2), b"secret").unwrap();
        assert!(verifier.verify(&within).is_ok());
        let expired = mint_hs256(&claims(None, now() - LEEWAY_SECS * 4), b"secret").unwrap();
        assert_eq!(
            verifier.verify(&expired).unwrap_err(),
            "the token has expired"
        );
    }

    #[test]
    fn issuer_and_audience_are_checked_when_configured() {
        let verifier = JwtVerifier::hs256(b"secret", Some("https://auth.example"), Some("feeds"));
        let mut good = claims(None, now() + 60);
        good.iss = Some("https://auth.example".into());
        good.aud = Some("feeds".into());
        assert!(verifier
            .verify(&mint_hs256(&good, b"secret").unwrap())
            .is_ok());
        let mut other_issuer = good.clone();
        other_issuer.iss = Some("https://evil.example".into());
        assert_eq!(
            verifier
                .verify(&mint_hs256(&other_issuer, b"secret").unwrap())
                .unwrap_err(),
            "the token is from another issuer"
        );
        let mut no_audience = good.clone();
        no_audience.aud = None;
        assert!(verifier
            .verify(&mint_hs256(&no_audience, b"secret").unwrap())
            .is_err());
        let mut no_issuer = good.clone();
        no_issuer.iss = None;
        assert!(verifier
            .verify(&mint_hs256(&no_issuer, b"secret").unwrap())
            .is_err());
    }

    #[test]
    fn not_before_and_audience_lists() {
        let verifier = JwtVerifier::hs256(b"secret", None, Some("feeds"));
        let mut later = claims(None, now() + 600);
        later.aud = Some("feeds".into());
        later.nbf = Some(now() + 300);
        assert_eq!(
            verifier
                .verify(&mint_hs256(&later, b"secret").unwrap())
                .unwrap_err(),
            "the token is not valid yet"
        );
        let mut listed = claims(None, now() + 600);
        listed.aud = Some(Audience::Many(vec!["other".into(), "feeds".into()]));
        assert!(verifier
            .verify(&mint_hs256(&listed, b"secret").unwrap())
            .is_ok());
    }

    #[test]
    fn bearer_parsing() {
        assert_eq!(bearer("Bearer abc"), Some("abc"));
        assert_eq!(bearer("bearer  abc "), Some("abc"));
        assert_eq!(bearer("Basic abc"), None);
        assert_eq!(bearer("abc"), None);
    }
}

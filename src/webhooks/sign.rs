//! Standard Webhooks signatures: `webhook-id`, `webhook-timestamp` and
//! `webhook-signature` (`v1,` and the base64 HMAC-SHA256 of
//! `{id}.{timestamp}.{body}` under the endpoint's secret).

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use ring::hmac;
use ring::rand::{SecureRandom, SystemRandom};

/// The prefix of a secret in its text form.
const PREFIX: &str = "whsec_";

/// Bytes in a secret Riverfeed draws (the specification asks for 24 to 64).
const DRAWN_BYTES: usize = 32;

/// An endpoint's signing secret.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(Vec<u8>);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(…)")
    }
}

impl Secret {
    /// A fresh random secret.
    pub fn draw() -> Secret {
        let mut bytes = vec![0u8; DRAWN_BYTES];
        SystemRandom::new()
            .fill(&mut bytes)
            .expect("the system's random source works");
        Secret(bytes)
    }

    /// The secret `drawn` gives for [`DRAWN_BYTES`] (a request's key's
    /// seed, which its retries draw again), or a fresh random one.
    pub fn draw_from(drawn: impl FnOnce(usize) -> Option<Vec<u8>>) -> Secret {
        drawn(DRAWN_BYTES).map_or_else(Secret::draw, Secret)
    }

    /// Reads `whsec_<base64>`, as [`Secret::to_text`] writes it: 24 to 64
    /// bytes once decoded.
    pub fn parse(text: &str) -> Result<Secret, String> {
        let encoded = text.strip_prefix(PREFIX).ok_or_else(|| {
            format!(
                "a webhook secret starts with {PREFIX} (then base64), e.g. one `riverfeed` drew"
            )
        })?;
        let bytes = STANDARD
            .decode(encoded)
            .map_err(|_| format!("a webhook secret is {PREFIX} then base64"))?;
        if !(24..=64).contains(&bytes.len()) {
            return Err(format!(
                "a webhook secret holds 24 to 64 bytes; this one holds {}",
                bytes.len()
            ));
        }
        Ok(Secret(bytes))
    }

    pub fn to_text(&self) -> String {
        format!("{PREFIX}{}", STANDARD.encode(&self.0))
    }

    /// The `webhook-signature` value of one delivery.
    pub fn sign(&self, id: &str, timestamp: i64, body: &[u8]) -> String {
        let key = hmac::Key::new(hmac::HMAC_SHA256, &self.0);
        let mut context = hmac::Context::with_key(&key);
        context.update(id.as_bytes());
        context.update(b".");
        context.update(timestamp.to_string().as_bytes());
        context.update(b".");
        context.update(body);
        format!("v1,{}", STANDARD.encode(context.sign().as_ref()))
    }

    /// Whether `signatures` (a `webhook-signature` header: space-separated
    /// `v1,…` values, one per secret while a secret rotates) holds this
    /// secret's signature of the delivery. Compared in constant time.
    pub fn verify(&self, id: &str, timestamp: i64, body: &[u8], signatures: &str) -> bool {
        let key = hmac::Key::new(hmac::HMAC_SHA256, &self.0);
        let mut message = Vec::with_capacity(id.len() + body.len() + 24);
        message.extend_from_slice(format!("{id}.{timestamp}.").as_bytes());
        message.extend_from_slice(body);
        signatures.split(' ').any(|candidate| {
            candidate
                .strip_prefix("v1,")
                .and_then(|b64| STANDARD.decode(b64).ok())
                .is_some_and(|tag| hmac::verify(&key, &message, &tag).is_ok())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example of the Standard Webhooks specification.
    #[test]
    fn signs_as_the_specification_example() {
        let secret = Secret::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let body = br#"{"test": 2432232314}"#;
        let signature = secret.sign("msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body);
        assert_eq!(signature, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
        let header = format!("v1,bm90IHRoaXMgb25l {signature}");
        assert!(secret.verify("msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body, &header));
        assert!(!secret.verify("msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265331, body, &header));
        assert!(!secret.verify("msg_other", 1614265330, body, &signature));
    }

    #[test]
    fn secrets_round_trip_and_bad_ones_are_refused() {
        let drawn = Secret::draw();
        assert_eq!(Secret::parse(&drawn.to_text()).unwrap(), drawn);
        assert_ne!(Secret::draw(), drawn);
        for bad in [
            "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
            "whsec_!!",
            "whsec_c2hvcnQ=",
        ] {
            assert!(Secret::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(format!("{drawn:?}"), "Secret(…)", "never logged");
    }
}

//! Request signatures as RocketMQ's ACL clients compute them (the Java `AclClientRPCHook`):
//! Base64(HMAC-SHA1(secretKey, values of all ext fields but `Signature`, in key order, then
//! the body)).

use base64::Engine;
use hmac::{Hmac, Mac};
use sha1::Sha1;

use crate::command::{ExtFields, RemotingCommand};

pub const ACCESS_KEY: &str = "AccessKey";
pub const SIGNATURE: &str = "Signature";

fn mac(ext: Option<&ExtFields>, body: Option<&[u8]>, secret_key: &str) -> Hmac<Sha1> {
    let mut mac =
        Hmac::<Sha1>::new_from_slice(secret_key.as_bytes()).expect("HMAC accepts any key length");
    for (key, value) in ext.into_iter().flatten() {
        if key != SIGNATURE {
            mac.update(value.as_bytes());
        }
    }
    if let Some(body) = body {
        mac.update(body);
    }
    mac
}

/// The signature of a request's ext fields and body under `secret_key`.
pub fn signature(ext: Option<&ExtFields>, body: Option<&[u8]>, secret_key: &str) -> String {
    base64::engine::general_purpose::STANDARD
        .encode(mac(ext, body, secret_key).finalize().into_bytes())
}

/// Whether `claimed` is the signature of the request under `secret_key` (constant time).
pub fn verify(
    ext: Option<&ExtFields>,
    body: Option<&[u8]>,
    secret_key: &str,
    claimed: &str,
) -> bool {
    let Ok(claimed) = base64::engine::general_purpose::STANDARD.decode(claimed) else {
        return false;
    };
    mac(ext, body, secret_key).verify_slice(&claimed).is_ok()
}

/// Signs `request` as the Java client hook does: adds `AccessKey`, then `Signature`.
pub fn sign(request: RemotingCommand, access_key: &str, secret_key: &str) -> RemotingCommand {
    let request = request.with_ext(ACCESS_KEY, access_key);
    let sig = signature(
        request.ext_fields.as_ref(),
        request.body.as_deref(),
        secret_key,
    );
    request.with_ext(SIGNATURE, sig)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::headers::{PutKvConfigHeader, RequestHeader};

    #[test]
    fn signs_values_in_key_order_then_body() {
        let signed = sign(
            PutKvConfigHeader {
                namespace: "ns",
                key: "k",
                value: None,
            }
            .to_command()
            .with_body(b"body".to_vec()),
            "ak",
            "sk",
        );
        // Key order: AccessKey, key, namespace → "ak" + "k" + "ns", then the body.
        let mut expected = Hmac::<Sha1>::new_from_slice(b"sk").unwrap();
        expected.update(b"akknsbody");
        let expected =
            base64::engine::general_purpose::STANDARD.encode(expected.finalize().into_bytes());
        assert_eq!(signed.ext(SIGNATURE), Some(expected.as_str()));
        assert!(verify(
            signed.ext_fields.as_ref(),
            signed.body.as_deref(),
            "sk",
            &expected
        ));
        assert!(!verify(
            signed.ext_fields.as_ref(),
            Some(b"other"),
            "sk",
            &expected
        ));
        assert!(!verify(
            signed.ext_fields.as_ref(),
            signed.body.as_deref(),
            "wrong",
            &expected
        ));
    }
}

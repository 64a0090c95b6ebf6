//! AWS Signature Version 4, checked the way AWS checks it, written out by
//! hand (not with the SDK's signer, so a signer bug cannot hide behind
//! itself): the canonical request (method, the path URI-encoded a second
//! time as every service but S3 wants, sorted query, the signed headers,
//! the body's SHA-256), the string to sign, the HMAC chain from the secret.

use ring::{digest, hmac};

/// What was wrong with a request's signature, as AWS names it.
#[derive(Debug, PartialEq, Eq)]
pub struct Refusal {
    pub code: &'static str,
    pub message: String,
}

fn refuse(code: &'static str, message: impl Into<String>) -> Refusal {
    Refusal {
        code,
        message: message.into(),
    }
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn hmac(key: &[u8], data: &str) -> Vec<u8> {
    hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, key), data.as_bytes())
        .as_ref()
        .to_vec()
}

/// RFC 3986 encoding of everything but the unreserved characters (and `/` when `keep_slash`).
fn uri_encode(text: &str, keep_slash: bool) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            b'/' if keep_slash => "/".into(),
            other => format!("%{other:02X}"),
        })
        .collect()
}

pub struct Request<'a> {
    pub method: &'a str,
    /// The path as it came on the wire (still percent-encoded).
    pub raw_path: &'a str,
    pub raw_query: &'a str,
    /// Lower-case names.
    pub headers: Vec<(String, String)>,
    pub body: &'a [u8],
}

impl Request<'_> {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Checks the `Authorization: AWS4-HMAC-SHA256 …` header against the secret of `access_key`.
pub fn verify(request: &Request, access_key: &str, secret: &str, service: &str) -> Result<(), Refusal> {
    let authorization = request.header("authorization").ok_or_else(|| {
        refuse(
            "MissingAuthenticationTokenException",
            "Missing Authentication Token",
        )
    })?;
    let Some(fields) = authorization.strip_prefix("AWS4-HMAC-SHA256 ") else {
        return Err(refuse(
            "IncompleteSignatureException",
            format!("Authorization header requires the AWS4-HMAC-SHA256 scheme: {authorization}"),
        ));
    };
    let field = |name: &str| {
        fields
            .split(',')
            .map(str::trim)
            .find_map(|f| f.strip_prefix(name)?.strip_prefix('='))
    };
    let (Some(credential), Some(signed_headers), Some(signature)) =
        (field("Credential"), field("SignedHeaders"), field("Signature"))
    else {
        return Err(refuse(
            "IncompleteSignatureException",
            "Authorization header requires 'Credential', 'SignedHeaders' and 'Signature'",
        ));
    };
    let scope: Vec<&str> = credential.split('/').collect();
    let [key_id, date, region, scope_service, "aws4_request"] = scope[..] else {
        return Err(refuse(
            "IncompleteSignatureException",
            format!("bad credential scope: {credential}"),
        ));
    };
    if key_id != access_key {
        return Err(refuse(
            "UnrecognizedClientException",
            "The security token included in the request is invalid.",
        ));
    }
    if scope_service != service {
        return Err(refuse(
            "InvalidSignatureException",
            format!("Credential should be scoped to correct service: '{service}'."),
        ));
    }
    let amz_date = request
        .header("x-amz-date")
        .ok_or_else(|| refuse("IncompleteSignatureException", "no X-Amz-Date header"))?;
    let mut query: Vec<&str> = request.raw_query.split('&').filter(|p| !p.is_empty()).collect();
    query.sort_unstable();
    let mut canonical_headers = String::new();
    for name in signed_headers.split(';') {
        let value = request.header(name).ok_or_else(|| {
            refuse(
                "IncompleteSignatureException",
                format!("signed header {name} is not in the request"),
            )
        })?;
        let value = value.split_whitespace().collect::<Vec<_>>().join(" ");
        canonical_headers.push_str(&format!("{name}:{value}\n"));
    }
    let canonical_request = format!(
        "{}\n{}\n{}\n{canonical_headers}\n{signed_headers}\n{}",
        request.method,
        uri_encode(request.raw_path, true),
        query.join("&"),
        hex(digest::digest(&digest::SHA256, request.body).as_ref()),
    );
    let string_to_sign = format!(
        "AWS4-HMAC-SHA256\n{amz_date}\n{date}/{region}/{service}/aws4_request\n{}",
        hex(digest::digest(&digest::SHA256, canonical_request.as_bytes()).as_ref())
    );
    let mut key = hmac(format!("AWS4{secret}").as_bytes(), date);
    for part in [region, service, "aws4_request"] {
        key = hmac(&key, part);
    }
    if hex(&hmac(&key, &string_to_sign)) != signature {
        return Err(refuse(
            "InvalidSignatureException",
            "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for details.",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// AWS's published example (the `get-vanilla` case of the SigV4 test suite).
    #[test]
    fn accepts_the_aws_test_suite_signature_and_refuses_a_changed_one() {
        let signed = |signature: &str| Request {
            method: "GET",
            raw_path: "/",
            raw_query: "",
            headers: vec![
                ("host".into(), "example.amazonaws.com".into()),
                ("x-amz-date".into(), "20150830T123600Z".into()),
                (
                    "authorization".into(),
                    format!(
                        "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, SignedHeaders=host;x-amz-date, Signature={signature}"
                    ),
                ),
            ],
            body: b"",
        };
        let good = "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31";
        let secret = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";
        assert_eq!(verify(&signed(good), "AKIDEXAMPLE", secret, "service"), Ok(()));
        let bad = verify(&signed(good), "AKIDEXAMPLE", "another-secret", "service").unwrap_err();
        assert_eq!(bad.code, "InvalidSignatureException");
        let unknown = verify(&signed(good), "AKIDOTHER", secret, "service").unwrap_err();
        assert_eq!(unknown.code, "UnrecognizedClientException");
        assert_eq!(
            uri_encode("/model/a%3A0/converse", true),
            "/model/a%253A0/converse"
        );
    }
}

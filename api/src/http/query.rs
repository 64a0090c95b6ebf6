//! Query strings, read one way everywhere: each parameter at most once. A
//! repeated parameter (`?agent=a&agent=b`) is a 400 naming it, whichever it
//! is, so no two readers of one request can take different values of it
//! (the scope check the first, the handler the last).

use std::collections::HashMap;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;

use super::error::ApiError;

/// The parameters of `query` by name, or a 400 naming the first one repeated.
pub fn parse(query: Option<&str>) -> Result<HashMap<String, String>, ApiError> {
    let mut params = HashMap::new();
    let Some(query) = query.filter(|q| !q.is_empty()) else {
        return Ok(params);
    };
    for (name, value) in url::form_urlencoded::parse(query.as_bytes()) {
        if params.contains_key(name.as_ref()) {
            return Err(repeated(&name));
        }
        params.insert(name.into_owned(), value.into_owned());
    }
    Ok(params)
}

/// Refuses a query that names a parameter twice (without keeping the values).
pub fn check_unique(query: Option<&str>) -> Result<(), ApiError> {
    let Some(query) = query.filter(|q| !q.is_empty()) else {
        return Ok(());
    };
    let mut seen: Vec<std::borrow::Cow<'_, str>> = Vec::new();
    for (name, _) in url::form_urlencoded::parse(query.as_bytes()) {
        if seen.contains(&name) {
            return Err(repeated(&name));
        }
        seen.push(name);
    }
    Ok(())
}

fn repeated(name: &str) -> ApiError {
    ApiError::BadRequest {
        message: format!("{name}: given more than once; give each query parameter once"),
        param: Some(name.to_string()),
        code: Some("duplicate_parameter"),
    }
}

/// The query parameters of a request, each named once (see the module docs).
pub struct Params(pub HashMap<String, String>);

impl<S: Send + Sync> FromRequestParts<S> for Params {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        parse(parts.uri.query()).map(Self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_parameter_once_or_a_400_naming_it() {
        let params = parse(Some("agent=ops&q=a%20b&limit=3")).unwrap();
        assert_eq!(params["agent"], "ops");
        assert_eq!(params["q"], "a b");
        assert!(parse(None).unwrap().is_empty());
        for query in ["agent=ops&agent=main", "limit=1&q=x&limit=2", "a&a"] {
            let err = parse(Some(query)).unwrap_err();
            let unique = check_unique(Some(query)).unwrap_err();
            for err in [err, unique] {
                let ApiError::BadRequest { param, code, .. } = err else {
                    panic!("{query}: {err:?}")
                };
                assert_eq!(code, Some("duplicate_parameter"));
                assert!(query.starts_with(param.as_deref().unwrap()), "{query}");
            }
        }
        // The same name spelled with an escape is the same parameter.
        assert!(parse(Some("agent=ops&%61gent=main")).is_err());
        assert!(check_unique(Some("agent=ops&%61gent=main")).is_err());
    }
}

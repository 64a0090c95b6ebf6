use std::collections::BTreeSet;

use serde_json::json;

use super::{document, openapi_path};

#[test]
fn the_document_names_exactly_the_routers_paths() {
    let routed: BTreeSet<String> = crate::http::routes()
        .into_iter()
        .map(|(path, _)| openapi_path(path))
        .collect();
    let doc = document();
    let documented: BTreeSet<String> = doc["paths"].as_object().expect("paths").keys().cloned().collect();
    let missing: Vec<&String> = routed.difference(&documented).collect();
    let extra: Vec<&String> = documented.difference(&routed).collect();
    assert!(
        missing.is_empty(),
        "routes missing from /openapi.json: {missing:?}"
    );
    assert!(
        extra.is_empty(),
        "/openapi.json names routes the router lacks: {extra:?}"
    );
    assert!(routed.len() > 80, "only {} routes", routed.len());
}

/// Every operation has a unique id, says who may call it, answers its
/// errors in a documented shape, and gives a schema for each answer it has
/// a body for. (Validity against the OpenAPI 3.1 meta-schema, and live
/// answers against the document, are `it::openapi`'s.)
#[test]
fn every_operation_is_complete() {
    let doc = document();
    let mut ids = BTreeSet::new();
    let mut schemas = 0;
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (verb, operation) in item.as_object().expect("a path item") {
            let id = operation["operationId"].as_str().expect("an operation id");
            assert!(ids.insert(id.to_string()), "operation id {id} twice");
            let access = operation["x-onyx-access"].as_str().expect("an access tier");
            let open = operation.get("security") == Some(&json!([]));
            assert_eq!(open, access == "open", "{verb} {path}: security vs {access}");
            assert!(
                operation["responses"]["default"].is_object(),
                "{verb} {path}: no error answer"
            );
            for (status, answer) in operation["responses"].as_object().expect("responses") {
                for (kind, media) in answer["content"].as_object().into_iter().flatten() {
                    let schema = &media["schema"];
                    assert!(
                        schema.is_object() || schema.is_boolean(),
                        "{verb} {path} {status} {kind}"
                    );
                    if let Some(target) = schema["$ref"].as_str() {
                        let name = target.strip_prefix("#/components/schemas/").expect("a component");
                        assert!(
                            doc["components"]["schemas"][name].is_object(),
                            "{target} is missing"
                        );
                    }
                    schemas += 1;
                }
            }
        }
    }
    assert!(ids.len() > 110, "only {} operations", ids.len());
    assert!(schemas > ids.len(), "only {schemas} answer schemas");
}

#[test]
fn error_shapes_follow_the_route_family() {
    let doc = document();
    let error_ref = |path: &str, verb: &str| {
        doc["paths"][path][verb]["responses"]["default"]["content"]["application/json"]["schema"]["$ref"]
            .clone()
    };
    assert_eq!(
        error_ref("/v1/messages", "post"),
        "#/components/schemas/AnthropicError"
    );
    assert_eq!(
        error_ref("/v1/chat/completions", "post"),
        "#/components/schemas/OpenAiError"
    );
    assert_eq!(error_ref("/v1/agents", "get"), "#/components/schemas/OpenAiError");
    let anthropic = &doc["components"]["schemas"]["AnthropicError"];
    assert_eq!(anthropic["properties"]["type"]["const"], "error");
    // The pass-through bodies say what Onyx reads and let the rest through.
    let chat = &doc["components"]["schemas"]["ChatRequest"];
    assert!(
        chat["required"]
            .as_array()
            .expect("required")
            .contains(&json!("model"))
    );
    assert_eq!(doc["paths"]["/v1/keys"]["get"]["x-onyx-access"], "admin");
    assert_eq!(doc["paths"]["/v1/usage"]["get"]["x-onyx-access"], "owner");
    assert_eq!(doc["paths"]["/v1/sessions"]["get"]["x-onyx-access"], "agent");
}

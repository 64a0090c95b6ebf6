"""Validates Onyx's OpenAPI document, and answers the gateway gave, against it.

Usage: validate.py SAMPLES.json, where the file holds
{"document": <GET /openapi.json>, "samples": [{"method", "path", "url", "status",
"content_type", "body"}, ...]}; `path` is the documented path (`/v1/agents/{agent}`),
`url` what was called. The document must be valid OpenAPI 3.1 (the official
meta-schema, vendored in api/tests/fixtures/openapi), each schema in it valid
JSON Schema 2020-12, and each answer must match the schema the document gives
for its route, status (or `default` for an error) and content type. Prints
one line per failure, the route and the first schema error, and exits 1 when
there is any. Run by the Rust test api/tests/it/openapi.rs.
"""

import json
import pathlib
import sys

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

META = pathlib.Path(__file__).resolve().parents[2] / "api/tests/fixtures/openapi/oas-3.1-schema.json"
BASE = "urn:onyx:openapi"


def escape(segment):
    return segment.replace("~", "~0").replace("/", "~1")


def at(error):
    return "/" + "/".join(str(part) for part in error.absolute_path)


def document_failures(doc):
    meta = json.loads(META.read_text())
    failures = [
        f"document: {error.message} at {at(error)}"
        for error in Draft202012Validator(meta).iter_errors(doc)
    ]
    for name, schema in doc.get("components", {}).get("schemas", {}).items():
        for error in Draft202012Validator(Draft202012Validator.META_SCHEMA).iter_errors(schema):
            failures.append(f"components/schemas/{name}: not JSON Schema 2020-12: {error.message}")
    return failures


def sample_failure(doc, registry, sample):
    method, path, status = sample["method"], sample["path"], sample["status"]
    route = f"{method.upper()} {sample['url']} -> {status}"
    operation = doc["paths"].get(path, {}).get(method)
    if operation is None:
        return f"{route}: the document has no {method} {path}"
    responses = operation["responses"]
    key = str(status) if str(status) in responses else "default"
    if key == "default" and status < 400:
        return f"{route}: status {status} is not documented"
    media = responses[key].get("content", {}).get(sample["content_type"])
    if media is None:
        return f"{route}: {sample['content_type']} is not documented for {key}"
    pointer = "/".join(
        ["#/paths", escape(path), method, "responses", key, "content", escape(sample["content_type"]), "schema"]
    )
    validator = Draft202012Validator({"$ref": BASE + pointer}, registry=registry)
    error = best_match(validator.iter_errors(sample["body"]))
    if error is not None:
        return f"{route}: {error.message} at {at(error)} (schema {'/'.join(str(p) for p in error.schema_path)})"
    return None


def main(path):
    data = json.loads(pathlib.Path(path).read_text())
    doc = data["document"]
    failures = document_failures(doc)
    registry = Registry().with_resource(BASE, Resource(contents=doc, specification=DRAFT202012))
    for sample in data["samples"]:
        failure = sample_failure(doc, registry, sample)
        if failure:
            failures.append(failure)
    for failure in failures:
        print(failure)
    print(f"{len(data['samples'])} answers checked, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))

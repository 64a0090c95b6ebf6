//! Property tests (fuzzing) of config parsing: arbitrary JSON5-ish text, and
//! the example config with values replaced by wrong types, huge numbers,
//! unicode, `${…}` references and deep nesting, keys removed and unknown keys
//! added. Parsing never panics, and every error names where it is: a line and
//! column for syntax, a key path for anything else.

use proptest::prelude::*;
use serde_json::{Map, Value};

use super::{ConfigError, parse};

const EXAMPLE: &str = include_str!("../../../config/onyx.example.json5");

fn env(fuzz: String) -> impl Fn(&str) -> Option<String> {
    move |name| match name {
        "HOME" => Some("/home/u".into()),
        "FUZZ" => Some(fuzz.clone()),
        _ => None,
    }
}

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        r#"[{}\[\]:,"' a-zA-Z0-9_$./*+\-\n]{0,200}"#,
        (1usize..400).prop_map(|n| format!("{}{}", "{a:".repeat(n), "}".repeat(n))),
        (1usize..400).prop_map(|n| format!("{{x:{}1{}}}", "[".repeat(n), "]".repeat(n))),
    ]
}

fn string() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        prop::sample::select(vec![
            "",
            "${FUZZ}",
            "${UNSET}",
            "${",
            "$${x}",
            "${FUZZ:-x}",
            "${:-}",
            "${A-B}",
            "0.0.0.0:0",
            "127.0.0.1:99999",
            "[::1]:80",
            "http://",
            "ftp://x",
            "http://[::1",
            "~/x",
            "~",
            "/",
            "openai",
            "openai/",
            "/gpt",
            "onyx:main",
            "Europe/Berlin",
            "Mars/Olympus",
            "-1",
            "1e400",
            "NaN",
            "$argon2id$v=19$m=1,t=1,p=1$AA$AA",
            "safe",
            "ask",
            "allow-all",
        ])
        .prop_map(String::from),
    ]
}

fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        prop::sample::select(vec![
            0.0,
            -0.0,
            -1.5,
            0.5,
            1e-300,
            1e300,
            f64::MAX,
            -f64::MAX,
            4294967296.5
        ])
        .prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        string().prop_map(Value::String),
    ]
}

fn json() -> impl Strategy<Value = Value> {
    scalar().prop_recursive(4, 32, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(string(), inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// One change to the tree; `Vec<usize>` picks a node (index modulo the children).
#[derive(Debug, Clone)]
enum Mutation {
    Replace(Vec<usize>, Value),
    Remove(Vec<usize>),
    AddKey(Vec<usize>, String, Value),
    Nest(Vec<usize>, usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let at = || prop::collection::vec(any::<usize>(), 0..6);
    prop_oneof![
        4 => (at(), json()).prop_map(|(at, v)| Mutation::Replace(at, v)),
        2 => at().prop_map(Mutation::Remove),
        1 => (at(), string(), json()).prop_map(|(at, k, v)| Mutation::AddKey(at, k, v)),
        1 => (at(), 1usize..100).prop_map(|(at, depth)| Mutation::Nest(at, depth)),
    ]
}

fn children(value: &mut Value) -> Vec<&mut Value> {
    match value {
        Value::Object(map) => map.values_mut().collect(),
        Value::Array(items) => items.iter_mut().collect(),
        _ => Vec::new(),
    }
}

/// The node `at` leads to (stopping early at a leaf).
fn node<'a>(value: &'a mut Value, at: &[usize]) -> &'a mut Value {
    let Some((first, rest)) = at.split_first() else {
        return value;
    };
    if children(value).is_empty() {
        return value;
    }
    let mut kids = children(value);
    let index = first % kids.len();
    node(kids.swap_remove(index), rest)
}

fn apply(tree: &mut Value, mutation: Mutation) {
    match mutation {
        Mutation::Replace(at, new) => *node(tree, &at) = new,
        Mutation::Remove(at) => {
            let (last, parent) = at.split_last().map_or((0, &[][..]), |(l, p)| (*l, p));
            match node(tree, parent) {
                Value::Object(map) if !map.is_empty() => {
                    let key = map.keys().nth(last % map.len()).cloned().unwrap_or_default();
                    map.remove(&key);
                }
                Value::Array(items) if !items.is_empty() => {
                    items.remove(last % items.len());
                }
                _ => {}
            }
        }
        Mutation::AddKey(at, key, new) => {
            if let Value::Object(map) = node(tree, &at) {
                map.insert(key, new);
            }
        }
        Mutation::Nest(at, depth) => {
            let target = node(tree, &at);
            let mut nested = target.take();
            for _ in 0..depth {
                nested = Value::Array(vec![nested]);
            }
            *target = nested;
        }
    }
}

/// Every error says where: a position for syntax, a key path otherwise.
fn check_error(err: &ConfigError) -> Result<(), TestCaseError> {
    let shown = err.to_string();
    match err {
        ConfigError::Syntax { line, column, .. } => {
            prop_assert!(*line >= 1 && *column >= 1, "{shown}");
        }
        ConfigError::Invalid { path, message } => {
            prop_assert!(!path.is_empty() && !message.is_empty(), "{shown}");
            prop_assert!(shown.starts_with(path.as_str()), "{shown}");
        }
        ConfigError::Read { .. } => prop_assert!(false, "parse read a file: {shown}"),
    }
    Ok(())
}

proptest! {
    #![proptest_config(crate::fuzzing::config(256))]

    #[test]
    fn arbitrary_text_never_panics(text in text(), fuzz in string()) {
        if let Err(err) = parse(Some(&text), None, &env(fuzz)) {
            check_error(&err)?;
        }
    }

    #[test]
    fn mutated_example_configs_fail_with_a_key_path(
        mutations in prop::collection::vec(mutation(), 1..4),
        fuzz in string(),
    ) {
        let Ok(mut tree) = json5::from_str::<Value>(EXAMPLE) else {
            return Err(TestCaseError::fail("the example config does not parse"));
        };
        for mutation in mutations {
            apply(&mut tree, mutation);
        }
        let text = serde_json::to_string(&tree).map_err(|e| TestCaseError::fail(e.to_string()))?;
        if let Err(err) = parse(Some(&text), None, &env(fuzz)) {
            check_error(&err)?;
            prop_assert!(!matches!(err, ConfigError::Syntax { .. }), "valid JSON is valid JSON5: {err}");
        }
    }
}

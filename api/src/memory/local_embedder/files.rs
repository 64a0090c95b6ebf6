//! The local model's files: a configured directory is used as it is; otherwise
//! they are downloaded once into `{dataDir}/models/{model}/`, each streamed to a
//! `.part` file, checked (length, and SHA-256 where the model's is known) and
//! renamed into place, so a crash never leaves a half file under its real name.

use std::path::{Path, PathBuf};
use std::time::Duration;

use futures::StreamExt;
use sha2::{Digest, Sha256};
use tokio::io::AsyncWriteExt;

use super::LocalError;

/// Required files, then the optional one that carries the input limit.
pub const REQUIRED: [&str; 3] = ["config.json", "tokenizer.json", "model.safetensors"];
pub const OPTIONAL: [&str; 2] = ["sentence_bert_config.json", "1_Pooling/config.json"];

/// Published sizes and SHA-256 digests (the Hugging Face LFS object ids) of the
/// large files of models whose downloads can be verified.
const KNOWN: [(&str, &str, u64, &str); 1] = [(
    "all-MiniLM-L6-v2",
    "model.safetensors",
    90_868_376,
    "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
)];

/// Download progress: the file, its bytes so far, its size when known.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DownloadProgress {
    pub file: String,
    pub done: u64,
    pub total: Option<u64>,
}

/// Whether `dir` holds every required file.
pub fn complete(dir: &Path) -> bool {
    REQUIRED.iter().all(|name| dir.join(name).is_file())
}

/// The files `dir` lacks, for an error that names them.
pub fn missing(dir: &Path) -> Vec<&'static str> {
    REQUIRED
        .into_iter()
        .filter(|name| !dir.join(name).is_file())
        .collect()
}

/// Downloads the missing files of `model` from `base` into `dir`.
pub async fn download(
    model: &str,
    base: &url::Url,
    dir: &Path,
    on_progress: &(dyn Fn(DownloadProgress) + Send + Sync),
) -> Result<(), LocalError> {
    tokio::fs::create_dir_all(dir)
        .await
        .map_err(|source| LocalError::io(dir, source))?;
    let client = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(30))
        .read_timeout(Duration::from_secs(60))
        .build()
        .map_err(|e| LocalError::Download {
            url: base.to_string(),
            message: e.to_string(),
        })?;
    let wanted = REQUIRED
        .iter()
        .map(|name| (*name, true))
        .chain(OPTIONAL.iter().map(|name| (*name, false)));
    for (name, required) in wanted {
        let target = dir.join(name);
        if target.is_file() {
            continue;
        }
        let url = file_url(base, name)?;
        fetch(&client, &url, model, name, &target, required, on_progress).await?;
    }
    Ok(())
}

fn file_url(base: &url::Url, name: &str) -> Result<url::Url, LocalError> {
    let mut base = base.clone();
    if !base.path().ends_with('/') {
        base.set_path(&format!("{}/", base.path()));
    }
    base.join(name).map_err(|e| LocalError::Download {
        url: base.to_string(),
        message: format!("cannot add {name}: {e}"),
    })
}

async fn fetch(
    client: &reqwest::Client,
    url: &url::Url,
    model: &str,
    name: &str,
    target: &Path,
    required: bool,
    on_progress: &(dyn Fn(DownloadProgress) + Send + Sync),
) -> Result<(), LocalError> {
    let failed = |message: String| LocalError::Download {
        url: url.to_string(),
        message,
    };
    let response = client
        .get(url.clone())
        .send()
        .await
        .map_err(|e| failed(error_text(&e)))?;
    if !required && response.status() == reqwest::StatusCode::NOT_FOUND {
        return Ok(());
    }
    let response = response.error_for_status().map_err(|e| failed(error_text(&e)))?;
    let total = response.content_length();
    let known = KNOWN
        .iter()
        .find(|(m, file, _, _)| *m == model && *file == name)
        .map(|(_, _, size, sha)| (*size, *sha));
    if let (Some((size, _)), Some(total)) = (known, total)
        && size != total
    {
        return Err(failed(format!(
            "the server sends {total} bytes; {name} of {model} has {size}"
        )));
    }
    if let Some(parent) = target.parent() {
        tokio::fs::create_dir_all(parent)
            .await
            .map_err(|source| LocalError::io(parent, source))?;
    }
    let part = part_path(target);
    let mut file = tokio::fs::File::create(&part)
        .await
        .map_err(|source| LocalError::io(&part, source))?;
    let mut hasher = Sha256::new();
    let mut done = 0u64;
    let mut body = response.bytes_stream();
    on_progress(DownloadProgress {
        file: name.into(),
        done,
        total,
    });
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(|e| failed(error_text(&e)))?;
        hasher.update(&chunk);
        file.write_all(&chunk)
            .await
            .map_err(|source| LocalError::io(&part, source))?;
        done += chunk.len() as u64;
        on_progress(DownloadProgress {
            file: name.into(),
            done,
            total,
        });
    }
    file.sync_all()
        .await
        .map_err(|source| LocalError::io(&part, source))?;
    drop(file);
    let verdict = check(done, total, known, &hex(&hasher.finalize()), name);
    if let Err(message) = verdict {
        let _ = tokio::fs::remove_file(&part).await;
        return Err(failed(message));
    }
    tokio::fs::rename(&part, target)
        .await
        .map_err(|source| LocalError::io(target, source))
}

fn check(
    done: u64,
    total: Option<u64>,
    known: Option<(u64, &str)>,
    sha: &str,
    name: &str,
) -> Result<(), String> {
    if let Some(total) = total.filter(|t| *t != done) {
        return Err(format!("{name}: received {done} of {total} bytes"));
    }
    if let Some((size, expected)) = known
        && (size != done || expected != sha)
    {
        return Err(format!(
            "{name}: {done} bytes with SHA-256 {sha}; expected {size} bytes with {expected}"
        ));
    }
    Ok(())
}

fn part_path(target: &Path) -> PathBuf {
    let mut name = target.file_name().unwrap_or_default().to_os_string();
    name.push(".part");
    target.with_file_name(name)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn error_text(err: &reqwest::Error) -> String {
    crate::error_chain::chain(err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_urls_keep_the_base_path() {
        let base =
            url::Url::parse("https://huggingface.co/sentence-transformers/all-MiniLM-L6-v2/resolve/main")
                .unwrap();
        assert_eq!(
            file_url(&base, "1_Pooling/config.json").unwrap().as_str(),
            "https://huggingface.co/sentence-transformers/all-MiniLM-L6-v2/resolve/main/1_Pooling/config.json"
        );
    }

    #[test]
    fn short_or_altered_files_are_refused() {
        assert!(check(10, Some(10), None, "x", "a").is_ok());
        assert!(
            check(9, Some(10), None, "x", "a")
                .unwrap_err()
                .contains("9 of 10")
        );
        assert!(
            check(10, None, Some((10, "abc")), "abd", "a")
                .unwrap_err()
                .contains("abc")
        );
        assert!(check(10, None, Some((10, "abc")), "abc", "a").is_ok());
    }
}

//! The S3 server the tests run against: s3s-fs (SigV4 checked, conditional
//! writes honoured) over a directory, with one change. s3s-fs checks a
//! write's condition (`If-None-Match: *`, `If-Match`) and then writes, so two
//! conditional writes to one key at the same moment can both succeed; S3 and
//! MinIO decide them atomically, and Onyx relies on that (a daily log's
//! segment numbers, compare-and-swap of whole files). Here every request that
//! changes something takes its turn, so a condition holds until its write
//! lands; reads run as they come.
//!
//! `onyx-s3-test-server --host H --port P --access-key K --secret-key S ROOT`
//! (the arguments of `s3s-fs`).

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use hyper::Method;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder;
use s3s::auth::SimpleAuth;
use s3s::service::S3ServiceBuilder;
use tokio::net::TcpListener;
use tokio::sync::Mutex;

struct Options {
    host: String,
    port: u16,
    keys: Option<(String, String)>,
    root: PathBuf,
}

fn options() -> Result<Options, String> {
    let mut args = std::env::args().skip(1);
    let (mut host, mut port) = ("127.0.0.1".to_string(), 8014);
    let (mut access, mut secret, mut root) = (None, None, None);
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or(format!("{arg} needs a value"));
        match arg.as_str() {
            "--host" => host = value()?,
            "--port" => port = value()?.parse().map_err(|e| format!("--port: {e}"))?,
            "--access-key" => access = Some(value()?),
            "--secret-key" => secret = Some(value()?),
            _ if !arg.starts_with("--") => root = Some(PathBuf::from(arg)),
            _ => return Err(format!("unknown option {arg}")),
        }
    }
    let keys = match (access, secret) {
        (Some(access), Some(secret)) => Some((access, secret)),
        (None, None) => None,
        _ => return Err("--access-key and --secret-key go together".into()),
    };
    let root =
        root.ok_or("usage: onyx-s3-test-server [--host H] [--port P] [--access-key K --secret-key S] ROOT")?;
    Ok(Options {
        host,
        port,
        keys,
        root,
    })
}

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("onyx-s3-test-server: {err}");
            ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<(), String> {
    let options = options()?;
    let fs =
        s3s_fs::FileSystem::new(&options.root).map_err(|e| format!("{}: {e:?}", options.root.display()))?;
    let mut builder = S3ServiceBuilder::new(fs);
    if let Some((access, secret)) = options.keys {
        builder.set_auth(SimpleAuth::from_single(access, secret));
    }
    let s3 = builder.build();
    let writes = Arc::new(Mutex::new(()));
    let listener = TcpListener::bind((options.host.as_str(), options.port))
        .await
        .map_err(|e| format!("{}:{}: {e}", options.host, options.port))?;
    loop {
        let Ok((socket, _)) = listener.accept().await else {
            continue;
        };
        let (s3, writes) = (s3.clone(), writes.clone());
        let service = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
            let (s3, writes) = (s3.clone(), writes.clone());
            async move {
                let reads = [Method::GET, Method::HEAD, Method::OPTIONS];
                // Held until the response: the write (body included) has landed.
                let _turn = match reads.contains(request.method()) {
                    true => None,
                    false => Some(writes.lock_owned().await),
                };
                hyper::service::Service::call(&s3, request).await
            }
        });
        tokio::spawn(async move {
            let _ = Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(socket), service)
                .await;
        });
    }
}

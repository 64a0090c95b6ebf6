//! A small HTTP/1.1 client for upstreams on plain `http://` (the local
//! servers people run beside Onyx: Ollama, vLLM, llama.cpp, LM Studio), for
//! the proxied JSON calls. Its I/O runs in the calling task: hyper's client
//! hands every request to a connection task over a channel and the answer
//! back over another, which costs two task wake-ups per call, and its pool
//! adds a checkout, a boxed service and a connector clone; together that
//! was several percent of the gateway's CPU at saturation.
//!
//! One request at a time per connection; idle connections are kept (most
//! recently used first) and one that the server closed while idle is found
//! out by the write or the first read, and the call made again once on a
//! new connection.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Idle connections kept per pool; more are closed when they come back.
const MAX_IDLE: usize = 512;
/// An idle connection older than this is closed rather than reused.
const IDLE_FOR: Duration = Duration::from_secs(90);
/// Larger response heads are refused.
const MAX_HEAD: usize = 64 * 1024;
const MAX_HEADERS: usize = 64;

/// The pooled connections to one `host:port`.
pub(crate) struct Pool {
    authority: String,
    connect_timeout: Duration,
    idle: Mutex<Vec<(Conn, Instant)>>,
}

struct Conn {
    stream: TcpStream,
    buf: BytesMut,
}

/// The status and whole body of an answer.
pub(crate) struct Response {
    pub status: http::StatusCode,
    pub body: Bytes,
}

/// Why a call failed: before an answer began (the connection, or the head)
/// or in its body.
#[derive(Debug)]
pub(crate) enum Failure {
    Connect(String),
    Body(String),
}

impl Pool {
    pub(crate) fn new(authority: &str, connect_timeout: Duration) -> Self {
        Self {
            authority: authority.to_owned(),
            connect_timeout,
            idle: Mutex::new(Vec::new()),
        }
    }

    pub(crate) fn authority(&self) -> &str {
        &self.authority
    }

    /// POSTs `body` to `path` with `headers` (the caller bounds the time).
    pub(crate) async fn post(
        &self,
        path: &str,
        headers: &http::HeaderMap,
        body: &[u8],
    ) -> Result<Response, Failure> {
        let request = self.request_bytes(path, headers, body);
        if let Some(conn) = self.take_idle() {
            match exchange(conn, &request).await {
                Ok((response, conn)) => return Ok(self.finish(response, conn)),
                // The server closed the idle connection before it read the request.
                Err(Exchange::NothingBack(_)) => {}
                Err(err) => return Err(err.into()),
            }
        }
        let conn = self.connect().await?;
        match exchange(conn, &request).await {
            Ok((response, conn)) => Ok(self.finish(response, conn)),
            Err(err) => Err(err.into()),
        }
    }

    fn request_bytes(&self, path: &str, headers: &http::HeaderMap, body: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(256 + body.len());
        out.extend_from_slice(b"POST ");
        out.extend_from_slice(if path.is_empty() { b"/" } else { path.as_bytes() });
        out.extend_from_slice(b" HTTP/1.1\r\nhost: ");
        out.extend_from_slice(self.authority.as_bytes());
        out.extend_from_slice(b"\r\n");
        for (name, value) in headers {
            if name == http::header::HOST || name == http::header::CONTENT_LENGTH {
                continue;
            }
            out.extend_from_slice(name.as_str().as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(value.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(b"content-length: ");
        out.extend_from_slice(body.len().to_string().as_bytes());
        out.extend_from_slice(b"\r\n\r\n");
        out.extend_from_slice(body);
        out
    }

    fn take_idle(&self) -> Option<Conn> {
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        while let Some((conn, since)) = idle.pop() {
            if since.elapsed() < IDLE_FOR {
                return Some(conn);
            }
        }
        None
    }

    fn finish(&self, response: Response, conn: Option<Conn>) -> Response {
        if let Some(conn) = conn {
            let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
            if idle.len() < MAX_IDLE {
                idle.push((conn, Instant::now()));
            }
        }
        response
    }

    async fn connect(&self) -> Result<Conn, Failure> {
        let connecting = TcpStream::connect(self.authority.as_str());
        let stream = match tokio::time::timeout(self.connect_timeout, connecting).await {
            Ok(Ok(stream)) => stream,
            Ok(Err(err)) => {
                return Err(Failure::Connect(format!(
                    "connecting to {}: {err}",
                    self.authority
                )));
            }
            Err(_) => {
                return Err(Failure::Connect(format!(
                    "connecting to {}: no answer in {:?}",
                    self.authority, self.connect_timeout
                )));
            }
        };
        stream
            .set_nodelay(true)
            .map_err(|err| Failure::Connect(err.to_string()))?;
        Ok(Conn {
            stream,
            buf: BytesMut::with_capacity(8 * 1024),
        })
    }
}

enum Exchange {
    /// Not a byte of an answer came back: on a reused connection, safe to
    /// send again (the server closed it without reading the request).
    NothingBack(String),
    Head(String),
    Body(String),
}

impl From<Exchange> for Failure {
    fn from(err: Exchange) -> Self {
        match err {
            Exchange::NothingBack(detail) | Exchange::Head(detail) => Failure::Connect(detail),
            Exchange::Body(detail) => Failure::Body(detail),
        }
    }
}

/// Sends one request and reads its answer; the connection comes back when
/// it can carry another.
async fn exchange(mut conn: Conn, request: &[u8]) -> Result<(Response, Option<Conn>), Exchange> {
    conn.buf.clear();
    if let Err(err) = conn.stream.write_all(request).await {
        return Err(Exchange::NothingBack(format!("sending the request: {err}")));
    }
    let head = read_head(&mut conn).await?;
    let body = match head.framing {
        Framing::Length(length) => read_length(&mut conn, length).await?,
        Framing::Chunked => read_chunked(&mut conn).await?,
        Framing::UntilClose => read_to_close(&mut conn).await?,
    };
    let reusable = head.keep_alive && !matches!(head.framing, Framing::UntilClose) && conn.buf.is_empty();
    let response = Response {
        status: head.status,
        body,
    };
    Ok((response, reusable.then_some(conn)))
}

enum Framing {
    Length(usize),
    Chunked,
    UntilClose,
}

struct Head {
    status: http::StatusCode,
    framing: Framing,
    keep_alive: bool,
}

/// Reads until a final (non-1xx) response head is in, and consumes it.
async fn read_head(conn: &mut Conn) -> Result<Head, Exchange> {
    let mut received = false;
    loop {
        if !conn.buf.is_empty() {
            let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
            let mut parsed = httparse::Response::new(&mut headers);
            match parsed.parse(&conn.buf) {
                Ok(httparse::Status::Complete(length)) => {
                    let head = head_of(&parsed)?;
                    conn.buf.advance(length);
                    match head {
                        Some(head) => return Ok(head),
                        None => continue, // 1xx: the real answer follows
                    }
                }
                Ok(httparse::Status::Partial) if conn.buf.len() > MAX_HEAD => {
                    return Err(Exchange::Head(format!(
                        "the answer's head is over {MAX_HEAD} bytes"
                    )));
                }
                Ok(httparse::Status::Partial) => {}
                Err(err) => return Err(Exchange::Head(format!("the answer is not HTTP/1: {err}"))),
            }
        }
        conn.buf.reserve(8 * 1024);
        match conn.stream.read_buf(&mut conn.buf).await {
            Ok(0) if !received => {
                return Err(Exchange::NothingBack(
                    "the connection closed before an answer".into(),
                ));
            }
            Ok(0) => {
                return Err(Exchange::Head(
                    "the connection closed in the answer's head".into(),
                ));
            }
            Ok(_) => received = true,
            Err(err) if !received => return Err(Exchange::NothingBack(format!("reading the answer: {err}"))),
            Err(err) => return Err(Exchange::Head(format!("reading the answer: {err}"))),
        }
    }
}

/// The head's status and framing; `None` for an interim (1xx) answer.
fn head_of(parsed: &httparse::Response<'_, '_>) -> Result<Option<Head>, Exchange> {
    let code = parsed.code.unwrap_or(0);
    let status = http::StatusCode::from_u16(code)
        .map_err(|_| Exchange::Head(format!("status {code} is not valid")))?;
    if status.is_informational() {
        return Ok(None);
    }
    let mut keep_alive = parsed.version == Some(1);
    let mut length = None;
    let mut chunked = false;
    for header in parsed.headers.iter() {
        if header.name.eq_ignore_ascii_case("content-length") {
            let text = std::str::from_utf8(header.value).unwrap_or_default().trim();
            let value = text
                .parse::<usize>()
                .map_err(|_| Exchange::Head(format!("content-length {text:?} is not a number")))?;
            if length.is_some_and(|seen| seen != value) {
                return Err(Exchange::Head("two different content-lengths".into()));
            }
            length = Some(value);
        } else if header.name.eq_ignore_ascii_case("transfer-encoding") {
            chunked = has_token(header.value, "chunked");
        } else if header.name.eq_ignore_ascii_case("connection") {
            if has_token(header.value, "close") {
                keep_alive = false;
            } else if has_token(header.value, "keep-alive") {
                keep_alive = true;
            }
        }
    }
    let no_body = status == http::StatusCode::NO_CONTENT || status == http::StatusCode::NOT_MODIFIED;
    let framing = if no_body {
        Framing::Length(0)
    } else if chunked {
        Framing::Chunked
    } else if let Some(length) = length {
        Framing::Length(length)
    } else {
        Framing::UntilClose
    };
    Ok(Some(Head {
        status,
        framing,
        keep_alive,
    }))
}

fn has_token(value: &[u8], token: &str) -> bool {
    std::str::from_utf8(value)
        .unwrap_or_default()
        .split(',')
        .any(|part| part.trim().eq_ignore_ascii_case(token))
}

/// Reads more of the answer into the buffer; the end of the stream here is an error.
async fn fill(conn: &mut Conn) -> Result<(), Exchange> {
    conn.buf.reserve(8 * 1024);
    match conn.stream.read_buf(&mut conn.buf).await {
        Ok(0) => Err(Exchange::Body(
            "the connection closed before the answer's end".into(),
        )),
        Ok(_) => Ok(()),
        Err(err) => Err(Exchange::Body(format!("reading the answer: {err}"))),
    }
}

async fn read_length(conn: &mut Conn, length: usize) -> Result<Bytes, Exchange> {
    while conn.buf.len() < length {
        fill(conn).await?;
    }
    Ok(conn.buf.split_to(length).freeze())
}

async fn read_to_close(conn: &mut Conn) -> Result<Bytes, Exchange> {
    loop {
        conn.buf.reserve(8 * 1024);
        match conn.stream.read_buf(&mut conn.buf).await {
            Ok(0) => return Ok(conn.buf.split().freeze()),
            Ok(_) => {}
            Err(err) => return Err(Exchange::Body(format!("reading the answer: {err}"))),
        }
    }
}

/// Decodes a chunked body (chunk extensions and trailers are read and dropped).
async fn read_chunked(conn: &mut Conn) -> Result<Bytes, Exchange> {
    let mut body = BytesMut::new();
    loop {
        let line = read_line(conn).await?;
        let size_text = line.split(';').next().unwrap_or_default().trim();
        let size = usize::from_str_radix(size_text, 16)
            .map_err(|_| Exchange::Body(format!("chunk size {size_text:?} is not hexadecimal")))?;
        if size == 0 {
            // Trailers, up to the empty line that ends the answer.
            while !read_line(conn).await?.is_empty() {}
            return Ok(body.freeze());
        }
        while conn.buf.len() < size + 2 {
            fill(conn).await?;
        }
        body.extend_from_slice(&conn.buf[..size]);
        if &conn.buf[size..size + 2] != b"\r\n" {
            return Err(Exchange::Body("a chunk does not end in CRLF".into()));
        }
        conn.buf.advance(size + 2);
    }
}

/// One CRLF-ended line, consumed, without its CRLF.
async fn read_line(conn: &mut Conn) -> Result<String, Exchange> {
    loop {
        if let Some(end) = conn.buf.windows(2).position(|pair| pair == b"\r\n") {
            let line = String::from_utf8_lossy(&conn.buf[..end]).into_owned();
            conn.buf.advance(end + 2);
            return Ok(line);
        }
        if conn.buf.len() > MAX_HEAD {
            return Err(Exchange::Body("a chunk header line is too long".into()));
        }
        fill(conn).await?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::TcpListener;

    /// A server that answers each accepted connection's requests with the
    /// given raw answers, in order, then closes it.
    async fn server(
        per_connection: Vec<Vec<&'static [u8]>>,
    ) -> (String, tokio::task::JoinHandle<Vec<Vec<u8>>>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let authority = listener.local_addr().unwrap().to_string();
        let handle = tokio::spawn(async move {
            let mut requests = Vec::new();
            for answers in per_connection {
                let (mut socket, _) = listener.accept().await.unwrap();
                for answer in answers {
                    let mut buf = vec![0u8; 64 * 1024];
                    let n = socket.read(&mut buf).await.unwrap();
                    requests.push(buf[..n].to_vec());
                    socket.write_all(answer).await.unwrap();
                }
            }
            requests
        });
        (authority, handle)
    }

    fn headers() -> http::HeaderMap {
        let mut headers = http::HeaderMap::new();
        headers.insert("authorization", http::HeaderValue::from_static("Bearer k"));
        headers
    }

    fn ok(response: Result<Response, Failure>) -> Response {
        response.unwrap_or_else(|err| panic!("the call failed: {err:?}"))
    }

    #[tokio::test]
    async fn reuses_a_connection_and_writes_a_well_formed_request() {
        let (authority, server) = server(vec![vec![
            b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}",
            b"HTTP/1.1 201 Created\r\nContent-Length: 5\r\n\r\nhello",
        ]])
        .await;
        let pool = Pool::new(&authority, Duration::from_secs(5));
        let first = ok(pool.post("/v1/x", &headers(), b"{\"a\":1}").await);
        assert_eq!((first.status.as_u16(), &first.body[..]), (200, &b"{}"[..]));
        let second = ok(pool.post("/v1/x", &headers(), b"[]").await);
        assert_eq!((second.status.as_u16(), &second.body[..]), (201, &b"hello"[..]));
        let requests = server.await.unwrap();
        assert_eq!(requests.len(), 2, "both calls went over the one connection");
        let first = String::from_utf8(requests[0].clone()).unwrap();
        assert!(first.starts_with("POST /v1/x HTTP/1.1\r\nhost: "), "{first}");
        assert!(first.contains("\r\nauthorization: Bearer k\r\n"), "{first}");
        assert!(first.ends_with("content-length: 7\r\n\r\n{\"a\":1}"), "{first}");
    }

    #[tokio::test]
    async fn decodes_chunked_answers_and_skips_interim_ones() {
        let (authority, _server) = server(vec![vec![
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4;ext=1\r\nWiki\r\n5\r\npedia\r\n0\r\nx-trailer: y\r\n\r\n",
        ]])
        .await;
        let pool = Pool::new(&authority, Duration::from_secs(5));
        let answer = ok(pool.post("/", &headers(), b"").await);
        assert_eq!(&answer.body[..], b"Wikipedia");
    }

    #[tokio::test]
    async fn a_connection_the_server_closed_while_idle_is_replaced() {
        // The first connection answers once and closes; the second call must
        // find that out and go again on a new connection.
        let (authority, server) = server(vec![
            vec![b"HTTP/1.1 200 OK\r\ncontent-length: 1\r\n\r\na"],
            vec![b"HTTP/1.1 200 OK\r\ncontent-length: 1\r\n\r\nb"],
        ])
        .await;
        let pool = Pool::new(&authority, Duration::from_secs(5));
        assert_eq!(&ok(pool.post("/", &headers(), b"1").await).body[..], b"a");
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(&ok(pool.post("/", &headers(), b"2").await).body[..], b"b");
        assert_eq!(server.await.unwrap().len(), 2);
    }

    #[tokio::test]
    async fn an_answer_cut_short_or_not_http_is_an_error_and_connection_close_is_honoured() {
        let (authority, _server) = server(vec![
            vec![b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nabc"],
            vec![b"SMTP ready\r\n\r\n"],
            vec![b"HTTP/1.1 200 OK\r\nconnection: close\r\n\r\nuntil close"],
        ])
        .await;
        let pool = Pool::new(&authority, Duration::from_secs(5));
        assert!(matches!(
            pool.post("/", &headers(), b"").await,
            Err(Failure::Body(_))
        ));
        assert!(matches!(
            pool.post("/", &headers(), b"").await,
            Err(Failure::Connect(_))
        ));
        let answer = ok(pool.post("/", &headers(), b"").await);
        assert_eq!(&answer.body[..], b"until close");
        assert!(pool.take_idle().is_none(), "a closed connection is not kept");
    }

    #[tokio::test]
    async fn nothing_listening_is_a_connect_failure() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let authority = listener.local_addr().unwrap().to_string();
        drop(listener);
        let pool = Pool::new(&authority, Duration::from_secs(5));
        assert!(matches!(
            pool.post("/", &headers(), b"").await,
            Err(Failure::Connect(_))
        ));
    }
}

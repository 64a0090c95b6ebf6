//! `onyx-paced`: an open-loop HTTP/1.1 load generator for the gateway
//! overhead benchmark's paced rows.
//!
//! wrk paces with its event loop's millisecond timers, so at 3,000 req/s its
//! requests leave in bursts of three on each millisecond tick and the later
//! ones in a burst queue behind the first: that measures the burst, not the
//! gateway. Here request `i` is due at `start + i / rate`, exactly spaced;
//! connection `k` of `C` sends the requests `i ≡ k (mod C)`, sleeping then
//! spinning until each is due. Latency is measured from when a request was
//! due, not when it left, so a slow answer that delays the next request is
//! counted against the server (no coordinated omission).
//!
//! ```text
//! onyx-paced --url http://127.0.0.1:8080/v1/chat/completions --rate 3000 \
//!   --seconds 10 --connections 8 --header 'Authorization: Bearer k' --body '{...}'
//! ```
//!
//! Prints one line: `requests=… errors=… rate=… p50_us=… p90_us=… p99_us=… p999_us=… max_us=…`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

struct Options {
    host: String,
    path: String,
    rate: f64,
    seconds: f64,
    warmup_seconds: f64,
    connections: usize,
    headers: Vec<String>,
    body: String,
    /// Writes `due_ms latency_us` per request, to see when slow ones happen.
    trace: Option<String>,
}

fn main() {
    // The first argument is the program's own name.
    let arguments: Vec<String> = std::env::args().collect();
    let options = match parse_args(arguments.get(1..).unwrap_or_default().to_vec()) {
        Ok(options) => options,
        Err(message) => {
            eprintln!("onyx-paced: {message}");
            std::process::exit(2);
        }
    };
    let request = request_bytes(&options);
    let total = ((options.seconds + options.warmup_seconds) * options.rate) as u64;
    let warmup = (options.warmup_seconds * options.rate) as u64;
    let interval = Duration::from_secs_f64(1.0 / options.rate);
    // Every connection starts at the same instant, a little ahead, once all are open.
    let start = Instant::now() + Duration::from_millis(200);
    let workers: Vec<_> = (0..options.connections)
        .map(|k| {
            let host = options.host.clone();
            let request = request.clone();
            let stride = options.connections as u64;
            std::thread::spawn(move || {
                run_connection(&host, &request, start, interval, k as u64, stride, total, warmup)
            })
        })
        .collect();
    let mut latencies = Vec::new();
    let mut errors = 0u64;
    for worker in workers {
        match worker.join() {
            Ok(outcome) => {
                latencies.extend(outcome.latencies_us);
                errors += outcome.errors;
            }
            Err(_) => errors += 1,
        }
    }
    if let Some(path) = &options.trace {
        // By request number, which is by due time.
        latencies.sort_unstable();
        let lines: String = latencies
            .iter()
            .map(|(i, micros)| format!("{:.3} {micros}\n", *i as f64 * 1000.0 / options.rate))
            .collect();
        if let Err(err) = std::fs::write(path, lines) {
            eprintln!("onyx-paced: {path}: {err}");
        }
    }
    let mut latencies: Vec<u32> = latencies.into_iter().map(|(_, micros)| micros).collect();
    latencies.sort_unstable();
    let pick = |q: f64| -> u32 {
        if latencies.is_empty() {
            return 0;
        }
        latencies[((latencies.len() - 1) as f64 * q).round() as usize]
    };
    println!(
        "requests={} errors={} rate={:.0} p50_us={} p90_us={} p99_us={} p999_us={} max_us={}",
        latencies.len(),
        errors,
        latencies.len() as f64 / options.seconds,
        pick(0.50),
        pick(0.90),
        pick(0.99),
        pick(0.999),
        latencies.last().copied().unwrap_or(0),
    );
    if errors > 0 {
        std::process::exit(1);
    }
}

struct Outcome {
    /// (request number, latency) of each request after the warm-up.
    latencies_us: Vec<(u64, u32)>,
    errors: u64,
}

/// One connection's share of the schedule: requests `first`, `first + stride`, ….
#[allow(clippy::too_many_arguments)]
fn run_connection(
    host: &str,
    request: &[u8],
    start: Instant,
    interval: Duration,
    first: u64,
    stride: u64,
    total: u64,
    warmup: u64,
) -> Outcome {
    let mut outcome = Outcome {
        latencies_us: Vec::with_capacity((total / stride + 1) as usize),
        errors: 0,
    };
    let mut connection: Option<BufReader<TcpStream>> = None;
    let mut i = first;
    while i < total {
        let due = start + interval.mul_f64(i as f64);
        wait_until(due);
        let result = (|| -> std::io::Result<u16> {
            let stream = match &mut connection {
                Some(stream) => stream,
                None => connection.insert(connect(host)?),
            };
            stream.get_mut().write_all(request)?;
            read_response(stream)
        })();
        let latency = due.elapsed();
        match result {
            Ok(status) if (200..300).contains(&status) => {
                if i >= warmup {
                    let micros = latency.as_micros().min(u32::MAX as u128) as u32;
                    outcome.latencies_us.push((i, micros));
                }
            }
            Ok(status) => {
                eprintln!("onyx-paced: HTTP {status}");
                outcome.errors += 1;
            }
            Err(err) => {
                eprintln!("onyx-paced: {err}");
                outcome.errors += 1;
                connection = None;
            }
        }
        i += stride;
    }
    outcome
}

fn connect(host: &str) -> std::io::Result<BufReader<TcpStream>> {
    let stream = TcpStream::connect(host)?;
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    Ok(BufReader::with_capacity(64 * 1024, stream))
}

/// Sleeps to just before `due`, then spins: a sleep alone overshoots by the
/// kernel's timer slack (50 µs by default), which would bunch the requests.
fn wait_until(due: Instant) {
    const SPIN: Duration = Duration::from_micros(150);
    let now = Instant::now();
    if due > now + SPIN {
        std::thread::sleep(due - now - SPIN);
    }
    while Instant::now() < due {
        std::hint::spin_loop();
    }
}

/// Reads one response (Content-Length or chunked body); returns its status.
fn read_response(stream: &mut BufReader<TcpStream>) -> std::io::Result<u16> {
    let invalid = |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_string());
    let mut line = String::new();
    if stream.read_line(&mut line)? == 0 {
        return Err(invalid("the server closed the connection"));
    }
    let status: u16 = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| invalid("no HTTP status line"))?;
    let mut length = None;
    let mut chunked = false;
    loop {
        line.clear();
        stream.read_line(&mut line)?;
        let header = line.trim_end();
        if header.is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            let value = value.trim();
            if name.eq_ignore_ascii_case("content-length") {
                length = value.parse::<usize>().ok();
            } else if name.eq_ignore_ascii_case("transfer-encoding") && value.contains("chunked") {
                chunked = true;
            }
        }
    }
    if chunked {
        loop {
            line.clear();
            stream.read_line(&mut line)?;
            let size = usize::from_str_radix(line.trim(), 16).map_err(|_| invalid("bad chunk size"))?;
            discard(stream, size + 2)?;
            if size == 0 {
                break;
            }
        }
    } else {
        discard(stream, length.ok_or_else(|| invalid("no Content-Length"))?)?;
    }
    Ok(status)
}

fn discard(stream: &mut BufReader<TcpStream>, mut n: usize) -> std::io::Result<()> {
    let mut buf = [0u8; 8192];
    while n > 0 {
        let take = n.min(buf.len());
        stream.read_exact(&mut buf[..take])?;
        n -= take;
    }
    Ok(())
}

fn request_bytes(options: &Options) -> Vec<u8> {
    let mut head = format!(
        "POST {} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
        options.path,
        options.host,
        options.body.len()
    );
    for header in &options.headers {
        head.push_str(header);
        head.push_str("\r\n");
    }
    head.push_str("\r\n");
    let mut bytes = head.into_bytes();
    bytes.extend_from_slice(options.body.as_bytes());
    bytes
}

fn parse_args(args: Vec<String>) -> Result<Options, String> {
    let mut url = None;
    let mut options = Options {
        host: String::new(),
        path: String::new(),
        rate: 1000.0,
        seconds: 10.0,
        warmup_seconds: 1.0,
        connections: 8,
        headers: Vec::new(),
        body: String::new(),
        trace: None,
    };
    let mut args = args.into_iter();
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{flag} needs a value"));
        let number = |text: String| {
            text.parse::<f64>()
                .map_err(|_| format!("{flag}: not a number: {text}"))
        };
        match flag.as_str() {
            "--url" => url = Some(value()?),
            "--rate" => options.rate = number(value()?)?,
            "--seconds" => options.seconds = number(value()?)?,
            "--warmup" => options.warmup_seconds = number(value()?)?,
            "--connections" => options.connections = number(value()?)? as usize,
            "--header" => options.headers.push(value()?),
            "--body" => options.body = value()?,
            "--trace" => options.trace = Some(value()?),
            other => return Err(format!("unknown argument {other}")),
        }
    }
    let url = url.ok_or("--url is required")?;
    let rest = url
        .strip_prefix("http://")
        .ok_or("--url must start with http://")?;
    let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
    options.host = host.to_string();
    options.path = format!("/{path}");
    if options.rate <= 0.0 || options.seconds <= 0.0 || options.connections == 0 {
        return Err("--rate, --seconds and --connections must be positive".into());
    }
    Ok(options)
}

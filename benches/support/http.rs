//! A small HTTP/1.1 keep-alive client for load generation: one request in flight per
//! connection, the request bytes built once, the answer read by `Content-Length`. Lean on
//! purpose, so the generator takes as little of the two cores as it can.

use anyhow::{Context, bail};
use std::net::SocketAddr;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// `POST path` with a JSON body, as wire bytes.
pub fn post(path: &str, body: &str) -> Vec<u8> {
    format!(
        "POST {path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

pub struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Conn {
    pub async fn open(addr: SocketAddr) -> anyhow::Result<Conn> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        Ok(Conn {
            stream,
            buf: Vec::with_capacity(4096),
        })
    }

    /// Sends one request and reads its answer: status and body.
    pub async fn request(&mut self, request: &[u8]) -> anyhow::Result<(u16, &[u8])> {
        self.stream.write_all(request).await?;
        self.buf.clear();
        let mut head_end = None;
        let mut chunk = [0u8; 4096];
        while head_end.is_none() {
            let n = self.stream.read(&mut chunk).await?;
            if n == 0 {
                bail!("connection closed before the response head");
            }
            self.buf.extend_from_slice(&chunk[..n]);
            head_end = find(&self.buf, b"\r\n\r\n").map(|i| i + 4);
        }
        let head_end = head_end.context("no head")?;
        let head = std::str::from_utf8(&self.buf[..head_end])?;
        let status: u16 = head.get(9..12).context("short status line")?.parse()?;
        let length: usize = head
            .lines()
            .find_map(|line| {
                let (name, value) = line.split_once(':')?;
                name.eq_ignore_ascii_case("content-length")
                    .then(|| value.trim().parse().ok())?
            })
            .unwrap_or(0);
        while self.buf.len() < head_end + length {
            let n = self.stream.read(&mut chunk).await?;
            if n == 0 {
                bail!("connection closed inside the body");
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
        Ok((status, &self.buf[head_end..head_end + length]))
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Creates a session with `mocks` (JSON) and returns its id.
pub async fn create_session(addr: SocketAddr, mocks: &str) -> anyhow::Result<String> {
    let mut conn = Conn::open(addr).await?;
    let body = format!(r#"{{"servers":["bench"],"user_id":"bench","mocks":{mocks}}}"#);
    let (status, answer) = conn.request(&post("/v1/sessions", &body)).await?;
    let answer: serde_json::Value = serde_json::from_slice(answer)?;
    if status != 201 {
        bail!("create session answered {status}: {answer}");
    }
    answer["id"]
        .as_str()
        .map(str::to_owned)
        .context("created session has no id")
}

pub fn execute_path(session: &str) -> String {
    format!("/v1/sessions/{session}/execute")
}

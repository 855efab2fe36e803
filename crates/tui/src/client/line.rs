//! The observer's WebSocket line: tungstenite dials and shakes hands, and reads every frame
//! out of the ordinary; whole unmasked text frames are split off a large read buffer here.
//!
//! The runtime's stream is almost only single-frame text messages. Read through
//! `tokio_tungstenite`, each one was a `Message` of its own: a waker registered per poll, a
//! shared slice of the read buffer to split off and drop, the buffer zeroed before each read.
//! Here a socket read fills a reused buffer and the frames in it are handed on as `&str`
//! borrowed from it. Any other frame (control, binary, fragmented, masked, reserved bits,
//! over the size cap, text that is not UTF-8) is fed whole to a tungstenite `WebSocket` of
//! the same role and config, which answers exactly as before: the same messages, the same
//! errors (and their words), the pong it queues for a ping.

use std::io::{self, Read, Write};
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::{IntoClientRequest, uri_mode};
use tokio_tungstenite::tungstenite::error::{Error as WsError, UrlError};
use tokio_tungstenite::tungstenite::handshake::client::Request;
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocket, WebSocketConfig};
use tokio_tungstenite::tungstenite::stream::Mode;

/// What the buffer asks of the socket at least per read: a burst of frames in one call.
const READ_CHUNK: usize = 256 * 1024;

/// The first byte of a final text frame with no extension bits: the fast path's frames.
const FINAL_TEXT: u8 = 0x81;

/// One item read off the line.
#[derive(Debug)]
pub enum Item<'a> {
    /// A whole text message, borrowed from the read buffer until the next call.
    Text(&'a str),
    /// What tungstenite read from a frame out of the ordinary.
    Message(Message),
}

/// Dials `request` as `tokio_tungstenite::connect_async_with_config` does (same address,
/// same errors, Nagle off) and returns the line with the handshake done.
pub async fn dial(request: Request, config: WebSocketConfig) -> Result<Line, WsError> {
    let request = request.into_client_request()?;
    let host = request
        .uri()
        .host()
        .ok_or(WsError::Url(UrlError::NoHostName))?
        .to_owned();
    let port = request
        .uri()
        .port_u16()
        .or_else(|| match request.uri().scheme_str() {
            Some("wss") => Some(443),
            Some("ws") => Some(80),
            _ => None,
        })
        .ok_or(WsError::Url(UrlError::UnsupportedUrlScheme))?;
    let tcp = TcpStream::connect(format!("{host}:{port}"))
        .await
        .map_err(WsError::Io)?;
    tcp.set_nodelay(true)?;
    // This build has no TLS: a `wss` URL fails here, after the connect, as it did.
    if matches!(uri_mode(request.uri())?, Mode::Tls) {
        return Err(WsError::Url(UrlError::TlsFeatureNotEnabled));
    }
    let (ws, _) =
        tokio_tungstenite::client_async_with_config(request, Tap::new(tcp), Some(config)).await?;
    let tap = ws.into_inner();
    Ok(Line {
        tcp: tap.tcp,
        reader: Reader::new(&tap.held, config),
    })
}

/// A connected stream: the socket and what has been read from it.
pub struct Line {
    tcp: TcpStream,
    reader: Reader,
}

impl Line {
    /// The next item among the bytes already read; `None` when more must be read first.
    pub fn next(&mut self) -> Option<Result<Item<'_>, WsError>> {
        self.reader.next()
    }

    /// Waits for bytes from the socket (cancel-safe: nothing is lost if dropped unfinished).
    /// An error or the end of the stream is reported by `next`, after the frames before it.
    pub async fn fill(&mut self) {
        let read = self.tcp.read(self.reader.spare()).await;
        self.reader.filled(read);
    }

    /// Takes bytes the socket already holds, without waiting; false when it had none.
    pub fn try_fill(&mut self) -> bool {
        match self.tcp.try_read(self.reader.spare()) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => false,
            read => {
                self.reader.filled(read);
                true
            }
        }
    }

    /// Writes what tungstenite queued in answer (a pong), if anything.
    pub async fn answer(&mut self) -> io::Result<()> {
        let out = self.reader.take_output();
        if out.is_empty() {
            return Ok(());
        }
        self.tcp.write_all(&out).await?;
        self.reader.give_back_output(out);
        Ok(())
    }
}

/// The frame stream's bytes and where in them the reader is. No IO: the line reads into
/// `spare` and reports with `filled`, and tests feed it the same way.
pub struct Reader {
    /// Read bytes live in `buf[start..end]`; the rest is room for the next read (zeroed
    /// once, when it is grown, never per read).
    buf: Vec<u8>,
    start: usize,
    end: usize,
    /// Bytes a frame begun at `start` needs in all, when more than are there.
    want: usize,
    /// How the socket ended, kept until the frames before it are read.
    ended: Option<io::Result<()>>,
    /// Frames out of the ordinary, fed whole to tungstenite's own state machine.
    slow: WebSocket<Feed>,
    /// tungstenite holds the first frames of a fragmented message: every frame goes to it
    /// until the message is whole.
    mid_message: bool,
    /// The longest frame tungstenite takes: a longer one is refused on its header.
    frame_cap: usize,
    /// The longest message: a longer text goes to tungstenite, which refuses it.
    message_cap: usize,
}

impl Reader {
    /// A reader whose stream starts with `read` (bytes that came with the handshake).
    pub fn new(read: &[u8], config: WebSocketConfig) -> Self {
        let mut buf = vec![0; READ_CHUNK.max(read.len())];
        buf[..read.len()].copy_from_slice(read);
        Self {
            buf,
            start: 0,
            end: read.len(),
            want: 0,
            ended: None,
            slow: WebSocket::from_raw_socket(Feed::default(), Role::Client, Some(config)),
            mid_message: false,
            frame_cap: config.max_frame_size.unwrap_or(usize::MAX),
            message_cap: config.max_message_size.unwrap_or(usize::MAX),
        }
    }

    /// Room to read into. The unread bytes (the start of a frame) move to the front when
    /// the room behind them runs short, and the buffer grows to hold a frame longer than it.
    pub fn spare(&mut self) -> &mut [u8] {
        if self.start == self.end {
            (self.start, self.end) = (0, 0);
            if self.buf.len() > READ_CHUNK && self.want <= READ_CHUNK {
                // A long frame grew it; the stream's usual frames need no more than this.
                self.buf.truncate(READ_CHUNK);
                self.buf.shrink_to_fit();
            }
        } else if self.buf.len() - self.end < READ_CHUNK / 4
            || self.start + self.want > self.buf.len()
        {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        let room = self.want.max(self.end + READ_CHUNK / 4);
        if room > self.buf.len() {
            self.buf.resize(room, 0);
        }
        &mut self.buf[self.end..]
    }

    /// What a read into `spare` gave: a count (0: the stream ended), or an error.
    pub fn filled(&mut self, read: io::Result<usize>) {
        match read {
            Ok(0) => self.ended = Some(Ok(())),
            Ok(n) => self.end += n,
            Err(e) => self.ended = Some(Err(e)),
        }
    }

    /// The next item among the bytes read so far; `None` until more are read.
    pub fn next(&mut self) -> Option<Result<Item<'_>, WsError>> {
        let (at, head, total) = match self.step() {
            Step::More => return None,
            Step::Slow(result) => return Some(result.map(Item::Message)),
            Step::Text { at, head, total } => (at, head, total),
        };
        match std::str::from_utf8(&self.buf[at + head..at + total]) {
            Ok(text) => Some(Ok(Item::Text(text))),
            // tungstenite names the error; a final text frame is never left incomplete.
            Err(_) => slow_read(
                &mut self.slow,
                &mut self.mid_message,
                &self.buf[at..at + total],
            )
            .map(|result| result.map(Item::Message)),
        }
    }

    /// Past the next whole frame: a fast-path text frame (its place in the buffer), what
    /// tungstenite made of any other, or `More` when the next frame is not all there.
    fn step(&mut self) -> Step {
        loop {
            let avail = self.end - self.start;
            let Some((head, len)) = header(&self.buf[self.start..self.end]) else {
                return self.at_end();
            };
            let at = self.start;
            if len > self.frame_cap as u64 {
                // tungstenite refuses it from its header alone: do not wait for the body.
                self.start += head;
                match slow_read(
                    &mut self.slow,
                    &mut self.mid_message,
                    &self.buf[at..at + head],
                ) {
                    Some(result) => return Step::Slow(result),
                    None => continue,
                }
            }
            let total = head + len as usize;
            if avail < total {
                self.want = total;
                return self.at_end();
            }
            self.want = 0;
            self.start += total;
            // Only a final, unmasked text frame within the message cap is taken here;
            // tungstenite names what is wrong with any other (a masked one from the server).
            if !self.mid_message
                && self.buf[at] == FINAL_TEXT
                && self.buf[at + 1] & 0x80 == 0
                && total - head <= self.message_cap
            {
                return Step::Text { at, head, total };
            }
            if let Some(result) = slow_read(
                &mut self.slow,
                &mut self.mid_message,
                &self.buf[at..at + total],
            ) {
                return Step::Slow(result);
            }
        }
    }

    /// With no whole frame left: how the socket ended, once, through tungstenite (which
    /// names a stream cut without a close, or mid-frame, as it always did).
    fn at_end(&mut self) -> Step {
        match self.ended.take() {
            None => Step::More,
            Some(Err(e)) => Step::Slow(Err(WsError::Io(e))),
            Some(Ok(())) => {
                let rest = self.start..self.end;
                self.start = self.end;
                self.slow.get_mut().eof = true;
                let read = slow_read(&mut self.slow, &mut self.mid_message, &self.buf[rest]);
                Step::Slow(read.unwrap_or(Err(WsError::ConnectionClosed)))
            }
        }
    }

    fn take_output(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.slow.get_mut().output)
    }

    fn give_back_output(&mut self, mut out: Vec<u8>) {
        out.clear();
        let feed = self.slow.get_mut();
        if feed.output.is_empty() {
            feed.output = out;
        }
    }
}

/// Where `Reader::step` got to.
enum Step {
    Text {
        at: usize,
        head: usize,
        total: usize,
    },
    Slow(Result<Message, WsError>),
    More,
}

/// Hands tungstenite one whole frame (or the header of one it refuses) and reads what it
/// makes of it; `None` when the frame is part of a message still incomplete.
fn slow_read(
    slow: &mut WebSocket<Feed>,
    mid_message: &mut bool,
    frame: &[u8],
) -> Option<Result<Message, WsError>> {
    let feed = slow.get_mut();
    feed.input.clear();
    feed.input.extend_from_slice(frame);
    feed.pos = 0;
    match slow.read() {
        Ok(msg) => {
            match &msg {
                Message::Text(_) | Message::Binary(_) => *mid_message = false,
                // Moves the pong tungstenite queued into the output, for `Line::answer`;
                // writing into a `Feed` cannot fail.
                Message::Ping(_) => {
                    let _ = slow.flush();
                }
                _ => {}
            }
            Some(Ok(msg))
        }
        Err(WsError::Io(e)) if e.kind() == io::ErrorKind::WouldBlock => {
            *mid_message = true;
            None
        }
        Err(e) => Some(Err(e)),
    }
}

/// A frame header at the front of `bytes`: its own length and the payload's; `None` when
/// not all of it is there.
fn header(bytes: &[u8]) -> Option<(usize, u64)> {
    let second = *bytes.get(1)?;
    let (ext, len7) = match second & 0x7f {
        126 => (2, None),
        127 => (8, None),
        n => (0, Some(u64::from(n))),
    };
    let head = 2 + ext + if second & 0x80 == 0 { 0 } else { 4 };
    if bytes.len() < head {
        return None;
    }
    let len = len7.unwrap_or_else(|| {
        let mut be = [0u8; 8];
        be[8 - ext..].copy_from_slice(&bytes[2..2 + ext]);
        u64::from_be_bytes(be)
    });
    Some((head, len))
}

/// tungstenite's side of the line: reads the frames it is fed, then "would block" (or the
/// end, once the socket ended); what it writes is kept for the socket.
#[derive(Default)]
struct Feed {
    input: Vec<u8>,
    pos: usize,
    eof: bool,
    output: Vec<u8>,
}

impl Read for Feed {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let rest = &self.input[self.pos..];
        if rest.is_empty() {
            return if self.eof {
                Ok(0)
            } else {
                Err(io::ErrorKind::WouldBlock.into())
            };
        }
        let n = rest.len().min(buf.len());
        buf[..n].copy_from_slice(&rest[..n]);
        self.pos += n;
        Ok(n)
    }
}

impl Write for Feed {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.output.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The socket during the handshake: tungstenite gets the response up to the end of its
/// headers and not a byte more, so the frames that follow in the same segment (the runtime
/// sends `stream.hello` at once) stay here for the reader instead of in tungstenite's
/// buffer, which `into_inner` would drop.
struct Tap {
    tcp: TcpStream,
    /// Read from the socket, not handed on.
    held: Vec<u8>,
    /// How much of `\r\n\r\n` the bytes handed on end with; 4 once the headers ended.
    matched: usize,
}

impl Tap {
    fn new(tcp: TcpStream) -> Self {
        Self {
            tcp,
            held: Vec::new(),
            matched: 0,
        }
    }
}

impl AsyncRead for Tap {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.matched == 4 {
            // Past the headers only if tungstenite reads on (a refused handshake's body).
            if this.held.is_empty() {
                return Pin::new(&mut this.tcp).poll_read(cx, out);
            }
            let n = this.held.len().min(out.remaining());
            out.put_slice(&this.held[..n]);
            this.held.drain(..n);
            return Poll::Ready(Ok(()));
        }
        if this.held.is_empty() {
            let mut chunk = [0u8; 4096];
            let mut read = ReadBuf::new(&mut chunk);
            ready!(Pin::new(&mut this.tcp).poll_read(cx, &mut read))?;
            this.held.extend_from_slice(read.filled());
            if this.held.is_empty() {
                return Poll::Ready(Ok(()));
            }
        }
        let mut n = 0;
        for &b in &this.held {
            if this.matched == 4 || n == out.remaining() {
                break;
            }
            n += 1;
            this.matched = if b == b"\r\n\r\n"[this.matched] {
                this.matched + 1
            } else {
                usize::from(b == b'\r')
            };
        }
        out.put_slice(&this.held[..n]);
        this.held.drain(..n);
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for Tap {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().tcp).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::{Item, Reader, dial};
    use std::io::{self, Read, Write};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio_tungstenite::tungstenite::Message;
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    use tokio_tungstenite::tungstenite::error::Error as WsError;
    use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
    use tokio_tungstenite::tungstenite::protocol::{Role, WebSocket, WebSocketConfig};

    /// Small caps, so "over the cap" costs a kilobyte, not megabytes.
    const CAP: usize = 1000;

    fn config() -> WebSocketConfig {
        WebSocketConfig::default()
            .max_message_size(Some(CAP))
            .max_frame_size(Some(CAP))
    }

    /// A message cap below the frame cap: a text frame between them is read whole, then
    /// refused.
    fn config_small_messages() -> WebSocketConfig {
        config().max_message_size(Some(200))
    }

    /// One frame as a server (or a broken peer) writes it: `first` is FIN, RSV and opcode;
    /// the length in its shortest form or, with `wide`, a longer one than needed.
    fn frame(
        rng: &mut fastrand::Rng,
        first: u8,
        payload: &[u8],
        wide: bool,
        mask: bool,
    ) -> Vec<u8> {
        let mut out = vec![first];
        let bit = if mask { 0x80 } else { 0 };
        let len = payload.len();
        match (len, wide && rng.bool()) {
            (0..=125, false) => out.push(bit | len as u8),
            (0..=0xffff, false) => {
                out.push(bit | 0x7e);
                out.extend_from_slice(&(len as u16).to_be_bytes());
            }
            (0..=0xffff, true) if rng.bool() => {
                out.push(bit | 0x7e);
                out.extend_from_slice(&(len as u16).to_be_bytes());
            }
            _ => {
                out.push(bit | 0x7f);
                out.extend_from_slice(&(len as u64).to_be_bytes());
            }
        }
        if mask {
            let key: [u8; 4] = std::array::from_fn(|_| rng.u8(..));
            out.extend_from_slice(&key);
            out.extend(payload.iter().enumerate().map(|(i, b)| b ^ key[i % 4]));
        } else {
            out.extend_from_slice(payload);
        }
        out
    }

    fn text(rng: &mut fastrand::Rng, max: usize) -> String {
        let pool = ['a', 'z', '{', '"', ' ', 'é', '€', '𝄞', '\u{0}', '\n'];
        let n = rng.usize(..=max);
        let mut s = String::new();
        while s.len() < n {
            s.push(pool[rng.usize(..pool.len())]);
        }
        s
    }

    fn bytes(rng: &mut fastrand::Rng, max: usize) -> Vec<u8> {
        (0..rng.usize(..=max)).map(|_| rng.u8(..)).collect()
    }

    /// A random stream of frames: mostly text, with every kind of frame the reader must
    /// pass to tungstenite mixed in, broken ones included.
    fn stream(rng: &mut fastrand::Rng) -> Vec<u8> {
        let mut out = Vec::new();
        for _ in 0..rng.usize(1..16) {
            let wide = rng.u8(..8) == 0;
            match rng.u8(..20) {
                0..=7 => {
                    let t = text(rng, 300);
                    out.extend(frame(rng, 0x81, t.as_bytes(), wide, false));
                }
                8 => {
                    let b = if rng.bool() {
                        text(rng, 80).into_bytes()
                    } else {
                        bytes(rng, 80)
                    };
                    out.extend(frame(rng, 0x82, &b, wide, false));
                }
                9 | 10 => {
                    // A fragmented message, cut anywhere (inside a character too), with
                    // control frames between the pieces.
                    let op = if rng.bool() { 0x01 } else { 0x02 };
                    let whole = text(rng, 400).into_bytes();
                    let mut cuts: Vec<usize> = (0..rng.usize(1..4))
                        .map(|_| rng.usize(..=whole.len()))
                        .collect();
                    cuts.sort_unstable();
                    cuts.push(whole.len());
                    let mut from = 0;
                    for (i, &to) in cuts.iter().enumerate() {
                        let fin = if i + 1 == cuts.len() { 0x80 } else { 0 };
                        let opcode = if i == 0 { op } else { 0 };
                        out.extend(frame(rng, fin | opcode, &whole[from..to], wide, false));
                        from = to;
                        if rng.u8(..3) == 0 {
                            let p = bytes(rng, 20);
                            out.extend(frame(rng, 0x89, &p, false, false));
                        }
                    }
                }
                11 => {
                    let max = if rng.u8(..6) == 0 { 130 } else { 125 };
                    let p = bytes(rng, max);
                    out.extend(frame(rng, 0x89, &p, wide, false));
                }
                12 => {
                    let p = bytes(rng, 20);
                    out.extend(frame(rng, 0x8A, &p, wide, false));
                }
                13 => {
                    let mut p = Vec::new();
                    match rng.u8(..4) {
                        0 => {}
                        1 => p.push(3),
                        2 => p.extend_from_slice(&[0x03, 0xe7]),
                        _ => {
                            let code: u16 = [1000, 1001, 1011, 999, 1005, 3000][rng.usize(..6)];
                            p.extend_from_slice(&code.to_be_bytes());
                            p.extend_from_slice(text(rng, 20).as_bytes());
                        }
                    }
                    out.extend(frame(rng, 0x88, &p, wide, false));
                }
                14 => {
                    // Oversize: over the cap, declared and sent.
                    let t = "x".repeat(CAP + 1 + rng.usize(..100));
                    let first = [0x81, 0x82, 0x01][rng.usize(..3)];
                    out.extend(frame(rng, first, t.as_bytes(), wide, false));
                }
                15 => {
                    let mut b = text(rng, 40).into_bytes();
                    b.push(0xff);
                    b.extend_from_slice(text(rng, 10).as_bytes());
                    out.extend(frame(rng, 0x81, &b, wide, false));
                }
                16 => {
                    let t = text(rng, 40);
                    out.extend(frame(rng, 0x81, t.as_bytes(), wide, true));
                }
                _ => {
                    // Reserved bits, reserved opcodes, a fragmented ping, a stray
                    // continuation, an unfinished text frame.
                    let first =
                        [0xC1, 0xA1, 0x91, 0x83, 0x8B, 0x09, 0x80, 0x00, 0x01][rng.usize(..9)];
                    let t = text(rng, 40);
                    out.extend(frame(rng, first, t.as_bytes(), wide, false));
                }
            }
        }
        if rng.u8(..4) == 0 {
            // Cut mid-frame.
            out.truncate(rng.usize(..=out.len()));
        }
        out
    }

    /// What a reader said, in words both readers share; the last item ends the read.
    fn said(item: Result<Item<'_>, WsError>) -> (String, bool) {
        match item {
            Ok(Item::Text(t)) => (format!("text {t:?}"), false),
            Ok(Item::Message(Message::Text(t))) => (format!("text {:?}", t.as_str()), false),
            Ok(Item::Message(Message::Close(c))) => (format!("close {c:?}"), true),
            Ok(Item::Message(m)) => (format!("{m:?}"), false),
            Err(e) => (format!("error {e}"), true),
        }
    }

    /// The bytes, then the end of the stream; what is written is dropped.
    struct Wire(io::Cursor<Vec<u8>>);

    impl Read for Wire {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            Read::read(&mut self.0, buf)
        }
    }

    impl Write for Wire {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    /// tungstenite alone, as the observer read the stream before.
    fn by_tungstenite(bytes: &[u8], config: WebSocketConfig) -> Vec<String> {
        let wire = Wire(io::Cursor::new(bytes.to_vec()));
        let mut ws = WebSocket::from_raw_socket(wire, Role::Client, Some(config));
        let mut out = Vec::new();
        loop {
            let (words, last) = said(ws.read().map(Item::Message));
            out.push(words);
            if last {
                return out;
            }
        }
    }

    /// The reader, fed the bytes in pieces of random sizes.
    fn by_reader(bytes: &[u8], rng: &mut fastrand::Rng, config: WebSocketConfig) -> Vec<String> {
        let mut reader = Reader::new(&[], config);
        let mut out = Vec::new();
        let mut rest = bytes;
        loop {
            while let Some(item) = reader.next() {
                let (words, last) = said(item);
                out.push(words);
                if last {
                    return out;
                }
            }
            if rest.is_empty() {
                reader.filled(Ok(0));
                continue;
            }
            let spare = reader.spare();
            let n = rng.usize(1..=rest.len().min(spare.len()).min(2000));
            spare[..n].copy_from_slice(&rest[..n]);
            rest = &rest[n..];
            reader.filled(Ok(n));
        }
    }

    #[test]
    fn the_reader_says_what_tungstenite_says_of_any_stream() {
        let mut rng = fastrand::Rng::with_seed(0x5eed);
        let mut seen = std::collections::BTreeSet::new();
        for round in 0..3000 {
            let bytes = stream(&mut rng);
            let config = if round % 4 == 3 {
                config_small_messages()
            } else {
                config()
            };
            let want = by_tungstenite(&bytes, config);
            let got = by_reader(&bytes, &mut rng, config);
            assert_eq!(got, want, "round {round}: {bytes:02x?}");
            for words in want {
                let kind = if words.starts_with("error") {
                    words.chars().take(60).collect()
                } else {
                    words
                        .split([' ', '('])
                        .next()
                        .unwrap_or_default()
                        .to_owned()
                };
                seen.insert(kind);
            }
        }
        // The streams reach every case, or the comparison proves less than it says.
        for case in [
            "text",
            "Binary",
            "Ping",
            "Pong",
            "close",
            "error UTF-8",
            "Message too long",
            "> 200",
            "Connection reset without",
            "Continue frame but nothing",
            "Control frame too big",
            "invalid opcode",
            "Fragmented control frame",
            "Invalid close sequence",
            "masked frame from",
            "Reserved bits are non-zero",
            "waiting for more fragm",
        ] {
            assert!(
                seen.iter().any(|s| s.contains(case)),
                "no stream reached {case}: {seen:?}"
            );
        }
    }

    #[test]
    fn a_ping_is_answered_with_its_payload_masked() {
        let mut rng = fastrand::Rng::with_seed(7);
        let mut reader = Reader::new(
            &frame(&mut rng, 0x89, b"are you there", false, false),
            config(),
        );
        assert!(matches!(
            reader.next(),
            Some(Ok(Item::Message(Message::Ping(_))))
        ));
        let out = reader.take_output();
        assert_eq!(out[0], 0x8A, "{out:02x?}");
        assert_eq!(out[1], 0x8d);
        let key = &out[2..6];
        let payload: Vec<u8> = out[6..]
            .iter()
            .enumerate()
            .map(|(i, b)| b ^ key[i % 4])
            .collect();
        assert_eq!(payload, b"are you there");
    }

    #[test]
    fn a_long_frame_grows_the_buffer_and_a_later_read_shrinks_it() {
        let mut rng = fastrand::Rng::with_seed(9);
        let caps = WebSocketConfig::default()
            .max_message_size(Some(8 << 20))
            .max_frame_size(Some(8 << 20));
        let long = "y".repeat(3 << 20);
        let bytes = [
            frame(&mut rng, 0x81, long.as_bytes(), false, false),
            frame(&mut rng, 0x81, b"after", false, false),
        ]
        .concat();
        let mut reader = Reader::new(&[], caps);
        let mut rest = &bytes[..];
        let mut got = Vec::new();
        while got.len() < 2 {
            while let Some(item) = reader.next() {
                match item {
                    Ok(Item::Text(t)) => got.push(t.len()),
                    other => panic!("{other:?}"),
                }
            }
            let spare = reader.spare();
            let n = rest.len().min(spare.len());
            spare[..n].copy_from_slice(&rest[..n]);
            rest = &rest[n..];
            reader.filled(Ok(n));
        }
        assert_eq!(got, [3 << 20, 5]);
        reader.spare();
        assert_eq!(reader.buf.len(), super::READ_CHUNK);
    }

    /// The first frames often come in the same segment as the handshake's answer: they
    /// must reach the reader, not stay in tungstenite's handshake buffer.
    #[tokio::test]
    async fn frames_sent_with_the_handshake_answer_are_read() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut tcp, _) = listener.accept().await.unwrap();
            let mut request = Vec::new();
            let mut byte = [0u8; 1];
            while !request.ends_with(b"\r\n\r\n") {
                tcp.read_exact(&mut byte).await.unwrap();
                request.push(byte[0]);
            }
            let request = String::from_utf8(request).unwrap();
            let key = request
                .lines()
                .find_map(|l| {
                    l.strip_prefix("sec-websocket-key: ")
                        .or_else(|| l.strip_prefix("Sec-WebSocket-Key: "))
                })
                .unwrap();
            let mut answer = format!(
                "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Accept: {}\r\n\r\n",
                derive_accept_key(key.trim().as_bytes())
            )
            .into_bytes();
            let mut rng = fastrand::Rng::with_seed(1);
            answer.extend(frame(&mut rng, 0x81, b"hello", false, false));
            answer.extend(frame(&mut rng, 0x81, b"world", false, false));
            tcp.write_all(&answer).await.unwrap();
            let mut rest = Vec::new();
            let _ = tcp.read_to_end(&mut rest).await;
        });
        let request = format!("ws://{addr}/").into_client_request().unwrap();
        let mut line = dial(request, config()).await.unwrap();
        let mut got = Vec::new();
        while got.len() < 2 {
            while let Some(item) = line.next() {
                match item {
                    Ok(Item::Text(t)) => got.push(t.to_owned()),
                    other => panic!("{other:?}"),
                }
            }
            if got.len() < 2 {
                line.fill().await;
            }
        }
        assert_eq!(got, ["hello", "world"]);
    }
}

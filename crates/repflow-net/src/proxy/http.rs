//! HTTP/1.x delimiting, sans-IO: where one request or one response ends in a byte buffer.
//! The proxy forwards the bytes themselves, never rewritten.
//!
//! Strict where a lenient parser lets two parties disagree on where a message ends (request
//! smuggling): CR LF line ends only, no folded header lines, no whitespace before a header's
//! colon, `Content-Length` digits only (repeated copies must agree), `Transfer-Encoding` only
//! `chunked` and never together with `Content-Length`. Upgrades (`CONNECT`, `Upgrade:`,
//! `101 Switching Protocols`) are refused: the proxy carries request/response exchanges.

use thiserror::Error;

/// Why bytes cannot be delimited as HTTP/1.x.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum HttpError {
    /// The request or status line is malformed.
    #[error("malformed {0} line")]
    StartLine(&'static str),
    /// Not HTTP/1.0 or HTTP/1.1.
    #[error("unsupported HTTP version (HTTP/1.0 and HTTP/1.1 only)")]
    Version,
    /// A header line is malformed (no colon, bad name, folded, bare LF, control bytes).
    #[error("malformed header line")]
    Header,
    /// `Content-Length` is not a number, or its copies disagree.
    #[error("invalid or conflicting Content-Length")]
    ContentLength,
    /// A transfer coding other than `chunked`, or one together with `Content-Length`.
    #[error("unsupported Transfer-Encoding (only chunked, and never with Content-Length)")]
    TransferEncoding,
    /// A chunk size line or chunk terminator is malformed.
    #[error("malformed chunked body")]
    Chunk,
    /// `CONNECT`, `Upgrade` or a `101` response.
    #[error("protocol upgrades and CONNECT are not supported")]
    Upgrade,
    /// The message (or its head) is longer than the limit.
    #[error("message longer than the limit of {0} bytes")]
    TooLarge(usize),
}

/// How a message's body is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Body {
    /// No body.
    None,
    /// `Content-Length` bytes.
    Length(u64),
    /// Chunked transfer coding.
    Chunked,
    /// A response without length: the body runs until the server closes the connection.
    UntilClose,
}

/// The head of a message, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    /// Bytes of the start line and headers, blank line included.
    pub len: usize,
    /// How the body is delimited.
    pub body: Body,
    /// The connection closes after this exchange (`Connection: close`, or HTTP/1.0 without
    /// keep-alive).
    pub close: bool,
    /// Request: method is `HEAD` (its response has no body). Response: status code.
    pub head_or_status: u16,
    /// Request: carries `Expect: 100-continue`.
    pub expect_continue: bool,
}

/// A complete message found at the start of a buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// Its head.
    pub head: Head,
    /// Bytes of the whole message (head and body).
    pub len: usize,
}

/// Longest head (start line and headers) accepted.
pub const MAX_HEAD: usize = 64 * 1024;

fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// Finds the end of the head (after the blank line): `Ok(None)` while incomplete.
fn head_end(buf: &[u8], max: usize) -> Result<Option<usize>, HttpError> {
    let limit = max.min(MAX_HEAD);
    let scan = &buf[..buf.len().min(limit)];
    let mut at = 0;
    while let Some(i) = scan[at..].iter().position(|&b| b == b'\n') {
        let nl = at + i;
        if nl == 0 || scan[nl - 1] != b'\r' {
            return Err(HttpError::Header);
        }
        if nl == at + 1 {
            // An empty line: the end of the head (a leading one is not allowed).
            return if at == 0 {
                Err(HttpError::StartLine("start"))
            } else {
                Ok(Some(nl + 1))
            };
        }
        at = nl + 1;
    }
    if buf.len() >= limit {
        return Err(HttpError::TooLarge(limit));
    }
    Ok(None)
}

fn version(v: &[u8]) -> Result<bool, HttpError> {
    match v {
        b"HTTP/1.1" => Ok(true),
        b"HTTP/1.0" => Ok(false),
        _ => Err(HttpError::Version),
    }
}

struct Fields {
    length: Option<u64>,
    chunked: bool,
    close: bool,
    keep_alive: bool,
    upgrade: bool,
    expect_continue: bool,
}

fn has_token(value: &[u8], token: &str) -> bool {
    value
        .split(|&b| b == b',')
        .any(|t| t.trim_ascii().eq_ignore_ascii_case(token.as_bytes()))
}

/// Reads the header lines (after the start line, up to the blank line).
fn fields(lines: &[u8]) -> Result<Fields, HttpError> {
    let mut f = Fields {
        length: None,
        chunked: false,
        close: false,
        keep_alive: false,
        upgrade: false,
        expect_continue: false,
    };
    let mut te = false;
    for line in lines.split(|&b| b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            continue;
        }
        let colon = line
            .iter()
            .position(|&b| b == b':')
            .ok_or(HttpError::Header)?;
        let (name, value) = (&line[..colon], line[colon + 1..].trim_ascii());
        if name.is_empty() || !name.iter().all(|&b| is_tchar(b)) {
            return Err(HttpError::Header);
        }
        if value.iter().any(|&b| (b < 0x20 && b != b'\t') || b == 0x7f) {
            return Err(HttpError::Header);
        }
        if name.eq_ignore_ascii_case(b"content-length") {
            if value.is_empty() || value.len() > 18 || !value.iter().all(u8::is_ascii_digit) {
                return Err(HttpError::ContentLength);
            }
            let n = value.iter().fold(0u64, |a, d| a * 10 + u64::from(d - b'0'));
            if f.length.is_some_and(|m| m != n) {
                return Err(HttpError::ContentLength);
            }
            f.length = Some(n);
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            if te || !value.eq_ignore_ascii_case(b"chunked") {
                return Err(HttpError::TransferEncoding);
            }
            te = true;
            f.chunked = true;
        } else if name.eq_ignore_ascii_case(b"connection") {
            f.close |= has_token(value, "close");
            f.keep_alive |= has_token(value, "keep-alive");
            f.upgrade |= has_token(value, "upgrade");
        } else if name.eq_ignore_ascii_case(b"upgrade") {
            f.upgrade = true;
        } else if name.eq_ignore_ascii_case(b"expect") {
            f.expect_continue |= value.eq_ignore_ascii_case(b"100-continue");
        }
    }
    if f.chunked && f.length.is_some() {
        return Err(HttpError::TransferEncoding);
    }
    Ok(f)
}

/// Length of a chunked body starting at `buf[0]`: `Ok(None)` while incomplete.
fn chunked_len(buf: &[u8], max: usize) -> Result<Option<usize>, HttpError> {
    let mut pos = 0usize;
    loop {
        // Chunk size line: hex digits, optional extensions, CR LF.
        let scan_end = buf.len().min(pos + 1024);
        let Some(i) = buf[pos..scan_end].iter().position(|&b| b == b'\n') else {
            return if scan_end - pos >= 1024 {
                Err(HttpError::Chunk)
            } else {
                Ok(None)
            };
        };
        let nl = pos + i;
        if nl == pos || buf[nl - 1] != b'\r' {
            return Err(HttpError::Chunk);
        }
        let line = &buf[pos..nl - 1];
        let digits = line
            .iter()
            .position(|&b| b == b';')
            .map_or(line, |s| &line[..s]);
        let digits = digits.trim_ascii_end();
        if digits.is_empty() || digits.len() > 15 || !digits.iter().all(u8::is_ascii_hexdigit) {
            return Err(HttpError::Chunk);
        }
        if line.iter().any(|&b| b < 0x20 && b != b'\t') {
            return Err(HttpError::Chunk);
        }
        let size = u64::from_str_radix(std::str::from_utf8(digits).expect("hex"), 16)
            .map_err(|_| HttpError::Chunk)?;
        pos = nl + 1;
        if size == 0 {
            // Trailer section: header lines, then an empty line.
            loop {
                let scan_end = buf.len().min(pos + MAX_HEAD);
                let Some(i) = buf[pos..scan_end].iter().position(|&b| b == b'\n') else {
                    return if scan_end - pos >= MAX_HEAD {
                        Err(HttpError::TooLarge(max))
                    } else {
                        Ok(None)
                    };
                };
                let nl = pos + i;
                if nl == pos || buf[nl - 1] != b'\r' {
                    return Err(HttpError::Chunk);
                }
                let empty = nl == pos + 1;
                if !empty {
                    fields(&buf[pos..nl + 1])?;
                }
                pos = nl + 1;
                if pos > max {
                    return Err(HttpError::TooLarge(max));
                }
                if empty {
                    return Ok(Some(pos));
                }
            }
        }
        let end = pos as u64 + size + 2;
        if end > max as u64 {
            return Err(HttpError::TooLarge(max));
        }
        let end = end as usize;
        if buf.len() < end {
            return Ok(None);
        }
        if &buf[end - 2..end] != b"\r\n" {
            return Err(HttpError::Chunk);
        }
        pos = end;
    }
}

/// Completes a message once its head is known.
fn with_body(buf: &[u8], head: Head, max: usize) -> Result<Option<Message>, HttpError> {
    let len = match head.body {
        Body::None => Some(head.len),
        Body::Length(n) => {
            let end = head.len as u64 + n;
            if end > max as u64 {
                return Err(HttpError::TooLarge(max));
            }
            (buf.len() as u64 >= end).then_some(end as usize)
        }
        Body::Chunked => {
            chunked_len(&buf[head.len..], max.saturating_sub(head.len))?.map(|n| head.len + n)
        }
        // Complete only when the connection closes: the caller decides.
        Body::UntilClose => None,
    };
    Ok(len.map(|len| Message { head, len }))
}

/// The head of the request at the start of `buf`.
pub fn request_head(buf: &[u8], max: usize) -> Result<Option<Head>, HttpError> {
    let Some(end) = head_end(buf, max)? else {
        return Ok(None);
    };
    let first = buf
        .iter()
        .position(|&b| b == b'\n')
        .expect("head has a line")
        - 1;
    let mut parts = buf[..first].split(|&b| b == b' ');
    let (Some(method), Some(target), Some(ver), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(HttpError::StartLine("request"));
    };
    if method.is_empty() || !method.iter().all(|&b| is_tchar(b)) {
        return Err(HttpError::StartLine("request"));
    }
    if target.is_empty() || target.iter().any(|&b| b <= 0x20 || b == 0x7f) {
        return Err(HttpError::StartLine("request"));
    }
    let v11 = version(ver)?;
    if method == b"CONNECT" {
        return Err(HttpError::Upgrade);
    }
    let f = fields(&buf[first + 2..end])?;
    if f.upgrade {
        return Err(HttpError::Upgrade);
    }
    if f.chunked && !v11 {
        return Err(HttpError::TransferEncoding);
    }
    let body = if f.chunked {
        Body::Chunked
    } else {
        match f.length {
            Some(0) | None => Body::None,
            Some(n) => Body::Length(n),
        }
    };
    Ok(Some(Head {
        len: end,
        body,
        close: f.close || (!v11 && !f.keep_alive),
        head_or_status: u16::from(method == b"HEAD"),
        expect_continue: f.expect_continue,
    }))
}

/// The whole request at the start of `buf`: `Ok(None)` while incomplete.
pub fn request(buf: &[u8], max: usize) -> Result<Option<Message>, HttpError> {
    match request_head(buf, max)? {
        None => Ok(None),
        Some(h) => with_body(buf, h, max),
    }
}

/// The response at the start of `buf`, answering a request whose method was `HEAD` when
/// `to_head` is set. Interim `1xx` responses are part of the message (they precede the final
/// one). A response delimited by the connection's close reports [`Body::UntilClose`] in
/// `Err`-free form through [`response_head`]; here it stays incomplete.
pub fn response(buf: &[u8], to_head: bool, max: usize) -> Result<Option<Message>, HttpError> {
    let mut at = 0;
    loop {
        let Some(h) = response_head(&buf[at..], to_head, max.saturating_sub(at))? else {
            return Ok(None);
        };
        if (100..200).contains(&h.head_or_status) {
            at += h.len;
            continue;
        }
        let h = Head {
            len: at + h.len,
            ..h
        };
        return with_body(buf, h, max);
    }
}

/// The head of the response at the start of `buf` (the first, possibly interim, one).
pub fn response_head(buf: &[u8], to_head: bool, max: usize) -> Result<Option<Head>, HttpError> {
    let Some(end) = head_end(buf, max)? else {
        return Ok(None);
    };
    let first = buf
        .iter()
        .position(|&b| b == b'\n')
        .expect("head has a line")
        - 1;
    let line = &buf[..first];
    if line.len() < 12 || line[8] != b' ' || (line.len() > 12 && line[12] != b' ') {
        return Err(HttpError::StartLine("status"));
    }
    let v11 = version(&line[..8])?;
    let code = &line[9..12];
    if !code.iter().all(u8::is_ascii_digit) {
        return Err(HttpError::StartLine("status"));
    }
    let status = code.iter().fold(0u16, |a, d| a * 10 + u16::from(d - b'0'));
    if !(100..600).contains(&status) {
        return Err(HttpError::StartLine("status"));
    }
    if status == 101 {
        return Err(HttpError::Upgrade);
    }
    let f = fields(&buf[first + 2..end])?;
    let body = if (100..200).contains(&status) || status == 204 || status == 304 || to_head {
        Body::None
    } else if f.chunked {
        Body::Chunked
    } else {
        match f.length {
            Some(0) => Body::None,
            Some(n) => Body::Length(n),
            None => Body::UntilClose,
        }
    };
    Ok(Some(Head {
        len: end,
        body,
        close: f.close || (!v11 && !f.keep_alive) || body == Body::UntilClose,
        head_or_status: status,
        expect_continue: false,
    }))
}

/// The response `msg` (an HTTP/1.1 response whose head is `head_len` bytes, complete and
/// not delimited by the close) without its `Connection` header lines, or `None` when it is
/// not HTTP/1.1 or has none. `Connection` is hop-by-hop: the upstream's `close` ends the
/// server sidecar's pooled connection, not the application's.
pub fn without_connection_header(msg: &[u8], head_len: usize) -> Option<Vec<u8>> {
    if !msg.starts_with(b"HTTP/1.1 ") || head_len > msg.len() {
        return None;
    }
    let head = &msg[..head_len];
    let mut out = Vec::with_capacity(msg.len());
    let mut found = false;
    let mut at = 0;
    while at < head.len() {
        let end = head[at..]
            .windows(2)
            .position(|w| w == b"\r\n")
            .map_or(head.len(), |i| at + i + 2);
        let line = &head[at..end];
        let name = b"connection:";
        if at > 0 && line.len() >= name.len() && line[..name.len()].eq_ignore_ascii_case(name) {
            found = true;
        } else {
            out.extend_from_slice(line);
        }
        at = end;
    }
    if !found {
        return None;
    }
    out.extend_from_slice(&msg[head_len..]);
    Some(out)
}

#[cfg(test)]
mod tests {
    #[test]
    fn connection_header_is_removed_from_a_delimited_response() {
        let m = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\nX-A: b\r\n\r\nhi";
        let h = super::response(m, false, 1 << 20).unwrap().unwrap();
        assert!(h.head.close);
        let out = super::without_connection_header(m, h.head.len).unwrap();
        assert_eq!(
            out,
            b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-A: b\r\n\r\nhi"
        );
        let h2 = super::response(&out, false, 1 << 20).unwrap().unwrap();
        assert!(!h2.head.close && h2.len == out.len());
        assert_eq!(
            super::without_connection_header(b"HTTP/1.0 200 OK\r\n\r\n", 19),
            None
        );
    }

    use super::*;
    use proptest::prelude::*;

    const MAX: usize = 1 << 20;

    #[test]
    fn requests() {
        let b =
            b"GET / HTTP/1.1\r\nHost: a\r\n\r\nPOST /x HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc";
        let m = request(b, MAX).unwrap().unwrap();
        assert_eq!(m.len, 27);
        assert_eq!(m.head.body, Body::None);
        assert!(!m.head.close);
        let m2 = request(&b[27..], MAX).unwrap().unwrap();
        assert_eq!(m2.len, b.len() - 27);
        for k in 0..27 {
            assert_eq!(request(&b[..k], MAX), Ok(None), "prefix {k}");
        }
        let c = b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\nabc\r\n0\r\nT: v\r\n\r\n";
        assert_eq!(request(c, MAX).unwrap().unwrap().len, c.len());
        for k in 0..c.len() {
            assert_eq!(request(&c[..k], MAX), Ok(None), "prefix {k}");
        }
        let h10 = request(b"GET / HTTP/1.0\r\n\r\n", MAX).unwrap().unwrap();
        assert!(h10.head.close);
        let head = request(b"HEAD / HTTP/1.1\r\n\r\n", MAX).unwrap().unwrap();
        assert_eq!(head.head.head_or_status, 1);
    }

    #[test]
    fn malformed_requests_are_refused() {
        for bad in [
            &b"GET /\r\n\r\n"[..],
            b"GET / HTTP/2.0\r\n\r\n",
            b"GET / HTTP/1.1\nHost: a\n\n",
            b"GET / HTTP/1.1\r\nHost : a\r\n\r\n",
            b"GET / HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n",
            b"POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
            b"POST / HTTP/1.1\r\nContent-Length: +1\r\n\r\na",
            b"POST / HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
            b"POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
            b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcX\r\n",
            b"CONNECT a:1 HTTP/1.1\r\n\r\n",
            b"GET / HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
            b"\r\nGET / HTTP/1.1\r\n\r\n",
        ] {
            assert!(
                request(bad, MAX).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        assert_eq!(
            request(b"POST / HTTP/1.1\r\nContent-Length: 5000\r\n\r\n", 1000),
            Err(HttpError::TooLarge(1000))
        );
        assert!(request(&[b'a'; 2000], 1000).is_err());
    }

    #[test]
    fn responses() {
        let r = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi";
        assert_eq!(response(r, false, MAX).unwrap().unwrap().len, r.len());
        assert_eq!(response(r, true, MAX).unwrap().unwrap().len, r.len() - 2);
        let c = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n";
        assert_eq!(response(c, false, MAX).unwrap().unwrap().len, c.len());
        for k in 0..c.len() {
            assert_eq!(response(&c[..k], false, MAX), Ok(None), "prefix {k}");
        }
        let nc = b"HTTP/1.1 204 No Content\r\n\r\n";
        assert_eq!(response(nc, false, MAX).unwrap().unwrap().len, nc.len());
        let uc = b"HTTP/1.0 200 OK\r\n\r\nbody";
        assert_eq!(response(uc, false, MAX), Ok(None));
        let h = response_head(uc, false, MAX).unwrap().unwrap();
        assert_eq!(h.body, Body::UntilClose);
        assert!(response(b"HTTP/1.1 101 Switching\r\n\r\n", false, MAX).is_err());
        assert!(response(b"HTTP/1.1 2x0 OK\r\n\r\n", false, MAX).is_err());
        assert!(response(b"HTTP/1.1 200\r\n\r\n", false, MAX).is_ok());
    }

    fn arb_request() -> impl Strategy<Value = Vec<u8>> {
        (
            prop::sample::select(vec!["GET", "POST", "PUT", "DELETE"]),
            "[a-z/]{1,10}",
            prop::collection::vec(("[A-Za-z-]{1,8}", "[ -~]{0,12}"), 0..4),
            prop::collection::vec(any::<u8>(), 0..40),
            any::<bool>(),
        )
            .prop_map(|(m, path, hdrs, body, chunked)| {
                let mut out = format!("{m} /{path} HTTP/1.1\r\n").into_bytes();
                for (n, v) in hdrs {
                    let lower = n.to_ascii_lowercase();
                    if [
                        "content-length",
                        "transfer-encoding",
                        "connection",
                        "upgrade",
                        "expect",
                    ]
                    .contains(&lower.as_str())
                    {
                        continue;
                    }
                    out.extend_from_slice(format!("X-{n}: {}\r\n", v.trim()).as_bytes());
                }
                if chunked {
                    out.extend_from_slice(b"Transfer-Encoding: chunked\r\n\r\n");
                    for part in body.chunks(7) {
                        out.extend_from_slice(format!("{:x}\r\n", part.len()).as_bytes());
                        out.extend_from_slice(part);
                        out.extend_from_slice(b"\r\n");
                    }
                    out.extend_from_slice(b"0\r\n\r\n");
                } else {
                    out.extend_from_slice(
                        format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes(),
                    );
                    out.extend_from_slice(&body);
                }
                out
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn arbitrary_bytes_never_panic(b in prop::collection::vec(any::<u8>(), 0..96)) {
            if let Ok(Some(m)) = request(&b, 512) {
                prop_assert!(m.len <= b.len());
            }
            if let Ok(Some(m)) = response(&b, false, 512) {
                prop_assert!(m.len <= b.len());
            }
        }

        #[test]
        fn valid_requests_delimit_exactly(r in arb_request()) {
            prop_assert_eq!(request(&r, MAX).unwrap().map(|m| m.len), Some(r.len()));
            for k in 0..r.len() {
                prop_assert_eq!(request(&r[..k], MAX), Ok(None));
            }
        }

        #[test]
        fn mutated_requests_never_overrun(r in arb_request(), at in any::<prop::sample::Index>(), byte in any::<u8>()) {
            let mut b = r.clone();
            let i = at.index(b.len());
            b[i] = byte;
            if let Ok(Some(m)) = request(&b, MAX) {
                prop_assert!(m.len <= b.len());
            }
        }
    }
}

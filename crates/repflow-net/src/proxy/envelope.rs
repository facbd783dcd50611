//! The bytes between the two sidecars, inside repflow-net calls.
//!
//! Request: `"RP"`, version 1, protocol code, then the application's request bytes (one HTTP
//! request, a run of pipelined RESP commands, or a whole `conn` connection's bytes).
//! Response: a status byte, then the upstream's response bytes (status `OK`) or a UTF-8
//! message (status `REFUSED`: not handed to the real server; `UNKNOWN`: handed to it, outcome
//! unknown — it may have executed).

/// The application protocol a sidecar carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Protocol {
    /// Redis RESP: requests are commands (pipelines kept in order), responses RESP replies.
    Redis,
    /// HTTP/1.0 and HTTP/1.1 with keep-alive; Content-Length and chunked bodies.
    Http,
    /// A whole short TCP connection each way: the client's bytes until it half-closes, the
    /// server's bytes until it closes.
    Conn,
}

impl Protocol {
    /// Parses `redis`, `http` or `conn` (the names of `repflow proxy --protocol`).
    pub fn parse(s: &str) -> Option<Protocol> {
        match s {
            "redis" => Some(Protocol::Redis),
            "http" => Some(Protocol::Http),
            "conn" => Some(Protocol::Conn),
            _ => None,
        }
    }

    /// Its name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Redis => "redis",
            Protocol::Http => "http",
            Protocol::Conn => "conn",
        }
    }

    fn code(self) -> u8 {
        match self {
            Protocol::Redis => 1,
            Protocol::Http => 2,
            Protocol::Conn => 3,
        }
    }
}

const MAGIC: [u8; 2] = *b"RP";
const VERSION: u8 = 1;
/// Bytes in front of the application's request.
pub(crate) const REQUEST_HEAD: usize = 4;

/// Response status byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Status {
    /// The upstream's response follows.
    Ok = 0,
    /// Refused before the real server saw it (a message follows).
    Refused = 1,
    /// Handed to the real server, outcome unknown (a message follows).
    Unknown = 2,
}

/// The request bytes for `proto`, with room reserved so that no copy is needed.
pub(crate) fn request_prefix(proto: Protocol) -> [u8; REQUEST_HEAD] {
    [MAGIC[0], MAGIC[1], VERSION, proto.code()]
}

/// The application's request inside a call's payload, if the header is right for `proto`.
pub(crate) fn open_request(data: &[u8], proto: Protocol) -> Result<&[u8], &'static str> {
    if data.len() < REQUEST_HEAD || data[..2] != MAGIC {
        return Err("not a repflow proxy request");
    }
    if data[2] != VERSION {
        return Err("unsupported proxy envelope version");
    }
    if data[3] != proto.code() {
        return Err("protocol mismatch between the client and server sidecars");
    }
    Ok(&data[REQUEST_HEAD..])
}

/// A response payload.
pub(crate) fn response(status: Status, body: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(1 + body.len());
    v.push(status as u8);
    v.extend_from_slice(body);
    v
}

/// Status and body of a response payload.
pub(crate) fn open_response(data: &[u8]) -> Result<(Status, &[u8]), &'static str> {
    match data.split_first() {
        Some((0, b)) => Ok((Status::Ok, b)),
        Some((1, b)) => Ok((Status::Refused, b)),
        Some((2, b)) => Ok((Status::Unknown, b)),
        _ => Err("malformed response from the server sidecar"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let mut req = request_prefix(Protocol::Redis).to_vec();
        req.extend_from_slice(b"PING\r\n");
        assert_eq!(open_request(&req, Protocol::Redis), Ok(&b"PING\r\n"[..]));
        assert!(open_request(&req, Protocol::Http).is_err());
        assert!(open_request(b"RP", Protocol::Redis).is_err());
        let r = response(Status::Unknown, b"x");
        assert_eq!(open_response(&r), Ok((Status::Unknown, &b"x"[..])));
        assert!(open_response(&[9]).is_err());
        assert!(open_response(&[]).is_err());
    }
}

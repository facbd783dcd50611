//! RESP (Redis serialization protocol) delimiting, sans-IO: where one request or one reply
//! ends in a byte buffer, nothing more. The proxy forwards the bytes themselves; it never
//! rewrites them.
//!
//! Requests are RESP arrays of bulk strings (what `redis-cli` and client libraries send) or
//! inline commands (one line, as typed over telnet). Replies are RESP2 or RESP3 values, except
//! out-of-band push messages (`>`), which do not answer a request.
//!
//! A request's command name is read exactly as Redis reads it, because the sidecars refuse
//! commands by name ([`classify`]): the first bulk string of an array, or the first word of
//! an inline line split by Redis's rules (`sdssplitargs` in Redis's `sds.c`: every C
//! `isspace` byte skipped before a word, quotes and escapes decoded, an unbalanced quote
//! refused). Where this codec and Redis could disagree it refuses: numbers must be what
//! Redis's `string2ll` accepts (no sign but `-`, no leading zero), every line ends in CR LF,
//! and an inline line may not hold a CR or a NUL.

use thiserror::Error;

/// Why bytes cannot be delimited as RESP.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum RespError {
    /// A byte where a RESP type marker was expected.
    #[error("unexpected byte {0:#04x} where a RESP type was expected")]
    BadType(u8),
    /// A length, count or integer line that is not a decimal number.
    #[error("malformed number in a RESP header line")]
    BadNumber,
    /// A line or bulk string not ended by CR LF.
    #[error("missing CR LF terminator")]
    BadTerminator,
    /// A request that is not an array of at least one bulk string.
    #[error("a request must be an array of one or more bulk strings")]
    BadRequest,
    /// The message is longer than the limit.
    #[error("message longer than the limit of {0} bytes")]
    TooLarge(usize),
    /// A push message (RESP3 `>`) where a reply was expected.
    #[error("push messages (RESP3 '>') are not supported: use RESP2, no pub/sub or tracking")]
    Push,
    /// An inline command whose quotes Redis would refuse (left open, or a closing quote
    /// followed by something other than a space).
    #[error("unbalanced quotes in an inline command")]
    Quotes,
}

/// One request found at the start of a buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// Bytes of the request, terminator included.
    pub len: usize,
    /// The command name as Redis reads it: the first bulk string of an array, or the first
    /// word of an inline command with its quotes and escapes decoded (`"MULTI"` and
    /// `\x0bMULTI` are both `MULTI`). `None` for an inline line without words (blanks only),
    /// which Redis skips without a reply; `Some` of an empty name for `""`, which Redis
    /// answers (with an error).
    pub name: Option<Vec<u8>>,
}

/// Longest header line (`*N`, `$N`, `:N`) of an array or bulk string accepted.
const MAX_NUMBER_LINE: usize = 32;
/// Longest inline command line (Redis refuses longer ones too).
const MAX_INLINE: usize = 64 * 1024;

/// Position of the CR LF ending the line that starts at `at`, searched up to `limit` bytes.
fn line_end(buf: &[u8], at: usize, limit: usize) -> Result<Option<usize>, RespError> {
    let end = buf.len().min(at.saturating_add(limit));
    match buf[at..end].iter().position(|&b| b == b'\n') {
        Some(i) => {
            let nl = at + i;
            if nl == at || buf[nl - 1] != b'\r' {
                return Err(RespError::BadTerminator);
            }
            Ok(Some(nl - 1))
        }
        None if end < buf.len() || buf.len() - at >= limit => Err(RespError::BadTerminator),
        None => Ok(None),
    }
}

/// A strict decimal integer as Redis's `string2ll` reads it: `0`, or an optional `-` and 1
/// to 18 digits, the first not `0`.
fn number(s: &[u8]) -> Result<i64, RespError> {
    let (neg, digits) = match s.first() {
        Some(b'-') => (true, &s[1..]),
        _ => (false, s),
    };
    if digits.is_empty() || digits.len() > 18 || !digits.iter().all(u8::is_ascii_digit) {
        return Err(RespError::BadNumber);
    }
    if digits[0] == b'0' && (neg || digits.len() > 1) {
        return Err(RespError::BadNumber);
    }
    let v = digits
        .iter()
        .fold(0i64, |acc, d| acc * 10 + i64::from(d - b'0'));
    Ok(if neg { -v } else { v })
}

/// Reads a `<marker><number>\r\n` line at `at`: `(number, position after the line)`.
fn number_line(buf: &[u8], at: usize) -> Result<Option<(i64, usize)>, RespError> {
    match line_end(buf, at, MAX_NUMBER_LINE)? {
        None => Ok(None),
        Some(cr) => Ok(Some((number(&buf[at + 1..cr])?, cr + 2))),
    }
}

/// The request at the start of `buf`: `Ok(None)` while incomplete, an error as soon as the
/// bytes cannot be a request or it would exceed `max` bytes.
pub fn request(buf: &[u8], max: usize) -> Result<Option<Request>, RespError> {
    let Some(&first) = buf.first() else {
        return Ok(None);
    };
    if first != b'*' {
        return inline(buf, max);
    }
    let Some((n, mut pos)) = number_line(buf, 0)? else {
        return Ok(None);
    };
    // `*0` and `*-1` get no reply from Redis: refused, so that replies stay one per request.
    if n < 1 || n as u64 > max as u64 / 4 {
        return Err(if n < 1 {
            RespError::BadRequest
        } else {
            RespError::TooLarge(max)
        });
    }
    let mut name = None;
    for i in 0..n {
        if pos >= buf.len() {
            return Ok(None);
        }
        if buf[pos] != b'$' {
            return Err(RespError::BadRequest);
        }
        let Some((len, data)) = number_line(buf, pos)? else {
            return Ok(None);
        };
        if len < 0 {
            return Err(RespError::BadRequest);
        }
        let end = data as u64 + len as u64 + 2;
        if end > max as u64 {
            return Err(RespError::TooLarge(max));
        }
        let end = end as usize;
        if buf.len() < end {
            return Ok(None);
        }
        if &buf[end - 2..end] != b"\r\n" {
            return Err(RespError::BadTerminator);
        }
        if i == 0 {
            name = Some(buf[data..end - 2].to_vec());
        }
        pos = end;
    }
    Ok(Some(Request { len: pos, name }))
}

/// An inline command: one line, the first word its name.
fn inline(buf: &[u8], max: usize) -> Result<Option<Request>, RespError> {
    let limit = MAX_INLINE.min(max);
    let end = buf.len().min(limit);
    let Some(nl) = buf[..end].iter().position(|&b| b == b'\n') else {
        return if buf.len() >= limit {
            Err(RespError::TooLarge(limit))
        } else {
            Ok(None)
        };
    };
    let line = &buf[..nl];
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if line.iter().any(|&b| b == b'\r' || b == 0) {
        return Err(RespError::BadTerminator);
    }
    Ok(Some(Request {
        len: nl + 1,
        name: inline_name(line)?,
    }))
}

/// C's `isspace` in the C locale (Redis does not set `LC_CTYPE`): what `sdssplitargs` skips
/// before a word and accepts after a closing quote.
fn c_isspace(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// The value of an ASCII hex digit.
fn hex_value(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

/// The first word of an inline line (no CR, LF or NUL in it) as Redis's `sdssplitargs`
/// splits it, after checking every word of the line as Redis does (one bad quote anywhere
/// and Redis refuses the whole line). Only the first word is kept.
fn inline_name(line: &[u8]) -> Result<Option<Vec<u8>>, RespError> {
    let mut first: Option<Vec<u8>> = None;
    let mut word = Vec::new();
    let mut p = 0;
    loop {
        while p < line.len() && c_isspace(line[p]) {
            p += 1;
        }
        if p == line.len() {
            return Ok(first);
        }
        let keep = first.is_none();
        let mut push = |b: u8| {
            if keep {
                word.push(b);
            }
        };
        // One word: unquoted bytes and quoted parts, until a separator outside quotes.
        loop {
            match line.get(p) {
                None | Some(b' ' | b'\t') => break,
                Some(b'"') => {
                    p += 1;
                    loop {
                        match line.get(p) {
                            None => return Err(RespError::Quotes),
                            Some(b'\\') => match line.get(p + 1) {
                                Some(b'x')
                                    if line.len() > p + 3
                                        && hex_value(line[p + 2]).is_some()
                                        && hex_value(line[p + 3]).is_some() =>
                                {
                                    let hi = hex_value(line[p + 2]).unwrap_or(0);
                                    let lo = hex_value(line[p + 3]).unwrap_or(0);
                                    push(hi * 16 + lo);
                                    p += 4;
                                }
                                Some(&e) => {
                                    push(match e {
                                        b'n' => b'\n',
                                        b'r' => b'\r',
                                        b't' => b'\t',
                                        b'b' => 0x08,
                                        b'a' => 0x07,
                                        other => other,
                                    });
                                    p += 2;
                                }
                                // A backslash ending the line leaves the quote open.
                                None => return Err(RespError::Quotes),
                            },
                            Some(b'"') => {
                                p += 1;
                                break;
                            }
                            Some(&b) => {
                                push(b);
                                p += 1;
                            }
                        }
                    }
                    // The closing quote must end the word.
                    if line.get(p).is_some_and(|&b| !c_isspace(b)) {
                        return Err(RespError::Quotes);
                    }
                    break;
                }
                Some(b'\'') => {
                    p += 1;
                    loop {
                        match line.get(p) {
                            None => return Err(RespError::Quotes),
                            Some(b'\\') if line.get(p + 1) == Some(&b'\'') => {
                                push(b'\'');
                                p += 2;
                            }
                            Some(b'\'') => {
                                p += 1;
                                break;
                            }
                            Some(&b) => {
                                push(b);
                                p += 1;
                            }
                        }
                    }
                    if line.get(p).is_some_and(|&b| !c_isspace(b)) {
                        return Err(RespError::Quotes);
                    }
                    break;
                }
                Some(&b) => {
                    push(b);
                    p += 1;
                }
            }
        }
        if keep {
            first = Some(std::mem::take(&mut word));
        }
    }
}

/// How the sidecars carry a Redis command, decided by its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// Changes the state of its connection or turns it into a stream ([`CONNECTION_STATE`]):
    /// it cannot be carried over a shared pool and both sidecars refuse it.
    ConnectionState,
    /// `QUIT`: the client sidecar answers it itself and closes; the server sidecar refuses it.
    Quit,
    /// A command known to leave its connection as it found it ([`STATELESS`]): the upstream
    /// connection goes back to the pool after it.
    Stateless,
    /// Any other name (a module's command, a newer Redis's, a typo): carried, but the
    /// upstream connection it ran on is closed afterwards instead of going back to the pool,
    /// so whatever it changed on that connection no other request sees.
    Unknown,
}

/// Commands that change the state of their connection (database, transaction, protocol,
/// authentication, client flags, reply mode) or turn it into a stream.
pub const CONNECTION_STATE: &[&str] = &[
    "MULTI",
    "EXEC",
    "DISCARD",
    "WATCH",
    "UNWATCH",
    "SELECT",
    "AUTH",
    "HELLO",
    "RESET",
    "SUBSCRIBE",
    "PSUBSCRIBE",
    "SSUBSCRIBE",
    "UNSUBSCRIBE",
    "PUNSUBSCRIBE",
    "SUNSUBSCRIBE",
    "MONITOR",
    "SYNC",
    "PSYNC",
    "REPLCONF",
    "CLIENT",
    "READONLY",
    "READWRITE",
    "ASKING",
];

/// Commands known to leave their connection's state as they found it: keys, strings,
/// hashes, lists, sets, sorted sets, HyperLogLog, bitmaps, geo, streams, `PUBLISH`, and a
/// few server queries. Not here on purpose: scripts and functions (`EVAL`, `FCALL`, …),
/// `DEBUG`, `OBJECT`-like admin commands, and every command added after this list — they
/// run as [`Command::Unknown`].
pub const STATELESS: &[&str] = &[
    "APPEND",
    "BITCOUNT",
    "BITFIELD",
    "BITFIELD_RO",
    "BITOP",
    "BITPOS",
    "BLMOVE",
    "BLMPOP",
    "BLPOP",
    "BRPOP",
    "BRPOPLPUSH",
    "BZMPOP",
    "BZPOPMAX",
    "BZPOPMIN",
    "COPY",
    "DBSIZE",
    "DECR",
    "DECRBY",
    "DEL",
    "DUMP",
    "ECHO",
    "EXISTS",
    "EXPIRE",
    "EXPIREAT",
    "EXPIRETIME",
    "GEOADD",
    "GEODIST",
    "GEOHASH",
    "GEOPOS",
    "GEORADIUS",
    "GEORADIUSBYMEMBER",
    "GEOSEARCH",
    "GEOSEARCHSTORE",
    "GET",
    "GETBIT",
    "GETDEL",
    "GETEX",
    "GETRANGE",
    "GETSET",
    "HDEL",
    "HEXISTS",
    "HGET",
    "HGETALL",
    "HINCRBY",
    "HINCRBYFLOAT",
    "HKEYS",
    "HLEN",
    "HMGET",
    "HMSET",
    "HRANDFIELD",
    "HSCAN",
    "HSET",
    "HSETNX",
    "HSTRLEN",
    "HVALS",
    "INCR",
    "INCRBY",
    "INCRBYFLOAT",
    "INFO",
    "KEYS",
    "LCS",
    "LINDEX",
    "LINSERT",
    "LLEN",
    "LMOVE",
    "LMPOP",
    "LPOP",
    "LPOS",
    "LPUSH",
    "LPUSHX",
    "LRANGE",
    "LREM",
    "LSET",
    "LTRIM",
    "MGET",
    "MSET",
    "MSETNX",
    "PERSIST",
    "PEXPIRE",
    "PEXPIREAT",
    "PEXPIRETIME",
    "PFADD",
    "PFCOUNT",
    "PFMERGE",
    "PING",
    "PSETEX",
    "PTTL",
    "PUBLISH",
    "RANDOMKEY",
    "RENAME",
    "RENAMENX",
    "RESTORE",
    "RPOP",
    "RPOPLPUSH",
    "RPUSH",
    "RPUSHX",
    "SADD",
    "SCAN",
    "SCARD",
    "SDIFF",
    "SDIFFSTORE",
    "SET",
    "SETBIT",
    "SETEX",
    "SETNX",
    "SETRANGE",
    "SINTER",
    "SINTERCARD",
    "SINTERSTORE",
    "SISMEMBER",
    "SMEMBERS",
    "SMISMEMBER",
    "SMOVE",
    "SORT",
    "SORT_RO",
    "SPOP",
    "SRANDMEMBER",
    "SREM",
    "SSCAN",
    "STRLEN",
    "SUBSTR",
    "SUNION",
    "SUNIONSTORE",
    "TIME",
    "TOUCH",
    "TTL",
    "TYPE",
    "UNLINK",
    "WAIT",
    "XACK",
    "XADD",
    "XAUTOCLAIM",
    "XCLAIM",
    "XDEL",
    "XLEN",
    "XPENDING",
    "XRANGE",
    "XREAD",
    "XREVRANGE",
    "XTRIM",
    "ZADD",
    "ZCARD",
    "ZCOUNT",
    "ZDIFF",
    "ZDIFFSTORE",
    "ZINCRBY",
    "ZINTER",
    "ZINTERCARD",
    "ZINTERSTORE",
    "ZLEXCOUNT",
    "ZMPOP",
    "ZMSCORE",
    "ZPOPMAX",
    "ZPOPMIN",
    "ZRANDMEMBER",
    "ZRANGE",
    "ZRANGEBYLEX",
    "ZRANGEBYSCORE",
    "ZRANGESTORE",
    "ZRANK",
    "ZREM",
    "ZREMRANGEBYLEX",
    "ZREMRANGEBYRANK",
    "ZREMRANGEBYSCORE",
    "ZREVRANGE",
    "ZREVRANGEBYLEX",
    "ZREVRANGEBYSCORE",
    "ZREVRANK",
    "ZSCAN",
    "ZSCORE",
    "ZUNION",
    "ZUNIONSTORE",
];

/// Commands that only read (a subset of [`STATELESS`]): sending one again cannot change
/// anything, so the server sidecar sends it again on a new connection when the upstream
/// closed a pooled connection after it was written and before its reply. Not here: every
/// command that writes, expires, pops, blocks or stores (`SORT`, `GETEX`, `GEOSEARCHSTORE`, …),
/// and `PFCOUNT` (it may rewrite its key's representation).
pub const READ_ONLY: &[&str] = &[
    "BITCOUNT",
    "BITFIELD_RO",
    "BITPOS",
    "DBSIZE",
    "DUMP",
    "ECHO",
    "EXISTS",
    "EXPIRETIME",
    "GEODIST",
    "GEOHASH",
    "GEOPOS",
    "GEOSEARCH",
    "GET",
    "GETBIT",
    "GETRANGE",
    "HEXISTS",
    "HGET",
    "HGETALL",
    "HKEYS",
    "HLEN",
    "HMGET",
    "HRANDFIELD",
    "HSCAN",
    "HSTRLEN",
    "HVALS",
    "KEYS",
    "LCS",
    "LINDEX",
    "LLEN",
    "LPOS",
    "LRANGE",
    "MGET",
    "PEXPIRETIME",
    "PING",
    "PTTL",
    "RANDOMKEY",
    "SCAN",
    "SCARD",
    "SDIFF",
    "SINTER",
    "SINTERCARD",
    "SISMEMBER",
    "SMEMBERS",
    "SMISMEMBER",
    "SORT_RO",
    "SRANDMEMBER",
    "SSCAN",
    "STRLEN",
    "SUBSTR",
    "SUNION",
    "TIME",
    "TTL",
    "TYPE",
    "XLEN",
    "XPENDING",
    "XRANGE",
    "XREVRANGE",
    "ZCARD",
    "ZCOUNT",
    "ZDIFF",
    "ZINTER",
    "ZINTERCARD",
    "ZLEXCOUNT",
    "ZMSCORE",
    "ZRANDMEMBER",
    "ZRANGE",
    "ZRANGEBYLEX",
    "ZRANGEBYSCORE",
    "ZRANK",
    "ZREVRANGE",
    "ZREVRANGEBYLEX",
    "ZREVRANGEBYSCORE",
    "ZREVRANK",
    "ZSCAN",
    "ZSCORE",
    "ZUNION",
];

/// Whether the command named `name` only reads ([`READ_ONLY`]; compared as [`classify`]
/// compares).
pub fn read_only(name: &[u8]) -> bool {
    let name = name.split(|&b| b == 0).next().unwrap_or_default();
    READ_ONLY
        .iter()
        .any(|c| c.as_bytes().eq_ignore_ascii_case(name))
}

/// How a command named `name` (as in [`Request::name`]) is carried. Names are compared as
/// Redis compares them: ASCII case ignored, and only up to a NUL byte (Redis's lookup ends
/// its comparison there).
pub fn classify(name: &[u8]) -> Command {
    let name = name.split(|&b| b == 0).next().unwrap_or_default();
    let is = |list: &[&str]| list.iter().any(|c| c.as_bytes().eq_ignore_ascii_case(name));
    if is(CONNECTION_STATE) {
        Command::ConnectionState
    } else if name.eq_ignore_ascii_case(b"QUIT") {
        Command::Quit
    } else if is(STATELESS) {
        Command::Stateless
    } else {
        Command::Unknown
    }
}

/// The length of the reply at the start of `buf`: `Ok(None)` while incomplete.
pub fn reply(buf: &[u8], max: usize) -> Result<Option<usize>, RespError> {
    // Values still expected: one reply, plus the elements of every aggregate opened so far.
    let mut pending: u64 = 1;
    let mut pos = 0usize;
    while pending > 0 {
        if pos >= buf.len() {
            return if pos >= max {
                Err(RespError::TooLarge(max))
            } else {
                Ok(None)
            };
        }
        let t = buf[pos];
        match t {
            b'+' | b'-' | b':' | b',' | b'#' | b'(' | b'_' => {
                let Some(cr) = line_end(buf, pos, max.saturating_sub(pos))? else {
                    return Ok(None);
                };
                let body = &buf[pos + 1..cr];
                let ok = match t {
                    b':' => number(body).is_ok(),
                    b'_' => body.is_empty(),
                    b'#' => body == b"t" || body == b"f",
                    b'(' => {
                        let d = body.strip_prefix(b"-").unwrap_or(body);
                        !d.is_empty() && d.iter().all(u8::is_ascii_digit)
                    }
                    _ => true,
                };
                if !ok {
                    return Err(RespError::BadNumber);
                }
                pos = cr + 2;
                pending -= 1;
            }
            b'$' | b'!' | b'=' => {
                let Some((len, data)) = number_line(buf, pos)? else {
                    return Ok(None);
                };
                if len < 0 {
                    if t != b'$' || len != -1 {
                        return Err(RespError::BadNumber);
                    }
                    pos = data;
                } else {
                    let end = data as u64 + len as u64 + 2;
                    if end > max as u64 {
                        return Err(RespError::TooLarge(max));
                    }
                    let end = end as usize;
                    if buf.len() < end {
                        return Ok(None);
                    }
                    if &buf[end - 2..end] != b"\r\n" {
                        return Err(RespError::BadTerminator);
                    }
                    pos = end;
                }
                pending -= 1;
            }
            b'*' | b'~' | b'%' | b'|' => {
                let Some((n, next)) = number_line(buf, pos)? else {
                    return Ok(None);
                };
                if n < 0 && !(t == b'*' && n == -1) {
                    return Err(RespError::BadNumber);
                }
                let elems = match t {
                    b'%' | b'|' => 2 * n.max(0) as u64,
                    _ => n.max(0) as u64,
                };
                // An attribute (`|`) annotates the value that follows it: that value is still due.
                pending = pending - u64::from(t != b'|') + elems;
                // Every value takes at least 3 bytes: more than fit in `max` cannot complete.
                if pending.saturating_mul(3) > max.saturating_sub(next) as u64 {
                    return Err(RespError::TooLarge(max));
                }
                pos = next;
            }
            b'>' => return Err(RespError::Push),
            other => return Err(RespError::BadType(other)),
        }
        if pos > max {
            return Err(RespError::TooLarge(max));
        }
    }
    Ok(Some(pos))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const MAX: usize = 1 << 20;

    #[test]
    fn read_only_commands_are_stateless_and_writes_are_not_read_only() {
        for c in READ_ONLY {
            assert_eq!(classify(c.as_bytes()), Command::Stateless, "{c}");
            assert!(read_only(c.to_ascii_lowercase().as_bytes()), "{c}");
        }
        for c in [
            "SET", "INCR", "GETEX", "GETDEL", "SORT", "PFCOUNT", "EVAL", "LPOP",
        ] {
            assert!(!read_only(c.as_bytes()), "{c}");
        }
        assert!(read_only(b"get\0junk"));
    }

    #[test]
    fn arrays_and_pipelines() {
        let b = b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n*1\r\n$4\r\nPING\r\n";
        let r = request(b, MAX).unwrap().unwrap();
        assert_eq!(r.len, 20);
        assert_eq!(r.name.as_deref(), Some(&b"GET"[..]));
        let r2 = request(&b[20..], MAX).unwrap().unwrap();
        assert_eq!(r2.len, 14);
        for k in 0..20 {
            assert_eq!(request(&b[..k], MAX), Ok(None), "prefix {k}");
        }
    }

    #[test]
    fn inline_commands() {
        let r = request(b"  incr  c\r\nrest", MAX).unwrap().unwrap();
        assert_eq!(r.len, 11);
        assert_eq!(r.name.as_deref(), Some(&b"incr"[..]));
        assert_eq!(request(b"\r\n", MAX).unwrap().unwrap().name, None);
        assert_eq!(request(b"\x0b\x0c \r\n", MAX).unwrap().unwrap().name, None);
        assert_eq!(request(b"PING", MAX), Ok(None));
        let name = |b: &[u8]| request(b, MAX).unwrap().unwrap().name.unwrap();
        assert_eq!(name(b"\"MULTI\"\r\n"), b"MULTI");
        assert_eq!(name(b"\x0bMULTI\r\n"), b"MULTI");
        assert_eq!(name(b"MU'LTI' 1\r\n"), b"MULTI");
        assert_eq!(name(b"\"\\x4d\\x55LTI\"\r\n"), b"MULTI");
        assert_eq!(name(b"GET\x0bk\r\n"), b"GET\x0bk");
        assert_eq!(name(b"\"\"\r\n"), b"");
        for bad in [
            &b"\"MULTI\r\n"[..],
            b"\"MULTI\"x\r\n",
            b"GET 'a\r\n",
            b"'a\\'\r\n",
        ] {
            assert_eq!(request(bad, MAX), Err(RespError::Quotes), "{bad:?}");
        }
    }

    #[test]
    fn commands_are_classified_as_redis_looks_them_up() {
        assert_eq!(classify(b"mUlTi"), Command::ConnectionState);
        assert_eq!(classify(b"SELECT\0junk"), Command::ConnectionState);
        assert_eq!(classify(b"quit"), Command::Quit);
        assert_eq!(classify(b"get"), Command::Stateless);
        assert_eq!(classify(b"EVAL"), Command::Unknown);
        assert_eq!(classify(b""), Command::Unknown);
        for c in CONNECTION_STATE {
            assert!(!STATELESS.contains(c), "{c}");
        }
    }

    #[test]
    fn malformed_requests_are_refused() {
        for bad in [
            &b"*0\r\n"[..],
            b"*-1\r\n",
            b"*1\r\n:1\r\n",
            b"*1\r\n$3\r\nGETX\r\n",
            b"*x\r\n",
            b"*1\n",
            b"*1\r\n$-1\r\n",
            b"PI\rNG\r\n",
            b"*01\r\n$3\r\nGET\r\n",
            b"*1\r\n$03\r\nGET\r\n",
            b"*1\r\n$+3\r\nGET\r\n",
            b"*1\r\n$-0\r\n\r\n",
        ] {
            assert!(request(bad, MAX).is_err(), "{bad:?}");
        }
        assert_eq!(
            request(b"*1\r\n$2000\r\n", 1000),
            Err(RespError::TooLarge(1000))
        );
        assert!(request(&[b'x'; 100], 50).is_err());
    }

    #[test]
    fn replies() {
        for (b, n) in [
            (&b"+OK\r\n"[..], 5),
            (b"-ERR no\r\n", 9),
            (b":42\r\n", 5),
            (b"$-1\r\n", 5),
            (b"$3\r\nabc\r\n", 9),
            (b"*-1\r\n", 5),
            (b"*2\r\n$1\r\na\r\n*1\r\n:1\r\n", 19),
            (b"%1\r\n+a\r\n#t\r\n", 12),
            (b"|1\r\n+k\r\n+v\r\n:1\r\n", 16),
            (b"_\r\n", 3),
            (b",1.5\r\n", 6),
            (b"*0\r\n", 4),
        ] {
            assert_eq!(reply(b, MAX), Ok(Some(n)), "{b:?}");
            for k in 0..n {
                assert_eq!(reply(&b[..k], MAX), Ok(None), "{b:?} prefix {k}");
            }
        }
        assert_eq!(reply(b">2\r\n", MAX), Err(RespError::Push));
        assert!(reply(b":x\r\n", MAX).is_err());
        assert!(reply(b"*99999999\r\n", 1000).is_err());
        assert!(reply(b"$5\r\nabcdefg", MAX).is_err());
    }

    fn arb_request() -> impl Strategy<Value = Vec<u8>> {
        prop::collection::vec(prop::collection::vec(any::<u8>(), 0..20), 1..5).prop_map(|args| {
            let mut out = format!("*{}\r\n", args.len()).into_bytes();
            for a in args {
                out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
                out.extend_from_slice(&a);
                out.extend_from_slice(b"\r\n");
            }
            out
        })
    }

    fn arb_reply() -> impl Strategy<Value = Vec<u8>> {
        let leaf = prop_oneof![
            Just(b"+OK\r\n".to_vec()),
            any::<i32>().prop_map(|i| format!(":{i}\r\n").into_bytes()),
            prop::collection::vec(any::<u8>(), 0..16).prop_map(|d| {
                let mut v = format!("${}\r\n", d.len()).into_bytes();
                v.extend_from_slice(&d);
                v.extend_from_slice(b"\r\n");
                v
            }),
            Just(b"$-1\r\n".to_vec()),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop::collection::vec(inner, 0..4).prop_map(|items| {
                let mut v = format!("*{}\r\n", items.len()).into_bytes();
                for i in items {
                    v.extend_from_slice(&i);
                }
                v
            })
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn arbitrary_bytes_never_panic(b in prop::collection::vec(any::<u8>(), 0..64)) {
            if let Ok(Some(r)) = request(&b, 256) {
                prop_assert!(r.len <= b.len() && r.name.map_or(0, |n| n.len()) <= r.len);
            }
            if let Ok(Some(n)) = reply(&b, 256) {
                prop_assert!(n <= b.len());
            }
        }

        #[test]
        fn valid_requests_delimit_exactly(r in arb_request(), tail in prop::collection::vec(any::<u8>(), 0..8)) {
            let mut b = r.clone();
            b.extend_from_slice(&tail);
            prop_assert_eq!(request(&b, MAX).unwrap().map(|x| x.len), Some(r.len()));
            for k in 0..r.len() {
                prop_assert_eq!(request(&r[..k], MAX), Ok(None));
            }
        }

        #[test]
        fn valid_replies_delimit_exactly(r in arb_reply()) {
            prop_assert_eq!(reply(&r, MAX), Ok(Some(r.len())));
            for k in 0..r.len() {
                prop_assert_eq!(reply(&r[..k], MAX), Ok(None));
            }
        }

        #[test]
        fn mutated_requests_never_half_parse(r in arb_request(), at in any::<prop::sample::Index>(), byte in any::<u8>()) {
            let mut b = r.clone();
            let i = at.index(b.len());
            b[i] = byte;
            // Either a whole request (possibly a different one) or an error/incomplete: a
            // complete parse never claims more bytes than there are.
            if let Ok(Some(x)) = request(&b, MAX) {
                prop_assert!(x.len <= b.len());
            }
            let _ = reply(&b, MAX);
        }
    }
}

//! A tiny, blocking RESP client: just enough to send one command and render
//! the reply as text. Used for readiness checks and [`RedisServer::cli`].
//!
//! [`RedisServer::cli`]: crate::RedisServer::cli

use std::io::{self, BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// Largest bulk payload we are willing to read (guards against garbage input).
const MAX_BULK: usize = 512 * 1024 * 1024;
/// Deepest nesting of aggregates we are willing to follow.
const MAX_DEPTH: usize = 32;

/// A decoded RESP (2 or 3) reply.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Reply {
    /// `+OK`, and RESP3 doubles, booleans and big numbers rendered as text.
    Simple(String),
    /// `-ERR ...`
    Error(String),
    /// `:42`
    Integer(i64),
    /// `$3\r\nfoo`
    Bulk(Vec<u8>),
    /// `$-1`, `*-1` or RESP3 `_`.
    Nil,
    /// `*N`, and RESP3 sets, pushes and maps (flattened key, value, ...).
    Array(Vec<Reply>),
}

impl Reply {
    /// Renders the reply the way the testkit documents it: bulk and simple
    /// strings as themselves, integers as digits, nil as `(nil)`, arrays as one
    /// element per line (nested arrays are flattened), nested errors as
    /// `(error) MSG`.
    pub(crate) fn render(&self) -> String {
        let mut lines = Vec::new();
        self.render_into(&mut lines);
        lines.join("\n")
    }

    fn render_into(&self, out: &mut Vec<String>) {
        match self {
            Reply::Simple(s) => out.push(s.clone()),
            Reply::Error(e) => out.push(format!("(error) {e}")),
            Reply::Integer(i) => out.push(i.to_string()),
            Reply::Bulk(b) => out.push(String::from_utf8_lossy(b).into_owned()),
            Reply::Nil => out.push("(nil)".to_owned()),
            Reply::Array(items) => items.iter().for_each(|i| i.render_into(out)),
        }
    }
}

/// Encodes a command as a RESP array of bulk strings.
pub(crate) fn encode(args: &[&str]) -> Vec<u8> {
    let mut buf = Vec::with_capacity(16 + args.iter().map(|a| a.len() + 16).sum::<usize>());
    buf.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for a in args {
        buf.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        buf.extend_from_slice(a.as_bytes());
        buf.extend_from_slice(b"\r\n");
    }
    buf
}

/// Where a server listens: a loopback TCP address, or a unix socket (a TLS-only server's
/// plaintext door for the testkit).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Target {
    Tcp(SocketAddr),
    Unix(std::path::PathBuf),
}

/// Opens a connection to `target`, authenticates with `password` if given (as the default
/// user), sends one command and reads its reply.
pub(crate) fn request_to(
    target: &Target,
    password: Option<&str>,
    args: &[&str],
    connect_timeout: Duration,
    io_timeout: Duration,
) -> io::Result<Reply> {
    let mut payload = Vec::new();
    if let Some(password) = password {
        payload.extend(encode(&["AUTH", password]));
    }
    payload.extend(encode(args));
    let exchange = |stream: &mut dyn ReadWrite| -> io::Result<Reply> {
        stream.write_all(&payload)?;
        let mut reader = BufReader::new(stream);
        if password.is_some()
            && let Reply::Error(e) = read_reply(&mut reader, 0)?
        {
            return Ok(Reply::Error(e));
        }
        read_reply(&mut reader, 0)
    };
    match target {
        Target::Tcp(addr) => {
            let mut stream = TcpStream::connect_timeout(addr, connect_timeout)?;
            stream.set_read_timeout(Some(io_timeout))?;
            stream.set_write_timeout(Some(io_timeout))?;
            stream.set_nodelay(true)?;
            exchange(&mut stream)
        }
        Target::Unix(path) => {
            let mut stream = std::os::unix::net::UnixStream::connect(path)?;
            stream.set_read_timeout(Some(io_timeout))?;
            stream.set_write_timeout(Some(io_timeout))?;
            exchange(&mut stream)
        }
    }
}

/// A byte stream both ways (TCP or unix socket).
trait ReadWrite: io::Read + Write {}
impl<T: io::Read + Write> ReadWrite for T {}

fn protocol_error(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.into())
}

/// Reads one `\r\n`-terminated line, without the terminator.
fn read_line<R: BufRead>(r: &mut R) -> io::Result<String> {
    let mut line = Vec::new();
    let n = r.read_until(b'\n', &mut line)?;
    if n == 0 {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "redis closed the connection before replying",
        ));
    }
    if !line.ends_with(b"\r\n") {
        return Err(protocol_error("truncated RESP line"));
    }
    line.truncate(line.len() - 2);
    Ok(String::from_utf8_lossy(&line).into_owned())
}

fn parse_int(s: &str) -> io::Result<i64> {
    s.parse::<i64>()
        .map_err(|_| protocol_error(format!("bad RESP integer {s:?}")))
}

fn read_blob<R: BufRead>(r: &mut R, len: &str) -> io::Result<Option<Vec<u8>>> {
    let len = parse_int(len)?;
    if len < 0 {
        return Ok(None);
    }
    let len = usize::try_from(len).map_err(|_| protocol_error("bad bulk length"))?;
    if len > MAX_BULK {
        return Err(protocol_error("bulk reply too large"));
    }
    let mut buf = vec![0u8; len + 2];
    r.read_exact(&mut buf)?;
    if !buf.ends_with(b"\r\n") {
        return Err(protocol_error("bulk reply not terminated by CRLF"));
    }
    buf.truncate(len);
    Ok(Some(buf))
}

fn read_items<R: BufRead>(r: &mut R, count: i64, depth: usize) -> io::Result<Reply> {
    if count < 0 {
        return Ok(Reply::Nil);
    }
    let mut items = Vec::new();
    for _ in 0..count {
        items.push(read_reply(r, depth + 1)?);
    }
    Ok(Reply::Array(items))
}

/// Reads one reply (RESP2, plus the RESP3 types in case a caller sent `HELLO 3`).
pub(crate) fn read_reply<R: BufRead>(r: &mut R, depth: usize) -> io::Result<Reply> {
    if depth > MAX_DEPTH {
        return Err(protocol_error("RESP reply nested too deeply"));
    }
    let line = read_line(r)?;
    let mut chars = line.chars();
    let kind = chars
        .next()
        .ok_or_else(|| protocol_error("empty RESP line"))?;
    let rest = chars.as_str();
    match kind {
        '+' | ',' | '(' => Ok(Reply::Simple(rest.to_owned())),
        '#' => Ok(Reply::Simple(
            if rest == "t" { "true" } else { "false" }.to_owned(),
        )),
        '-' => Ok(Reply::Error(rest.to_owned())),
        ':' => Ok(Reply::Integer(parse_int(rest)?)),
        '_' => Ok(Reply::Nil),
        '$' => Ok(read_blob(r, rest)?.map_or(Reply::Nil, Reply::Bulk)),
        '=' => Ok(match read_blob(r, rest)? {
            // Verbatim string: strip the "txt:" format prefix.
            Some(b) if b.len() >= 4 && b[3] == b':' => Reply::Bulk(b[4..].to_vec()),
            Some(b) => Reply::Bulk(b),
            None => Reply::Nil,
        }),
        '!' => Ok(match read_blob(r, rest)? {
            Some(b) => Reply::Error(String::from_utf8_lossy(&b).into_owned()),
            None => Reply::Nil,
        }),
        '*' | '~' | '>' => read_items(r, parse_int(rest)?, depth),
        '%' => read_items(r, parse_int(rest)?.saturating_mul(2), depth),
        '|' => {
            // Attribute: skip it, then return the reply it decorates.
            read_items(r, parse_int(rest)?.saturating_mul(2), depth)?;
            read_reply(r, depth + 1)
        }
        other => Err(protocol_error(format!(
            "unexpected RESP type byte {other:?} in {line:?}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(bytes: &[u8]) -> io::Result<Reply> {
        read_reply(&mut BufReader::new(bytes), 0)
    }

    #[test]
    fn encodes_bulk_array() {
        assert_eq!(
            encode(&["GET", "k"]),
            b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n".to_vec()
        );
        assert_eq!(
            encode(&["SET", ""]),
            b"*2\r\n$3\r\nSET\r\n$0\r\n\r\n".to_vec()
        );
    }

    #[test]
    fn parses_and_renders() {
        assert_eq!(parse(b"+OK\r\n").unwrap().render(), "OK");
        assert_eq!(parse(b":-7\r\n").unwrap().render(), "-7");
        assert_eq!(parse(b"$-1\r\n").unwrap().render(), "(nil)");
        assert_eq!(parse(b"$5\r\na\r\nbc\r\n").unwrap().render(), "a\r\nbc");
        assert_eq!(
            parse(b"*3\r\n$1\r\na\r\n:1\r\n*1\r\n$-1\r\n")
                .unwrap()
                .render(),
            "a\n1\n(nil)"
        );
        assert_eq!(parse(b"*0\r\n").unwrap().render(), "");
        assert_eq!(parse(b"-ERR x\r\n").unwrap(), Reply::Error("ERR x".into()));
        assert_eq!(parse(b"%1\r\n+k\r\n:2\r\n").unwrap().render(), "k\n2");
        assert_eq!(parse(b"=7\r\ntxt:abc\r\n").unwrap().render(), "abc");
    }

    #[test]
    fn rejects_garbage() {
        assert!(parse(b"").is_err());
        assert!(parse(b"?x\r\n").is_err());
        assert!(parse(b"$3\r\nab").is_err());
        assert!(parse(b":x\r\n").is_err());
    }
}

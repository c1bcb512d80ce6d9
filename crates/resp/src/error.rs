//! Protocol errors.

/// A malformed request or reply.
///
/// The request-side variants display as the exact texts Redis 7 sends before
/// closing the connection (`networking.c`, `processMultibulkBuffer` and
/// `processInlineBuffer`); the reply-side variants are this crate's own and
/// only ever reach a client or test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProtoError {
    /// `*` count that is not a number, or above [`crate::Limits::max_multibulk`].
    #[error("Protocol error: invalid multibulk length")]
    InvalidMultibulkLength,
    /// An element of a multibulk request that is not a bulk string.
    #[error("Protocol error: expected '$', got '{}'", char::from(sanitize_byte(*.0)))]
    ExpectedDollar(u8),
    /// `$` length that is not a number, negative, or above
    /// [`crate::Limits::proto_max_bulk_len`].
    #[error("Protocol error: invalid bulk length")]
    InvalidBulkLength,
    /// An inline line longer than [`crate::Limits::max_inline`] with no `\n`.
    #[error("Protocol error: too big inline request")]
    TooBigInlineRequest,
    /// A `*` header longer than [`crate::Limits::max_inline`] with no `\r`.
    #[error("Protocol error: too big mbulk count string")]
    TooBigMbulkCount,
    /// A `$` header longer than [`crate::Limits::max_inline`] with no `\r`.
    #[error("Protocol error: too big bulk count string")]
    TooBigBulkCount,
    /// An inline line with an unterminated quote, or a closing quote that is
    /// not followed by whitespace.
    #[error("Protocol error: unbalanced quotes in request")]
    UnbalancedQuotes,
    /// Reply parsing: a type byte that is not a RESP2/RESP3 reply type.
    #[error("Protocol error: unknown reply type byte 0x{0:02x}")]
    UnknownReplyType(u8),
    /// Reply parsing: a frame that does not follow the RESP grammar.
    #[error("Protocol error: invalid reply: {0}")]
    InvalidReply(&'static str),
    /// Reply parsing: aggregates nested deeper than the allowed depth.
    #[error("Protocol error: reply nested deeper than {0} levels")]
    TooDeep(usize),
}

/// Redis formats the offending byte with `%c` and then maps CR and LF to
/// spaces so the error line cannot break the reply stream.
fn sanitize_byte(b: u8) -> u8 {
    if b == b'\r' || b == b'\n' {
        b' '
    } else {
        b
    }
}

impl ProtoError {
    /// Appends the error reply a server sends for this error,
    /// `-ERR <text>\r\n`.
    ///
    /// Unlike `Display`, which must be valid UTF-8 and so shows a non-ASCII
    /// byte as its Latin-1 character, this writes the offending byte of
    /// [`ProtoError::ExpectedDollar`] raw, as Redis does.
    pub fn write_reply(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(b"-ERR ");
        match *self {
            ProtoError::ExpectedDollar(b) => {
                out.extend_from_slice(b"Protocol error: expected '$', got '");
                out.push(sanitize_byte(b));
                out.push(b'\'');
            }
            ref other => out.extend_from_slice(other.to_string().as_bytes()),
        }
        out.extend_from_slice(b"\r\n");
    }

    /// True for the errors a server can get from [`crate::parse_command`]
    /// (as opposed to reply-parsing errors).
    pub fn is_request_error(&self) -> bool {
        !matches!(self, ProtoError::UnknownReplyType(_) | ProtoError::InvalidReply(_) | ProtoError::TooDeep(_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_texts() {
        let cases: &[(ProtoError, &str)] = &[
            (ProtoError::InvalidMultibulkLength, "Protocol error: invalid multibulk length"),
            (ProtoError::ExpectedDollar(b'X'), "Protocol error: expected '$', got 'X'"),
            (ProtoError::ExpectedDollar(b'\r'), "Protocol error: expected '$', got ' '"),
            (ProtoError::InvalidBulkLength, "Protocol error: invalid bulk length"),
            (ProtoError::TooBigInlineRequest, "Protocol error: too big inline request"),
            (ProtoError::TooBigMbulkCount, "Protocol error: too big mbulk count string"),
            (ProtoError::TooBigBulkCount, "Protocol error: too big bulk count string"),
            (ProtoError::UnbalancedQuotes, "Protocol error: unbalanced quotes in request"),
        ];
        for (e, text) in cases {
            assert_eq!(e.to_string(), *text);
            assert!(e.is_request_error());
            let mut out = Vec::new();
            e.write_reply(&mut out);
            assert_eq!(out, format!("-ERR {text}\r\n").into_bytes());
        }
    }

    #[test]
    fn raw_byte_in_reply() {
        let mut out = Vec::new();
        ProtoError::ExpectedDollar(0xff).write_reply(&mut out);
        assert_eq!(out, b"-ERR Protocol error: expected '$', got '\xff'\r\n");
        out.clear();
        ProtoError::ExpectedDollar(b'\n').write_reply(&mut out);
        assert_eq!(out, b"-ERR Protocol error: expected '$', got ' '\r\n");
        assert!(!ProtoError::TooDeep(3).is_request_error());
    }
}

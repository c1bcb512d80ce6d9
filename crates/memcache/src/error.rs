//! Parse errors: each one is exactly what memcached would do next.

use crate::meta::MetaKey;

/// An error reply line memcached sends for a malformed request.
///
/// The `&'static str` forms (see [`ErrorReply::as_str`]) are byte-for-byte
/// memcached 1.6's, including the odd double space in
/// [`ErrorReply::DeleteUsage`] and the "are" that only `mg` says in
/// [`ErrorReply::MgOptionsTooLong`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorReply {
    /// `ERROR`: unknown command or wrong number of tokens.
    Error,
    /// `CLIENT_ERROR bad command line format`.
    BadFormat,
    /// `CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]`.
    DeleteUsage,
    /// `CLIENT_ERROR bad data chunk`: the data block did not end in `\r\n`.
    BadDataChunk,
    /// `SERVER_ERROR object too large for cache`.
    TooLarge,
    /// `CLIENT_ERROR invalid numeric delta argument` (incr/decr).
    InvalidDelta,
    /// `CLIENT_ERROR invalid exptime argument` (touch, gat, flush_all).
    InvalidExptime,
    /// `CLIENT_ERROR options flags are too long` (mg: more than 17 flags).
    MgOptionsTooLong,
    /// `CLIENT_ERROR options flags too long` (ms/md/ma).
    OptionsTooLong,
    /// `CLIENT_ERROR duplicate flag` (also sent for flag bytes >= 127).
    DuplicateFlag,
    /// `CLIENT_ERROR invalid flag`.
    InvalidFlag,
    /// `CLIENT_ERROR invalid or duplicate flag` (md/ma report every flag
    /// error this way).
    InvalidOrDuplicateFlag,
    /// `CLIENT_ERROR bad token in command line format` (bad T/N/R/C/E value).
    BadToken,
    /// `CLIENT_ERROR error decoding key` (bad base64 with the `b` flag).
    KeyDecode,
    /// `CLIENT_ERROR incorrect length for M token`.
    ModeTokenLength,
    /// `CLIENT_ERROR invalid numeric initial value` (ma J).
    InvalidInitial,
    /// `CLIENT_ERROR invalid numeric delta value` (ma D).
    InvalidDeltaValue,
    /// `CLIENT_ERROR opaque token too long` (O token over 32 bytes).
    OpaqueTooLong,
    /// `CLIENT_ERROR invalid mode for ms M token`.
    InvalidMsMode,
    /// `CLIENT_ERROR invalid mode for ma M token`.
    InvalidMaMode,
}

impl ErrorReply {
    /// The reply line including its trailing `\r\n`.
    pub const fn line(self) -> &'static [u8] {
        match self {
            ErrorReply::Error => b"ERROR\r\n",
            ErrorReply::BadFormat => b"CLIENT_ERROR bad command line format\r\n",
            ErrorReply::DeleteUsage => b"CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]\r\n",
            ErrorReply::BadDataChunk => b"CLIENT_ERROR bad data chunk\r\n",
            ErrorReply::TooLarge => b"SERVER_ERROR object too large for cache\r\n",
            ErrorReply::InvalidDelta => b"CLIENT_ERROR invalid numeric delta argument\r\n",
            ErrorReply::InvalidExptime => b"CLIENT_ERROR invalid exptime argument\r\n",
            ErrorReply::MgOptionsTooLong => b"CLIENT_ERROR options flags are too long\r\n",
            ErrorReply::OptionsTooLong => b"CLIENT_ERROR options flags too long\r\n",
            ErrorReply::DuplicateFlag => b"CLIENT_ERROR duplicate flag\r\n",
            ErrorReply::InvalidFlag => b"CLIENT_ERROR invalid flag\r\n",
            ErrorReply::InvalidOrDuplicateFlag => b"CLIENT_ERROR invalid or duplicate flag\r\n",
            ErrorReply::BadToken => b"CLIENT_ERROR bad token in command line format\r\n",
            ErrorReply::KeyDecode => b"CLIENT_ERROR error decoding key\r\n",
            ErrorReply::ModeTokenLength => b"CLIENT_ERROR incorrect length for M token\r\n",
            ErrorReply::InvalidInitial => b"CLIENT_ERROR invalid numeric initial value\r\n",
            ErrorReply::InvalidDeltaValue => b"CLIENT_ERROR invalid numeric delta value\r\n",
            ErrorReply::OpaqueTooLong => b"CLIENT_ERROR opaque token too long\r\n",
            ErrorReply::InvalidMsMode => b"CLIENT_ERROR invalid mode for ms M token\r\n",
            ErrorReply::InvalidMaMode => b"CLIENT_ERROR invalid mode for ma M token\r\n",
        }
    }

    /// The reply text without `\r\n`.
    pub fn as_str(self) -> &'static str {
        let l = self.line();
        // All lines are ASCII literals above.
        std::str::from_utf8(&l[..l.len() - 2]).unwrap_or("ERROR")
    }
}

impl std::fmt::Display for ErrorReply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What memcached does with a request it cannot execute.
///
/// Handling, in order: if [`closes`](Error::closes), close the connection
/// (nothing is written). Otherwise write [`reply`](Error::reply) if it is
/// `Some`, drop [`consumed`](Error::consumed) bytes from the buffer, then
/// discard the next [`skip`](Error::skip) bytes of input, which may extend
/// past what is buffered now (memcached's `conn_swallow`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// Reply (unless `silent`) and continue after `consumed` bytes.
    #[error("{reply}")]
    Reply {
        /// The line memcached sends.
        reply: ErrorReply,
        /// Bytes of the buffer this request occupied (command line, plus the
        /// data block for [`ErrorReply::BadDataChunk`]).
        consumed: usize,
        /// memcached suppresses the reply: the classic command carried
        /// `noreply`, which memcached honours even for errors detected after
        /// it has seen the token.
        silent: bool,
    },
    /// Reply (unless `silent`), drop the `consumed` command line, then
    /// swallow `skip` bytes (the announced data block plus its `\r\n`)
    /// without interpreting them. Storage commands whose length token was
    /// valid but which fail later (too large; for `ms` also bad flags) do
    /// this so the data is not parsed as commands.
    #[error("{reply} (swallowing {skip} bytes)")]
    Swallow {
        /// The line memcached sends.
        reply: ErrorReply,
        /// Length of the command line including `\n`.
        consumed: usize,
        /// Bytes to discard after the command line; may exceed the buffer.
        skip: usize,
        /// memcached suppresses the reply (`noreply`).
        silent: bool,
        /// A key whose item memcached deletes first: a `set` or `ms` too
        /// large to store unlinks the key's old item, "to avoid stale data
        /// persisting in cache because we failed alloc" (1.6.18 does this for
        /// `set`, with or without `noreply`, and for `ms` in every mode; not
        /// for `add`, `replace`, `append`, `prepend` or `cas`). See
        /// [`Error::unlink`].
        unlink: Option<KeyAt>,
    },
    /// No newline among more than
    /// [`Limits::max_unterminated_line`](crate::Limits) buffered bytes of a
    /// line that is not a multiget (buffered: in memcached's read buffer, see
    /// [`parse_window`](crate::parse_window)): memcached closes the connection
    /// silently.
    #[error("command line too long; closing connection")]
    Close,
}

/// Where a request's key sits in the buffer handed to [`parse`](crate::parse)
/// (and whether it is base64, the meta `b` flag).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyAt {
    pub(crate) start: usize,
    pub(crate) len: usize,
    pub(crate) base64: bool,
}

impl Error {
    /// The key memcached deletes before it replies (see [`Error::Swallow`]),
    /// read from `buf`, the buffer this error was parsed from.
    pub fn unlink<'a>(&self, buf: &'a [u8]) -> Option<MetaKey<'a>> {
        let Error::Swallow { unlink: Some(k), .. } = *self else {
            return None;
        };
        let raw = buf.get(k.start..k.start + k.len)?;
        if k.base64 {
            MetaKey::binary(raw)
        } else {
            Some(MetaKey::text(raw))
        }
    }

    /// The bytes to write, including `\r\n`; `None` when memcached stays
    /// silent (noreply, or closing).
    pub fn reply(&self) -> Option<&'static [u8]> {
        match *self {
            Error::Reply { reply, silent, .. } | Error::Swallow { reply, silent, .. } => {
                (!silent).then(|| reply.line())
            }
            Error::Close => None,
        }
    }

    /// The error reply kind, if any (also when silent).
    pub fn kind(&self) -> Option<ErrorReply> {
        match *self {
            Error::Reply { reply, .. } | Error::Swallow { reply, .. } => Some(reply),
            Error::Close => None,
        }
    }

    /// Bytes at the front of the buffer to drop now (0 for [`Error::Close`]).
    pub fn consumed(&self) -> usize {
        match *self {
            Error::Reply { consumed, .. } | Error::Swallow { consumed, .. } => consumed,
            Error::Close => 0,
        }
    }

    /// Further bytes to discard after `consumed`, possibly not yet received.
    pub fn skip(&self) -> usize {
        match *self {
            Error::Swallow { skip, .. } => skip,
            _ => 0,
        }
    }

    /// Whether memcached closes the connection.
    pub fn closes(&self) -> bool {
        matches!(self, Error::Close)
    }
}

//! RESP2/RESP3 wire protocol for Larder: request parsing, reply composition
//! and reply parsing. No engine dependency, no I/O: everything works on byte
//! slices and `Vec<u8>` output buffers.
//!
//! # Wire format in brief
//!
//! Every RESP frame starts with a one-byte type marker and its header line
//! ends with `\r\n`:
//!
//! | marker | type | example |
//! |---|---|---|
//! | `+` | simple string | `+OK\r\n` |
//! | `-` | error | `-ERR unknown command\r\n` |
//! | `:` | integer | `:42\r\n` |
//! | `$` | bulk string (`$-1` is the RESP2 null) | `$3\r\nfoo\r\n` |
//! | `*` | array (`*-1` is the RESP2 null array) | `*2\r\n:1\r\n:2\r\n` |
//! | `_` | RESP3 null | `_\r\n` |
//! | `,` | RESP3 double | `,1.5\r\n`, `,inf\r\n` |
//! | `#` | RESP3 boolean | `#t\r\n` |
//! | `!` | RESP3 blob error | `!3\r\nERR\r\n` |
//! | `=` | RESP3 verbatim string | `=7\r\ntxt:abc\r\n` |
//! | `(` | RESP3 big number | `(123456789012345678901\r\n` |
//! | `%` | RESP3 map (n key/value pairs) | `%1\r\n+k\r\n:1\r\n` |
//! | `~` | RESP3 set | `~1\r\n:1\r\n` |
//! | `>` | RESP3 push | `>2\r\n+message\r\n+hi\r\n` |
//! | `|` | RESP3 attribute (pairs, then the reply they annotate) | `|1\r\n+k\r\n:1\r\n+OK\r\n` |
//!
//! Clients send requests either as a *multibulk* (an array of bulk strings,
//! `*2\r\n$3\r\nGET\r\n$1\r\nk\r\n`) or as an *inline* command, a text line
//! split on whitespace with shell-like quoting (`SET k "a b"\r\n`). Servers
//! always answer with the reply types above; RESP3 types are only sent to a
//! client that switched with `HELLO 3`, and [`Writer`] maps each of them onto
//! its RESP2 equivalent otherwise.
//!
//! # Entry points
//!
//! * [`parse_command_into`]: the server's hot path. Zero copy, no allocation
//!   per request once the reusable [`Args`] has grown.
//! * [`parse_command`]: convenience form returning a self-contained
//!   [`Command`].
//! * [`Writer`]: appends replies to a `Vec<u8>` in the client's [`Protocol`].
//! * [`parse_reply`] / [`reply_len`]: the client side, for tests and load
//!   generators.
//!
//! Protocol errors on the request side carry Redis 7's exact texts as their
//! `Display`, so a server replies `-ERR <text>\r\n` (see
//! [`ProtoError::write_reply`]) and closes the connection, as Redis does.

mod error;
mod num;
mod reply;
mod request;
mod writer;

pub use error::ProtoError;
pub use num::{push_u64, DoubleBuf};
pub use reply::{parse_reply, parse_reply_with_depth, reply_len, Reply, DEFAULT_MAX_DEPTH};
pub use request::{parse_command, parse_command_into, Args, ArgsIter, Command, Progress};
pub use writer::{format_double, shared, write_command, Protocol, Writer};

/// Request-size limits, mirroring the Redis settings of the same purpose.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Largest accepted bulk argument (`proto-max-bulk-len`, 512 MiB by
    /// default). A larger `$len` is `Protocol error: invalid bulk length`.
    pub proto_max_bulk_len: u64,
    /// How many bytes an inline line, or a `*`/`$` header line, may reach
    /// without its line terminator before it is rejected
    /// (`PROTO_INLINE_MAX_SIZE`, 64 KiB).
    pub max_inline: usize,
    /// Largest accepted multibulk argument count. Redis 7 accepts up to
    /// `INT_MAX`; a larger count is `Protocol error: invalid multibulk length`.
    pub max_multibulk: u64,
}

impl Limits {
    /// Redis 7 defaults.
    pub const DEFAULT: Limits =
        Limits { proto_max_bulk_len: 512 * 1024 * 1024, max_inline: 64 * 1024, max_multibulk: i32::MAX as u64 };
}

impl Default for Limits {
    fn default() -> Self {
        Self::DEFAULT
    }
}

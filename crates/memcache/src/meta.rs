//! Meta command keys and flags (`mg`, `ms`, `md`, `ma`, `me`).
//!
//! Flags are single-letter tokens, some with a value glued on (`T30`,
//! `Oabc`). memcached's `_meta_flag_preparse` decides what is valid, and
//! the same flag set is accepted by every meta command: a flag that makes
//! no sense for a command (say `D` on `mg`) is accepted and ignored.

use crate::error::ErrorReply;
use crate::num::{parse_i32, parse_u32, parse_u64};
use crate::parse::Tokens;

/// Largest base64 key text we decode; 256 bytes of base64 are at most 192
/// bytes of key. memcached's 250-byte key limit keeps real keys below this.
const MAX_B64_KEY: usize = 256;
const MAX_DECODED_KEY: usize = MAX_B64_KEY / 4 * 3;

/// Longest `O` token memcached echoes, counting the `O` itself.
pub(crate) const MAX_OPAQUE_TOKEN: usize = 32;

/// A meta command key: either the bytes as sent, or, with the `b` flag,
/// the base64-decoded binary key (held inline: no allocation).
#[derive(Clone, Copy)]
pub struct MetaKey<'a> {
    raw: &'a [u8],
    decoded_len: u8,
    decoded: [u8; MAX_DECODED_KEY],
}

impl<'a> MetaKey<'a> {
    pub(crate) fn text(raw: &'a [u8]) -> Self {
        MetaKey { raw, decoded_len: 0, decoded: [0; MAX_DECODED_KEY] }
    }

    /// Decodes `raw` as base64 (memcached's lenient decoder).
    pub(crate) fn binary(raw: &'a [u8]) -> Option<Self> {
        if raw.len() > MAX_B64_KEY {
            return None;
        }
        let mut k = MetaKey::text(raw);
        let n = crate::base64::decode(raw, &mut k.decoded)?;
        k.decoded_len = n as u8;
        Some(k)
    }

    /// The key to look up: decoded if the `b` flag was given.
    pub fn bytes(&self) -> &[u8] {
        if self.decoded_len > 0 {
            &self.decoded[..self.decoded_len as usize]
        } else {
            self.raw
        }
    }

    /// The key token exactly as sent (base64 text for binary keys).
    pub fn raw(&self) -> &'a [u8] {
        self.raw
    }

    /// Whether the key was sent base64-encoded (`b` flag). memcached
    /// remembers this on the item and returns such keys base64-encoded
    /// followed by a `b` flag (see [`crate::reply::Meta::key`]).
    pub fn is_binary(&self) -> bool {
        self.decoded_len > 0
    }
}

impl std::fmt::Debug for MetaKey<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetaKey")
            .field("raw", &String::from_utf8_lossy(self.raw))
            .field("binary", &self.is_binary())
            .field("bytes", &self.bytes())
            .finish()
    }
}

impl PartialEq for MetaKey<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.raw == other.raw && self.bytes() == other.bytes()
    }
}
impl Eq for MetaKey<'_> {}

/// Parsed meta flags. Boolean fields are "flag present"; valued flags are
/// `Some(value)` when present. Use [`MetaFlags::tokens`] to echo return
/// flags in request order, as memcached does.
///
/// Quiet mode (`q`) only ever hides the *nominal* reply; errors are always
/// sent. Per memcached 1.6:
/// * `mg`: `EN` (miss) is suppressed; hits (`HD`/`VA`) are sent.
/// * `ms`: `HD` (stored) is suppressed; `NS`, `EX`, `NF` are sent.
/// * `md`: `HD` (deleted/invalidated) is suppressed; `NF`, `EX` are sent.
/// * `ma`: `HD`/`VA` for a successful update of an existing item are
///   suppressed; `NF`, `EX`, `NS` and the reply for an auto-created (`N`)
///   item are sent.
///
/// The caller applies this; `mn` is the usual way for a client to learn a
/// quiet pipeline has finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MetaFlags<'a> {
    section: &'a [u8],
    /// `b`: the key is base64 (already decoded into the [`MetaKey`]).
    pub base64_key: bool,
    /// `c`: return the CAS value.
    pub return_cas: bool,
    /// `f`: return client flags.
    pub return_flags: bool,
    /// `h`: return whether the item was fetched before (`h0`/`h1`).
    pub return_hit: bool,
    /// `k`: return the key.
    pub return_key: bool,
    /// `l`: return seconds since last access.
    pub return_last_access: bool,
    /// `q`: quiet mode (see the type docs).
    pub quiet: bool,
    /// `s`: return item size.
    pub return_size: bool,
    /// `t`: return remaining TTL in seconds (`-1` for never).
    pub return_ttl: bool,
    /// `v`: return the value (`VA` instead of `HD`).
    pub return_value: bool,
    /// `u`: do not bump the item in the LRU.
    pub no_bump: bool,
    /// `x`: md: remove the value but keep the item (newer memcached).
    pub remove_value: bool,
    /// `I`: invalidate: mark stale instead of deleting (md), or allow a
    /// stale CAS win (ms).
    pub invalidate: bool,
    /// `O<token>`: opaque, echoed back (without the `O` here).
    pub opaque: Option<&'a [u8]>,
    /// `T<ttl>`: update TTL (mg, ma) or set it (ms).
    pub ttl: Option<i32>,
    /// `N<ttl>`: vivify on miss with this TTL (mg, ma).
    pub vivify_ttl: Option<i32>,
    /// `R<ttl>`: win a recache token if remaining TTL is below this (mg).
    pub recache_ttl: Option<i32>,
    /// `F<flags>`: client flags to store (ms).
    pub client_flags: Option<u32>,
    /// `C<cas>`: compare CAS (ms, md, ma).
    pub compare_cas: Option<u64>,
    /// `E<cas>`: use this as the new CAS value instead of generating one.
    pub explicit_cas: Option<u64>,
    /// `M<char>`: mode switch; see [`SetMode`] and [`ArithMode`].
    pub mode: Option<u8>,
    /// `D<n>`: ma delta (default 1, see [`MetaFlags::delta_or_default`]).
    pub delta: Option<u64>,
    /// `J<n>`: ma initial value on vivify (default 0).
    pub initial: Option<u64>,
    pub(crate) opaque_too_long: bool,
}

impl<'a> MetaFlags<'a> {
    /// The flag tokens in request order, exactly as sent (e.g. `b"T30"`).
    /// memcached builds replies by walking these, so echoed flags follow
    /// the request's order.
    pub fn tokens(&self) -> Tokens<'a> {
        Tokens::new(self.section)
    }

    /// `ma` delta: `D` or 1.
    pub fn delta_or_default(&self) -> u64 {
        self.delta.unwrap_or(1)
    }

    /// `ma` initial value for vivify: `J` or 0.
    pub fn initial_or_default(&self) -> u64 {
        self.initial.unwrap_or(0)
    }
}

/// `ms` mode (`M` flag).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetMode {
    /// `MS` or no mode. memcached upgrades set to CAS when `C` is given.
    Set,
    /// `ME`: add (store only if absent).
    Add,
    /// `MA`: append.
    Append,
    /// `MP`: prepend.
    Prepend,
    /// `MR`: replace. Upgraded to CAS when `C` is given, like set.
    Replace,
}

impl SetMode {
    pub(crate) fn from_flag(mode: Option<u8>) -> Option<SetMode> {
        Some(match mode {
            None | Some(b'S') => SetMode::Set,
            Some(b'E') => SetMode::Add,
            Some(b'A') => SetMode::Append,
            Some(b'P') => SetMode::Prepend,
            Some(b'R') => SetMode::Replace,
            Some(_) => return None,
        })
    }
}

/// `ma` mode (`M` flag).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArithMode {
    /// No mode, `MI` or `M+`.
    Incr,
    /// `MD` or `M-`.
    Decr,
}

impl ArithMode {
    pub(crate) fn from_flag(mode: Option<u8>) -> Option<ArithMode> {
        match mode {
            None | Some(b'I') | Some(b'+') => Some(ArithMode::Incr),
            Some(b'D') | Some(b'-') => Some(ArithMode::Decr),
            Some(_) => None,
        }
    }
}

/// memcached's `_meta_flag_preparse`. `flags` are the tokens after the key
/// (after the datalen for `ms`), `section` the same bytes as one slice.
///
/// Duplicate and unknown flags abort at once; bad values mark an error and
/// keep scanning, the last message set winning, as in C. The error for a
/// bad `F` value is the generic "bad command line format".
pub(crate) fn preparse<'a>(
    key_raw: &'a [u8],
    flags: &[&'a [u8]],
    section: &'a [u8],
) -> Result<(MetaKey<'a>, MetaFlags<'a>), ErrorReply> {
    let mut of = MetaFlags { section, ..MetaFlags::default() };
    let mut key = MetaKey::text(key_raw);
    let mut seen = [false; 127];
    let mut err: Option<ErrorReply> = None;
    let mut has_error = false;
    for &tok in flags {
        let o = tok[0];
        if o >= 127 || seen[o as usize] {
            return Err(ErrorReply::DuplicateFlag);
        }
        seen[o as usize] = true;
        let arg = &tok[1..];
        match o {
            b'b' => {
                of.base64_key = true;
                match MetaKey::binary(key_raw) {
                    Some(k) => key = k,
                    None => {
                        err = Some(ErrorReply::KeyDecode);
                        has_error = true;
                    }
                }
            }
            b'N' | b'T' | b'R' => match parse_i32(arg) {
                Some(v) => match o {
                    b'N' => of.vivify_ttl = Some(v),
                    b'T' => of.ttl = Some(v),
                    _ => of.recache_ttl = Some(v),
                },
                None => {
                    err = Some(ErrorReply::BadToken);
                    has_error = true;
                }
            },
            b'l' => of.return_last_access = true,
            b'O' => {
                of.opaque = Some(arg);
                of.opaque_too_long = tok.len() > MAX_OPAQUE_TOKEN;
            }
            // Proxy hints; memcached accepts and ignores them.
            b'P' | b'L' => {}
            b'k' => of.return_key = true,
            b's' => of.return_size = true,
            b't' => of.return_ttl = true,
            b'c' => of.return_cas = true,
            b'f' => of.return_flags = true,
            b'v' => of.return_value = true,
            b'h' => of.return_hit = true,
            b'u' => of.no_bump = true,
            b'q' => of.quiet = true,
            b'x' => of.remove_value = true,
            b'F' => match parse_u32(arg) {
                Some(v) => of.client_flags = Some(v),
                // memcached sets has_error but leaves the message alone.
                None => has_error = true,
            },
            b'C' | b'E' => match parse_u64(arg) {
                Some(v) if o == b'C' => of.compare_cas = Some(v),
                Some(v) => of.explicit_cas = Some(v),
                None => {
                    err = Some(ErrorReply::BadToken);
                    has_error = true;
                }
            },
            b'M' => {
                if tok.len() != 2 {
                    err = Some(ErrorReply::ModeTokenLength);
                    has_error = true;
                } else {
                    of.mode = Some(tok[1]);
                }
            }
            b'J' => match parse_u64(arg) {
                Some(v) => of.initial = Some(v),
                None => {
                    err = Some(ErrorReply::InvalidInitial);
                    has_error = true;
                }
            },
            b'D' => match parse_u64(arg) {
                Some(v) => of.delta = Some(v),
                None => {
                    err = Some(ErrorReply::InvalidDeltaValue);
                    has_error = true;
                }
            },
            b'I' => of.invalidate = true,
            _ => return Err(ErrorReply::InvalidFlag),
        }
    }
    if has_error {
        Err(err.unwrap_or(ErrorReply::BadFormat))
    } else {
        Ok((key, of))
    }
}

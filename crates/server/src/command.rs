//! The command table (data, as Redis's JSON specs are) and the dispatcher that checks arity
//! once, times the call, and turns errors into replies.
//!
//! Each family file (`families/*.rs`) exports a `COMMANDS: &[Spec]` list; [`table`] joins
//! them. A handler gets a [`Ctx`]: the arguments, a RESP writer over the connection's output
//! buffer, the engine handle, the connection's state and the shared server.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::OnceLock;

use larder_engine::Handle;
use larder_resp::{Args, Protocol, Writer};

use crate::{ClientInfo, Shared};

// Command flags, as COMMAND INFO names them.
pub const WRITE: u32 = 1;
pub const READONLY: u32 = 1 << 1;
pub const DENYOOM: u32 = 1 << 2;
pub const ADMIN: u32 = 1 << 3;
pub const PUBSUB: u32 = 1 << 4;
pub const NOSCRIPT: u32 = 1 << 5;
pub const BLOCKING: u32 = 1 << 6;
pub const LOADING: u32 = 1 << 7;
pub const STALE: u32 = 1 << 8;
pub const FAST: u32 = 1 << 9;
pub const NO_AUTH: u32 = 1 << 10;
pub const ALLOW_BUSY: u32 = 1 << 11;
pub const NO_ASYNC_LOADING: u32 = 1 << 12;
pub const NO_MULTI: u32 = 1 << 13;
/// Key positions depend on the arguments (ZUNIONSTORE's numkeys, SORT's STORE, EVAL).
pub const MOVABLEKEYS: u32 = 1 << 14;
/// The command may be called with no key at all (COMMAND GETKEYS answers `[]`).
pub const NO_MANDATORY_KEYS: u32 = 1 << 15;
/// Never entered in the slow log (EXEC logs its commands instead).
pub const SKIP_SLOWLOG: u32 = 1 << 16;
/// Not a write, but Redis would propagate something to replicas (PFCOUNT may rewrite its
/// key's encoding; PUBLISH goes to replicas): CLIENT PAUSE WRITE holds it. Not shown by
/// COMMAND INFO (Redis 7.0 does not list it either).
pub const MAY_REPLICATE: u32 = 1 << 17;
/// Served in a cluster to a client redirected with -ASK (RESTORE-ASKING); shown only.
pub const ASKING: u32 = 1 << 18;
/// Not fed to MONITOR as a whole (EVAL: its script's commands are).
pub const SKIP_MONITOR: u32 = 1 << 19;

pub const FLAG_NAMES: &[(u32, &str)] = &[
    (WRITE, "write"),
    (READONLY, "readonly"),
    (DENYOOM, "denyoom"),
    (ADMIN, "admin"),
    (PUBSUB, "pubsub"),
    (NOSCRIPT, "noscript"),
    (BLOCKING, "blocking"),
    (LOADING, "loading"),
    (STALE, "stale"),
    (SKIP_MONITOR, "skip_monitor"),
    (SKIP_SLOWLOG, "skip_slowlog"),
    (ASKING, "asking"),
    (FAST, "fast"),
    (NO_AUTH, "no_auth"),
    (NO_MANDATORY_KEYS, "no_mandatory_keys"),
    (NO_ASYNC_LOADING, "no_async_loading"),
    (NO_MULTI, "no_multi"),
    (MOVABLEKEYS, "movablekeys"),
    (ALLOW_BUSY, "allow_busy"),
];

pub type Handler = fn(&mut Ctx<'_>) -> Result<(), CmdError>;

/// One command: name, arity (negative = at least), flags, key positions, group, handler.
pub struct Spec {
    pub name: &'static str,
    pub arity: i32,
    pub flags: u32,
    pub first_key: i32,
    pub last_key: i32,
    pub step: i32,
    pub group: &'static str,
    pub summary: &'static str,
    pub handler: Handler,
}

/// An error reply, with its full text (`ERR syntax error`, `WRONGTYPE ...`). Bytes, not a
/// `String`: Redis echoes a client's bytes in some errors (an unknown command's name and
/// arguments, an unknown option) exactly as they came.
#[derive(Debug)]
pub struct CmdError(pub Vec<u8>);

impl CmdError {
    pub fn new(s: impl Into<String>) -> CmdError {
        CmdError(s.into().into_bytes())
    }
    pub fn syntax() -> CmdError {
        CmdError::new("ERR syntax error")
    }
    pub fn not_integer() -> CmdError {
        CmdError::new("ERR value is not an integer or out of range")
    }
    pub fn not_float() -> CmdError {
        CmdError::new("ERR value is not a valid float")
    }
}

impl From<larder_engine::Error> for CmdError {
    fn from(e: larder_engine::Error) -> CmdError {
        if e.is_oom() {
            return CmdError::new("OOM command not allowed when used memory > 'maxmemory'.");
        }
        CmdError::new(e.to_string())
    }
}

/// The reply mode set by CLIENT REPLY.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplyMode {
    On,
    Off,
    /// Skip the reply of the next command only (set by CLIENT REPLY SKIP).
    SkipNext,
    /// The command running now is the one whose reply is skipped.
    Skipping,
}

/// Per-connection state commands may change.
#[derive(Debug)]
pub struct ConnState {
    pub id: u64,
    pub db: u32,
    pub proto: Protocol,
    pub reply: ReplyMode,
    /// Close the connection once the pending replies are written (QUIT, protocol errors).
    pub close: bool,
    pub info: std::sync::Arc<crate::ClientInfo>,
    /// memcached: bytes of a rejected data block still to discard as they arrive
    /// (`conn_swallow`), since the block may be larger than what is buffered.
    pub mc_swallow: u64,
    /// memcached: how many keys of the multiget at the front of the read buffer have been
    /// answered, when its replies filled the output and it stopped there (0: none).
    pub mc_resume: usize,
    /// When the current command started: the batch start for the first request of a read,
    /// then the end of the previous command (one clock read per command, not two).
    pub clock: u64,
    /// The connection's slot in its worker: with the worker index and the id, how other
    /// threads address it (pub/sub deliveries).
    pub slot: u32,
    /// Channel, pattern and shard-channel subscriptions; None when there are none (a RESP2
    /// client with some is in the subscribed context).
    pub subs: Option<Box<crate::families::pubsub::Subs>>,
    /// The queue of an open MULTI.
    pub multi: Option<Box<crate::families::multi::Queue>>,
    /// Keys WATCHed for the next EXEC.
    pub watched: Vec<crate::families::multi::Watched>,
    /// Running the commands of an EXEC (Redis's CLIENT_DENY_BLOCKING): a blocking command
    /// must answer as on timeout instead of blocking.
    pub in_exec: bool,
    /// Running the commands of a script (Redis's CLIENT_SCRIPT).
    pub in_script: bool,
    /// The command's output must not be silenced as a whole by CLIENT REPLY OFF / SKIP:
    /// pub/sub pushes, or an EXEC that turned replies off part way.
    pub pushed: bool,
    /// Set by a blocking command that found nothing: the worker parks the client (see
    /// [`crate::blocking`]) and runs nothing else of it until it is served or times out.
    pub park: Option<Box<crate::blocking::Park>>,
    /// Keys written inside the running EXEC while clients are blocked, in order: their
    /// waiters are served when EXEC ends (see [`crate::blocking::after_call`]).
    pub ready: Vec<(u32, Vec<u8>)>,
    /// Set by a write command that changed nothing (SETBIT of a bit to its value, a
    /// BITFIELD that wrote what was there): it does not count in the dirty counter.
    pub unchanged: bool,
    /// Set when CLIENT PAUSE held the command instead of running it: the pause generation
    /// it waits at (see [`crate::pause`]). The worker leaves the request in the read buffer
    /// and runs it again when the pause ends.
    pub postponed: Option<u64>,
    /// CLIENT TRACKING's flags ([`crate::tracking::ON`] ...; [`crate::tracking::PENDING`]
    /// while invalidations wait for the reply): 0 for a client that does not track, the
    /// one check a command pays.
    pub tracking: u32,
    pub tracking_state: Option<Box<crate::tracking::ConnTracking>>,
    /// Authenticated (Redis's `c->authenticated`): a client that connected while the default
    /// user needed no password (on, `nopass`: `requirepass` empty) is, and stays so when a
    /// password is set later; one that connected otherwise is not until AUTH (or HELLO ...
    /// AUTH) gives it.
    pub authenticated: bool,
    /// The ACL user its commands are checked against (the default user until AUTH). Its
    /// `is_open()` is the one load a command pays for ACLs.
    pub user: std::sync::Arc<crate::acl::User>,
}

impl ConnState {
    /// A new connection's state: database 0, RESP2, replies on, ACL user `user`.
    pub fn new(
        id: u64,
        slot: u32,
        info: std::sync::Arc<crate::ClientInfo>,
        user: std::sync::Arc<crate::acl::User>,
    ) -> ConnState {
        ConnState {
            id,
            db: 0,
            proto: Protocol::Resp2,
            reply: ReplyMode::On,
            close: false,
            info,
            mc_swallow: 0,
            mc_resume: 0,
            clock: larder_engine::monotonic_ns(),
            slot,
            subs: None,
            multi: None,
            watched: Vec::new(),
            in_exec: false,
            in_script: false,
            pushed: false,
            park: None,
            ready: Vec::new(),
            unchanged: false,
            postponed: None,
            tracking: 0,
            tracking_state: None,
            authenticated: true,
            user,
        }
    }
}

/// The arguments of one request, borrowed from the connection's read buffer.
#[derive(Clone, Copy)]
pub struct Argv<'a> {
    pub args: &'a Args,
    pub buf: &'a [u8],
}

impl<'a> Argv<'a> {
    #[inline]
    pub fn len(&self) -> usize {
        self.args.len()
    }
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.args.is_empty()
    }
    /// Argument `i` (empty if out of range; arity is checked before handlers run).
    #[inline]
    pub fn get(&self, i: usize) -> &'a [u8] {
        self.args.get(self.buf, i).unwrap_or(b"")
    }
    pub fn iter(&self) -> impl Iterator<Item = &'a [u8]> + 'a {
        let (args, buf) = (self.args, self.buf);
        (0..args.len()).map(move |i| args.get(buf, i).unwrap_or(b""))
    }
}

pub struct Ctx<'a> {
    pub argv: Argv<'a>,
    pub out: Writer<'a>,
    pub h: &'a mut Handle,
    pub conn: &'a mut ConnState,
    pub shared: &'a Shared,
    pub worker: usize,
}

impl<'a> Ctx<'a> {
    #[inline]
    pub fn arg(&self, i: usize) -> &'a [u8] {
        self.argv.get(i)
    }
    #[inline]
    pub fn argc(&self) -> usize {
        self.argv.len()
    }
    /// Argument `i` as an i64, or Redis's "not an integer" error.
    pub fn int(&self, i: usize) -> Result<i64, CmdError> {
        parse_i64(self.arg(i)).ok_or_else(CmdError::not_integer)
    }
    /// Argument `i` as a float, or Redis's "not a valid float" error.
    pub fn float(&self, i: usize) -> Result<f64, CmdError> {
        parse_f64(self.arg(i)).ok_or_else(CmdError::not_float)
    }
    pub fn stats(&self) -> &crate::stats::WorkerStats {
        self.shared.stats.worker(self.worker)
    }
}

/// Redis's `string2ll`: optional `-`, digits without leading zeros, no spaces, fits in i64
/// ("+1", "01" and "-0" are rejected: Redis 7 replies "not an integer" to `INCRBY k -0`).
pub fn parse_i64(b: &[u8]) -> Option<i64> {
    larder_engine::parse_canonical_i64(b)
}

/// Redis's float parsing for arguments (`strtold` without spaces; "inf" allowed, NaN not).
pub fn parse_f64(b: &[u8]) -> Option<f64> {
    if b.is_empty() || b.iter().any(|c| c.is_ascii_whitespace()) {
        return None;
    }
    let (v, n) = strtod_prefix(b);
    (n == b.len() && !v.is_nan()).then_some(v)
}

/// Parses the longest float prefix of `s` as C's `strtod` does (after leading whitespace);
/// returns the value and the bytes consumed (0 if none).
pub fn strtod_prefix(s: &[u8]) -> (f64, usize) {
    let mut i = 0;
    while i < s.len() && matches!(s[i], b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r') {
        i += 1;
    }
    let start = i;
    let mut j = i;
    if j < s.len() && (s[j] == b'+' || s[j] == b'-') {
        j += 1;
    }
    if let Some((v, n)) = strtod_hex(&s[j..]) {
        return (if s[start] == b'-' { -v } else { v }, j + n);
    }
    for word in [&b"infinity"[..], b"inf", b"nan"] {
        if s[j..].get(..word.len()).is_some_and(|w| w.eq_ignore_ascii_case(word)) {
            let end = j + word.len();
            let v: f64 = std::str::from_utf8(&s[start..end]).ok().and_then(|t| t.parse().ok()).unwrap_or(0.0);
            return (v, end);
        }
    }
    let mut k = j;
    let mut digits = 0;
    while k < s.len() && s[k].is_ascii_digit() {
        k += 1;
        digits += 1;
    }
    if k < s.len() && s[k] == b'.' {
        k += 1;
        while k < s.len() && s[k].is_ascii_digit() {
            k += 1;
            digits += 1;
        }
    }
    if digits == 0 {
        return (0.0, 0);
    }
    if k < s.len() && (s[k] == b'e' || s[k] == b'E') {
        let mut e = k + 1;
        if e < s.len() && (s[e] == b'+' || s[e] == b'-') {
            e += 1;
        }
        if e < s.len() && s[e].is_ascii_digit() {
            while e < s.len() && s[e].is_ascii_digit() {
                e += 1;
            }
            k = e;
        }
    }
    let v = std::str::from_utf8(&s[start..k]).ok().and_then(|t| t.parse().ok()).unwrap_or(0.0);
    (v, k)
}

/// C's `strtod` on a hexadecimal float (after the sign): `0x`, hex digits with at most one
/// `.`, then optionally `p`, a sign and decimal digits (a power of two). Returns the
/// magnitude, rounded to nearest even as glibc does (±inf above f64's range, 0 below it),
/// and the bytes read; None when no hex digit follows the `0x` (strtod then reads only the
/// "0"). Redis's scores, weights, ranges, SORT and timeouts all accept this form.
fn strtod_hex(s: &[u8]) -> Option<(f64, usize)> {
    if s.len() < 3 || s[0] != b'0' || s[1] | 0x20 != b'x' {
        return None;
    }
    // The first 57-60 significant bits in m, the rest only as "anything nonzero" (sticky).
    let (mut m, mut e2, mut sticky, mut digits, mut dot) = (0u64, 0i64, false, 0, false);
    let mut i = 2;
    while i < s.len() {
        match (s[i], (s[i] as char).to_digit(16)) {
            (b'.', _) if !dot => dot = true,
            (_, Some(d)) => {
                digits += 1;
                if m < 1 << 56 {
                    m = m << 4 | d as u64;
                    e2 -= 4 * dot as i64;
                } else {
                    sticky |= d != 0;
                    e2 += 4 * !dot as i64;
                }
            }
            _ => break,
        }
        i += 1;
    }
    if digits == 0 {
        return None;
    }
    // The exponent counts only with at least one digit; it saturates (only its size matters).
    if i < s.len() && s[i] | 0x20 == b'p' {
        let (neg, mut j) = match s.get(i + 1) {
            Some(b'-') => (true, i + 2),
            Some(b'+') => (false, i + 2),
            _ => (false, i + 1),
        };
        if j < s.len() && s[j].is_ascii_digit() {
            let mut p = 0i64;
            while j < s.len() && s[j].is_ascii_digit() {
                p = (p * 10 + (s[j] - b'0') as i64).min(1 << 40);
                j += 1;
            }
            e2 += if neg { -p } else { p };
            i = j;
        }
    }
    Some((scale2(m, sticky, e2), i))
}

/// (m + sticky) × 2^e2 rounded to the nearest f64, ties to even.
fn scale2(m: u64, sticky: bool, e2: i64) -> f64 {
    if m == 0 {
        return 0.0;
    }
    let bits = 64 - m.leading_zeros() as i64;
    if bits + e2 > 1024 {
        return f64::INFINITY;
    }
    if bits + e2 < -1075 {
        return 0.0;
    }
    // Keep 53 bits, fewer for a subnormal (whose last bit is 2^-1074), and round the rest.
    let drop = (bits - 53).max(-1074 - e2);
    let mut q = m;
    if drop > 0 {
        let m = m as u128;
        q = (m >> drop) as u64;
        let (rest, half) = (m & ((1 << drop) - 1), 1u128 << (drop - 1));
        if rest > half || (rest == half && (sticky || q & 1 == 1)) {
            q += 1;
        }
    }
    // Exact from here: q has at most 54 bits and its last one is at or above 2^-1074.
    let pow2 = |k: i64| f64::from_bits(((1023 + k) as u64) << 52);
    let (mut v, mut e) = (q as f64, e2 + drop.max(0));
    while e > 1000 {
        v *= pow2(1000);
        e -= 1000;
    }
    while e < -1000 {
        v *= pow2(-1000);
        e += 1000;
    }
    v * pow2(e)
}

/// Whether `strtod` sets ERANGE reading `text` (a whole number, sign included) as `v`: an
/// overflow to ±inf that was not written as "inf", or an underflow to 0 of a nonzero
/// mantissa. Redis refuses both (`getDoubleFromObject`, SORT).
pub fn strtod_erange(text: &[u8], v: f64) -> bool {
    let t = text.strip_prefix(b"-").or_else(|| text.strip_prefix(b"+")).unwrap_or(text);
    if v.is_infinite() {
        return !t.eq_ignore_ascii_case(b"inf") && !t.eq_ignore_ascii_case(b"infinity");
    }
    if v != 0.0 {
        return false;
    }
    // (`c | 0x20` is the lowercase of a letter, and no other byte maps to `p` or `e`.)
    let (mantissa, nonzero): (&[u8], fn(&u8) -> bool) = match t.get(..2) {
        Some(x) if x.eq_ignore_ascii_case(b"0x") => {
            (t[2..].split(|&c| c | 0x20 == b'p').next().unwrap_or(b""), |c| c.is_ascii_hexdigit() && *c != b'0')
        }
        _ => (t.split(|&c| c | 0x20 == b'e').next().unwrap_or(b""), |c| (b'1'..=b'9').contains(c)),
    };
    mantissa.iter().any(nonzero)
}

/// FNV-1a for the command-name maps: names are short and not attacker-chosen keys of a
/// growing table (the table is fixed), so SipHash's flooding resistance buys nothing and
/// its cost showed in profiles of every request.
#[derive(Clone, Copy, Default)]
pub struct Fnv;

pub struct FnvHasher(u64);

impl std::hash::BuildHasher for Fnv {
    type Hasher = FnvHasher;
    fn build_hasher(&self) -> FnvHasher {
        FnvHasher(0xcbf2_9ce4_8422_2325)
    }
}

impl std::hash::Hasher for FnvHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ b as u64).wrapping_mul(0x100_0000_01b3);
        }
    }
}

/// An open-addressed table from a command name's first 8 bytes (lowercased) and its
/// length to the command's index.
struct NameIndex {
    slots: Vec<(u64, u16, u16, &'static str)>,
}

const NAME_SLOTS: usize = 1024;

impl Default for NameIndex {
    fn default() -> Self {
        NameIndex { slots: vec![(0, 0, u16::MAX, ""); NAME_SLOTS] }
    }
}

impl NameIndex {
    #[inline]
    fn key(name: &[u8]) -> u64 {
        // The first 8 bytes, zero-padded, from two overlapping loads (a short copy into a
        // zeroed word would be a memcpy call).
        let n = name.len();
        let x = match n {
            8.. => u64::from_le_bytes([name[0], name[1], name[2], name[3], name[4], name[5], name[6], name[7]]),
            4..=7 => {
                let lo = u32::from_le_bytes([name[0], name[1], name[2], name[3]]) as u64;
                let hi = u32::from_le_bytes([name[n - 4], name[n - 3], name[n - 2], name[n - 1]]) as u64;
                lo | hi << (8 * (n - 4))
            }
            2..=3 => {
                let lo = u16::from_le_bytes([name[0], name[1]]) as u64;
                let hi = u16::from_le_bytes([name[n - 2], name[n - 1]]) as u64;
                lo | hi << (8 * (n - 2))
            }
            1 => name[0] as u64,
            _ => 0,
        };
        // ASCII-lowercase the 8 bytes at once (a byte at a time was half the cost of a
        // lookup): per byte below 0x80, the high bit of b + 0x3f says b >= 'A' and that of
        // b + 0x25 says b > 'Z' (neither carries into the next byte); those in 'A'..='Z'
        // get 0x20 added.
        const ONES: u64 = 0x0101_0101_0101_0101;
        let low7 = x & (0x7f * ONES);
        let ge_a = low7 + (0x80 - b'A' as u64) * ONES;
        let gt_z = low7 + (0x80 - b'Z' as u64 - 1) * ONES;
        let upper = ge_a & !gt_z & !x & (0x80 * ONES);
        x | (upper >> 2)
    }

    #[inline]
    fn home(key: u64, len: usize) -> usize {
        ((key ^ (len as u64).rotate_left(56)).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 54) as usize
    }

    fn insert(&mut self, name: &'static str, idx: usize) {
        let (key, len) = (Self::key(name.as_bytes()), name.len() as u16);
        let mut h = Self::home(key, name.len());
        while self.slots[h].2 != u16::MAX {
            h = (h + 1) % NAME_SLOTS;
        }
        self.slots[h] = (key, len, idx as u16, name);
    }

    /// The command with this name, any case.
    #[inline]
    fn get(&self, name: &[u8]) -> Option<usize> {
        if name.len() > 64 {
            return None;
        }
        let key = Self::key(name);
        let mut h = Self::home(key, name.len());
        loop {
            let (k, l, i, full) = self.slots[h];
            if i == u16::MAX {
                return None;
            }
            // The first 8 bytes and the length match; a longer name must match in full.
            if k == key
                && l as usize == name.len()
                && (name.len() <= 8 || name[8..].eq_ignore_ascii_case(&full.as_bytes()[8..]))
            {
                return Some(i as usize);
            }
            h = (h + 1) & (NAME_SLOTS - 1);
        }
    }
}

pub struct Table {
    /// Every command, then every subcommand of the container commands (named
    /// `parent|sub`, as Redis names them in COMMAND, CLIENT LIST and INFO commandstats).
    pub specs: Vec<&'static Spec>,
    by_name: HashMap<&'static str, usize, Fnv>,
    by_full_name: HashMap<&'static str, usize, Fnv>,
    children: Vec<Vec<usize>>,
    /// The wire-name index [`Table::lookup`] probes: every command is found with one
    /// multiply and a compare or two, without lowercasing the name into a buffer first.
    fast: NameIndex,
}

impl Table {
    /// Commands and subcommands (the size of per-command statistics).
    pub fn len(&self) -> usize {
        self.specs.len()
    }
    pub fn is_empty(&self) -> bool {
        self.specs.is_empty()
    }
    /// Looks a command up by name, case-insensitively. Subcommands are not found this way
    /// (`client|list` is not a command name on the wire).
    #[inline]
    pub fn lookup(&self, name: &[u8]) -> Option<usize> {
        self.fast.get(name)
    }
    /// A subcommand of command `parent` by its name on the wire (`LIST` of `CLIENT LIST`).
    pub fn lookup_sub(&self, parent: usize, sub: &[u8]) -> Option<usize> {
        if self.children[parent].is_empty() {
            return None;
        }
        let mut full = String::with_capacity(self.specs[parent].name.len() + 1 + sub.len());
        full.push_str(self.specs[parent].name);
        full.push('|');
        full.push_str(&std::str::from_utf8(sub).ok()?.to_ascii_lowercase());
        self.by_full_name.get(full.as_str()).copied()
    }
    /// The command an argument vector names, as Redis's `lookupCommand`: its first argument,
    /// or with a container and a second argument, that subcommand (None if unknown); a
    /// container alone is the container.
    pub fn lookup_argv<A: AsRef<[u8]>>(&self, argv: &[A]) -> Option<usize> {
        let i = self.lookup(argv.first()?.as_ref())?;
        match argv.get(1) {
            Some(sub) if !self.children[i].is_empty() => self.lookup_sub(i, sub.as_ref()),
            _ => Some(i),
        }
    }
    /// A command or subcommand by its full lowercase name (`get`, `config|get`).
    pub fn lookup_full(&self, name: &str) -> Option<usize> {
        self.by_name.get(name).or_else(|| self.by_full_name.get(name)).copied()
    }
    /// The subcommands of a container command (empty for other commands).
    pub fn subcommands(&self, i: usize) -> &[usize] {
        &self.children[i]
    }
    /// Whether entry `i` is a subcommand.
    pub fn is_subcommand(&self, i: usize) -> bool {
        self.specs[i].name.contains('|')
    }
    /// The top-level commands, in table order (COMMAND, COMMAND COUNT).
    pub fn commands(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.specs.len()).filter(|&i| !self.is_subcommand(i))
    }
}

/// Subcommand tables, each `Spec` named `parent|sub`. The parent must be in a family's
/// `COMMANDS`; the dispatcher routes `PARENT SUB ...` to the subcommand's own arity check
/// and handler, as Redis 7 does for its container commands.
const SUBCOMMANDS: &[&[Spec]] = &[
    crate::families::keys::SUBCOMMANDS,
    crate::families::connection::SUBCOMMANDS,
    crate::families::server::SUBCOMMANDS,
    crate::families::pubsub::SUBCOMMANDS,
    crate::families::module::SUBCOMMANDS,
    crate::families::acl::SUBCOMMANDS,
    crate::families::scripting::SUBCOMMANDS,
];

/// The command table: every family's commands, then the subcommands.
pub fn table() -> &'static Table {
    static TABLE: OnceLock<Table> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut specs: Vec<&'static Spec> = Vec::new();
        for family in crate::families::ALL {
            specs.extend(family.iter());
        }
        let by_name: HashMap<&'static str, usize, Fnv> = specs.iter().enumerate().map(|(i, s)| (s.name, i)).collect();
        let mut children = vec![Vec::new(); specs.len()];
        let mut by_full_name = HashMap::with_hasher(Fnv);
        for sub in SUBCOMMANDS.iter().flat_map(|t| t.iter()) {
            let parent = sub.name.split('|').next().unwrap_or("");
            let Some(&p) = by_name.get(parent) else { continue };
            let i = specs.len();
            specs.push(sub);
            children.push(Vec::new());
            children[p].push(i);
            by_full_name.insert(sub.name, i);
        }
        let mut fast = NameIndex::default();
        for (i, spec) in specs.iter().enumerate() {
            if !spec.name.contains('|') {
                fast.insert(spec.name, i);
            }
        }
        Table { specs, by_name, by_full_name, children, fast }
    })
}

/// Where a request's first key is, by its command's (`cmd`'s) key positions: the argument
/// index, or None for a keyless command, or too few arguments. A hint only (for
/// prefetching): the request is checked in full when it runs.
pub(crate) fn first_key_index(cmd: usize, argv: Argv<'_>) -> Option<usize> {
    let spec = table().specs.get(cmd)?;
    usize::try_from(spec.first_key).ok().filter(|&k| k > 0 && k < argv.len())
}

/// The table index of the command named `name` (any case), if there is one.
#[inline]
pub(crate) fn lookup_command(name: &[u8]) -> Option<usize> {
    table().lookup(name)
}

/// Appends `'arg'` as Redis's `'%.*s'` prints it into an error: at most `max` bytes, up to
/// a NUL (a C string), with CR and LF turned into spaces (as `addReplyErrorFormat` does).
pub(crate) fn quote_arg(out: &mut Vec<u8>, a: &[u8], max: usize) {
    out.push(b'\'');
    for &c in a.iter().take(max).take_while(|&&c| c != 0) {
        out.push(if c == b'\r' || c == b'\n' { b' ' } else { c });
    }
    out.push(b'\'');
}

/// Runs one request: lookup (and subcommand lookup), arity, handler, stats, slow log.
/// Writes exactly one reply, or none under CLIENT REPLY OFF/SKIP. `cmd` is the table index
/// of its command if the caller already looked it up ([`lookup_command`] of the first
/// argument), so the lookup isn't repeated.
pub fn dispatch(ctx: &mut Ctx<'_>, cmd: Option<usize>) {
    let mark = ctx.out.buf().len();
    // CLIENT REPLY SKIP asked to skip the reply of this command (Redis's SKIP_NEXT -> SKIP).
    if ctx.conn.reply == ReplyMode::SkipNext {
        ctx.conn.reply = ReplyMode::Skipping;
    }
    let ran = execute(ctx, cmd);
    // Whether the reply goes out is decided after the command ran, as Redis checks the flags
    // when a reply is added: CLIENT REPLY ON is answered, CLIENT REPLY OFF is not. Pub/sub
    // pushes go out whatever the mode.
    if matches!(ctx.conn.reply, ReplyMode::Off | ReplyMode::Skipping) && !ctx.conn.pushed {
        ctx.out.buf().truncate(mark);
    }
    ctx.conn.pushed = false;
    if ctx.conn.reply == ReplyMode::Skipping {
        // A command held by CLIENT PAUSE has not run: the skip is still for it.
        ctx.conn.reply = if ctx.conn.postponed.is_some() { ReplyMode::SkipNext } else { ReplyMode::On };
    }
    // A tracking client's read remembers its keys (again: see `tracking`), and its own
    // invalidations go out after its reply, whatever the reply mode.
    if ctx.conn.tracking != 0 {
        crate::tracking::after_dispatch(ctx, ran);
    }
}

/// Returns the command that ran (None: unknown, refused or queued).
fn execute(ctx: &mut Ctx<'_>, known: Option<usize>) -> Option<usize> {
    let t = table();
    let name = ctx.arg(0);
    let Some(mut i) = known.or_else(|| t.lookup(name)) else {
        // Redis: "unknown command '%.128s', with args beginning with: " then each argument
        // as "'%.*s' " while fewer than 128 bytes of them have been written.
        let mut msg = b"ERR unknown command ".to_vec();
        quote_arg(&mut msg, name, 128);
        msg.extend_from_slice(b", with args beginning with: ");
        let args_from = msg.len();
        for a in ctx.argv.iter().skip(1) {
            let written = msg.len() - args_from;
            if written >= 128 {
                break;
            }
            quote_arg(&mut msg, a, 128 - written);
            msg.push(b' ');
        }
        // CLIENT LIST's cmd= is Redis's lastcmd: what the lookup found, here nothing.
        ctx.conn.info.last_cmd.store(u32::MAX, Ordering::Relaxed);
        reject(ctx, None, msg);
        return None;
    };
    if ctx.argc() >= 2 && !t.subcommands(i).is_empty() {
        match t.lookup_sub(i, ctx.arg(1)) {
            Some(sub) => i = sub,
            None => {
                let mut msg = b"ERR unknown subcommand ".to_vec();
                quote_arg(&mut msg, ctx.arg(1), 128);
                msg.extend_from_slice(b". Try ");
                msg.extend(name.iter().map(u8::to_ascii_uppercase));
                msg.extend_from_slice(b" HELP.");
                ctx.conn.info.last_cmd.store(u32::MAX, Ordering::Relaxed);
                reject(ctx, None, msg);
                return None;
            }
        }
    }
    let spec = t.specs[i];
    let argc = ctx.argc() as i32;
    if (spec.arity > 0 && argc != spec.arity) || argc < -spec.arity {
        // Redis sets lastcmd at the lookup, before the arity check.
        ctx.conn.info.last_cmd.store(i as u32, Ordering::Relaxed);
        let msg = format!("ERR wrong number of arguments for '{}' command", spec.name);
        reject(ctx, Some(i), msg);
        return None;
    }
    // The rare states (in MULTI, subscribed, not authenticated, an ACL user with less than
    // every command, key and channel) cost one branch on the common path, and CLIENT PAUSE
    // one relaxed load.
    if ctx.conn.multi.is_some() || ctx.conn.subs.is_some() || !ctx.conn.authenticated || !ctx.conn.user.is_open() {
        if !admit(ctx, i) {
            return None;
        }
    } else if ctx.shared.pause.mode() != crate::pause::OFF && crate::pause::postpones(ctx, i) {
        return None;
    }
    // A tracking client's read remembers its keys before it runs (see `tracking`).
    if ctx.conn.tracking != 0 {
        crate::tracking::before_read(ctx, spec);
    }
    call(ctx, i);
    Some(i)
}

/// The checks Redis's `processCommand` makes for a client in MULTI or subscribed, in its
/// order; then CLIENT PAUSE (which holds even a command about to be queued, as Redis 7.0
/// does) and queueing inside MULTI. Returns whether the command runs now.
fn admit(ctx: &mut Ctx<'_>, i: usize) -> bool {
    let spec = table().specs[i];
    let top = spec.name.split('|').next().unwrap_or(spec.name);
    if auth_required(ctx.shared, ctx.conn) && spec.flags & NO_AUTH == 0 {
        reject(ctx, Some(i), "NOAUTH Authentication required.");
        return false;
    }
    if ctx.conn.multi.is_some() && spec.flags & NO_MULTI != 0 {
        reject(ctx, Some(i), "ERR Command not allowed inside a transaction");
        return false;
    }
    if !ctx.conn.user.is_open() {
        // Redis sets lastcmd at the lookup: the log entry's client info shows this command.
        ctx.conn.info.last_cmd.store(i as u32, Ordering::Relaxed);
        let context = if ctx.conn.multi.is_some() { crate::acl::Context::Multi } else { crate::acl::Context::Toplevel };
        if let Err(denied) = crate::families::acl::check(ctx, i, context) {
            reject(ctx, Some(i), denied.error(i));
            return false;
        }
    }
    // RESP2 has no push type: a subscribed client may only (un)subscribe, PING, QUIT, RESET.
    if ctx.conn.subs.is_some()
        && ctx.conn.proto == Protocol::Resp2
        && !matches!(
            top,
            "ping"
                | "subscribe"
                | "ssubscribe"
                | "unsubscribe"
                | "sunsubscribe"
                | "psubscribe"
                | "punsubscribe"
                | "quit"
                | "reset"
        )
    {
        let msg = format!(
            "ERR Can't execute '{}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context",
            spec.name
        );
        reject(ctx, Some(i), msg);
        return false;
    }
    if refused_to_monitor(ctx, spec) {
        reject(ctx, Some(i), MONITOR_REFUSED);
        return false;
    }
    if ctx.shared.pause.mode() != crate::pause::OFF && crate::pause::postpones(ctx, i) {
        return false;
    }
    if ctx.conn.multi.is_some() && !crate::families::multi::runs_in_multi(top) {
        ctx.conn.info.last_cmd.store(i as u32, Ordering::Relaxed);
        crate::families::multi::queue(ctx, i);
        return false;
    }
    true
}

/// Redis's `authRequired`: the default user needs a password (or is off) and the client
/// has not authenticated.
pub(crate) fn auth_required(shared: &Shared, conn: &ConnState) -> bool {
    !conn.authenticated && !shared.acl.default.is_free()
}

/// What a client in MONITOR mode gets for a command that reads or writes the keyspace
/// (Redis treats it as a replica).
const MONITOR_REFUSED: &str = "ERR Replica can't interact with the keyspace";

/// Whether the client is in MONITOR mode and the command reads or writes the keyspace.
fn refused_to_monitor(ctx: &Ctx<'_>, spec: &Spec) -> bool {
    spec.flags & (WRITE | READONLY | MAY_REPLICATE) != 0 && ctx.conn.info.monitor.load(Ordering::Relaxed)
}

/// Refuses a request before it runs (Redis's `rejectCommand`): marks an open transaction so
/// EXEC aborts, counts the rejection, and answers the error; a rejected EXEC aborts the
/// transaction with `-EXECABORT` (and is shown to monitors, which saw the MULTI).
fn reject(ctx: &mut Ctx<'_>, i: Option<usize>, msg: impl Into<Vec<u8>>) {
    let msg = msg.into();
    crate::families::multi::flag(ctx.conn);
    if let Some(i) = i {
        if table().specs[i].name == "exec" {
            if ctx.shared.monitors.active() {
                crate::monitor::feed(ctx, table().specs[i]);
            }
            crate::families::multi::discard(ctx.shared, ctx.conn);
            let reason = msg.strip_prefix(b"ERR ").unwrap_or(&msg);
            let mut e = b"EXECABORT Transaction discarded because of: ".to_vec();
            e.extend_from_slice(reason);
            reply_error(ctx, &CmdError(e), Some((i, true)));
            return;
        }
    }
    reply_error(ctx, &CmdError(msg), i.map(|i| (i, true)));
}

/// Runs command `i` (arity already checked): the handler, then commandstats, the dirty
/// counter, error accounting and the slow log. EXEC calls this for each queued command.
pub(crate) fn call(ctx: &mut Ctx<'_>, i: usize) {
    // Whether any client is in MONITOR mode: one relaxed load, and all MONITOR costs a
    // command while there is none (no client is a monitor then either). A monitor that
    // attaches while the command runs sees the next one.
    if ctx.shared.monitors.active() {
        call_monitored(ctx, i);
    } else {
        run(ctx, i);
    }
}

/// [`call`] while clients monitor: a monitor's own keyspace commands are refused, and the
/// command is fed to the monitors once it ran.
#[cold]
#[inline(never)]
fn call_monitored(ctx: &mut Ctx<'_>, i: usize) {
    let spec = table().specs[i];
    if refused_to_monitor(ctx, spec) {
        ctx.conn.info.last_cmd.store(i as u32, Ordering::Relaxed);
        reject(ctx, Some(i), MONITOR_REFUSED);
        return;
    }
    // A script is shown before the commands it runs (Redis's evalCommand feeds it itself).
    if spec.flags & SKIP_MONITOR != 0 {
        crate::monitor::feed(ctx, spec);
        run(ctx, i);
        return;
    }
    run(ctx, i);
    crate::monitor::feed(ctx, spec);
}

#[inline(always)]
fn run(ctx: &mut Ctx<'_>, i: usize) {
    let spec = table().specs[i];
    // Inside EXEC, CLIENT LIST goes on showing `cmd=exec`, as Redis's `lastcmd`.
    if !ctx.conn.in_exec {
        ctx.conn.info.last_cmd.store(i as u32, Ordering::Relaxed);
    }
    ctx.conn.unchanged = false;
    let r = (spec.handler)(ctx);
    // Keys the engine found expired, created or missed and no keyspace event published yet,
    // and keys it changed while clients track (a plain load; set only while
    // notify-keyspace-events or tracking asks for them).
    if ctx.h.has_changes() {
        crate::notify::flush(ctx);
        if ctx.h.has_modified() {
            crate::tracking::after_command(ctx);
        }
    }
    let end = larder_engine::monotonic_ns();
    let usec = end.saturating_sub(ctx.conn.clock) / 1000;
    ctx.conn.clock = end;
    let ws = ctx.shared.stats.worker(ctx.worker);
    ws.commands.incr();
    if let Some(c) = ws.cmd.get(i) {
        c.calls.incr();
        c.usec.add(usec);
        if ctx.shared.config.latency_tracking.load(Ordering::Relaxed) {
            c.record(usec);
        }
    }
    let ok = r.is_ok();
    match r {
        Ok(()) if spec.flags & WRITE != 0 && !ctx.conn.unchanged => {
            ws.dirty.incr();
        }
        Ok(()) => {}
        Err(e) => reply_error(ctx, &e, Some((i, false))),
    }
    // Clients blocked on keys this command wrote are served now, before its reply goes
    // out (one atomic load when nobody is blocked).
    if ok && ctx.shared.blocked_clients.load(Ordering::Relaxed) > 0 {
        crate::blocking::after_call(ctx, spec);
    }
    // A write that creates a key someone watches while it is absent fails their EXEC.
    if ok && spec.flags & WRITE != 0 && ctx.shared.watches.any() {
        crate::families::multi::touch_created(ctx, spec);
    }
    // One threshold for the slow log and the latency monitor.
    if usec >= ctx.shared.config.slow_usec.load(Ordering::Relaxed) {
        slow(ctx, spec, usec);
    }
}

/// A command that took long enough for the slow log or the latency monitor (Redis's
/// `call`: the "command" / "fast-command" latency sample, then the slow log entry).
#[cold]
#[inline(never)]
fn slow(ctx: &mut Ctx<'_>, spec: &Spec, usec: u64) {
    let cfg = &ctx.shared.config;
    let threshold_ms = cfg.latency_monitor_threshold.load(Ordering::Relaxed);
    if threshold_ms > 0 && usec / 1000 >= threshold_ms {
        let event = if spec.flags & FAST != 0 { "fast-command" } else { "command" };
        ctx.shared.latency.lock().unwrap_or_else(|e| e.into_inner()).add(event, usec / 1000);
    }
    if usec >= cfg.slowlog_log_slower_than.load(Ordering::Relaxed) && spec.flags & SKIP_SLOWLOG == 0 {
        // A client that blocked is logged when it is served or unblocked, with its whole
        // duration (Redis's `updateStatsOnUnblock`; see `blocking::enter`).
        if ctx.conn.park.is_none() {
            slowlog_add(ctx.shared, spec.name, &ctx.argv, &ctx.conn.info, usec);
        }
    }
}

/// Writes an error reply and counts it (errorstats; failed or rejected calls).
pub fn reply_error(ctx: &mut Ctx<'_>, e: &CmdError, cmd: Option<(usize, bool)>) {
    let ws = ctx.shared.stats.worker(ctx.worker);
    ws.count_error(e.0.split(|&c| c == b' ').next().unwrap_or(b"ERR"));
    if let Some((i, rejected)) = cmd {
        if let Some(c) = ws.cmd.get(i) {
            if rejected {
                c.rejected.incr();
            } else {
                c.failed.incr();
            }
        }
    }
    let mut line = Vec::with_capacity(e.0.len() + 1);
    line.push(b'-');
    line.extend_from_slice(&e.0);
    ctx.out.error(&line);
}

/// Adds command `name` with arguments `argv`, run by client `info` in `usec`, to the slow log.
pub(crate) fn slowlog_add(shared: &Shared, name: &str, argv: &Argv<'_>, info: &ClientInfo, usec: u64) {
    let max = shared.config.slowlog_max_len.load(Ordering::Relaxed);
    // Credentials are logged as Redis logs them: "(redacted)".
    let redacted = crate::families::connection::redacted_args(shared, name, *argv);
    let mut log = shared.slowlog.lock().unwrap_or_else(|e| e.into_inner());
    let id = log.next_id;
    log.next_id += 1;
    // As Redis: at most 32 arguments, each at most 128 bytes, with a note of what was cut.
    let argc = argv.len();
    let mut args: Vec<Vec<u8>> = argv
        .iter()
        .take(if argc > 32 { 31 } else { 32 })
        .enumerate()
        .map(|(j, a)| {
            if redacted.contains(&j) {
                b"(redacted)".to_vec()
            } else if a.len() > 128 {
                let mut v = a[..128].to_vec();
                v.extend_from_slice(format!("... ({} more bytes)", a.len() - 128).as_bytes());
                v
            } else {
                a.to_vec()
            }
        })
        .collect();
    if argc > 32 {
        args.push(format!("... ({} more arguments)", argc - 31).into_bytes());
    }
    let entry = crate::stats::SlowEntry {
        id,
        time: larder_engine::now_ms() / 1000,
        usec,
        args,
        addr: info.addr.clone(),
        name: info.name.lock().unwrap_or_else(|e| e.into_inner()).clone(),
    };
    log.entries.push_front(entry);
    while log.entries.len() > max {
        log.entries.pop_back();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_f64_takes_a_whole_float_without_spaces() {
        for (text, want) in [
            ("1.5", 1.5),
            ("-2", -2.0),
            ("+3", 3.0),
            ("1.", 1.0),
            (".5", 0.5),
            ("1e3", 1000.0),
            ("1E-2", 0.01),
            ("1e400", f64::INFINITY),
            ("inf", f64::INFINITY),
            ("+INF", f64::INFINITY),
            ("Infinity", f64::INFINITY),
            ("-infinity", f64::NEG_INFINITY),
            ("0x10", 16.0),
        ] {
            assert_eq!(parse_f64(text.as_bytes()), Some(want), "{text:?}");
        }
        for text in ["", " 1", "1 ", "1\n", "nan", "-NaN", "1e", ".", "abc", "1x", "infinit", "\u{ff}"] {
            assert_eq!(parse_f64(text.as_bytes()), None, "{text:?}");
        }
        assert_eq!(parse_f64(b"\xff"), None);
    }

    #[test]
    fn hex_floats_round_as_strtod() {
        let hex = |s: &str| strtod_hex(s.as_bytes());
        assert_eq!(hex("0x1p3"), Some((8.0, 5)));
        assert_eq!(hex("0x.8"), Some((0.5, 4)));
        assert_eq!(hex("0x1p"), Some((1.0, 3)));
        assert_eq!(hex("0x1p+"), Some((1.0, 3)));
        assert_eq!(hex("0x"), None);
        assert_eq!(hex("0x."), None);
        assert_eq!(hex("0xg"), None);
        // Ties to even, with digits past the first 60 bits still counted.
        assert_eq!(hex("0x20000000000001"), Some((9007199254740992.0, 16)));
        assert_eq!(hex("0x20000000000003"), Some((9007199254740996.0, 16)));
        assert_eq!(hex("0x200000000000010000000000000001").map(|v| v.0), Some(f64::from_bits(0x4740_0000_0000_0001)));
        // Subnormals, overflow, underflow.
        assert_eq!(hex("0x1.8p-1074").map(|v| v.0), Some(f64::from_bits(2)));
        assert_eq!(hex("0x1p-1075").map(|v| v.0), Some(0.0));
        assert_eq!(hex("0x1.1p-1075").map(|v| v.0), Some(f64::from_bits(1)));
        assert_eq!(hex("0x1.fffffffffffffp1023").map(|v| v.0), Some(f64::MAX));
        assert_eq!(hex("0x1p1024").map(|v| v.0), Some(f64::INFINITY));
        assert_eq!(hex("0x1p99999999999999999999").map(|v| v.0), Some(f64::INFINITY));
        assert_eq!(hex("0x1p-99999999999999999999").map(|v| v.0), Some(0.0));
        assert_eq!(parse_f64(b"-0x1p-8"), Some(-1.0 / 256.0));
        assert_eq!(parse_f64(b"0x1p"), None);
        assert!(strtod_erange(b"-0x1p-1100", 0.0) && !strtod_erange(b"0x0p-1100", 0.0));
        assert!(strtod_erange(b"1e999", f64::INFINITY) && !strtod_erange(b"-Infinity", f64::NEG_INFINITY));
        assert!(strtod_erange(b"1E-999", 0.0) && strtod_erange(b"0X1P-1100", 0.0) && !strtod_erange(b"0E-999", 0.0));
        assert!(!strtod_erange(b"+INF", f64::INFINITY) && !strtod_erange(b"-iNfInItY", f64::NEG_INFINITY));
        assert_eq!(strtod_prefix(b"INFx"), (f64::INFINITY, 3));
        assert_eq!(strtod_prefix(b" -InFiNiTy"), (f64::NEG_INFINITY, 10));
        assert_eq!(strtod_prefix(b"nAn").1, 3);
    }

    #[test]
    fn every_command_is_found_by_its_wire_name_in_any_case() {
        let t = table();
        for i in t.commands() {
            let name = t.specs[i].name;
            assert_eq!(t.lookup(name.as_bytes()), Some(i), "{name}");
            assert_eq!(t.lookup(name.to_ascii_uppercase().as_bytes()), Some(i), "{name}");
            let mixed: String =
                name.chars().enumerate().map(|(k, c)| if k % 2 == 0 { c.to_ascii_uppercase() } else { c }).collect();
            assert_eq!(t.lookup(mixed.as_bytes()), Some(i), "{mixed}");
            // Near misses are not commands (unless they are: LPUSH and LPUSHX).
            let near = format!("{name}x");
            assert_eq!(t.lookup(near.as_bytes()), t.lookup_full(&near).filter(|&j| !t.is_subcommand(j)), "{near}");
            if name.len() > 1 {
                assert_eq!(
                    t.lookup(&name.as_bytes()[..name.len() - 1]).map(|j| t.specs[j].name),
                    None.or(t.lookup_full(&name[..name.len() - 1]).map(|j| t.specs[j].name))
                );
            }
            let mut tail = name.as_bytes().to_vec();
            *tail.last_mut().unwrap() ^= 0x01;
            if let Some(j) = t.lookup(&tail) {
                assert!(t.specs[j].name.as_bytes().eq_ignore_ascii_case(&tail));
            }
        }
        assert_eq!(t.lookup(b"client|list"), None);
        assert_eq!(t.lookup(b""), None);
        assert_eq!(t.lookup(&[b'g'; 100]), None);
    }

    #[test]
    fn name_keys_lowercase_ascii_letters_only() {
        for b in 0..=255u8 {
            let name = [b, b'A', b'z', b'@', b'[', b'`', b'{', b];
            let want: Vec<u8> = name.iter().map(|c| c.to_ascii_lowercase()).collect();
            assert_eq!(NameIndex::key(&name), u64::from_le_bytes(want.try_into().unwrap()), "{b:#x}");
            for n in 0..=9 {
                let name: Vec<u8> = (0..n as u8).map(|k| b.wrapping_add(k.wrapping_mul(37))).collect();
                let mut want = [0u8; 8];
                for (w, c) in want.iter_mut().zip(&name) {
                    *w = c.to_ascii_lowercase();
                }
                assert_eq!(NameIndex::key(&name), u64::from_le_bytes(want), "{name:?}");
            }
        }
    }
}

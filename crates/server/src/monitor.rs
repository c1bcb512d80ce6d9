//! MONITOR: every command any client runs, as one line to each client in MONITOR mode, in
//! Redis 7.0's format (`replicationFeedMonitors`):
//!
//! ```text
//!   +1700000000.123456 [0 127.0.0.1:50412] "set" "foo" "bar"\r\n
//!    unix time, µs      db after the command, client address, each argument as sdscatrepr
//! ```
//!
//! ```text
//!   MONITOR ── attach: the client joins `list`, `count` goes up; +OK
//!   any command on any worker ── call(): one relaxed load of `count`; when not 0, after the
//!            handler ran, [`feed`]: the line is built once and pushed (Msg::Monitor) into
//!            the mailbox of each monitor's worker, which appends it to the connection's
//!            output. A mailbox is a queue per worker, and a client's commands all run on
//!            its own worker, one after the other: each monitor gets a client's commands in
//!            the order they ran; and a command that started after another's reply went out
//!            comes after it too (the line is queued before the reply is written).
//!   close, RESET ── leave: out of `list`, `count` down
//! ```
//!
//! As in Redis: the line is fed after the command ran, with the database it left selected
//! (`SELECT 1` shows `[1 …]`), whether it failed or not; commands refused before they run
//! (unknown, wrong arity, refused inside MULTI) are not shown, nor are admin commands (CONFIG,
//! CLIENT LIST/KILL, DEBUG, MONITOR …). Queued commands show when EXEC runs them, before the
//! EXEC (an EXEC refused as a whole still shows, so the MULTI seen before is closed). AUTH's
//! and HELLO's credentials are `"(redacted)"`. A client in MONITOR mode is treated as Redis
//! treats it (a replica): it may not run commands that read or write the keyspace, CLIENT
//! PAUSE does not hold it, and under CLIENT REPLY OFF its lines are dropped. Its output is
//! limited by the normal class of `client-output-buffer-limit`, lines waiting in its
//! worker's mailbox included. memcached requests are not shown (Redis has no form for them).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::command::{Argv, Ctx, Spec, ADMIN};
use crate::{ClientInfo, Msg, Shared};

/// The clients in MONITOR mode.
#[derive(Default)]
pub struct Monitors {
    /// How many: the one relaxed load every command makes (nothing else here is touched
    /// while it is 0).
    count: AtomicUsize,
    list: Mutex<Vec<Target>>,
}

/// Where a monitor is: its worker and slot (checked against the id, as slots are reused).
struct Target {
    worker: usize,
    slot: u32,
    info: Arc<ClientInfo>,
}

impl Monitors {
    /// Whether any client is in MONITOR mode.
    #[inline]
    pub fn active(&self) -> bool {
        self.count.load(Ordering::Relaxed) != 0
    }

    /// Puts a client in MONITOR mode; false if it already is.
    pub fn attach(&self, info: &Arc<ClientInfo>, worker: usize, slot: u32) -> bool {
        let mut list = self.list.lock().unwrap_or_else(|e| e.into_inner());
        if info.monitor.swap(true, Ordering::Relaxed) {
            return false;
        }
        list.push(Target { worker, slot, info: info.clone() });
        self.count.store(list.len(), Ordering::Relaxed);
        true
    }

    /// Takes a client out of MONITOR mode (it closed, or RESET); nothing if it was not in it.
    pub fn leave(&self, info: &ClientInfo) {
        if !info.monitor.load(Ordering::Relaxed) {
            return;
        }
        let mut list = self.list.lock().unwrap_or_else(|e| e.into_inner());
        info.monitor.store(false, Ordering::Relaxed);
        list.retain(|t| t.info.id != info.id);
        self.count.store(list.len(), Ordering::Relaxed);
    }

    /// Queues a line for every monitor, each in its worker's mailbox. A worker is woken
    /// only if its mailbox was empty: otherwise whoever filled it woke it, and it has not
    /// taken the messages yet (it takes them all at once, under the same lock). A monitor
    /// whose pending output would pass the normal class's hard limit is killed instead.
    fn deliver(&self, shared: &Shared, line: Vec<u8>) {
        let data = Arc::new(line);
        let len = data.len() as u64;
        let hard = shared.config.client_output_buffer_limit.load(Ordering::Relaxed);
        let list = self.list.lock().unwrap_or_else(|e| e.into_inner());
        for t in list.iter() {
            let info = &t.info;
            if info.killed.load(Ordering::Relaxed) {
                continue;
            }
            let Some(mb) = shared.mailboxes.get(t.worker) else { continue };
            let pending = info.pending.fetch_add(len, Ordering::Relaxed) + len;
            if hard > 0 && pending + info.obuf.load(Ordering::Relaxed) > hard {
                info.pending.fetch_sub(len, Ordering::Relaxed);
                if !info.killed.swap(true, Ordering::Relaxed) {
                    tracing::warn!(client = info.id, "closing client for overcoming of output buffer limits");
                }
                mb.sweep.store(true, Ordering::Release);
                wake(shared, t.worker);
                continue;
            }
            let was_empty = {
                let mut q = mb.msgs.lock().unwrap_or_else(|e| e.into_inner());
                let was_empty = q.is_empty();
                q.push(Msg::Monitor { client: info.id, slot: t.slot, data: data.clone() });
                was_empty
            };
            if was_empty {
                wake(shared, t.worker);
            }
        }
    }
}

fn wake(shared: &Shared, worker: usize) {
    if let Some(w) = shared.wakers.get().and_then(|w| w.get(worker)) {
        let _ = w.wake();
    }
}

/// Feeds the command that just ran in `ctx` (its table entry `spec`) to the monitors;
/// called only while there are some.
#[cold]
#[inline(never)]
pub(crate) fn feed(ctx: &Ctx<'_>, spec: &Spec) {
    // "Administrative commands are considered too dangerous to be shown" (Redis's call()).
    if spec.flags & ADMIN != 0 {
        return;
    }
    let redacted = crate::families::connection::redacted_args(ctx.shared, spec.name, ctx.argv);
    // A script's commands are shown as Redis shows its Lua client's.
    let addr = if ctx.conn.in_script { "lua" } else { &ctx.conn.info.addr };
    let line = line(SystemTime::now(), ctx.conn.db, addr, ctx.argv, &redacted);
    ctx.shared.monitors.deliver(ctx.shared, line);
}

/// One monitor line: `+<secs>.<µs> [<db> <addr>] "arg" ...\r\n`, the arguments at the
/// positions in `redacted` shown as `"(redacted)"`. (Built by hand: `format!` was two thirds
/// of the cost of a command while a monitor listened.)
pub fn line(now: SystemTime, db: u32, addr: &str, argv: Argv<'_>, redacted: &[usize]) -> Vec<u8> {
    let t = now.duration_since(UNIX_EPOCH).unwrap_or_default();
    let mut out = Vec::with_capacity(48 + addr.len() + argv.iter().map(|a| a.len() + 3).sum::<usize>());
    out.push(b'+');
    larder_resp::push_u64(&mut out, t.as_secs());
    out.push(b'.');
    let micros = t.subsec_micros();
    out.extend((0..6).rev().map(|k| b'0' + (micros / 10u32.pow(k) % 10) as u8));
    out.extend_from_slice(b" [");
    larder_resp::push_u64(&mut out, db as u64);
    out.push(b' ');
    out.extend_from_slice(addr.as_bytes());
    out.extend_from_slice(b"] ");
    for (j, a) in argv.iter().enumerate() {
        if j > 0 {
            out.push(b' ');
        }
        if redacted.contains(&j) {
            out.extend_from_slice(b"\"(redacted)\"");
        } else {
            repr(&mut out, a);
        }
    }
    out.extend_from_slice(b"\r\n");
    out
}

/// Redis's `sdscatrepr`: the bytes in double quotes, `\` and `"` escaped, `\n \r \t \a \b`
/// by name, other bytes outside printable ASCII as `\xhh`.
pub fn repr(out: &mut Vec<u8>, a: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push(b'"');
    // Runs of bytes that stand for themselves go in whole.
    let mut plain = 0;
    for (i, &c) in a.iter().enumerate() {
        let escaped: &[u8] = match c {
            b'\\' => b"\\\\",
            b'"' => b"\\\"",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0x07 => b"\\a",
            0x08 => b"\\b",
            b' '..=b'~' => continue,
            _ => &[b'\\', b'x', HEX[(c >> 4) as usize], HEX[(c & 15) as usize]],
        };
        out.extend_from_slice(&a[plain..i]);
        out.extend_from_slice(escaped);
        plain = i + 1;
    }
    out.extend_from_slice(&a[plain..]);
    out.push(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn args(parts: &[&[u8]]) -> (larder_resp::Args, Vec<u8>) {
        let mut buf = Vec::new();
        larder_resp::write_command(&mut buf, parts.iter().copied());
        let mut a = larder_resp::Args::new();
        larder_resp::parse_command_into(&buf, &larder_resp::Limits::DEFAULT, &mut a).unwrap();
        (a, buf)
    }

    #[test]
    fn arguments_are_quoted_as_sdscatrepr() {
        let mut out = Vec::new();
        repr(&mut out, b"a \"b\" \\c\n\r\t\x07\x08\x00\x1f\x7f\x80\xff~");
        assert_eq!(out, b"\"a \\\"b\\\" \\\\c\\n\\r\\t\\a\\b\\x00\\x1f\\x7f\\x80\\xff~\"".to_vec());
        let mut empty = Vec::new();
        repr(&mut empty, b"");
        assert_eq!(empty, b"\"\"");
    }

    #[test]
    fn a_line_has_the_time_db_address_and_arguments() {
        let (a, buf) = args(&[b"set", b"k y", b"\xe9"]);
        let now = UNIX_EPOCH + Duration::from_micros(1_700_000_000_000_042);
        let l = line(now, 3, "127.0.0.1:5000", Argv { args: &a, buf: &buf }, &[]);
        assert_eq!(
            String::from_utf8(l).unwrap(),
            "+1700000000.000042 [3 127.0.0.1:5000] \"set\" \"k y\" \"\\xe9\"\r\n"
        );
        let l = line(UNIX_EPOCH + Duration::from_nanos(999_999_999), 15, "a:1", Argv { args: &a, buf: &buf }, &[]);
        assert!(l.starts_with(b"+0.999999 [15 a:1] \"set\""));
        let mut d = Vec::new();
        larder_resp::push_u64(&mut d, 0);
        larder_resp::push_u64(&mut d, u64::MAX);
        assert_eq!(d, b"018446744073709551615");
        let (a, buf) = args(&[b"auth", b"user", b"secret"]);
        let l = line(now, 0, "[::1]:7", Argv { args: &a, buf: &buf }, &[1, 2]);
        assert_eq!(
            String::from_utf8(l).unwrap(),
            "+1700000000.000042 [0 [::1]:7] \"auth\" \"(redacted)\" \"(redacted)\"\r\n"
        );
    }
}

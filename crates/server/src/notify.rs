//! Keyspace notifications, as Redis 7.0's `notify.c`: with `notify-keyspace-events` set,
//! each change to a key is published as pub/sub messages to `__keyspace@<db>__:<key>`
//! (the message is the event's name) and `__keyevent@<db>__:<event>` (the message is the
//! key), which subscribers get as any other message (pushes in RESP3).
//!
//! ```text
//!   command handler ── notify(ctx, class, "lpush", key) ── one relaxed load of the flags;
//!        │                 class off: return          class on: emit (cold)
//!        ▼                                                 │
//!   engine op ── Handle records keys it found expired      ├─ first what the engine
//!                 and keys it created (Handle::report,     │  recorded: "expired", "new"
//!                 on only while x or n is asked for)       └─ then the command's event:
//!                                                             pubsub::publish × (K, E)
//!   after every command (`call`): what the engine recorded and no event took
//!   every worker round and active-expiry round: what is left (memcached requests, expiry)
//! ```
//!
//! The events a command emits, their names and their order are Redis 7.0.15's (its
//! `notifyKeyspaceEvent` calls in `t_*.c`, `db.c`, `expire.c`, …): each family calls
//! [`notify`] where Redis does. Two of them come from the engine, which alone sees them:
//! "expired" (a read or write that found its key expired, or active expiry) and "new" (a
//! write that created its key; Redis's `dbAdd`). The engine records those only while the
//! flags ask for them ([`sync`]), and they are published in the order they happened,
//! before the event of the command that caused them.
//!
//! Not notified: what local processes attached to the shared segment write or expire
//! (they have no server to publish through), memcached requests' own events (their
//! "expired" and "new" are), "evicted" (no eviction yet), stream and module events.

use std::sync::atomic::Ordering;

use larder_engine::{Change, Handle, KeyChange, Reporting};

use crate::command::Ctx;
use crate::families::pubsub;
use crate::Shared;

// The classes, with Redis's values and letters.
pub const KEYSPACE: u32 = 1 << 0; // K
pub const KEYEVENT: u32 = 1 << 1; // E
pub const GENERIC: u32 = 1 << 2; // g
pub const STRING: u32 = 1 << 3; // $
pub const LIST: u32 = 1 << 4; // l
pub const SET: u32 = 1 << 5; // s
pub const HASH: u32 = 1 << 6; // h
pub const ZSET: u32 = 1 << 7; // z
pub const EXPIRED: u32 = 1 << 8; // x
pub const EVICTED: u32 = 1 << 9; // e
pub const STREAM: u32 = 1 << 10; // t
pub const KEY_MISS: u32 = 1 << 11; // m (not part of A)
pub const MODULE: u32 = 1 << 13; // d
pub const NEW: u32 = 1 << 14; // n (not part of A)
/// `A`: every class but `m` and `n`.
pub const ALL: u32 = GENERIC | STRING | LIST | SET | HASH | ZSET | EXPIRED | EVICTED | STREAM | MODULE;

/// Redis's `keyspaceEventsStringToFlags`: None for a character that is no class (the
/// string ends at a NUL byte, as a C string does).
pub fn parse(s: &[u8]) -> Option<u32> {
    let mut flags = 0;
    for &c in s.iter().take_while(|&&c| c != 0) {
        flags |= match c {
            b'A' => ALL,
            b'g' => GENERIC,
            b'$' => STRING,
            b'l' => LIST,
            b's' => SET,
            b'h' => HASH,
            b'z' => ZSET,
            b'x' => EXPIRED,
            b'e' => EVICTED,
            b'K' => KEYSPACE,
            b'E' => KEYEVENT,
            b't' => STREAM,
            b'm' => KEY_MISS,
            b'd' => MODULE,
            b'n' => NEW,
            _ => return None,
        };
    }
    Some(flags)
}

/// Redis's `keyspaceEventsFlagsToString`, as CONFIG GET prints the flags: `A` for all of
/// its classes (then `n` is not printed even when set, as in Redis 7.0), else each class's
/// letter in a fixed order; then `K`, `E`, `m`.
pub fn render(flags: u32) -> String {
    let mut s = String::new();
    if flags & ALL == ALL {
        s.push('A');
    } else {
        for (f, c) in [
            (GENERIC, 'g'),
            (STRING, '$'),
            (LIST, 'l'),
            (SET, 's'),
            (HASH, 'h'),
            (ZSET, 'z'),
            (EXPIRED, 'x'),
            (EVICTED, 'e'),
            (STREAM, 't'),
            (MODULE, 'd'),
            (NEW, 'n'),
        ] {
            if flags & f != 0 {
                s.push(c);
            }
        }
    }
    for (f, c) in [(KEYSPACE, 'K'), (KEYEVENT, 'E'), (KEY_MISS, 'm')] {
        if flags & f != 0 {
            s.push(c);
        }
    }
    s
}

/// The flags now: the one relaxed load a write command pays while they are empty.
#[inline]
pub fn flags(shared: &Shared) -> u32 {
    shared.config.notify_keyspace_events.load(Ordering::Relaxed)
}

/// What the engine must record for `flags`: expired keys for `x`, created keys for `n`,
/// keyspace misses for `m`, and none without `K` or `E` (nothing would be published).
fn reporting(flags: u32) -> Reporting {
    let on = flags & (KEYSPACE | KEYEVENT) != 0;
    Reporting {
        expired: on && flags & EXPIRED != 0,
        created: on && flags & NEW != 0,
        missed: on && flags & KEY_MISS != 0,
        modified: false,
    }
}

/// What to record for `flags`, keeping what client-side caching asks for (see
/// [`crate::tracking`]).
fn with_flags(h: &Handle, flags: u32) -> Reporting {
    Reporting { modified: h.reporting().modified, ..reporting(flags) }
}

/// Tells a handle what to record for the current flags (active expiry, before each round).
pub fn sync(h: &Handle, shared: &Shared) {
    let want = with_flags(h, flags(shared));
    if h.reporting() != want {
        h.report(want);
    }
}

/// [`sync`] for worker `w`'s handle, which it notes in the worker's mailbox. Each worker
/// calls it once a round (two relaxed loads when nothing changed), and CONFIG SET on its
/// own worker at once, so a write pipelined behind it already records what it asks for.
#[inline]
pub fn sync_worker(h: &Handle, shared: &Shared, w: usize) {
    let f = flags(shared);
    let Some(m) = shared.mailboxes.get(w) else { return };
    if m.notify_flags.load(Ordering::Relaxed) != f {
        sync_to(h, m, f);
    }
}

#[cold]
#[inline(never)]
fn sync_to(h: &Handle, m: &crate::Mailbox, f: u32) {
    h.report(with_flags(h, f));
    m.notify_flags.store(f, Ordering::Relaxed);
}

/// A key that a command replaces as Redis's `setKey` does (the STORE commands), by a delete
/// and then a write: the write must not report the key created when it existed (Redis
/// overwrites it: no "new").
pub struct Replace {
    /// The key existed (and was deleted).
    pub existed: bool,
}

impl Replace {
    /// The key of a STORE command with an empty result: deleted as Redis's `dbDelete` deletes
    /// it, without a lookup first, so an expired key is deleted as any other (its event is
    /// "del", not "expired"). Returns whether it had an item.
    pub fn delete(h: &mut Handle, db: u32, key: &[u8]) -> Result<bool, larder_engine::Error> {
        h.del_even_expired(db, key)
    }

    /// Deletes `key`, noting whether it existed. An expired key is "expired" and did not
    /// exist, as Redis's `setKey` looks the key up before it writes it.
    pub fn begin(h: &mut Handle, db: u32, key: &[u8]) -> Result<Replace, larder_engine::Error> {
        Ok(Replace { existed: h.del(db, &[key])? > 0 })
    }

    /// Runs the write that puts the key back; it does not report the key created if it
    /// existed. What the handle reports is then as before.
    pub fn write<R>(&self, h: &mut Handle, f: impl FnOnce(&mut Handle) -> R) -> R {
        let before = h.reporting();
        if self.existed && before.created {
            h.report(Reporting { created: false, ..before });
        }
        let r = f(h);
        h.report(before);
        r
    }
}

/// The events of a STORE command's destination (SINTERSTORE, ZUNIONSTORE, SORT ... STORE,
/// BITOP, ...): its event when it now holds the result, "del" when an empty result removed
/// it (none when it did not exist).
pub fn notify_store(ctx: &mut Ctx<'_>, class: u32, event: &str, key: &[u8], stored: bool, existed: bool) {
    if stored {
        notify(ctx, class, event, key);
    } else if existed {
        notify(ctx, GENERIC, "del", key);
    }
}

/// Members taken from the collection `key` (a pop, a removal): `event`, then "del" if that
/// emptied it, as Redis's commands do.
pub fn notify_removed(ctx: &mut Ctx<'_>, class: u32, event: &str, key: &[u8], emptied: bool) {
    let f = flags(ctx.shared);
    notify_with(ctx, f, class, event, key);
    if emptied {
        notify_with(ctx, f, GENERIC, "del", key);
    }
}

/// Publishes `event` about `key` in the client's database if `class` is on.
#[inline]
pub fn notify(ctx: &mut Ctx<'_>, class: u32, event: &str, key: &[u8]) {
    let db = ctx.conn.db;
    notify_db(ctx, class, event, key, db);
}

/// [`notify`] for a key in database `db` (MOVE, COPY ... DB).
#[inline]
pub fn notify_db(ctx: &mut Ctx<'_>, class: u32, event: &str, key: &[u8], db: u32) {
    let f = flags(ctx.shared);
    if f & class != 0 {
        emit(ctx, f, event, key, db);
    }
}

/// [`notify`] with the flags already loaded ([`flags`]): a command with several events
/// loads them once.
#[inline]
pub fn notify_with(ctx: &mut Ctx<'_>, flags: u32, class: u32, event: &str, key: &[u8]) {
    if flags & class != 0 {
        let db = ctx.conn.db;
        emit(ctx, flags, event, key, db);
    }
}

/// [`notify_db`] with the flags already loaded.
#[inline]
pub fn notify_db_with(ctx: &mut Ctx<'_>, flags: u32, class: u32, event: &str, key: &[u8], db: u32) {
    if flags & class != 0 {
        emit(ctx, flags, event, key, db);
    }
}

/// The engine's changes first (they happened before the command's event), then the event.
#[cold]
#[inline(never)]
fn emit(ctx: &mut Ctx<'_>, flags: u32, event: &str, key: &[u8], db: u32) {
    flush_with(ctx, flags);
    publish(ctx, flags, event.as_bytes(), key, db);
}

/// Publishes what the engine recorded and no event published yet. `call` runs it after any
/// command that left some (a read that found its key expired, say).
#[cold]
#[inline(never)]
pub fn flush(ctx: &mut Ctx<'_>) {
    let f = flags(ctx.shared);
    flush_with(ctx, f);
}

fn flush_with(ctx: &mut Ctx<'_>, flags: u32) {
    if !ctx.h.has_changes() {
        return;
    }
    for c in ctx.h.take_changes() {
        publish_change(ctx, flags, &c);
    }
}

/// Takes what the engine recorded, for a command that places each change itself (MSET:
/// each key's "new" right before its "set").
pub fn take_changes(ctx: &mut Ctx<'_>) -> Vec<KeyChange> {
    if ctx.h.has_changes() {
        ctx.h.take_changes()
    } else {
        Vec::new()
    }
}

/// SET ... GET and GETSET of a missing key: Redis looks the key up ("keymiss", after the
/// "expired" of a key it found expired) and replies with the old value before it creates
/// the key ("new"), but the engine saw the creation before the command reported its miss.
/// Publishes what the engine recorded but the key's creation, which it returns for the
/// caller to publish ([`publish_changes`]) after its reply.
pub fn miss_before_creation(ctx: &mut Ctx<'_>, key: &[u8]) -> Vec<KeyChange> {
    if !ctx.h.has_changes() {
        return Vec::new();
    }
    let db = ctx.conn.db;
    let (created, found): (Vec<_>, Vec<_>) =
        ctx.h.take_changes().into_iter().partition(|c| c.change == Change::Created && c.db == db && c.key == key);
    publish_changes(ctx, &found);
    created
}

/// Publishes changes the engine recorded that a command held back, in order.
pub fn publish_changes(ctx: &mut Ctx<'_>, changes: &[KeyChange]) {
    let f = flags(ctx.shared);
    for c in changes {
        publish_change(ctx, f, c);
    }
}

/// Publishes one change the engine recorded, if its class is on.
pub fn publish_change(ctx: &mut Ctx<'_>, flags: u32, c: &KeyChange) {
    let (class, event) = change_event(c.change);
    if flags & class != 0 {
        publish(ctx, flags, event.as_bytes(), &c.key, c.db);
    }
}

fn change_event(c: Change) -> (u32, &'static str) {
    match c {
        Change::Expired => (EXPIRED, "expired"),
        Change::Created => (NEW, "new"),
        Change::Missed => (KEY_MISS, "keymiss"),
    }
}

/// Publishes what a handle recorded outside any client's command: active expiry, memcached
/// requests (a memcached client is never a subscriber).
pub fn flush_detached(shared: &Shared, h: &Handle) {
    if !h.has_changes() {
        return;
    }
    let f = flags(shared);
    for c in h.take_changes() {
        let (class, event) = change_event(c.change);
        if f & class != 0 {
            for (ch, msg) in channels(f, event.as_bytes(), &c.key, c.db) {
                pubsub::publish_from(shared, None, &ch, msg, false);
            }
        }
    }
}

fn publish(ctx: &mut Ctx<'_>, flags: u32, event: &[u8], key: &[u8], db: u32) {
    for (ch, msg) in channels(flags, event, key, db) {
        pubsub::publish(ctx, &ch, msg, false);
    }
}

/// The (channel, message) pairs of one event: the keyspace one (K), then the keyevent one
/// (E), as Redis publishes them.
fn channels<'a>(flags: u32, event: &'a [u8], key: &'a [u8], db: u32) -> impl Iterator<Item = (Vec<u8>, &'a [u8])> {
    let name = |kind: &str, tail: &[u8]| {
        let mut ch = Vec::with_capacity(24 + tail.len());
        ch.extend_from_slice(b"__key");
        ch.extend_from_slice(kind.as_bytes());
        ch.push(b'@');
        ch.extend_from_slice(db.to_string().as_bytes());
        ch.extend_from_slice(b"__:");
        ch.extend_from_slice(tail);
        ch
    };
    let space = (flags & KEYSPACE != 0).then(|| (name("space", key), event));
    let evt = (flags & KEYEVENT != 0).then(|| (name("event", event), key));
    space.into_iter().chain(evt)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_parse_and_render_as_redis() {
        for (set, get) in [
            ("", ""),
            ("gKE", "gKE"),
            ("$lshzxeKE", "$lshzxeKE"),
            ("KA", "AK"),
            ("EA", "AE"),
            ("AKE", "AKE"),
            ("Ex", "xE"),
            ("En", "nE"),
            ("mK", "Km"),
            ("ndtzxhsl$g", "g$lshzxtdn"),
            // A with n: n is set but not printed (Redis 7.0's keyspaceEventsFlagsToString).
            ("KEAn", "AKE"),
            ("g$lshzxetd", "A"),
            ("KKKgg", "gK"),
        ] {
            let f = parse(set.as_bytes()).unwrap_or_else(|| panic!("{set:?}"));
            assert_eq!(render(f), get, "{set:?}");
        }
        assert_eq!(parse(b"KEAn"), Some(KEYSPACE | KEYEVENT | ALL | NEW));
        assert_eq!(parse(b"A").map(|f| f & (NEW | KEY_MISS)), Some(0));
        for bad in ["a", "KEX", "k", " ", "K E", "\u{e9}"] {
            assert_eq!(parse(bad.as_bytes()), None, "{bad:?}");
        }
        // Read as a C string: up to a NUL.
        assert_eq!(parse(b"K\0junk"), Some(KEYSPACE));
    }

    #[test]
    fn the_engine_records_only_what_can_be_published() {
        let r = |s: &str| reporting(parse(s.as_bytes()).unwrap());
        assert_eq!(r(""), Reporting::default());
        assert_eq!(r("xn"), Reporting::default());
        assert_eq!(r("KA"), Reporting { expired: true, ..Reporting::default() });
        assert_eq!(r("En"), Reporting { created: true, ..Reporting::default() });
        assert_eq!(r("Km"), Reporting { missed: true, ..Reporting::default() });
        assert_eq!(r("KEAnm"), Reporting { expired: true, created: true, missed: true, modified: false });
    }

    #[test]
    fn channels_name_the_database_key_and_event() {
        let all: Vec<_> = channels(KEYSPACE | KEYEVENT, b"set", b"k:1", 12).collect();
        assert_eq!(
            all,
            [(b"__keyspace@12__:k:1".to_vec(), &b"set"[..]), (b"__keyevent@12__:set".to_vec(), &b"k:1"[..])]
        );
        assert_eq!(channels(KEYEVENT, b"del", b"k", 0).count(), 1);
        assert_eq!(channels(ALL, b"del", b"k", 0).count(), 0);
    }
}

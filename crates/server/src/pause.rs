//! CLIENT PAUSE: clients' commands wait until a deadline or CLIENT UNPAUSE, as in Redis 7.0
//! (`pauseClients` in networking.c, the check in `processCommand`).
//!
//! ```text
//!   CLIENT PAUSE ms [WRITE|ALL] ── Pause::pause: kind = the stricter of the old and new,
//!                                  end = the later one; the store keeps expired keys
//!   every command ── execute(): after the checks that reject it (unknown, arity, no-multi,
//!                   subscribed context), one relaxed load of `mode`; when it is not OFF,
//!                   [`postpones`]: ALL holds every command, WRITE the ones that may
//!                   change the dataset or replicate (write flag, or may-replicate:
//!                   PFCOUNT, PUBLISH, SPUBLISH; EXEC by its queued commands)
//!   held command ── left in the connection's read buffer, the connection marked paused
//!                   (CLIENT LIST flag `b`, INFO blocked_clients); nothing counted, no reply
//!   end ── CLIENT UNPAUSE, or the deadline seen by a worker holding paused clients, the
//!          background thread, or the next command: `generation` moves on, the workers
//!          are woken and run their paused clients' buffers again, in the order they were
//!          paused (a command may be held again by a newer pause)
//! ```
//!
//! The dataset stays still while paused, as in Redis: reads answer an expired key as
//! missing without deleting it, and active expiry does nothing ([`Store::keep_expired_until`]),
//! so `expired_keys` does not move until the pause ends. Commands queued in a transaction
//! that started the pause still run at EXEC: the pause applies to what comes after.
//!
//! memcached requests are held the same way: under ALL every one, under WRITE those that
//! change items (storage, delete, incr/decr, touch, gat, flush_all, `ms`, `md`, `ma`, and
//! `mg` with `T` or `N`).
//!
//! Not as in Redis: the deadline is checked against the clock at each command and by
//! each worker holding paused clients (Redis's cron checks it ten times a second); local
//! processes attached to the segment (`--shm`) are not paused and still delete the expired
//! keys they find.

use std::sync::atomic::{AtomicI64, AtomicU64, AtomicU8, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use larder_engine::Store;

use crate::command::{table, Ctx, MAY_REPLICATE, WRITE};

/// No pause.
pub const OFF: u8 = 0;
/// Commands that may change the dataset or replicate wait.
pub const WRITE_ONLY: u8 = 1;
/// Every command waits.
pub const ALL: u8 = 2;

/// The pause in force, shared by the workers.
pub struct Pause {
    /// OFF, WRITE_ONLY or ALL: what every command loads (relaxed); nothing else of the
    /// pause is touched while it is OFF.
    mode: AtomicU8,
    /// When it ends, Unix ms (the last millisecond it holds), mirrored for lock-free looks.
    end: AtomicI64,
    /// Moves on each time the pause is lifted or loosened: a client paused at generation
    /// `g` runs again once it is past `g`.
    generation: AtomicU64,
    /// Clients whose command waits (INFO `blocked_clients` adds them to the blocked ones).
    pub postponed: AtomicU64,
    /// Taken to change the pause, and to decide to hold a command (so that an UNPAUSE on
    /// another worker either comes first, and the command runs, or after, and its
    /// generation wakes the client).
    lock: Mutex<State>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct State {
    kind: u8,
    end: i64,
}

impl Default for Pause {
    fn default() -> Self {
        Pause {
            mode: AtomicU8::new(OFF),
            end: AtomicI64::new(0),
            generation: AtomicU64::new(0),
            postponed: AtomicU64::new(0),
            lock: Mutex::new(State { kind: OFF, end: 0 }),
        }
    }
}

impl Pause {
    /// The pause in force as last published (OFF, WRITE_ONLY, ALL). A deadline that has
    /// passed is noticed by [`Pause::refresh`].
    #[inline(always)]
    pub fn mode(&self) -> u8 {
        self.mode.load(Ordering::Relaxed)
    }

    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.lock.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// CLIENT PAUSE: pauses `kind` commands until `end` (Unix ms; a time already past
    /// pauses nothing new). Over a pause in force, the stricter kind and the later end win,
    /// as Redis's `pauseClients` merges them. Returns whether paused clients may now run
    /// (never, as a pause only tightens; kept for symmetry with `unpause`).
    pub fn pause(&self, store: &Store, kind: u8, end: i64, now: i64) -> bool {
        let mut s = self.state();
        if s.kind == OFF {
            *s = State { kind, end };
        } else {
            *s = State { kind: s.kind.max(kind), end: s.end.max(end) };
        }
        self.publish(store, &mut s, now)
    }

    /// CLIENT UNPAUSE. Returns whether paused clients may now run (the workers must be
    /// woken).
    pub fn unpause(&self, store: &Store, now: i64) -> bool {
        let mut s = self.state();
        *s = State { kind: OFF, end: 0 };
        self.publish(store, &mut s, now)
    }

    /// Ends a pause whose deadline has passed. Returns whether paused clients may now run.
    pub fn refresh(&self, store: &Store, now: i64) -> bool {
        if self.mode() == OFF || now <= self.end.load(Ordering::Relaxed) {
            return false;
        }
        let mut s = self.state();
        self.publish(store, &mut s, now)
    }

    /// How long until the pause's deadline (None: no pause).
    pub fn remaining(&self, now: i64) -> Option<Duration> {
        if self.mode() == OFF {
            return None;
        }
        let left = self.end.load(Ordering::Relaxed).saturating_sub(now).saturating_add(1);
        Some(Duration::from_millis(left.max(0) as u64))
    }

    /// Under the lock: drops a pause past its deadline (Redis: `end < now`), publishes the
    /// mode, and moves the generation on if the pause got looser. Returns whether it did.
    fn publish(&self, store: &Store, s: &mut State, now: i64) -> bool {
        if s.kind != OFF && s.end < now {
            *s = State { kind: OFF, end: 0 };
        }
        let old = self.mode.load(Ordering::Relaxed);
        self.end.store(s.end, Ordering::Relaxed);
        store.keep_expired_until(if s.kind == OFF { 0 } else { s.end as u64 });
        self.mode.store(s.kind, Ordering::Release);
        let looser = s.kind < old;
        if looser {
            self.generation.fetch_add(1, Ordering::AcqRel);
        }
        looser
    }

    /// Decides under the lock whether a command of the kind `holds` says waits: Some(the
    /// generation it waits at), or None if it runs.
    fn hold(&self, store: &Store, now: i64, holds: impl FnOnce(u8) -> bool) -> (Option<u64>, bool) {
        let mut s = self.state();
        let looser = if s.kind != OFF && s.end < now { self.publish(store, &mut s, now) } else { false };
        let held = (s.kind != OFF && holds(s.kind)).then(|| self.generation.load(Ordering::Acquire));
        (held, looser)
    }
}

/// Whether command `i` waits under a pause of `kind`: ALL holds everything; WRITE the
/// commands flagged write or may-replicate, and an EXEC whose queue holds one.
fn holds_command(ctx: &Ctx<'_>, i: usize, kind: u8) -> bool {
    if kind == ALL {
        return true;
    }
    let spec = table().specs[i];
    let mut flags = crate::families::scripting::command_flags(ctx, spec);
    if spec.name == "exec" {
        flags |= ctx.conn.multi.as_ref().map_or(0, |q| q.flags);
    }
    flags & (WRITE | MAY_REPLICATE) != 0
}

/// Called by the dispatcher while a pause is published: holds command `i` if the pause
/// (still in force) covers it. A held command is marked in `ctx.conn.postponed` and left
/// for the worker to run again when the pause ends; nothing else happens to it.
#[cold]
#[inline(never)]
pub(crate) fn postpones(ctx: &mut Ctx<'_>, i: usize) -> bool {
    // A client in MONITOR mode is never held, as Redis never pauses its replicas.
    if ctx.conn.info.monitor.load(Ordering::Relaxed) {
        return false;
    }
    let shared = ctx.shared;
    let now = larder_engine::now_ms() as i64;
    let (held, looser) = shared.pause.hold(&shared.store, now, |kind| holds_command(ctx, i, kind));
    if looser {
        shared.wake_workers();
    }
    let Some(generation) = held else { return false };
    // CLIENT LIST shows the held command (Redis sets `lastcmd` at the lookup).
    ctx.conn.info.last_cmd.store(i as u32, Ordering::Relaxed);
    ctx.conn.postponed = Some(generation);
    true
}

/// The memcached side: whether request `req` waits under the pause in force (see
/// [`postpones`]); Some(generation) if so.
#[cold]
#[inline(never)]
pub(crate) fn postpones_memcache(shared: &crate::Shared, writes: bool) -> Option<u64> {
    let now = larder_engine::now_ms() as i64;
    let (held, looser) = shared.pause.hold(&shared.store, now, |kind| kind == ALL || writes);
    if looser {
        shared.wake_workers();
    }
    held
}

/// CLIENT PAUSE's timeout argument, as Redis 7.0's `getTimeoutFromObjectOrReply` in
/// milliseconds: an integer, not negative; 0 stays 0 (a deadline already past), any other
/// value is added to the clock as Redis adds it (wrapping, so a huge one is past too).
pub fn parse_timeout(arg: &[u8], now: i64) -> Result<i64, &'static str> {
    let t = crate::command::parse_i64(arg).ok_or("ERR timeout is not an integer or out of range")?;
    if t < 0 {
        return Err("ERR timeout is negative");
    }
    Ok(if t > 0 { t.wrapping_add(now) } else { 0 })
}

#[cfg(test)]
mod tests {
    use super::*;
    use larder_engine::StoreConfig;

    fn store() -> Store {
        Store::open(StoreConfig::small_for_tests()).unwrap()
    }

    #[test]
    fn a_second_pause_keeps_the_stricter_kind_and_the_later_end() {
        let (p, s) = (Pause::default(), store());
        assert!(!p.pause(&s, WRITE_ONLY, 5_000, 1_000));
        assert_eq!(p.mode(), WRITE_ONLY);
        // ALL with an earlier end: ALL, until the later end.
        p.pause(&s, ALL, 2_000, 1_000);
        assert_eq!((p.mode(), p.end.load(Ordering::Relaxed)), (ALL, 5_000));
        // WRITE again does not loosen it.
        p.pause(&s, WRITE_ONLY, 9_000, 1_000);
        assert_eq!((p.mode(), p.end.load(Ordering::Relaxed)), (ALL, 9_000));
        let g = p.generation();
        assert!(p.unpause(&s, 1_000));
        assert_eq!(p.mode(), OFF);
        assert_eq!(p.generation(), g + 1);
        // Unpausing what is not paused changes nothing.
        assert!(!p.unpause(&s, 1_000));
        assert_eq!(p.generation(), g + 1);
    }

    #[test]
    fn a_pause_ends_after_its_last_millisecond() {
        let (p, s) = (Pause::default(), store());
        p.pause(&s, WRITE_ONLY, 1_500, 1_000);
        assert!(!p.refresh(&s, 1_500), "still paused in its last millisecond");
        assert_eq!(p.remaining(1_500), Some(Duration::from_millis(1)));
        assert!(p.refresh(&s, 1_501));
        assert_eq!(p.mode(), OFF);
        assert_eq!(p.remaining(1_501), None);
        // A deadline already past (CLIENT PAUSE 0) pauses nothing.
        assert!(!p.pause(&s, ALL, 0, 1_000));
        assert_eq!(p.mode(), OFF);
    }

    #[test]
    fn a_held_command_waits_at_the_generation_it_was_held_at() {
        let (p, s) = (Pause::default(), store());
        p.pause(&s, WRITE_ONLY, 10_000, 1_000);
        let g = p.generation();
        assert_eq!(p.hold(&s, 1_000, |_| true), (Some(g), false));
        assert_eq!(p.hold(&s, 1_000, |_| false), (None, false));
        // Past the deadline: the pause goes, the generation moves on, nothing is held.
        assert_eq!(p.hold(&s, 10_001, |_| true), (None, true));
        assert_eq!(p.generation(), g + 1);
    }

    #[test]
    fn timeouts_read_as_redis_reads_them() {
        assert_eq!(parse_timeout(b"100", 1_000), Ok(1_100));
        assert_eq!(parse_timeout(b"0", 1_000), Ok(0));
        assert_eq!(parse_timeout(b"-1", 1_000), Err("ERR timeout is negative"));
        assert_eq!(parse_timeout(b"1.5", 1_000), Err("ERR timeout is not an integer or out of range"));
        assert_eq!(parse_timeout(b"+1", 1_000), Err("ERR timeout is not an integer or out of range"));
        // Redis adds without a check: the sum wraps to a time long past.
        assert!(parse_timeout(i64::MAX.to_string().as_bytes(), 1_000).unwrap() < 0);
    }
}

//! The handle and the keyspace operations that apply to every type: DEL, EXISTS, TYPE,
//! EXPIRE/TTL/PERSIST, RENAME, COPY, SCAN, RANDOMKEY, DBSIZE, FLUSHDB/FLUSHALL, and active
//! expiry.
//!
//! Every write goes through [`Handle::write`]: lock the key's home bucket, drop the key if it
//! has expired (lazy expiry), let the operation decide (keep, put a new item, delete), then
//! publish, journal and retire the old item.

use larder_arena::{Arena, Participant};

use crate::index::{self, Loc, Room};
use crate::item::{self, ItemView, Meta, NewItem, Type, Value};
use crate::{now_ms, Error, PageRelease, Record, Store};

/// What a write decided.
pub(crate) enum Action {
    /// Nothing changed.
    Keep,
    /// The item was changed in place (integer or expiry): journal its post-image.
    InPlace,
    /// Publish this new item in place of the old one (or as a new key). The old item is
    /// dropped with everything it owns, unless the new one took over its tree (same roots).
    Put(u64),
    Delete,
    /// A collection edit: publish the new version; the old item is retired alone (the edit
    /// session retires the tree blocks it replaced).
    Update(u64),
    /// A collection edit that emptied it: delete the key, retiring the old item alone.
    Drop,
}

/// A key's time to live, as `PTTL` reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ttl {
    Missing,
    Persistent,
    Ms(u64),
}

/// The NX / XX / GT / LT options of EXPIRE.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ExpireCond {
    #[default]
    Always,
    Nx,
    Xx,
    Gt,
    Lt,
    /// XX and LT together: the key has an expiry and the new one is earlier. (XX with GT is
    /// just GT, which already fails on a key without an expiry.)
    XxLt,
}

/// What one [`Handle::expire_cycle`] saw.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExpireRound {
    /// Keys with an expiry in the buckets visited.
    pub examined: usize,
    /// Of them, expired keys it deleted.
    pub deleted: usize,
    /// Remaining time to live of the keys not yet expired, summed (Redis's INFO `avg_ttl`
    /// is a running average of these).
    pub ttl_sum_ms: u64,
    /// How many keys `ttl_sum_ms` sums.
    pub ttl_samples: u64,
}

/// What happened to a key, as [`Handle::take_changes`] reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    /// The key was found expired and deleted: by a read or a write that met it (lazy
    /// expiry), or by [`Handle::expire_cycle`].
    Expired,
    /// A write made the key exist. RENAME, COPY and MOVE report their destination so even
    /// when it replaced a key: its value was dropped and another put in its place.
    Created,
    /// A caller looked the key up and did not find it ([`Handle::report_miss`]): the engine
    /// does not decide what counts as a miss, but keeps it in order with the rest.
    Missed,
}

/// One change a handle recorded (see [`Handle::report`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyChange {
    pub change: Change,
    pub db: u32,
    pub key: Vec<u8>,
}

/// Which changes a handle records, for [`Handle::take_changes`] (and, for `modified`,
/// [`Handle::take_modified`]). Nothing by default.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reporting {
    pub expired: bool,
    pub created: bool,
    pub missed: bool,
    /// Every key a write changed or deleted, and every key found expired and deleted (the
    /// server's client-side caching invalidations).
    pub modified: bool,
}

/// A key that a write changed (see [`Reporting::modified`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Modified {
    pub db: u32,
    pub key: Vec<u8>,
    /// Deleted because it had expired (by a read or a write that met it, or active expiry),
    /// not by what the caller asked for.
    pub expired: bool,
}

/// How many keys [`Handle::prefetch_group`] brings in at once: enough misses in flight to
/// keep a core's line-fill buffers busy (10-12 on current x86), few enough that the first
/// key's lines are still cached when it is read.
pub const PREFETCH_GROUP: usize = 16;

/// A key about to be looked up, between [`Handle::prefetch_bucket`] and
/// [`Handle::prefetch_item`].
#[derive(Clone, Copy, Debug, Default)]
pub struct Hint {
    db: u32,
    h: u64,
    klen: usize,
}

/// One thread's access to a [`Store`]: a participant slot and scratch space. Not `Sync`;
/// create one per thread with [`Store::handle`].
pub struct Handle {
    pub(crate) store: Store,
    pub(crate) p: Participant,
    rng: u64,
    /// Set by a delete that left its segment nearly empty.
    maybe_merge: std::cell::Cell<bool>,
    /// Where active expiry continues, per database (a hash position).
    expire_cursor: Vec<u64>,
    /// Byte buffers list edits borrow (see `coll::Spare`).
    pub(crate) list_spare: (Vec<u8>, Vec<u8>),
    /// Expired keys this handle deleted since [`Handle::take_expired`] last asked.
    expired: std::cell::Cell<u64>,
    /// Which changes to record, and those recorded since [`Handle::take_changes`] (with
    /// `pending` set while there are any: the one check a caller makes after each command).
    report: std::cell::Cell<Reporting>,
    changes: std::cell::Cell<Vec<KeyChange>>,
    /// Keys written since [`Handle::take_modified`] (while `report.modified`).
    modified: std::cell::Cell<Vec<Modified>>,
    /// Set while either list holds something: the one check a caller makes after each
    /// command. `changes_pending` / `modified_pending` say which.
    pending: std::cell::Cell<bool>,
    changes_pending: std::cell::Cell<bool>,
    modified_pending: std::cell::Cell<bool>,
}

impl Handle {
    pub(crate) fn new(store: Store) -> Result<Handle, Error> {
        let p = store.arena().register()?;
        let rng = (now_ms() ^ (p.slot() as u64).rotate_left(32)) | 1;
        Ok(Handle {
            store,
            p,
            rng,
            maybe_merge: Default::default(),
            expire_cursor: Vec::new(),
            list_spare: Default::default(),
            expired: Default::default(),
            report: Default::default(),
            changes: Default::default(),
            modified: Default::default(),
            pending: Default::default(),
            changes_pending: Default::default(),
            modified_pending: Default::default(),
        })
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    /// How many expired keys this handle has deleted since the last call: found by a read
    /// or a write (lazy expiry) or by [`Handle::expire_cycle`] (Redis's `expired_keys`).
    pub fn take_expired(&self) -> u64 {
        self.expired.take()
    }

    /// Which changes this handle's operations record from now on, for
    /// [`Handle::take_changes`]: keys they found expired and deleted, keys they created (the
    /// server turns these into keyspace notifications). Recording costs nothing while off,
    /// the default; while on, the recorded changes pile up until taken.
    ///
    /// ```
    /// # use larder_engine::*;
    /// # let store = Store::open(StoreConfig::small_for_tests()).unwrap();
    /// # let mut h = store.handle().unwrap();
    /// h.report(Reporting { expired: true, created: true, missed: false, modified: false });
    /// h.set(0, b"k", b"v", &SetOptions::default()).unwrap();
    /// h.set(0, b"k", b"w", &SetOptions::default()).unwrap(); // exists: no change to report
    /// let soon = SetOptions { expiry: Expiry::At(now_ms() + 20), ..Default::default() };
    /// h.set(0, b"brief", b"v", &soon).unwrap();
    /// std::thread::sleep(std::time::Duration::from_millis(30));
    /// assert_eq!(h.get(0, b"brief").unwrap(), None); // found expired: deleted
    /// assert!(h.has_changes());
    /// let seen: Vec<_> = h.take_changes().into_iter().map(|c| (c.change, c.key)).collect();
    /// assert_eq!(
    ///     seen,
    ///     [(Change::Created, b"k".to_vec()), (Change::Created, b"brief".to_vec()), (Change::Expired, b"brief".to_vec())]
    /// );
    /// assert!(!h.has_changes());
    /// ```
    pub fn report(&self, what: Reporting) {
        self.report.set(what);
    }

    /// What this handle records (see [`Handle::report`]).
    pub fn reporting(&self) -> Reporting {
        self.report.get()
    }

    /// Whether changes (or modified keys) were recorded since [`Handle::take_changes`] and
    /// [`Handle::take_modified`] last took them.
    #[inline]
    pub fn has_changes(&self) -> bool {
        self.pending.get()
    }

    /// The changes recorded since the last call, in the order they happened.
    pub fn take_changes(&self) -> Vec<KeyChange> {
        self.changes_pending.set(false);
        self.pending.set(self.modified_pending.get());
        self.changes.take()
    }

    /// Whether modified keys were recorded since [`Handle::take_modified`] last took them.
    #[inline]
    pub fn has_modified(&self) -> bool {
        self.modified_pending.get()
    }

    /// The keys written since the last call (with [`Reporting::modified`] on), in the order
    /// they were written.
    ///
    /// ```
    /// # use larder_engine::*;
    /// # let store = Store::open(StoreConfig::small_for_tests()).unwrap();
    /// # let mut h = store.handle().unwrap();
    /// h.report(Reporting { modified: true, ..Default::default() });
    /// h.set(0, b"a", b"1", &SetOptions::default()).unwrap();
    /// h.del(0, &[&b"a"[..], &b"missing"[..]]).unwrap(); // only what existed
    /// let keys: Vec<_> = h.take_modified().into_iter().map(|m| m.key).collect();
    /// assert_eq!(keys, [b"a".to_vec(), b"a".to_vec()]);
    /// ```
    pub fn take_modified(&self) -> Vec<Modified> {
        self.modified_pending.set(false);
        self.pending.set(self.changes_pending.get());
        self.modified.take()
    }

    #[cold]
    #[inline(never)]
    fn record(&self, change: Change, db: u32, key: &[u8]) {
        let mut v = self.changes.take();
        v.push(KeyChange { change, db, key: key.to_vec() });
        self.changes.set(v);
        self.changes_pending.set(true);
        self.pending.set(true);
    }

    /// Records, if asked, that a write changed `key` (or deleted it, found expired).
    #[inline]
    fn record_modified(&self, db: u32, key: &[u8], expired: bool) {
        if self.report.get().modified {
            self.push_modified(db, key.to_vec(), expired);
        }
    }

    #[cold]
    #[inline(never)]
    fn push_modified(&self, db: u32, key: Vec<u8>, expired: bool) {
        let mut v = self.modified.take();
        v.push(Modified { db, key, expired });
        self.modified.set(v);
        self.modified_pending.set(true);
        self.pending.set(true);
    }

    /// [`Handle::record_modified`] for a write that knows its item, not its key.
    #[inline]
    fn record_modified_item(&self, db: u32, item: u64) {
        if self.report.get().modified {
            self.push_modified_item(db, item);
        }
    }

    #[cold]
    #[inline(never)]
    fn push_modified_item(&self, db: u32, item: u64) {
        let a = self.arena();
        let mut k = Vec::new();
        if ItemView::read(a, item).and_then(|v| v.key(a, &mut k)).is_ok() {
            self.push_modified(db, k, false);
        }
    }

    /// Counts (and reports, if asked) a key found expired and deleted.
    pub(crate) fn count_expired(&self, db: u32, key: &[u8]) {
        self.expired.set(self.expired.get() + 1);
        if self.report.get().expired {
            self.record(Change::Expired, db, key);
        }
    }

    /// Reports a key created, if asked.
    #[inline]
    pub(crate) fn count_created(&self, db: u32, key: &[u8]) {
        if self.report.get().created {
            self.record(Change::Created, db, key);
        }
    }

    /// Records, if misses are reported, that the caller looked `key` up and did not find
    /// it (the server's keyspace-miss notifications), after the changes that lookup made (a
    /// key it found expired).
    #[inline]
    pub fn report_miss(&self, db: u32, key: &[u8]) {
        if self.report.get().missed {
            self.record(Change::Missed, db, key);
        }
    }

    #[inline]
    pub(crate) fn arena(&self) -> &Arena {
        self.p.arena()
    }

    #[inline]
    pub(crate) fn check_db(&self, db: u32) -> Result<(), Error> {
        if db < self.store.databases() {
            Ok(())
        } else {
            Err(Error::BadDb)
        }
    }

    #[inline]
    pub(crate) fn hash(&self, key: &[u8]) -> u64 {
        index::key_hash(self.arena().seed(), key)
    }

    pub(crate) fn random(&mut self) -> u64 {
        // xorshift64*: good enough for sampling buckets.
        let mut x = self.rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// First half of a prefetch: hints that `key` of `db` is about to be looked up, and
    /// brings its index bucket into cache. A lookup is two dependent cache misses, the
    /// bucket then the item; done one operation at a time the CPU waits for each in turn.
    /// For a batch (a pipeline's requests), call this for every key first, then
    /// [`Handle::prefetch_item`] with each returned hint: the misses of the whole batch then
    /// overlap. Changes nothing and takes no lock.
    #[inline]
    pub fn prefetch_bucket(&self, db: u32, key: &[u8]) -> Hint {
        let h = self.hash(key);
        if self.check_db(db).is_ok() {
            let _ = index::prefetch_bucket(self.arena(), db, h);
        }
        Hint { db, h, klen: key.len() }
    }

    /// Second half of a prefetch: brings in the item(s) the hinted key's bucket points at.
    #[inline]
    pub fn prefetch_item(&self, hint: Hint) {
        if self.check_db(hint.db).is_ok() {
            let _ = index::prefetch_items(self.arena(), hint.db, hint.h, hint.klen);
        }
    }

    /// Both halves of a prefetch for up to [`PREFETCH_GROUP`] keys (the rest of `keys` is
    /// not looked at): every bucket, then every item. For a multi-key read (MGET, a
    /// memcached `get k1 k2 …`), call it for each group of keys just before reading them.
    ///
    /// ```
    /// # use larder_engine::*;
    /// # let store = Store::open(StoreConfig::small_for_tests()).unwrap();
    /// # let mut h = store.handle().unwrap();
    /// let keys: Vec<Vec<u8>> = (0..40).map(|i| format!("k{i}").into_bytes()).collect();
    /// let mut out = Vec::new();
    /// for group in keys.chunks(PREFETCH_GROUP) {
    ///     h.prefetch_group(0, group.iter().map(|k| &k[..]));
    ///     for k in group {
    ///         h.get_into(0, k, &mut out).unwrap();
    ///     }
    /// }
    /// ```
    #[inline]
    pub fn prefetch_group<'k>(&self, db: u32, keys: impl IntoIterator<Item = &'k [u8]>) {
        let mut hints = [Hint::default(); PREFETCH_GROUP];
        let mut n = 0;
        for (hint, key) in hints.iter_mut().zip(keys) {
            *hint = self.prefetch_bucket(db, key);
            n += 1;
        }
        for &hint in &hints[..n] {
            self.prefetch_item(hint);
        }
    }

    /// Looks `key` up without locking and calls `f` with its live (unexpired) item.
    #[inline]
    pub(crate) fn read<R>(
        &self,
        db: u32,
        key: &[u8],
        f: impl FnOnce(&Arena, &ItemView) -> Result<R, Error>,
    ) -> Result<Option<R>, Error> {
        self.check_db(db)?;
        let a = self.arena();
        let h = self.hash(key);
        let _g = self.p.pin();
        let loc = index::locate(a, db, h)?;
        match index::find(a, &loc, h, key)? {
            Some(found) => {
                if found.item.expire_off().is_some() && found.item.expired(a, now_ms())? {
                    self.reap_expired(db, key, h)?;
                    return Ok(None);
                }
                f(a, &found.item).map(Some)
            }
            None => Ok(None),
        }
    }

    /// A read that found `key` expired deletes it, as Redis's lookups do: DBSIZE and INFO
    /// then stop counting a key every client already sees as gone, and its memory goes
    /// back without waiting for active expiry. Takes the key's bucket lock (the write
    /// path's removal: the item is retired, the deletion journaled); only on this path.
    /// Not while the store keeps expired keys ([`Store::keep_expired_until`]).
    #[cold]
    #[inline(never)]
    fn reap_expired(&self, db: u32, key: &[u8], h: u64) -> Result<(), Error> {
        let now = now_ms();
        if self.store.keeps_expired(now) {
            return Ok(());
        }
        let p = &self.p;
        let a = self.arena();
        let loc = index::lock_home(p, db, h)?;
        let r = (|| {
            if let Some(f) = index::find(a, &loc, h, key)? {
                let at = f.item.expire_at(a)?;
                // Another writer may have replaced it since the lock-free look.
                if at != 0 && at <= now {
                    self.remove_locked(db, key, &loc, &f)?;
                }
            }
            Ok(())
        })();
        index::unlock_home(p, &loc)?;
        r
    }

    /// Under the key's home lock: removes its found item, found expired (by a write, or a
    /// read's [`Handle::reap_expired`]), journals the deletion and retires the item.
    fn remove_locked(&self, db: u32, key: &[u8], loc: &Loc, f: &index::Found) -> Result<(), Error> {
        index::remove(self.arena(), loc, f, Some(&self.p))?;
        self.count_expired(db, key);
        self.journal_del_expired(db, key);
        item::retire_view(&self.p, &f.item)
    }

    /// The write path. `f` sees the key's live item (or None) with its home bucket locked
    /// and returns what to do and a result.
    #[inline(always)]
    pub(crate) fn write<R>(
        &mut self,
        db: u32,
        key: &[u8],
        f: impl FnOnce(&Participant, Option<&ItemView>) -> Result<(Action, R), Error>,
    ) -> Result<R, Error> {
        self.write_with::<true, R>(db, key, f)
    }

    /// [`Handle::write`]; `LAZY` false: `f` sees the key's item even if it has expired (an
    /// expired key is not deleted first, counted or reported as expired).
    fn write_with<const LAZY: bool, R>(
        &mut self,
        db: u32,
        key: &[u8],
        f: impl FnOnce(&Participant, Option<&ItemView>) -> Result<(Action, R), Error>,
    ) -> Result<R, Error> {
        self.check_db(db)?;
        let h = self.hash(key);
        let _g = self.p.pin();
        let p = &self.p;
        // Each retry follows a split (a key needs a handful at most unless hashes collide on
        // purpose, which the bound turns into an error) or a busy neighbour bucket.
        let mut splits = 0;
        for _ in 0..index::RETRIES {
            let loc = index::lock_home(p, db, h)?;
            let (found, room, ttl_before) = match self.write_locked::<LAZY>(db, key, h, &loc) {
                Ok(x) => x,
                Err(e) => {
                    index::unlock_home(p, &loc)?;
                    return Err(e);
                }
            };
            let reserved = match room {
                None => None,
                Some(Room::Slot(r)) => Some(r),
                Some(Room::Full) => {
                    index::unlock_home(p, &loc)?;
                    splits += 1;
                    if splits > 64 {
                        return Err(Error::IndexFull);
                    }
                    index::split(p, db, &loc)?;
                    continue;
                }
                Some(Room::Busy) => {
                    index::unlock_home(p, &loc)?;
                    std::thread::yield_now();
                    continue;
                }
            };
            let out = match f(p, found.as_ref().map(|f| &f.item)) {
                Ok((action, r)) => {
                    let found = found.as_ref().map(|f| (f, ttl_before));
                    self.apply(db, key, &loc, found, reserved.as_ref(), action).map(|_| r)
                }
                Err(e) => {
                    if let Some(r) = &reserved {
                        index::release(p, &loc, r)?;
                    }
                    Err(e)
                }
            };
            index::unlock_home(p, &loc)?;
            return out;
        }
        Err(Error::IndexFull)
    }

    /// Under the home lock: the key's live item, with an expired one removed first (unless
    /// not `LAZY`), and for an absent key, room to add it; and whether the item has an
    /// expiry set (before the write's closure may change it in place).
    // Always inlined into `write`: out of line, its result (a found item and a reservation,
    // 14 words) went back through memory and was copied again.
    #[inline(always)]
    fn write_locked<const LAZY: bool>(
        &self,
        db: u32,
        key: &[u8],
        h: u64,
        loc: &Loc,
    ) -> Result<(Option<index::Found>, Option<Room>, bool), Error> {
        let a = self.arena();
        let mut found = index::find(a, loc, h, key)?;
        let mut ttl = false;
        if let Some(f) = &found {
            let at = f.item.expire_at(a)?;
            if LAZY && at != 0 && at <= now_ms() {
                self.remove_locked(db, key, loc, f)?;
                found = None;
            } else {
                ttl = at != 0;
            }
        }
        let room = if found.is_none() { Some(index::reserve_slot(&self.p, loc, &[], &[])?) } else { None };
        Ok((found, room, ttl))
    }

    /// Carries out what a write decided, under the home lock. `found` is the key's item and
    /// whether it had an expiry set before the write.
    // Inlined for the commonest case, an existing key overwritten (every SET of a key that
    // is there); the other cases go through `apply_other`.
    #[inline]
    fn apply(
        &self,
        db: u32,
        key: &[u8],
        loc: &Loc,
        found: Option<(&index::Found, bool)>,
        reserved: Option<&index::Reserved>,
        action: Action,
    ) -> Result<(), Error> {
        match (action, found) {
            (Action::Put(item), Some((f, ttl))) => self.overwrite(db, loc, f, ttl, item),
            (action, _) => self.apply_other(db, key, loc, found, reserved, action),
        }
    }

    /// Puts `item` in the place of the found key's item.
    #[inline(always)]
    fn overwrite(&self, db: u32, loc: &Loc, f: &index::Found, ttl: bool, item: u64) -> Result<(), Error> {
        index::replace_counted(&self.p, loc.seg, f, ttl, item)?;
        self.journal_item(db, item);
        retire_replaced(&self.p, &f.item, item)
    }

    #[inline(never)]
    fn apply_other(
        &self,
        db: u32,
        key: &[u8],
        loc: &Loc,
        found: Option<(&index::Found, bool)>,
        reserved: Option<&index::Reserved>,
        action: Action,
    ) -> Result<(), Error> {
        let a = self.arena();
        let p = &self.p;
        match (action, found, reserved) {
            (Action::Put(item), Some((f, ttl)), _) => self.overwrite(db, loc, f, ttl, item)?,
            (Action::Update(item), Some((f, ttl)), _) => {
                index::replace_counted(p, loc.seg, f, ttl, item)?;
                self.journal_item(db, item);
                p.retire(f.item.off)?;
            }
            (Action::Put(item) | Action::Update(item), None, Some(r)) => {
                index::fill(p, loc, r, self.hash(key), item)?;
                self.journal_item(db, item);
                self.count_created(db, key);
            }
            (Action::Put(item) | Action::Update(item), None, None) => {
                p.free(item)?;
                return Err(Error::Corrupt("new key without a reserved slot"));
            }
            (Action::InPlace, Some((f, ttl)), _) => {
                // An in-place EXPIRE or PERSIST may have set or cleared the expiry.
                index::replace_counted(p, loc.seg, f, ttl, f.item.off)?;
                self.journal_item(db, f.item.off)
            }
            (action @ (Action::Delete | Action::Drop), Some((f, _)), _) => {
                index::remove(a, loc, f, Some(p))?;
                self.journal_del(db, key);
                if matches!(action, Action::Drop) {
                    p.retire(f.item.off)?;
                } else {
                    item::retire_view(p, &f.item)?;
                }
                if index::seg_count(a, loc.seg)? < index::MERGE_BELOW / 4 && loc.depth > 0 {
                    // Shrink opportunistically, once the locks are released.
                    self.maybe_merge.set(true);
                }
            }
            (_, _, reserved) => {
                if let Some(r) = reserved {
                    index::release(p, loc, r)?;
                }
            }
        }
        Ok(())
    }

    /// Journals an item's post-image (and reports its key modified, if asked). The checks
    /// are inlined into every write; the record is built out of line.
    #[inline]
    pub(crate) fn journal_item(&self, db: u32, item: u64) {
        self.record_modified_item(db, item);
        if self.store.journaling() {
            self.journal_item_record(db, item);
        }
    }

    #[inline(never)]
    fn journal_item_record(&self, db: u32, item: u64) {
        let j = self.store.journal();
        let a = self.arena();
        if let Ok(v) = ItemView::read(a, item) {
            let (mut k, mut val) = (Vec::new(), Vec::new());
            if v.key(a, &mut k).is_ok() && v.value(a, &mut val).is_ok() {
                j.append(&Record::Set {
                    db,
                    key: &k,
                    value: &val,
                    expire_at: v.expire_at(a).unwrap_or(0),
                    flags: v.cflags,
                });
            }
        }
    }

    pub(crate) fn journal_del(&self, db: u32, key: &[u8]) {
        self.record_modified(db, key, false);
        if self.store.journaling() {
            self.store.journal().append(&Record::Del { db, key });
        }
    }

    /// [`Handle::journal_del`] of a key deleted because it had expired.
    fn journal_del_expired(&self, db: u32, key: &[u8]) {
        self.record_modified(db, key, true);
        if self.store.journaling() {
            self.store.journal().append(&Record::Del { db, key });
        }
    }

    // ---- keyspace commands ----

    /// Deletes the keys; returns how many existed.
    ///
    /// ```
    /// # use larder_engine::*;
    /// # let store = Store::open(StoreConfig::small_for_tests()).unwrap();
    /// # let mut h = store.handle().unwrap();
    /// h.set(0, b"a", b"1", &SetOptions::default()).unwrap();
    /// h.set(0, b"b", b"2", &SetOptions::default()).unwrap();
    /// assert_eq!(h.del(0, &[b"a", b"b", b"c"]).unwrap(), 2);
    /// assert_eq!(h.dbsize(0).unwrap(), 0);
    /// ```
    pub fn del(&mut self, db: u32, keys: &[&[u8]]) -> Result<u64, Error> {
        let mut n = 0;
        for k in keys {
            n += self.write(db, k, |_, old| Ok(if old.is_some() { (Action::Delete, 1) } else { (Action::Keep, 0) }))?;
            self.after_delete(db, k)?;
        }
        Ok(n)
    }

    /// Deletes `key` whether or not its time to live has passed, as Redis's `dbDelete`
    /// (which a STORE command with an empty result calls without looking the key up first):
    /// returns whether the key had an item. An expired key is deleted as any other, not
    /// counted or reported as expired.
    ///
    /// ```
    /// # use larder_engine::*;
    /// # let store = Store::open(StoreConfig::small_for_tests()).unwrap();
    /// # let mut h = store.handle().unwrap();
    /// let soon = SetOptions { expiry: Expiry::At(now_ms() + 20), ..Default::default() };
    /// h.set(0, b"k", b"v", &soon).unwrap();
    /// std::thread::sleep(std::time::Duration::from_millis(30));
    /// assert!(h.del_even_expired(0, b"k").unwrap()); // still there, expired
    /// assert!(!h.del_even_expired(0, b"k").unwrap());
    /// assert_eq!(h.take_expired(), 0);
    /// ```
    pub fn del_even_expired(&mut self, db: u32, key: &[u8]) -> Result<bool, Error> {
        let deleted = self.write_with::<false, bool>(db, key, |_, old| {
            Ok(if old.is_some() { (Action::Delete, true) } else { (Action::Keep, false) })
        })?;
        self.after_delete(db, key)?;
        Ok(deleted)
    }

    /// How many of the keys exist (a key named twice counts twice, as in Redis).
    ///
    /// ```
    /// # use larder_engine::*;
    /// # let store = Store::open(StoreConfig::small_for_tests()).unwrap();
    /// # let mut h = store.handle().unwrap();
    /// h.set(0, b"a", b"1", &SetOptions::default()).unwrap();
    /// assert_eq!(h.exists(0, &[b"a", b"a", b"nope"]).unwrap(), 2);
    /// ```
    pub fn exists(&self, db: u32, keys: &[&[u8]]) -> Result<u64, Error> {
        let mut n = 0;
        for k in keys {
            if self.read(db, k, |_, _| Ok(()))?.is_some() {
                n += 1;
            }
        }
        Ok(n)
    }

    /// TYPE: the key's type, or None if it does not exist.
    ///
    /// ```
    /// # use larder_engine::*;
    /// # let store = Store::open(StoreConfig::small_for_tests()).unwrap();
    /// # let mut h = store.handle().unwrap();
    /// h.set(0, b"s", b"1", &SetOptions::default()).unwrap();
    /// assert_eq!(h.type_of(0, b"s").unwrap(), Some(Type::String));
    /// assert_eq!(h.type_of(0, b"s").unwrap().map(Type::name), Some("string"));
    /// assert_eq!(h.type_of(0, b"nope").unwrap(), None);
    /// ```
    pub fn type_of(&self, db: u32, key: &[u8]) -> Result<Option<Type>, Error> {
        self.read(db, key, |_, it| Ok(it.type_()))
    }

    /// The key's metadata (type, expiry, client flags, version).
    pub fn meta(&self, db: u32, key: &[u8]) -> Result<Option<Meta>, Error> {
        self.read(db, key, |a, it| it.meta(a))
    }

    /// Whether `key` has an item in the index, expired or not, without deleting it if it
    /// expired: for the server to tell that a write just put the key there (WATCH of an
    /// absent key), whatever its expiry did since.
    pub fn present(&self, db: u32, key: &[u8]) -> Result<bool, Error> {
        self.check_db(db)?;
        let a = self.arena();
        let h = self.hash(key);
        let _g = self.p.pin();
        let loc = index::locate(a, db, h)?;
        Ok(index::find(a, &loc, h, key)?.is_some())
    }

    /// Sets an absolute expiry (Unix ms) subject to `cond`. An expiry in the past deletes the
    /// key. Returns whether the expiry was set (Redis's 1/0).
    ///
    /// ```
    /// # use larder_engine::*;
    /// # let store = Store::open(StoreConfig::small_for_tests()).unwrap();
    /// # let mut h = store.handle().unwrap();
    /// h.set(0, b"session", b"data", &SetOptions::default()).unwrap();
    /// assert!(h.expire_at(0, b"session", now_ms() + 10_000, ExpireCond::Nx).unwrap());
    /// assert!(!h.expire_at(0, b"session", now_ms() + 99_000, ExpireCond::Nx).unwrap()); // has one
    /// assert!(h.persist(0, b"session").unwrap());
    /// assert_eq!(h.pttl(0, b"session").unwrap(), Ttl::Persistent);
    /// ```
    pub fn expire_at(&mut self, db: u32, key: &[u8], at_ms: u64, cond: ExpireCond) -> Result<bool, Error> {
        let now = now_ms();
        let r = self.write(db, key, |p, old| {
            let Some(old) = old else { return Ok((Action::Keep, false)) };
            let a = p.arena();
            let cur = old.expire_at(a)?;
            // Redis treats "no expiry" as an infinite TTL for GT and LT.
            let ok = match cond {
                ExpireCond::Always => true,
                ExpireCond::Nx => cur == 0,
                ExpireCond::Xx => cur != 0,
                ExpireCond::Gt => cur != 0 && at_ms > cur,
                ExpireCond::Lt => cur == 0 || at_ms < cur,
                ExpireCond::XxLt => cur != 0 && at_ms < cur,
            };
            if !ok {
                return Ok((Action::Keep, false));
            }
            if at_ms <= now {
                return Ok((Action::Delete, true));
            }
            Ok((crate::string::set_expiry(p, old, at_ms, p.next_version()?)?, true))
        })?;
        if r {
            self.after_delete(db, key)?;
        }
        Ok(r)
    }

    /// Removes the key's expiry; returns whether it had one.
    pub fn persist(&mut self, db: u32, key: &[u8]) -> Result<bool, Error> {
        self.write(db, key, |p, old| {
            let Some(old) = old else { return Ok((Action::Keep, false)) };
            let a = p.arena();
            if old.expire_at(a)? == 0 {
                return Ok((Action::Keep, false));
            }
            Ok((crate::string::set_expiry(p, old, 0, p.next_version()?)?, true))
        })
    }

    /// Remaining time to live.
    pub fn pttl(&self, db: u32, key: &[u8]) -> Result<Ttl, Error> {
        let now = now_ms();
        Ok(match self.read(db, key, |a, it| it.expire_at(a))? {
            None => Ttl::Missing,
            Some(0) => Ttl::Persistent,
            Some(at) => Ttl::Ms(at.saturating_sub(now)),
        })
    }

    /// Bytes of arena memory the key holds (MEMORY USAGE): its item's block, and for a
    /// collection tree every node and element. `samples` bounds how many tree blocks are
    /// measured (0 = all); the rest are estimated from their mean, as Redis samples.
    pub fn memory_usage(&self, db: u32, key: &[u8], samples: usize) -> Result<Option<u64>, Error> {
        self.read(db, key, |a, it| {
            let mut total = a.block_size(it.off)?;
            let blocks = crate::coll::owned_blocks(a, it)?;
            let measured = if samples == 0 { blocks.len() } else { samples.min(blocks.len()) };
            let mut sum = 0;
            for &b in &blocks[..measured] {
                sum += a.block_size(b)?;
            }
            if measured > 0 {
                total += sum * blocks.len() as u64 / measured as u64;
            }
            Ok(total)
        })
    }

    /// The key's value encoding as Redis's `OBJECT ENCODING` names it: `int` for an
    /// integer item, `embstr` for raw bytes up to 44 long (Redis's embedded-string limit),
    /// `raw` above that and for a string APPEND, SETRANGE or SETBIT changed (as Redis
    /// turns a string it edits into a raw one).
    pub fn encoding(&self, db: u32, key: &[u8]) -> Result<Option<&'static str>, Error> {
        Ok(self.encoding_and_int(db, key)?.map(|(e, _)| e))
    }

    /// [`Handle::encoding`] and, for an integer item, its value, from one lookup (OBJECT
    /// REFCOUNT: Redis shares the small integers). Two lookups could see two items, an
    /// integer and then a hash put in its place.
    ///
    /// ```
    /// # use larder_engine::*;
    /// # let store = Store::open(StoreConfig::small_for_tests()).unwrap();
    /// # let mut h = store.handle().unwrap();
    /// h.set(0, b"n", b"42", &SetOptions::default()).unwrap();
    /// h.set(0, b"s", b"forty-two", &SetOptions::default()).unwrap();
    /// assert_eq!(h.encoding_and_int(0, b"n").unwrap(), Some(("int", Some(42))));
    /// assert_eq!(h.encoding_and_int(0, b"s").unwrap(), Some(("embstr", None)));
    /// assert_eq!(h.encoding_and_int(0, b"nope").unwrap(), None);
    /// ```
    pub fn encoding_and_int(&self, db: u32, key: &[u8]) -> Result<Option<(&'static str, Option<i64>)>, Error> {
        self.read(db, key, |a, it| {
            let int = if it.is_int() { Some(it.int(a)?) } else { None };
            let encoding = match it.type_() {
                Type::String if it.is_int() => "int",
                Type::String if it.is_edited() => "raw",
                Type::String if it.vlen <= 44 => "embstr",
                Type::String => "raw",
                Type::Hash | Type::ZSet if it.ty() % 2 == 0 => "listpack",
                Type::Hash => "hashtable",
                Type::ZSet => "skiplist",
                Type::Set if it.ty() % 2 == 0 => "intset",
                Type::Set => "hashtable",
                Type::List => "quicklist",
            };
            Ok((encoding, int))
        })
    }

    /// Renames `src` to `dst` (overwriting it unless `nx`). Returns false if `nx` and `dst`
    /// exists; [`Error::NoSuchKey`] if `src` does not exist. The new key keeps the TTL.
    ///
    /// ```
    /// # use larder_engine::*;
    /// # let store = Store::open(StoreConfig::small_for_tests()).unwrap();
    /// # let mut h = store.handle().unwrap();
    /// h.set(0, b"old", b"v", &SetOptions { expiry: Expiry::At(now_ms() + 60_000), ..Default::default() }).unwrap();
    /// assert!(h.rename(0, b"old", b"new", false).unwrap());
    /// assert_eq!(h.get(0, b"old").unwrap(), None);
    /// assert!(matches!(h.pttl(0, b"new").unwrap(), Ttl::Ms(_)));
    /// h.set(0, b"taken", b"t", &SetOptions::default()).unwrap();
    /// assert!(!h.rename(0, b"new", b"taken", true).unwrap()); // RENAMENX
    /// assert!(matches!(h.rename(0, b"old", b"x", false), Err(Error::NoSuchKey)));
    /// ```
    pub fn rename(&mut self, db: u32, src: &[u8], dst: &[u8], nx: bool) -> Result<bool, Error> {
        self.check_db(db)?;
        if src == dst {
            return match self.read(db, src, |_, _| Ok(()))? {
                Some(()) => Ok(!nx),
                None => Err(Error::NoSuchKey),
            };
        }
        self.move_key(db, src, db, dst, !nx, true)
    }

    /// Copies `src` (in `db`) to `dst` in `dst_db`. Returns false if `dst` exists and not
    /// `replace`, or if `src` does not exist.
    ///
    /// ```
    /// # use larder_engine::*;
    /// # let store = Store::open(StoreConfig::small_for_tests()).unwrap();
    /// # let mut h = store.handle().unwrap();
    /// h.set(0, b"src", b"v", &SetOptions::default()).unwrap();
    /// assert!(h.copy(0, b"src", 5, b"dst", false).unwrap());
    /// assert_eq!(h.get(5, b"dst").unwrap().as_deref(), Some(&b"v"[..]));
    /// assert!(!h.copy(0, b"src", 5, b"dst", false).unwrap()); // exists, no REPLACE
    /// assert!(h.copy(0, b"src", 5, b"dst", true).unwrap());
    /// ```
    pub fn copy(&mut self, db: u32, src: &[u8], dst_db: u32, dst: &[u8], replace: bool) -> Result<bool, Error> {
        self.check_db(db)?;
        self.check_db(dst_db)?;
        if db == dst_db && src == dst {
            return Ok(false);
        }
        match self.move_key(db, src, dst_db, dst, replace, false) {
            Err(Error::NoSuchKey) => Ok(false),
            r => r,
        }
    }

    /// Moves a key to another database (Redis MOVE): false if it is missing in `db` or
    /// exists in `dst_db`.
    pub fn move_to(&mut self, db: u32, key: &[u8], dst_db: u32) -> Result<bool, Error> {
        self.check_db(db)?;
        self.check_db(dst_db)?;
        if db == dst_db {
            return Ok(false);
        }
        match self.move_key(db, key, dst_db, key, false, true) {
            Err(Error::NoSuchKey) => Ok(false),
            r => r,
        }
    }

    /// RENAME, COPY and MOVE: both keys are locked together (in address order) so the
    /// change is atomic for every observer.
    fn move_key(
        &mut self,
        db: u32,
        src: &[u8],
        dst_db: u32,
        dst: &[u8],
        replace: bool,
        delete_src: bool,
    ) -> Result<bool, Error> {
        let hs = self.hash(src);
        let hd = self.hash(dst);
        let _g = self.p.pin();
        let p = &self.p;
        let a = &**p.arena();
        let now = now_ms();
        let mut locked = Vec::new();
        let mut last_retired = None;
        // Whether a list or sorted set landed under `dst`: clients blocked on it (BLPOP,
        // BZPOPMIN, in any attached process) must hear of it as of a push.
        let mut poppable = false;
        for _ in 0..index::RETRIES {
            // Lock both pairs; databases differ only in their directories, so locking by
            // bucket address still gives one global order.
            let ls = index::locate(a, db, hs)?;
            let ld = index::locate(a, dst_db, hd)?;
            let mut words = vec![index::home_lock_off(&ls), index::home_lock_off(&ld)];
            words.sort_unstable();
            words.dedup();
            for &w in &words {
                p.lock(a.u32(w)?);
            }
            locked.clone_from(&words);
            let current = |l: &Loc| -> Result<bool, Error> {
                let (_, retired, _, _) = index::seg_header(a, l.seg)?;
                Ok(!retired)
            };
            let stale = if !current(&ls)? {
                Some(ls.seg)
            } else if !current(&ld)? {
                Some(ld.seg)
            } else {
                None
            };
            if let Some(seg) = stale {
                index::unlock_many(p, &locked)?;
                // Named again after we held one of its locks: a corrupt directory (see
                // `index::lock_home`).
                if last_retired == Some(seg) {
                    return Err(Error::Corrupt("directory points at a retired segment"));
                }
                last_retired = Some(seg);
                continue;
            }
            let r = (|| -> Result<Result<bool, Option<Loc>>, Error> {
                let live = |f: Option<index::Found>| -> Result<Option<index::Found>, Error> {
                    Ok(match f {
                        Some(f) if f.item.expired(a, now)? => None,
                        f => f,
                    })
                };
                // A source found expired goes, as a write that meets it removes it.
                let s = match index::find(a, &ls, hs, src)? {
                    Some(f) if f.item.expired(a, now)? => {
                        self.remove_locked(db, src, &ls, &f)?;
                        return Err(Error::NoSuchKey);
                    }
                    Some(f) => f,
                    None => return Err(Error::NoSuchKey),
                };
                let d = live(index::find(a, &ld, hd, dst)?)?;
                if d.is_some() && !replace {
                    return Ok(Ok(false));
                }
                // An expired item in the destination is simply replaced below (and counted
                // as expired).
                let d_raw = index::find(a, &ld, hd, dst)?;
                let d_expired = d.is_none() && d_raw.is_some();
                let reserved = match d_raw {
                    Some(_) => None,
                    None => match index::reserve_slot(p, &ld, &[], &locked)? {
                        Room::Slot(r) => Some(r),
                        Room::Full => return Ok(Err(Some(ld))),
                        Room::Busy => return Ok(Err(None)),
                    },
                };
                let version = p.next_version()?;
                let expire_at = s.item.expire_at(a)?;
                let built = if s.item.is_string() {
                    let mut val = Vec::new();
                    s.item.value(a, &mut val)?;
                    let value = if s.item.is_int() { Value::of(&val) } else { Value::kept(&s.item, &val) };
                    item::build(p, &NewItem { key: dst, value, expire_at, cflags: s.item.cflags, version })
                } else if delete_src {
                    // RENAME / MOVE: the new item takes over the collection (its tree stays).
                    let mut raw = Vec::new();
                    s.item.raw_value(a, &mut raw)?;
                    item::build(
                        p,
                        &NewItem { key: dst, value: Value::Coll(s.item.ty(), &raw), expire_at, cflags: 0, version },
                    )
                } else {
                    crate::coll::deep_copy(p, &s.item, dst, expire_at, version)
                };
                let new = match built {
                    Ok(n) => n,
                    Err(e) => {
                        if let Some(r) = &reserved {
                            index::release(p, &ld, r)?;
                        }
                        return Err(e);
                    }
                };
                match (d_raw, reserved) {
                    (Some(f), _) => {
                        index::replace_counted(p, ld.seg, &f, f.item.expire_at(a)? != 0, new)?;
                        item::retire_view(p, &f.item)?;
                    }
                    (None, Some(r)) => index::fill(p, &ld, &r, hd, new)?,
                    (None, None) => return Err(Error::Corrupt("new key without a reserved slot")),
                }
                if d_expired {
                    self.count_expired(dst_db, dst);
                }
                if delete_src {
                    // The source's tree, if any, now belongs to the new item.
                    index::remove(a, &ls, &s, Some(p))?;
                    self.journal_del(db, src);
                    p.retire(s.item.off)?;
                }
                self.journal_item(dst_db, new);
                self.count_created(dst_db, dst);
                poppable = matches!(s.item.type_(), Type::List | Type::ZSet);
                Ok(Ok(true))
            })();
            index::unlock_many(p, &locked)?;
            match r? {
                Ok(done) => {
                    if poppable {
                        self.store.notify_push();
                    }
                    return Ok(done);
                }
                Err(Some(full)) => index::split(p, dst_db, &full)?,
                Err(None) => std::thread::yield_now(),
            }
        }
        Err(Error::IndexFull)
    }

    /// Swaps the contents of two databases (Redis SWAPDB): every reader and writer sees
    /// either both before or both after. O(segments of the two databases): see
    /// `index::swap_dbs` for why the segments are fenced rather than the directories
    /// simply exchanged.
    ///
    /// ```
    /// # use larder_engine::*;
    /// # let store = Store::open(StoreConfig::small_for_tests()).unwrap();
    /// # let mut h = store.handle().unwrap();
    /// h.set(0, b"k", b"zero", &SetOptions::default()).unwrap();
    /// h.swapdb(0, 1).unwrap();
    /// assert_eq!(h.get(0, b"k").unwrap(), None);
    /// assert_eq!(h.get(1, b"k").unwrap().as_deref(), Some(&b"zero"[..]));
    /// ```
    pub fn swapdb(&mut self, a: u32, b: u32) -> Result<(), Error> {
        self.check_db(a)?;
        self.check_db(b)?;
        if a == b {
            return Ok(());
        }
        {
            let _g = self.p.pin();
            index::swap_dbs(&self.p, a, b)?;
        }
        if self.store.journaling() {
            self.store.journal().append(&Record::SwapDb { a, b });
        }
        // Lists and sorted sets may now sit under keys that clients block on, in any
        // attached process: as for a push (a no-op while nobody is blocked).
        self.store.notify_push();
        Ok(())
    }

    /// Number of keys in the database (including expired keys not yet reclaimed, as Redis).
    ///
    /// ```
    /// # use larder_engine::*;
    /// # let store = Store::open(StoreConfig::small_for_tests()).unwrap();
    /// # let mut h = store.handle().unwrap();
    /// for k in [&b"a"[..], b"b", b"c"] {
    ///     h.set(3, k, b"v", &SetOptions::default()).unwrap();
    /// }
    /// assert_eq!(h.dbsize(3).unwrap(), 3);
    /// assert_eq!(h.dbsize(0).unwrap(), 0);
    /// assert!(matches!(h.dbsize(16), Err(Error::BadDb)));
    /// ```
    pub fn dbsize(&self, db: u32) -> Result<u64, Error> {
        self.check_db(db)?;
        let a = self.arena();
        let _g = self.p.pin();
        let mut n = 0u64;
        for (seg, _) in index::segments(a, db)? {
            n += index::live_count(a, seg)? as u64;
        }
        Ok(n)
    }

    /// Bytes the database's index takes in the arena: its directory and its segments, as
    /// allocated (INFO memory counts them in `used_memory_overhead`, as Redis counts its
    /// dictionaries' buckets and entries there). O(segments).
    ///
    /// ```
    /// # use larder_engine::*;
    /// # let store = Store::open(StoreConfig::small_for_tests()).unwrap();
    /// # let mut h = store.handle().unwrap();
    /// let empty = h.index_bytes(0).unwrap();
    /// assert!(empty > 0, "a database starts with one segment");
    /// for i in 0..20_000 {
    ///     h.set(0, format!("k{i}").as_bytes(), b"v", &SetOptions::default()).unwrap();
    /// }
    /// assert!(h.index_bytes(0).unwrap() > empty, "the index grew by splitting");
    /// ```
    pub fn index_bytes(&self, db: u32) -> Result<u64, Error> {
        self.check_db(db)?;
        let a = self.arena();
        let _g = self.p.pin();
        let (dir, _) = index::directory(a, db)?;
        let mut n = a.block_size(dir)?;
        for (seg, _) in index::segments(a, db)? {
            n += a.block_size(seg)?;
        }
        Ok(n)
    }

    /// Number of keys in the database with an expiry set (INFO keyspace's `expires`; like
    /// [`Handle::dbsize`], expired keys count until they are reclaimed). O(segments).
    ///
    /// ```
    /// # use larder_engine::*;
    /// # let store = Store::open(StoreConfig::small_for_tests()).unwrap();
    /// # let mut h = store.handle().unwrap();
    /// h.set(0, b"a", b"1", &SetOptions::default()).unwrap();
    /// h.set(0, b"b", b"2", &SetOptions { expiry: Expiry::At(now_ms() + 60_000), ..Default::default() }).unwrap();
    /// assert_eq!(h.expires(0).unwrap(), 1);
    /// h.persist(0, b"b").unwrap();
    /// assert_eq!(h.expires(0).unwrap(), 0);
    /// ```
    pub fn expires(&self, db: u32) -> Result<u64, Error> {
        self.check_db(db)?;
        let a = self.arena();
        let _g = self.p.pin();
        let mut n = 0u64;
        for (seg, _) in index::segments(a, db)? {
            n += index::seg_expires(a, seg)? as u64;
        }
        Ok(n)
    }

    /// Empties one database. O(keys), like Redis's synchronous FLUSHDB; readers and writers
    /// of other databases are not stopped.
    ///
    /// ```
    /// # use larder_engine::*;
    /// # let store = Store::open(StoreConfig::small_for_tests()).unwrap();
    /// # let mut h = store.handle().unwrap();
    /// h.set(0, b"a", b"1", &SetOptions::default()).unwrap();
    /// h.set(1, b"b", b"2", &SetOptions::default()).unwrap();
    /// h.flushdb(0).unwrap();
    /// assert_eq!((h.dbsize(0).unwrap(), h.dbsize(1).unwrap()), (0, 1));
    /// ```
    pub fn flushdb(&mut self, db: u32) -> Result<(), Error> {
        self.check_db(db)?;
        self.empty(db)?;
        if self.store.journaling() {
            self.store.journal().append(&Record::FlushDb { db });
        }
        Ok(())
    }

    /// Swaps in an empty index, then fences writers out of each old segment and retires
    /// its items and the segment.
    fn empty(&mut self, db: u32) -> Result<(), Error> {
        let _g = self.p.pin();
        for (seg, _) in index::swap_in_empty(&self.p, db)? {
            for it in index::drain_segment(&self.p, seg)? {
                item::retire_item(&self.p, it)?;
            }
            self.p.retire(seg)?;
        }
        Ok(())
    }

    /// Empties every database.
    ///
    /// ```
    /// # use larder_engine::*;
    /// # let store = Store::open(StoreConfig::small_for_tests()).unwrap();
    /// # let mut h = store.handle().unwrap();
    /// h.set(0, b"a", b"1", &SetOptions::default()).unwrap();
    /// h.set(1, b"b", b"2", &SetOptions::default()).unwrap();
    /// h.flushall().unwrap();
    /// assert_eq!((h.dbsize(0).unwrap(), h.dbsize(1).unwrap()), (0, 0));
    /// ```
    pub fn flushall(&mut self) -> Result<(), Error> {
        for db in 0..self.store.databases() {
            self.empty(db)?;
        }
        if self.store.journaling() {
            self.store.journal().append(&Record::FlushAll);
        }
        Ok(())
    }

    /// One step of SCAN: from `cursor` (0 to start), returns the next cursor (0 when done)
    /// and appends matching live keys to `out`. Visits whole home buckets, so about `count`
    /// keys come back; every key present for the whole scan is returned. Expired keys the
    /// pattern matches are deleted on the way, as Redis's SCAN does.
    ///
    /// ```
    /// # use larder_engine::*;
    /// # let store = Store::open(StoreConfig::small_for_tests()).unwrap();
    /// # let mut h = store.handle().unwrap();
    /// for i in 0..100 {
    ///     h.set(0, format!("user:{i}").as_bytes(), b"x", &SetOptions::default()).unwrap();
    /// }
    /// h.set(0, b"other", b"x", &SetOptions::default()).unwrap();
    /// let (mut cursor, mut keys) = (0, Vec::new());
    /// loop {
    ///     cursor = h.scan(0, cursor, 10, Some(b"user:*"), None, &mut keys).unwrap();
    ///     if cursor == 0 { break; }
    /// }
    /// assert_eq!(keys.len(), 100);
    /// ```
    pub fn scan(
        &self,
        db: u32,
        cursor: u64,
        count: usize,
        pattern: Option<&[u8]>,
        ty: Option<Type>,
        out: &mut Vec<Vec<u8>>,
    ) -> Result<u64, Error> {
        self.scan_step(db, cursor, count, pattern, ty, out, true)
    }

    /// Every live key of `db` that `pattern` matches, as Redis's KEYS: one whole scan,
    /// which leaves expired keys in place (Redis's KEYS only skips them).
    pub fn keys(&self, db: u32, pattern: &[u8]) -> Result<Vec<Vec<u8>>, Error> {
        let (mut cursor, mut keys) = (0, Vec::new());
        loop {
            // A cursor is a hash position, so one pass visits every key exactly once.
            cursor = self.scan_step(db, cursor, 1024, Some(pattern), None, &mut keys, false)?;
            if cursor == 0 {
                return Ok(keys);
            }
        }
    }

    /// [`Handle::scan`]; `reap`: delete the expired keys met.
    #[allow(clippy::too_many_arguments)]
    fn scan_step(
        &self,
        db: u32,
        cursor: u64,
        count: usize,
        pattern: Option<&[u8]>,
        ty: Option<Type>,
        out: &mut Vec<Vec<u8>>,
        reap: bool,
    ) -> Result<u64, Error> {
        self.check_db(db)?;
        // `*` matches every key, the empty one too (as SCAN's, which skips matching for it).
        let pattern = pattern.filter(|p| *p != b"*");
        let a = self.arena();
        let _g = self.p.pin();
        let now = now_ms();
        let mut cur = cursor;
        let mut visited = 0usize;
        let want = count.max(1);
        let mut key = Vec::new();
        let mut seen = 0usize;
        let mut expired = Vec::new();
        let next = loop {
            let loc = index::locate(a, db, cur)?;
            // The buckets after the home only if keys of this home were displaced there: the
            // count is raised before such a key is published and lowered after it is gone,
            // so a key present for the whole scan is never missed.
            let reach = if index::overflow_of(a, loc.seg, loc.b)? == 0 { 1 } else { index::WINDOW };
            for b in (0..reach).map(|d| loc.b + d) {
                let bucket = index::bucket_off(loc.seg, b);
                for i in 0..index::SLOTS {
                    let u = index::slot(a, bucket, i)?.load(std::sync::atomic::Ordering::Acquire);
                    if u == 0 {
                        continue;
                    }
                    let it = ItemView::read(a, Arena::from_units(u))?;
                    it.key(a, &mut key)?;
                    let h = self.hash(&key);
                    // Only keys of this home bucket, at or after the cursor.
                    if !same_home(h, cur, loc.depth) || h < cur {
                        continue;
                    }
                    seen += 1;
                    if pattern.is_some_and(|p| !crate::glob_match(p, &key, false)) {
                        continue;
                    }
                    if it.expired(a, now)? {
                        // Deleted once the walk is done, as Redis's SCAN deletes the
                        // expired keys it meets (those its pattern matches).
                        if reap {
                            expired.push((key.clone(), h));
                        }
                        continue;
                    }
                    if ty.is_some_and(|t| t != it.type_()) {
                        continue;
                    }
                    out.push(key.clone());
                }
            }
            visited += 1;
            // Next home bucket: the hash range after this one.
            let shift = 56 - loc.depth;
            let top = (cur >> shift) + 1;
            if top >> (64 - shift) != 0 {
                break 0;
            }
            cur = top << shift;
            if seen >= want || visited >= want * 10 {
                break cur;
            }
        };
        for (k, h) in expired {
            self.reap_expired(db, &k, h)?;
        }
        Ok(next)
    }

    /// A random live key, or None if the database is empty.
    ///
    /// As Redis does: random buckets until one holds a key, then one of that bucket's keys
    /// at random. Buckets are drawn as keys' positions fall, so every key is about equally
    /// likely, however the keys are spread (a walk forward from a random bucket would favour
    /// keys after long empty stretches, and with two keys can all but never pick one of
    /// them). A nearly empty table can take many draws, so after `BUCKET_DRAWS` of them it
    /// walks forward instead.
    pub fn random_key(&mut self, db: u32) -> Result<Option<Vec<u8>>, Error> {
        const BUCKET_DRAWS: usize = 1024;
        const WALKS: usize = 64;
        self.check_db(db)?;
        if self.dbsize(db)? == 0 {
            return Ok(None);
        }
        let now = now_ms();
        for draw in 0..BUCKET_DRAWS + WALKS {
            // A position drawn as keys' positions are made (a uniform hash, bent), so that
            // each bucket is drawn in proportion to the keys it holds.
            let (h, pick) = (index::spiral(self.random()), self.random());
            let a = self.arena();
            let _g = self.p.pin();
            let loc = index::locate(a, db, h)?;
            let buckets = if draw < BUCKET_DRAWS { 1 } else { index::NB };
            for step in 0..buckets {
                let bucket = index::bucket_off(loc.seg, loc.b + step);
                let mut held = [0u32; index::SLOTS as usize];
                let mut n = 0;
                for i in 0..index::SLOTS {
                    let u = index::slot(a, bucket, i)?.load(std::sync::atomic::Ordering::Acquire);
                    if u != 0 {
                        held[n] = u;
                        n += 1;
                    }
                }
                if n == 0 {
                    continue;
                }
                // An expired pick is deleted, as Redis's RANDOMKEY does, and counts as a
                // miss: draw again.
                let it = ItemView::read(a, Arena::from_units(held[pick as usize % n]))?;
                let mut k = Vec::new();
                it.key(a, &mut k)?;
                if !it.expired(a, now)? {
                    return Ok(Some(k));
                }
                self.reap_expired(db, &k, self.hash(&k))?;
                break;
            }
        }
        Ok(None)
    }

    /// Active expiry: visits the next `samples` buckets of `db` and deletes the expired keys
    /// found there. Returns what it saw: call again while the share deleted is high (Redis
    /// repeats while more than 25% of the sample had expired).
    ///
    /// ```
    /// # use larder_engine::*;
    /// # let store = Store::open(StoreConfig::small_for_tests()).unwrap();
    /// # let mut h = store.handle().unwrap();
    /// for i in 0..10 {
    ///     // Each expiry well ahead of its SET, however slow the machine (a SET of a time
    ///     // already past deletes the key at once).
    ///     let soon = SetOptions { expiry: Expiry::At(now_ms() + 100), ..Default::default() };
    ///     h.set(0, format!("k{i}").as_bytes(), b"v", &soon).unwrap();
    /// }
    /// h.set(0, b"stays", b"v", &SetOptions::default()).unwrap();
    /// assert_eq!(h.dbsize(0).unwrap(), 11);
    /// std::thread::sleep(std::time::Duration::from_millis(150));
    /// // Nobody reads the expired keys (which would delete them lazily): the cycle finds them.
    /// let deleted: usize = (0..4).map(|_| h.expire_cycle(0, 256).unwrap().deleted).sum();
    /// assert_eq!(deleted, 10);
    /// assert_eq!(h.dbsize(0).unwrap(), 1);
    /// ```
    pub fn expire_cycle(&mut self, db: u32, samples: usize) -> Result<ExpireRound, Error> {
        self.check_db(db)?;
        let now = now_ms();
        if self.store.keeps_expired(now) {
            return Ok(ExpireRound::default());
        }
        let mut expired: Vec<Vec<u8>> = Vec::new();
        let mut round = ExpireRound::default();
        // Walk the buckets in hash order from where the last cycle stopped, as Redis walks
        // its table: every bucket is visited in turn, so no expired key is left behind for
        // long (random sampling can miss one for a very long time).
        if self.expire_cursor.len() <= db as usize {
            self.expire_cursor.resize(db as usize + 1, 0);
        }
        let mut cur = self.expire_cursor[db as usize];
        {
            let a = self.arena();
            let _g = self.p.pin();
            for _ in 0..samples {
                let loc = index::locate(a, db, cur)?;
                let bucket = index::bucket_off(loc.seg, loc.b);
                for i in 0..index::SLOTS {
                    let u = index::slot(a, bucket, i)?.load(std::sync::atomic::Ordering::Acquire);
                    if u == 0 {
                        continue;
                    }
                    let it = ItemView::read(a, Arena::from_units(u))?;
                    // (A value of 1 KiB or more has an expiry field even without an expiry.)
                    let at = it.expire_at(a)?;
                    if at == 0 {
                        continue;
                    }
                    round.examined += 1;
                    if at <= now {
                        let mut k = Vec::new();
                        it.key(a, &mut k)?;
                        expired.push(k);
                    } else {
                        round.ttl_sum_ms = round.ttl_sum_ms.saturating_add(at - now);
                        round.ttl_samples += 1;
                    }
                }
                let shift = 56 - loc.depth;
                let top = (cur >> shift) + 1;
                cur = if top >> (64 - shift) != 0 { 0 } else { top << shift };
            }
        }
        self.expire_cursor[db as usize] = cur;
        for k in &expired {
            // The write path removes the key if it is still expired (lazy expiry does the work).
            let existed = self.write(db, k, |_, old| Ok((Action::Keep, old.is_none())))?;
            if existed {
                round.deleted += 1;
            }
            self.after_delete(db, k)?;
        }
        Ok(round)
    }

    /// After deleting `key`: if its segment has become nearly empty, merge it with its
    /// buddy, so the index shrinks back as keys go away.
    pub(crate) fn after_delete(&mut self, db: u32, key: &[u8]) -> Result<(), Error> {
        if !self.maybe_merge.take() {
            return Ok(());
        }
        let h = self.hash(key);
        let _g = self.p.pin();
        index::try_merge(&self.p, db, h)?;
        Ok(())
    }

    /// Frees retired memory that no reader can still see, and gives the kernel back the
    /// pages of large runs that have been free for a while (call when idle, or now and then).
    pub fn collect(&self) -> Result<usize, Error> {
        let freed = self.p.collect()?;
        self.p.purge_dirty(larder_arena::DIRTY_DECAY_MS)?;
        Ok(freed)
    }

    /// Gives back all the memory it can now (MEMORY PURGE, jemalloc's purge): frees the
    /// memory this handle retired that no reader can still see, returns whole free pages of
    /// small size classes to the page pool, and gives the kernel the pages of every free
    /// run, however recently freed. Returns the pages given to the kernel.
    pub fn purge(&self) -> Result<u64, Error> {
        // A collect frees what was retired before the previous one: two free all that the
        // other participants' pins allow.
        self.p.collect()?;
        self.p.collect()?;
        self.p.release_free_pages(&mut PageRelease::default())?;
        Ok(self.p.purge_dirty(0)?)
    }

    /// Gives whole free pages of small size classes back to the page pool (and, after a
    /// second, to the kernel), so memory freed by values of one size serves values of
    /// another: see `Participant::release_free_pages`. `state` carries, between calls, what
    /// the last passes saw (a class unchanged since is skipped). Returns the pages freed.
    /// The server calls it once a second; it costs a load per size class when nothing
    /// changed.
    pub fn release_free_pages(&self, state: &mut PageRelease) -> Result<u64, Error> {
        Ok(self.p.release_free_pages(state)?)
    }

    /// Hands the free blocks this handle keeps for its next allocations to the shared
    /// stacks, for a thread going idle: cached, they would keep their pages from
    /// [`Handle::release_free_pages`].
    pub fn flush_free_lists(&self) -> Result<(), Error> {
        Ok(self.p.flush_free_lists()?)
    }

    /// Whether [`Handle::collect`] has anything to do: retired blocks of this handle, or
    /// free large runs whose pages are still resident (anyone's).
    pub fn has_memory_to_return(&self) -> bool {
        self.p.retired_waiting() > 0 || self.p.arena().dirty_free_bytes() > 0
    }

    /// How many blocks this handle retired that are not freed yet. Retirements collect as
    /// they accumulate; a handle that then only reads keeps the last of them (a deleted
    /// large value, say) until it collects: a long-lived reader checks this now and then.
    pub fn retired_waiting(&self) -> u32 {
        self.p.retired_waiting()
    }
}

/// Retires the item `new` replaced: with its tree, unless `new` took the tree over (an
/// expiry change rebuilds a collection's item around the same roots).
#[inline]
fn retire_replaced(p: &Participant, old: &ItemView, new: u64) -> Result<(), Error> {
    if item::is_tree_type(old.ty()) {
        return retire_replaced_tree(p, old, new);
    }
    item::retire_view(p, old)
}

#[inline(never)]
fn retire_replaced_tree(p: &Participant, old: &ItemView, new: u64) -> Result<(), Error> {
    let a = &**p.arena();
    let n = ItemView::read(a, new)?;
    if crate::coll::tree_roots(a, &n)? == crate::coll::tree_roots(a, old)? {
        return p.retire(old.off).map_err(Into::into);
    }
    item::retire_view(p, old)
}

/// Whether hash `h` has the same home bucket range as `cur` at depth `l`.
fn same_home(h: u64, cur: u64, l: u32) -> bool {
    let shift = 56 - l;
    h >> shift == cur >> shift
}

#[cfg(test)]
mod tests {
    use crate::{ArenaConfig, SetOptions, Store, StoreConfig};

    /// RANDOMKEY picks every key about equally often. Positions are bent ([`index::spiral`]):
    /// keys are twice as dense at the start of the position space as at its end, and the
    /// segments there split deeper, so a position drawn uniformly landed on the start's
    /// keys less often than on the end's (each by its bucket's share of the space, then one
    /// in the bucket).
    #[test]
    fn random_key_is_fair_across_the_bent_positions() {
        let store = crate::Store::open(crate::StoreConfig::small_for_tests()).unwrap();
        let mut h = store.handle().unwrap();
        const KEYS: u64 = 20_000;
        const DRAWS: u64 = 200_000;
        let mut first_half = std::collections::HashSet::new();
        for i in 0..KEYS {
            let k = format!("key:{i}").into_bytes();
            h.set(0, &k, b"v", &crate::SetOptions::default()).unwrap();
            if h.hash(&k) < 1 << 63 {
                first_half.insert(k);
            }
        }
        let mut hits = 0u64;
        for _ in 0..DRAWS {
            let k = h.random_key(0).unwrap().unwrap();
            hits += first_half.contains(&k) as u64;
        }
        // The share of draws landing on the first half's keys against those keys' share:
        // 1 for a fair pick (the standard error here is about 0.3%).
        let ratio = (hits as f64 / DRAWS as f64) / (first_half.len() as f64 / KEYS as f64);
        assert!((ratio - 1.0).abs() < 0.03, "the first half of the positions was drawn {ratio:.3}x its share");
    }

    /// SCAN deletes the expired keys it meets that its pattern matches, and RANDOMKEY the
    /// expired keys it draws, as Redis's do: DBSIZE stops counting them, and each counts as
    /// an expiry. KEYS leaves them, as Redis's.
    #[test]
    fn scan_and_random_key_delete_the_expired_keys_they_meet() {
        let store = Store::open(StoreConfig::small_for_tests()).unwrap();
        let mut h = store.handle().unwrap();
        let soon = SetOptions { expiry: crate::Expiry::At(crate::now_ms() + 20), ..Default::default() };
        for i in 0..50 {
            h.set(0, format!("a:{i}").as_bytes(), b"v", &soon).unwrap();
            h.set(0, format!("b:{i}").as_bytes(), b"v", &soon).unwrap();
        }
        h.set(0, b"a:live", b"v", &SetOptions::default()).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(40));
        assert_eq!(h.dbsize(0).unwrap(), 101);
        assert_eq!(h.keys(0, b"*").unwrap(), [b"a:live".to_vec()]);
        assert_eq!(h.dbsize(0).unwrap(), 101);
        let scan = |h: &crate::Handle, pattern: &[u8]| {
            let (mut cursor, mut keys) = (0, Vec::new());
            loop {
                cursor = h.scan(0, cursor, 10, Some(pattern), None, &mut keys).unwrap();
                if cursor == 0 {
                    return keys;
                }
            }
        };
        assert_eq!(scan(&h, b"a:*"), [b"a:live".to_vec()]);
        // Only the keys the pattern matched.
        assert_eq!(h.dbsize(0).unwrap(), 51);
        assert_eq!(h.take_expired(), 50);
        // RANDOMKEY draws until it finds the live key (or none is left).
        h.del(0, &[b"a:live"]).unwrap();
        h.set(0, b"c:live", b"v", &SetOptions::default()).unwrap();
        let mut picks = 0;
        while h.dbsize(0).unwrap() > 1 && picks < 10_000 {
            assert_eq!(h.random_key(0).unwrap(), Some(b"c:live".to_vec()));
            picks += 1;
        }
        assert_eq!(h.dbsize(0).unwrap(), 1, "RANDOMKEY left expired keys after {picks} picks");
        assert_eq!(h.take_expired(), 50);
    }

    /// Prefetch hints change nothing, whatever they are given: keys present or not, a
    /// database out of range, hints used after the key was overwritten or deleted.
    #[test]
    fn prefetch_hints_change_nothing() {
        let store = Store::open(StoreConfig::small_for_tests()).unwrap();
        let mut h = store.handle().unwrap();
        for i in 0..2000 {
            h.set(0, format!("k{i}").as_bytes(), format!("v{i}").as_bytes(), &SetOptions::default()).unwrap();
        }
        let keys: Vec<String> = (0..4000).step_by(7).map(|i| format!("k{i}")).collect();
        let hints: Vec<_> = keys.iter().map(|k| h.prefetch_bucket(0, k.as_bytes())).collect();
        let bad = h.prefetch_bucket(u32::MAX, b"k1");
        let mut deleted = 0;
        for (i, k) in keys.iter().enumerate() {
            if i % 2 == 0 {
                deleted += h.del(0, &[k.as_bytes()]).unwrap();
            }
        }
        for &hint in hints.iter().chain([&bad]) {
            h.prefetch_item(hint);
        }
        for (i, k) in keys.iter().enumerate() {
            let n: usize = k[1..].parse().unwrap();
            let want = (i % 2 == 1 && n < 2000).then(|| format!("v{n}").into_bytes());
            assert_eq!(h.get(0, k.as_bytes()).unwrap(), want, "{k}");
        }
        assert_eq!(h.dbsize(0).unwrap(), 2000 - deleted);
    }

    /// SWAPDB while other threads insert (splitting segments) and delete (merging them) in
    /// both databases: no write may be lost or land twice, and the index stays sound.
    #[test]
    fn swapdb_under_concurrent_splits_and_merges() {
        // SWAPDB copies both databases' segments and retires the old ones, about 130 KiB per
        // swap here. A swapper in a tight loop outran reclamation in a 64 MiB arena whenever
        // a pinned writer was descheduled (2 cores, 3 threads): allocation failed with Full
        // in about 1 release run in 5. In 256 MiB (sparse) it passed 100 of 100, with 48 to
        // 1,923 swaps during the writes.
        let config = StoreConfig {
            arena: ArenaConfig { capacity: 256 << 20, max_participants: 8 },
            ..StoreConfig::small_for_tests()
        };
        let store = Store::open(config).unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        // Writers start once the swapper has swapped: on two cores they could otherwise
        // finish before it runs at all.
        let swaps = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
        const N: u32 = 6000;
        let writers: Vec<_> = (0..2u32)
            .map(|w| {
                let (store, swaps) = (store.clone(), swaps.clone());
                std::thread::spawn(move || {
                    let mut h = store.handle().unwrap();
                    while swaps.load(std::sync::atomic::Ordering::Relaxed) == 0 {
                        std::thread::yield_now();
                    }
                    for i in 0..N {
                        h.set(w, format!("w{w}:{i}").as_bytes(), b"v", &SetOptions::default()).unwrap();
                    }
                    // Delete most again, in whichever database each key is now.
                    for i in (0..N).filter(|i| i % 4 != 0) {
                        let k = format!("w{w}:{i}");
                        let n = h.del(0, &[k.as_bytes()]).unwrap() + h.del(1, &[k.as_bytes()]).unwrap();
                        assert!(n <= 1, "{k} deleted twice");
                    }
                })
            })
            .collect();
        let swapper = {
            let (store, stop, swaps) = (store.clone(), stop.clone(), swaps.clone());
            std::thread::spawn(move || {
                let mut h = store.handle().unwrap();
                let mut n = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    h.swapdb(0, 1).unwrap();
                    n += 1;
                    swaps.store(n, std::sync::atomic::Ordering::Relaxed);
                }
                n
            })
        };
        for w in writers {
            w.join().unwrap();
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        assert!(swapper.join().unwrap() > 0);
        let h = store.handle().unwrap();
        let mut total = 0;
        for w in 0..2 {
            for i in 0..N {
                let k = format!("w{w}:{i}");
                let n = h.exists(0, &[k.as_bytes()]).unwrap() + h.exists(1, &[k.as_bytes()]).unwrap();
                // Keys the delete pass missed (it looked in db 0 and then db 1 while the
                // databases were being swapped) may remain; none may be doubled.
                assert!(n <= 1, "{k} in both databases");
                if i % 4 == 0 {
                    assert_eq!(n, 1, "{k} lost");
                }
                total += n;
            }
        }
        assert_eq!(h.dbsize(0).unwrap() + h.dbsize(1).unwrap(), total);
        let r = store.check().unwrap();
        assert!(r.ok(), "{:?}", r.problems);
        assert_eq!(r.held_locks, 0);
    }

    mod changes {
        use crate::{Change, Expiry, Kind, Reporting, SetOptions, Store, StoreConfig};

        fn both() -> Reporting {
            Reporting { expired: true, created: true, missed: false, modified: false }
        }

        /// (change, db, key) of what the handle recorded, taken.
        fn taken(h: &crate::Handle) -> Vec<(Change, u32, String)> {
            h.take_changes().into_iter().map(|c| (c.change, c.db, String::from_utf8(c.key).unwrap())).collect()
        }

        /// A key that will have expired by the time [`wait`] returns.
        fn brief(h: &mut crate::Handle, db: u32, key: &[u8]) {
            let soon = SetOptions { expiry: Expiry::At(crate::now_ms() + 20), ..Default::default() };
            h.set(db, key, b"v", &soon).unwrap();
        }

        fn wait() {
            std::thread::sleep(std::time::Duration::from_millis(40));
        }

        #[test]
        fn nothing_is_recorded_unless_asked() {
            let store = Store::open(StoreConfig::small_for_tests()).unwrap();
            let mut h = store.handle().unwrap();
            brief(&mut h, 0, b"x");
            h.set(0, b"k", b"v", &SetOptions::default()).unwrap();
            wait();
            assert_eq!(h.get(0, b"x").unwrap(), None);
            assert!(!h.has_changes());
            assert!(h.take_changes().is_empty());
            assert_eq!(h.take_expired(), 1);
            // Only what is asked for.
            h.report(Reporting { expired: true, ..Reporting::default() });
            brief(&mut h, 0, b"y");
            wait();
            assert_eq!(h.exists(0, &[b"y"]).unwrap(), 0);
            h.report_miss(0, b"y");
            assert_eq!(taken(&h), [(Change::Expired, 0, "y".into())]);
            // Misses are the caller's to report, in order with the rest.
            h.report(Reporting { missed: true, expired: true, created: false, modified: false });
            brief(&mut h, 0, b"z");
            wait();
            assert_eq!(h.get(0, b"z").unwrap(), None);
            h.report_miss(0, b"z");
            assert_eq!(taken(&h), [(Change::Expired, 0, "z".into()), (Change::Missed, 0, "z".into())]);
        }

        #[test]
        fn lazy_and_active_expiry_are_reported() {
            let store = Store::open(StoreConfig::small_for_tests()).unwrap();
            let mut h = store.handle().unwrap();
            for k in [&b"read"[..], b"write", b"cycle"] {
                brief(&mut h, 3, k);
            }
            wait();
            h.report(both());
            assert_eq!(h.get(3, b"read").unwrap(), None);
            // A write that finds its key expired: the expiry, then the creation.
            h.set(3, b"write", b"new", &SetOptions::default()).unwrap();
            let mut deleted = 0;
            for _ in 0..8 {
                deleted += h.expire_cycle(3, 256).unwrap().deleted;
            }
            assert_eq!(deleted, 1);
            assert_eq!(
                taken(&h),
                [
                    (Change::Expired, 3, "read".into()),
                    (Change::Expired, 3, "write".into()),
                    (Change::Created, 3, "write".into()),
                    (Change::Expired, 3, "cycle".into()),
                ]
            );
        }

        #[test]
        fn creation_is_reported_once_per_key_made() {
            let store = Store::open(StoreConfig::small_for_tests()).unwrap();
            let mut h = store.handle().unwrap();
            h.report(both());
            h.set(0, b"s", b"1", &SetOptions::default()).unwrap();
            h.set(0, b"s", b"2", &SetOptions::default()).unwrap();
            h.incr_by(0, b"n", 1).unwrap();
            h.incr_by(0, b"n", 1).unwrap();
            h.coll_write(0, b"l", Kind::List, true, |c| c.insert_at(0, b"a")).unwrap();
            h.coll_write(0, b"l", Kind::List, true, |c| c.insert_at(0, b"b")).unwrap();
            // A collection write that adds nothing makes no key.
            h.coll_write(0, b"none", Kind::Set, true, |_| Ok(())).unwrap();
            h.del(0, &[b"s"]).unwrap();
            assert_eq!(
                taken(&h),
                [(Change::Created, 0, "s".into()), (Change::Created, 0, "n".into()), (Change::Created, 0, "l".into())]
            );
        }

        #[test]
        fn mset_reports_each_new_or_expired_key_in_order() {
            let store = Store::open(StoreConfig::small_for_tests()).unwrap();
            let mut h = store.handle().unwrap();
            h.set(0, b"live", b"v", &SetOptions::default()).unwrap();
            brief(&mut h, 0, b"gone");
            wait();
            h.report(both());
            let pairs: [(&[u8], &[u8]); 4] = [(b"a", b"1"), (b"live", b"2"), (b"gone", b"3"), (b"a", b"4")];
            assert!(h.mset(0, &pairs, false).unwrap());
            assert_eq!(
                taken(&h),
                [
                    (Change::Created, 0, "a".into()),
                    (Change::Expired, 0, "gone".into()),
                    (Change::Created, 0, "gone".into()),
                ]
            );
            assert_eq!(h.take_expired(), 1);
            assert_eq!(h.get(0, b"a").unwrap().as_deref(), Some(&b"4"[..]));
        }

        #[test]
        fn rename_copy_and_move_report_their_destination() {
            let store = Store::open(StoreConfig::small_for_tests()).unwrap();
            let mut h = store.handle().unwrap();
            h.set(0, b"src", b"v", &SetOptions::default()).unwrap();
            h.set(0, b"taken", b"t", &SetOptions::default()).unwrap();
            brief(&mut h, 0, b"stale");
            brief(&mut h, 0, b"old-src");
            wait();
            h.report(both());
            // Onto a live key: reported as made anew. Onto an expired one: its expiry first.
            assert!(h.rename(0, b"src", b"taken", false).unwrap());
            assert!(h.copy(0, b"taken", 0, b"stale", false).unwrap());
            assert!(h.move_to(0, b"stale", 5).unwrap());
            assert!(h.rename(0, b"taken", b"stale2", true).unwrap());
            // A source found expired is deleted, and reported.
            assert!(matches!(h.rename(0, b"old-src", b"x", false), Err(crate::Error::NoSuchKey)));
            assert_eq!(
                taken(&h),
                [
                    (Change::Created, 0, "taken".into()),
                    (Change::Expired, 0, "stale".into()),
                    (Change::Created, 0, "stale".into()),
                    (Change::Created, 5, "stale".into()),
                    (Change::Created, 0, "stale2".into()),
                    (Change::Expired, 0, "old-src".into()),
                ]
            );
            assert_eq!(h.dbsize(0).unwrap(), 1);
            assert_eq!(h.take_expired(), 2);
        }
    }
}

//! SORT and SORT_RO, as Redis 7.0's `sort.c`: sorts the elements of a list, set or sorted
//! set numerically or (ALPHA) as strings, by the elements themselves or by keys they name
//! (`BY weight_*`, `BY hash_*->field`), then returns or STOREs (as a list) the elements or
//! what `GET` patterns name for each.
//!
//! The weights and GET values are read key by key while the command runs: unlike Redis,
//! which runs SORT alone, writes by other clients may land in between (each read is
//! consistent on its own).

use std::cmp::Ordering;

use larder_engine::{Error, Handle, Kind, Type};

use crate::command::{strtod_erange, strtod_prefix, CmdError, Ctx, Spec, DENYOOM, MOVABLEKEYS, READONLY, WRITE};
use crate::families::string::count_lookup;
use crate::notify::{self, Replace, LIST};

#[rustfmt::skip]
pub const COMMANDS: &[Spec] = &[
    Spec { name: "sort", arity: -2, flags: WRITE | DENYOOM | MOVABLEKEYS, first_key: 1, last_key: 1, step: 1, group: "generic", summary: "Sort the elements in a list, set or sorted set", handler: cmd_sort },
    Spec { name: "sort_ro", arity: -2, flags: READONLY | MOVABLEKEYS, first_key: 1, last_key: 1, step: 1, group: "generic", summary: "Sort the elements in a list, set or sorted set. Read-only variant of SORT.", handler: cmd_sort_ro },
];

/// A parsed SORT request.
#[derive(Default, Debug)]
pub struct SortOpts<'a> {
    pub desc: bool,
    pub alpha: bool,
    /// LIMIT offset count (count < 0: to the end).
    pub limit: Option<(i64, i64)>,
    pub by: Option<&'a [u8]>,
    /// BY a pattern without `*` (e.g. `nosort`): keep the natural order.
    pub dontsort: bool,
    pub get: Vec<&'a [u8]>,
    pub store: Option<&'a [u8]>,
    /// Called from a script: its result must not depend on a set's internal order.
    pub from_script: bool,
}

/// Whether the client's ACL user may read every key with SORT (or SORT_RO).
fn reads_all_keys(ctx: &Ctx<'_>, readonly: bool) -> bool {
    ctx.conn.user.is_open() || {
        let name = if readonly { "sort_ro" } else { "sort" };
        crate::command::table().lookup_full(name).is_some_and(|i| crate::families::acl::reads_all_keys(ctx, i))
    }
}

/// Parses the options from argument 2 on, in Redis's order of checks.
fn parse_opts<'a>(ctx: &Ctx<'a>, readonly: bool) -> Result<SortOpts<'a>, CmdError> {
    let mut o = SortOpts::default();
    let mut j = 2;
    while j < ctx.argc() {
        let left = ctx.argc() - j - 1;
        let w = ctx.arg(j);
        let is = |s: &str| w.eq_ignore_ascii_case(s.as_bytes());
        if is("asc") {
            o.desc = false;
        } else if is("desc") {
            o.desc = true;
        } else if is("alpha") {
            o.alpha = true;
        } else if is("limit") && left >= 2 {
            o.limit = Some((ctx.int(j + 1)?, ctx.int(j + 2)?));
            j += 2;
        } else if !readonly && is("store") && left >= 1 {
            o.store = Some(ctx.arg(j + 1));
            j += 1;
        } else if is("by") && left >= 1 {
            let p = ctx.arg(j + 1);
            o.by = Some(p);
            o.dontsort = !p.contains(&b'*');
            // The keys a pattern names are not known before it runs: it needs a user who
            // may read every key.
            if !o.dontsort && !reads_all_keys(ctx, readonly) {
                return Err(CmdError::new("ERR BY option of SORT denied due to insufficient ACL permissions."));
            }
            j += 1;
        } else if is("get") && left >= 1 {
            if !reads_all_keys(ctx, readonly) {
                return Err(CmdError::new("ERR GET option of SORT denied due to insufficient ACL permissions."));
            }
            o.get.push(ctx.arg(j + 1));
            j += 1;
        } else {
            return Err(CmdError::syntax());
        }
        j += 1;
    }
    Ok(o)
}

/// Redis's `lookupKeyByPattern`: `#` is the element itself; otherwise the first `*` is
/// replaced by the element, and a `->field` after it (non-empty) reads that hash field.
/// None when the pattern has no `*`, the key is missing or of the wrong type. The key it
/// looks up (none for `#` or a pattern without `*`) is passed to `looked_up` with whether
/// it was found, for the keyspace hits and misses Redis's `lookupKeyRead` counts.
pub fn lookup_by_pattern(
    h: &Handle,
    db: u32,
    pattern: &[u8],
    elem: &[u8],
    looked_up: &mut impl FnMut(&[u8], bool),
) -> Result<Option<Vec<u8>>, Error> {
    if pattern == b"#" {
        return Ok(Some(elem.to_vec()));
    }
    let Some(star) = pattern.iter().position(|&c| c == b'*') else { return Ok(None) };
    let after = &pattern[star + 1..];
    let arrow = after.windows(2).position(|w| w == b"->").filter(|&i| i + 2 < after.len());
    let (postfix, field) = match arrow {
        Some(i) => (&after[..i], Some(&after[i + 2..])),
        None => (after, None),
    };
    let mut key = Vec::with_capacity(pattern.len() + elem.len());
    key.extend_from_slice(&pattern[..star]);
    key.extend_from_slice(elem);
    key.extend_from_slice(postfix);
    let r = match field {
        Some(f) => h.coll_read(db, &key, Kind::Hash, |c| c.find(f)),
        None => h.get(db, &key).map(|v| v.map(Some)),
    };
    // Ok(None): the key is missing; Ok(Some(None)): a hash without the field.
    match r {
        Err(Error::WrongType) => {
            looked_up(&key, true);
            Ok(None)
        }
        Ok(v) => {
            looked_up(&key, v.is_some());
            Ok(v.flatten())
        }
        Err(e) => Err(e),
    }
}

/// C's `strtod` as SORT uses it: leading white space skipped, the rest must be a number
/// (up to a NUL byte, where C stops reading); an empty string is 0. None: not a number,
/// NaN, or out of range.
fn sort_score(v: &[u8]) -> Option<f64> {
    let v = v.split(|&c| c == 0).next().unwrap_or(b"");
    if v.is_empty() {
        return Some(0.0);
    }
    let t = v.iter().position(|c| !b" \t\n\x0b\x0c\r".contains(c)).map_or(&v[v.len()..], |i| &v[i..]);
    let (x, n) = strtod_prefix(t);
    if t.is_empty() || n != t.len() || x.is_nan() || strtod_erange(t, x) {
        return None;
    }
    Some(x)
}

/// The part of a string that SORT ALPHA compares: all of it with STORE (Redis compares
/// binary-safe then), else what strcoll sees in the C locale, the bytes up to the first NUL.
fn collated(s: &[u8], whole: bool) -> &[u8] {
    if whole {
        s
    } else {
        s.split(|&c| c == 0).next().unwrap_or(s)
    }
}

/// One element to sort: the element, its numeric weight, its ALPHA weight from BY.
struct Item {
    elem: Vec<u8>,
    score: f64,
    by: Option<Vec<u8>>,
}

/// The elements of the key to sort, of type `ty`: all of them, or for a list or sorted set
/// left in its order (`dontsort`) only the LIMIT window, read in the requested direction.
/// Returns the elements and whether they are already that window.
fn load(
    h: &Handle,
    db: u32,
    key: &[u8],
    ty: Option<Type>,
    o: &SortOpts<'_>,
    window: impl Fn(i64) -> (i64, i64),
) -> Result<(Vec<Vec<u8>>, bool), CmdError> {
    let kind = match ty {
        None => return Ok((Vec::new(), false)),
        Some(Type::List) => Kind::List,
        Some(Type::Set) => Kind::Set,
        Some(Type::ZSet) => Kind::ZSet,
        Some(_) => return Err(Error::WrongType.into()),
    };
    let r = h.coll_read(db, key, kind, |c| {
        let len = c.len() as i64;
        let mut out = Vec::new();
        if o.dontsort && kind != Kind::Set {
            let (start, end) = window(len);
            if end >= start {
                let (from, to) = if o.desc { (len - 1 - end, len - start) } else { (start, end + 1) };
                c.range(from as u64, to as u64, |k, _| {
                    out.push(k.to_vec());
                    true
                })?;
                if o.desc {
                    out.reverse();
                }
            }
            return Ok((out, true));
        }
        c.range(0, c.len(), |k, _| {
            out.push(k.to_vec());
            true
        })?;
        Ok((out, false))
    })?;
    Ok(r.unwrap_or_default())
}

/// Redis's LIMIT arithmetic: the window `start..=end` over `len` elements (empty when
/// end < start).
fn window(limit: Option<(i64, i64)>, len: i64) -> (i64, i64) {
    let (ls, lc) = limit.unwrap_or((0, -1));
    let start = ls.max(0).min(len);
    let count = lc.max(-1).min(len);
    let mut end = if count < 0 { len - 1 } else { start + count - 1 };
    let start = if start >= len {
        end = len - 2;
        len - 1
    } else {
        start
    };
    if end >= len {
        end = len - 1;
    }
    (start, end)
}

/// What SORT produces: the values to return or store (None: a GET that found nothing).
/// `ty`: the type of `key`, as the caller's lookup found it. Each key a BY or GET pattern
/// looks up is passed to `looked_up` with whether it was found ([`lookup_by_pattern`]).
pub fn op_sort(
    h: &Handle,
    db: u32,
    key: &[u8],
    ty: Option<Type>,
    o: &mut SortOpts<'_>,
    looked_up: &mut impl FnMut(&[u8], bool),
) -> Result<Vec<Option<Vec<u8>>>, CmdError> {
    // A set has no order of its own: with STORE, or for a script, it is sorted as strings,
    // so replicas and reloads agree (Redis's rule).
    if o.dontsort && (o.store.is_some() || o.from_script) && ty == Some(Type::Set) {
        o.dontsort = false;
        o.alpha = true;
        o.by = None;
    }
    let limit = o.limit;
    let (elems, windowed) = load(h, db, key, ty, o, |len| window(limit, len))?;
    let len = elems.len() as i64;
    let (start, end) = if windowed { (0, len - 1) } else { window(limit, len) };
    let mut items: Vec<Item> = elems.into_iter().map(|elem| Item { elem, score: 0.0, by: None }).collect();
    if !o.dontsort {
        let mut bad = false;
        for it in &mut items {
            let w = match o.by {
                Some(p) => match lookup_by_pattern(h, db, p, &it.elem, looked_up)? {
                    Some(w) => w,
                    None => continue,
                },
                None => it.elem.clone(),
            };
            if o.alpha {
                if o.by.is_some() {
                    it.by = Some(w);
                }
            } else {
                match sort_score(&w) {
                    Some(s) => it.score = s,
                    None => bad = true,
                }
            }
        }
        let (alpha, by, desc) = (o.alpha, o.by.is_some(), o.desc);
        let whole = o.store.is_some();
        let alpha_cmp = |a: &[u8], b: &[u8]| collated(a, whole).cmp(collated(b, whole));
        let cmp = |a: &Item, b: &Item| -> Ordering {
            let c = if !alpha {
                a.score.partial_cmp(&b.score).unwrap_or(Ordering::Equal).then_with(|| a.elem.cmp(&b.elem))
            } else if by {
                // A missing weight sorts first.
                match (&a.by, &b.by) {
                    (Some(x), Some(y)) => alpha_cmp(x, y),
                    (x, y) => x.is_some().cmp(&y.is_some()),
                }
            } else {
                alpha_cmp(&a.elem, &b.elem)
            };
            if desc {
                c.reverse()
            } else {
                c
            }
        };
        items.sort_by(cmp);
        if bad {
            return Err(CmdError::new("ERR One or more scores can't be converted into double"));
        }
    }
    let mut out = Vec::new();
    if end >= start {
        for it in &items[start as usize..=end as usize] {
            if o.get.is_empty() {
                out.push(Some(it.elem.clone()));
            }
            for p in &o.get {
                out.push(lookup_by_pattern(h, db, p, &it.elem, looked_up)?);
            }
        }
    }
    Ok(out)
}

/// Op: replaces `dst` with a list of `vals` (a missing GET stored as an empty string), or
/// deletes it when there are none; returns whether it existed. Delete then write: a reader
/// may see it missing between.
pub fn op_store_list(h: &mut Handle, db: u32, dst: &[u8], vals: &[Option<Vec<u8>>]) -> Result<bool, Error> {
    if vals.is_empty() {
        return Replace::delete(h, db, dst);
    }
    let replace = Replace::begin(h, db, dst)?;
    replace.write(h, |h| {
        h.coll_write(db, dst, Kind::List, true, |c| {
            for v in vals {
                c.insert_at(c.len(), v.as_deref().unwrap_or(b""))?;
            }
            Ok(())
        })
    })?;
    Ok(replace.existed)
}

fn sort_generic(ctx: &mut Ctx<'_>, readonly: bool) -> Result<(), CmdError> {
    let mut o = parse_opts(ctx, readonly)?;
    o.from_script = ctx.conn.in_script;
    let (db, key) = (ctx.conn.db, ctx.arg(1));
    // Redis looks the key up (a keyspace hit or miss) before it sorts, and each key its BY
    // and GET patterns name as it reads them.
    let ty = ctx.h.type_of(db, key)?;
    count_lookup(ctx, key, ty.is_some());
    let vals = op_sort(ctx.h, db, key, ty, &mut o, &mut |k, found| count_lookup(ctx, k, found))?;
    match o.store {
        Some(dst) => {
            let existed = op_store_list(ctx.h, db, dst, &vals)?;
            notify::notify_store(ctx, LIST, "sortstore", dst, !vals.is_empty(), existed);
            ctx.out.integer(vals.len() as i64);
        }
        None => {
            ctx.out.array(vals.len());
            for v in &vals {
                match v {
                    Some(v) => ctx.out.bulk(v),
                    None => ctx.out.null(),
                };
            }
        }
    }
    Ok(())
}

/// # Format
/// `SORT key [BY pattern] [LIMIT offset count] [GET pattern ...] [ASC|DESC] [ALPHA]
/// [STORE destination]` → the sorted elements (or GET values), or with STORE the number of
/// values stored as a list.
fn cmd_sort(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    sort_generic(ctx, false)
}

/// # Format
/// `SORT_RO key [BY pattern] [LIMIT offset count] [GET pattern ...] [ASC|DESC] [ALPHA]` →
/// as SORT, without STORE.
fn cmd_sort_ro(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    sort_generic(ctx, true)
}

/// SORT's keys as Redis's `sortGetKeys` finds them: the sorted key, and the last STORE
/// destination (the arguments of LIMIT, GET and BY are skipped, so `GET store` is no STORE).
pub fn key_positions(args: &[&[u8]]) -> Vec<usize> {
    let mut keys = vec![1];
    let mut store = None;
    let mut i = 2;
    while i < args.len() {
        let a = args[i];
        if a.eq_ignore_ascii_case(b"limit") {
            i += 2;
        } else if a.eq_ignore_ascii_case(b"get") || a.eq_ignore_ascii_case(b"by") {
            i += 1;
        } else if a.eq_ignore_ascii_case(b"store") && i + 1 < args.len() {
            store = Some(i + 1);
            i += 1;
        }
        i += 1;
    }
    keys.extend(store);
    keys
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scores_parse_as_strtod() {
        assert_eq!(sort_score(b"1.5"), Some(1.5));
        assert_eq!(sort_score(b"  -3"), Some(-3.0));
        assert_eq!(sort_score(b""), Some(0.0));
        assert_eq!(sort_score(b"inf"), Some(f64::INFINITY));
        assert_eq!(sort_score(b"1e400"), None);
        assert_eq!(sort_score(b"1e-400"), None);
        assert_eq!(sort_score(b"0e-400"), Some(0.0));
        assert_eq!(sort_score(b"nan"), None);
        assert_eq!(sort_score(b"1 "), None);
        assert_eq!(sort_score(b"   "), None);
        assert_eq!(sort_score(b"abc"), None);
        assert_eq!(sort_score(b"2\0junk"), Some(2.0));
        assert_eq!(sort_score(b"0x10"), Some(16.0));
        assert_eq!(sort_score(b" -0x1.8p1"), Some(-3.0));
        assert_eq!(sort_score(b"0x1p-2000"), None);
        assert_eq!(sort_score(b"0x"), None);
    }

    #[test]
    fn store_keys_as_redis_finds_them() {
        let k = |s: &str| key_positions(&s.split(' ').map(str::as_bytes).collect::<Vec<_>>());
        assert_eq!(k("sort abc store def"), [1, 3]);
        assert_eq!(k("sort abc store invalid store stillbad store def"), [1, 7]);
        assert_eq!(k("sort abc get store"), [1]);
        assert_eq!(k("sort abc limit store 1 store x"), [1, 6]);
        assert_eq!(k("sort abc store"), [1]);
    }

    #[test]
    fn limit_windows_follow_redis() {
        assert_eq!(window(None, 5), (0, 4));
        assert_eq!(window(Some((1, 2)), 5), (1, 2));
        assert_eq!(window(Some((-3, 2)), 5), (0, 1));
        assert_eq!(window(Some((10, 2)), 5), (4, 3));
        assert_eq!(window(Some((3, 100)), 5), (3, 4));
        assert_eq!(window(Some((0, 0)), 5), (0, -1));
        assert_eq!(window(None, 0), (-1, -2));
    }
}

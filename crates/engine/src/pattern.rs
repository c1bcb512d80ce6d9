//! Redis's glob matching (`stringmatchlen`): `*`, `?`, `[abc]`, `[^a-z]`, `\x`.

/// Whether `s` matches the glob `pat` (Redis semantics; `nocase` folds ASCII case).
pub fn glob_match(pat: &[u8], s: &[u8], nocase: bool) -> bool {
    // Redis's matcher loops while both pattern and string have bytes left, so an empty string
    // matches only the empty pattern: not `*` (KEYS and SCAN skip matching for a pattern of
    // exactly `*`, and so do their callers here), nor `**`; and PSUBSCRIBE * gets nothing
    // published to the empty channel.
    if s.is_empty() {
        return pat.is_empty();
    }
    // Redis's recursive matcher gives up past 1000 nested `*` (each run of stars recurses
    // once), so a pattern with more star runs than that never matches there: the same here.
    if star_runs(pat) > 1000 {
        return false;
    }
    glob(pat, s, nocase, 0)
}

/// Runs of `*` outside escapes and classes.
fn star_runs(pat: &[u8]) -> usize {
    let (mut n, mut i, mut prev_star) = (0, 0, false);
    while i < pat.len() {
        match pat[i] {
            b'*' => {
                if !prev_star {
                    n += 1;
                }
                prev_star = true;
                i += 1;
                continue;
            }
            b'\\' => i += 1,
            b'[' => {
                while i + 1 < pat.len() && pat[i + 1] != b']' {
                    i += if pat[i + 1] == b'\\' { 2 } else { 1 };
                }
                i += 1;
            }
            _ => {}
        }
        prev_star = false;
        i += 1;
    }
    n
}

fn eq(a: u8, b: u8, nocase: bool) -> bool {
    if nocase {
        a.eq_ignore_ascii_case(&b)
    } else {
        a == b
    }
}

/// Matches one pattern element (not `*`) at the start of `pat` against byte `c`. Returns
/// whether it matched and the element's length in the pattern.
fn one(pat: &[u8], c: u8, nocase: bool) -> (bool, usize) {
    match pat[0] {
        b'?' => (true, 1),
        b'\\' if pat.len() >= 2 => (eq(pat[1], c, nocase), 2),
        b'[' => {
            let mut i = 1;
            let not = pat.get(1) == Some(&b'^');
            if not {
                i += 1;
            }
            let mut matched = false;
            while i < pat.len() && pat[i] != b']' {
                if pat[i] == b'\\' && i + 1 < pat.len() {
                    i += 1;
                    matched |= pat[i] == c;
                } else if i + 2 < pat.len() && pat[i + 1] == b'-' {
                    // Redis compares a range's bytes as C `char`, signed on x86 and ARM
                    // Linux alike: `[a-\xff]` is `[\xff-a]`, which covers 0x00..=0x61.
                    // It orders the ends before folding case, so `[Z-a]` matches nothing
                    // under NOCASE.
                    let (mut lo, mut hi) = (pat[i] as i8, pat[i + 2] as i8);
                    if lo > hi {
                        std::mem::swap(&mut lo, &mut hi);
                    }
                    let fold = |b: i8| if nocase { (b as u8).to_ascii_lowercase() as i8 } else { b };
                    let (lo, hi, x) = (fold(lo), fold(hi), fold(c as i8));
                    matched |= x >= lo && x <= hi;
                    i += 2;
                } else {
                    matched |= eq(pat[i], c, nocase);
                }
                i += 1;
            }
            // An unterminated class runs to the end of the pattern, as in Redis.
            let len = (i + 1).min(pat.len());
            (matched != not, len)
        }
        p => (eq(p, c, nocase), 1),
    }
}

/// Iterative matching with backtracking to the last `*` only: O(len(pat) × len(s)), so no
/// pattern can make the server spin (Redis guards its recursive matcher for the same reason).
fn glob(pat: &[u8], s: &[u8], nocase: bool, _depth: u32) -> bool {
    let (mut p, mut i) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while i < s.len() {
        if p < pat.len() && pat[p] == b'*' {
            while p < pat.len() && pat[p] == b'*' {
                p += 1;
            }
            star = Some((p, i));
            continue;
        }
        if p < pat.len() {
            let (ok, len) = one(&pat[p..], s[i], nocase);
            if ok {
                p += len;
                i += 1;
                continue;
            }
        }
        match star {
            Some((sp, si)) => {
                p = sp;
                i = si + 1;
                star = Some((sp, si + 1));
            }
            None => return false,
        }
    }
    while p < pat.len() && pat[p] == b'*' {
        p += 1;
    }
    p == pat.len()
}

#[cfg(test)]
mod tests {
    use super::glob_match;

    #[test]
    fn more_than_1000_star_runs_never_match_as_in_redis() {
        let key = vec![b'a'; 50_000];
        assert!(!glob_match(&b"*?".repeat(50_000), &key, false));
        assert!(glob_match(&b"*?".repeat(1000), &key, false));
        assert!(!glob_match(&b"*a".repeat(1001), &key, false));
        // Stars in a class or escaped are not runs; consecutive stars are one run.
        assert!(glob_match(&[b"[*]".repeat(1001), b"*".repeat(3000)].concat(), &b"*".repeat(1001), false));
        assert!(glob_match(&b"\\*".repeat(1001), &b"*".repeat(1001), false));
    }

    #[test]
    fn redis_glob_cases() {
        let t = |p: &str, s: &str| glob_match(p.as_bytes(), s.as_bytes(), false);
        // An empty string matches only the empty pattern (checked against redis-server
        // 7.0.15: KEYS ** and PSUBSCRIBE * leave out an empty key or channel).
        assert!(t("", ""));
        assert!(!t("*", ""));
        assert!(!t("**", ""));
        assert!(!t("?", ""));
        assert!(t("a*", "a"));
        assert!(t("a**", "a"));
        assert!(t("*", "anything"));
        assert!(t("h?llo", "hello"));
        assert!(!t("h?llo", "hllo"));
        assert!(t("h*llo", "heeeello"));
        assert!(t("h[ae]llo", "hallo"));
        assert!(!t("h[ae]llo", "hillo"));
        assert!(t("h[^e]llo", "hallo"));
        assert!(!t("h[^e]llo", "hello"));
        assert!(t("h[a-b]llo", "hbllo"));
        assert!(t("key:*", "key:0000001"));
        assert!(!t("key:*", "kex:1"));
        assert!(t("a\\*b", "a*b"));
        assert!(!t("a\\*b", "axb"));
        assert!(t("*a*", "bab"));
        assert!(glob_match(b"HELLO", b"hello", true));
        // Many stars must not take exponential time.
        let p = "*a".repeat(30) + "b";
        assert!(!t(&p, &"a".repeat(60)));
    }

    /// Each case checked against redis-server 7.0.15 with KEYS over the keys below.
    #[test]
    fn range_ends_compare_as_signed_chars_as_in_redis() {
        let keys: [&[u8]; 7] = [b"\xe9t", b"at", b"zt", b"At", b"Zt", b"\x00t", b"\x80t"];
        let matching = |pat: &[u8], nocase: bool| -> Vec<&[u8]> {
            keys.iter().copied().filter(|k| glob_match(pat, k, nocase)).collect()
        };
        assert_eq!(matching(b"[a-\xff]t", false), [&b"at"[..], b"At", b"Zt", b"\x00t"]);
        assert_eq!(matching(b"[\x80-\xff]t", false), [&b"\xe9t"[..], b"\x80t"]);
        assert_eq!(matching(b"[\x00-\xe9]t", false), [&b"\xe9t"[..], b"\x00t"]);
        assert_eq!(matching(b"[^a-\xff]t", false), [&b"\xe9t"[..], b"zt", b"\x80t"]);
        assert_eq!(matching(b"[\xe9-b]t", false), [&b"\xe9t"[..], b"at", b"At", b"Zt", b"\x00t"]);
        assert_eq!(matching(b"[A-\xe9]t", false), [&b"\xe9t"[..], b"At", b"\x00t"]);
        assert_eq!(matching(b"[Z-a]t", false), [&b"at"[..], b"Zt"]);
        // Ends are ordered before case is folded: 'Z'..'a' folds to 'z'..'a', which is empty.
        assert_eq!(matching(b"[Z-a]t", true), Vec::<&[u8]>::new());
        assert_eq!(matching(b"[a-Z]t", true), Vec::<&[u8]>::new());
        assert_eq!(matching(b"[A-z]t", true), [&b"at"[..], b"zt", b"At", b"Zt"]);
    }
}

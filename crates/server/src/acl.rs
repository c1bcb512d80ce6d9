//! Access control lists as Redis 7.0 has them (`acl.c`): users, their rules, the check a
//! restricted user's commands pass, and the ACL log.
//!
//! ```text
//!   Acl (in Shared):  name -> Arc<User>, the default user, the log
//!   User:             RwLock<Rules>  (flags, password hashes, selectors)
//!                     open: AtomicBool  (some selector allows every command, key, channel)
//!   connection:       Arc<User>: a command pays one relaxed load of `open` (the default
//!                     user's is true unless changed); only then are its command, keys and
//!                     channels checked against the rules, under the read lock
//! ```
//!
//! The workers share the users: ACL SETUSER replaces a user's rules under its write lock and
//! stores `open` before it replies, so the next command of any worker sees the change. A
//! deleted user's clients are closed (the one that deleted it after its reply).
//!
//! One difference from Redis 7.0: ACL GETUSER / LIST describe a selector's command rules
//! from the rules as given (later ones replacing earlier ones about the same command or
//! category, rules that changed nothing left out), where Redis 7.0 rebuilds them from the
//! command bitmap by a best-fit search over the categories. Both give back the same
//! permissions; they differ in wording, e.g. Redis 7.0 would describe `-@all +@stream` on a
//! server without stream commands as `-@all`.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use sha2::{Digest, Sha256};

use crate::command::{table, NO_AUTH};

/// Key permissions of a pattern, and those a key spec needs.
pub const PERM_R: u8 = 1;
pub const PERM_W: u8 = 2;
const PERM_ALL: u8 = PERM_R | PERM_W;

/// ACL categories, in Redis's order (ACL CAT, COMMAND INFO).
pub const CATEGORIES: &[&str] = &[
    "keyspace",
    "read",
    "write",
    "set",
    "sortedset",
    "list",
    "hash",
    "string",
    "bitmap",
    "hyperloglog",
    "geo",
    "stream",
    "pubsub",
    "admin",
    "fast",
    "slow",
    "blocking",
    "dangerous",
    "connection",
    "transaction",
    "scripting",
];

/// Each table entry's categories as a bit mask (bit j: `CATEGORIES[j]`).
fn category_masks() -> &'static [u32] {
    static MASKS: OnceLock<Vec<u32>> = OnceLock::new();
    MASKS.get_or_init(|| {
        (0..table().len())
            .map(|i| {
                crate::families::server::categories(i)
                    .iter()
                    .filter_map(|c| CATEGORIES.iter().position(|x| x == c))
                    .fold(0, |m, j| m | 1 << j)
            })
            .collect()
    })
}

/// The category mask of `name` (any case), if it is one.
fn category(name: &[u8]) -> Option<u32> {
    CATEGORIES.iter().position(|c| c.as_bytes().eq_ignore_ascii_case(name)).map(|j| 1 << j)
}

/// Whether table entry `i` is in category `name`.
pub fn in_category(i: usize, name: &str) -> bool {
    category(name.as_bytes()).is_some_and(|m| category_masks()[i] & m != 0)
}

/// Why an ACL rule was refused (Redis's errno values), with Redis's text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RuleError {
    Syntax,
    Unknown,
    KeyAfterAll,
    ChannelAfterAll,
    NoSuchPassword,
    BadHash,
    FirstArgOfSubcommand,
}

impl RuleError {
    pub fn text(self) -> &'static str {
        match self {
            RuleError::Syntax => "Syntax error",
            RuleError::Unknown => "Unknown command or category name in ACL",
            RuleError::KeyAfterAll => "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns",
            RuleError::ChannelAfterAll => "Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does not have any effect. Try 'resetchannels' to start with an empty list of channels",
            RuleError::NoSuchPassword => "The password you are trying to remove from the user does not exist",
            RuleError::BadHash => "The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters",
            RuleError::FirstArgOfSubcommand => "Allowing first-arg of a subcommand is not supported",
        }
    }
}

/// Redis's `ACLStringHasSpaces`: a space or a NUL.
pub fn has_spaces(s: &[u8]) -> bool {
    s.iter().any(|&c| c == b' ' || c == 0)
}

/// A key pattern and what it allows (`~` both, `%R~` reads, `%W~` writes).
#[derive(Clone, Debug, PartialEq, Eq)]
struct KeyPattern {
    perms: u8,
    pattern: Vec<u8>,
}

impl KeyPattern {
    fn describe(&self) -> String {
        let prefix = match self.perms {
            PERM_R => "%R~",
            PERM_W => "%W~",
            _ => "~",
        };
        format!("{prefix}{}", String::from_utf8_lossy(&self.pattern))
    }
}

/// A set of permissions (Redis's `aclSelector`): commands, keys, channels. A user has a root
/// selector and any number of added ones; a command runs if one of them allows all of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Selector {
    allkeys: bool,
    allchannels: bool,
    /// Every command, without a look at the bitmap (cleared by any rule that takes one away).
    allcommands: bool,
    /// One bit per table entry, then the "future commands" bit `+@all` sets.
    bits: Vec<u64>,
    /// Allowed first arguments of otherwise refused commands (`+select|0`).
    firstargs: BTreeMap<usize, Vec<Vec<u8>>>,
    keys: Vec<KeyPattern>,
    channels: Vec<Vec<u8>>,
    /// The command rules as ACL GETUSER shows them (see the module notes).
    rules: Vec<String>,
}

impl Selector {
    /// No permissions; all channels if `acl-pubsub-default` is `allchannels`.
    pub fn new(allchannels: bool) -> Selector {
        Selector {
            allkeys: false,
            allchannels,
            allcommands: false,
            bits: vec![0; table().len() / 64 + 1],
            firstargs: BTreeMap::new(),
            keys: Vec::new(),
            channels: Vec::new(),
            rules: Vec::new(),
        }
    }

    fn bit(&self, i: usize) -> bool {
        self.bits[i / 64] & 1 << (i % 64) != 0
    }

    fn set_bit(&mut self, i: usize, on: bool) {
        if on {
            self.bits[i / 64] |= 1 << (i % 64);
        } else {
            self.bits[i / 64] &= !(1 << (i % 64));
            self.allcommands = false;
        }
    }

    /// Whether `+@all` (or `allcommands`) started the rules: future commands are allowed.
    fn future(&self) -> bool {
        self.bit(table().len())
    }

    /// Every command, key and channel.
    fn is_open(&self) -> bool {
        self.allcommands && self.allkeys && self.allchannels
    }

    /// Redis's `ACLChangeSelectorPerm`: a command and all its subcommands.
    fn change(&mut self, i: usize, allow: bool) {
        self.set_bit(i, allow);
        self.firstargs.remove(&i);
        for &s in table().subcommands(i) {
            self.set_bit(s, allow);
        }
    }

    /// Applies one selector rule (Redis's `ACLSetSelector`).
    pub fn apply(&mut self, op: &[u8]) -> Result<(), RuleError> {
        let is = |w: &str| op.eq_ignore_ascii_case(w.as_bytes());
        if op.is_empty() {
            return Err(RuleError::Syntax);
        }
        if is("allkeys") || op == b"~*" {
            self.allkeys = true;
            self.keys.clear();
        } else if is("resetkeys") {
            self.allkeys = false;
            self.keys.clear();
        } else if is("allchannels") || op == b"&*" {
            self.allchannels = true;
            self.channels.clear();
        } else if is("resetchannels") {
            self.allchannels = false;
            self.channels.clear();
        } else if is("allcommands") || is("+@all") {
            self.bits.iter_mut().for_each(|w| *w = u64::MAX);
            self.allcommands = true;
            self.firstargs.clear();
            self.rules.clear();
        } else if is("nocommands") || is("-@all") {
            self.bits.iter_mut().for_each(|w| *w = 0);
            self.allcommands = false;
            self.firstargs.clear();
            self.rules.clear();
        } else if op[0] == b'~' || op[0] == b'%' {
            self.add_key_pattern(op)?;
        } else if op[0] == b'&' {
            if self.allchannels {
                return Err(RuleError::ChannelAfterAll);
            }
            if has_spaces(&op[1..]) {
                return Err(RuleError::Syntax);
            }
            if !self.channels.iter().any(|c| c[..] == op[1..]) {
                self.channels.push(op[1..].to_vec());
            }
        } else if (op[0] == b'+' || op[0] == b'-') && op.get(1) == Some(&b'@') {
            let mask = category(&op[2..]).ok_or(RuleError::Unknown)?;
            let allow = op[0] == b'+';
            for (i, m) in category_masks().iter().enumerate() {
                if m & mask != 0 {
                    self.change(i, allow);
                }
            }
            let rule = String::from_utf8_lossy(op).to_ascii_lowercase();
            self.rules.retain(|r| r[1..] != rule[1..]);
            self.rules.push(rule);
        } else if op[0] == b'+' || op[0] == b'-' {
            self.command_rule(op)?;
        } else {
            return Err(RuleError::Syntax);
        }
        Ok(())
    }

    fn add_key_pattern(&mut self, op: &[u8]) -> Result<(), RuleError> {
        if self.allkeys {
            return Err(RuleError::KeyAfterAll);
        }
        let (mut perms, mut offset) = (0, 1);
        if op[0] == b'%' {
            let mut ok = true;
            while offset < op.len() {
                match op[offset].to_ascii_uppercase() {
                    b'R' if perms & PERM_R == 0 => perms |= PERM_R,
                    b'W' if perms & PERM_W == 0 => perms |= PERM_W,
                    b'~' => {
                        offset += 1;
                        break;
                    }
                    _ => {
                        ok = false;
                        break;
                    }
                }
                offset += 1;
            }
            if perms == 0 || !ok {
                return Err(RuleError::Syntax);
            }
        } else {
            perms = PERM_ALL;
        }
        let pattern = &op[offset.min(op.len())..];
        if has_spaces(pattern) {
            return Err(RuleError::Syntax);
        }
        match self.keys.iter_mut().find(|k| k.pattern == pattern) {
            Some(k) => k.perms |= perms,
            None => self.keys.push(KeyPattern { perms, pattern: pattern.to_vec() }),
        }
        self.allkeys = false;
        Ok(())
    }

    /// `+cmd`, `-cmd`, `+cmd|sub`, `-cmd|sub` and `+cmd|first-arg`.
    fn command_rule(&mut self, op: &[u8]) -> Result<(), RuleError> {
        let allow = op[0] == b'+';
        let name = String::from_utf8_lossy(&op[1..]).to_ascii_lowercase();
        let t = table();
        let before = (self.bits.clone(), self.firstargs.clone());
        let target;
        match name.rsplit_once('|') {
            Some((parent, sub)) if allow => {
                let p = t.lookup_full(parent).ok_or(RuleError::Unknown)?;
                if t.is_subcommand(p) {
                    return Err(RuleError::FirstArgOfSubcommand);
                }
                if sub.is_empty() {
                    return Err(RuleError::Syntax);
                }
                if !t.subcommands(p).is_empty() {
                    let i = t.lookup_full(&name).ok_or(RuleError::Unknown)?;
                    self.change(i, true);
                    target = name.clone();
                } else {
                    // A first argument, as given (Redis compares it without case).
                    let arg = op[1 + parent.len() + 1..].to_vec();
                    let list = self.firstargs.entry(p).or_default();
                    if !list.iter().any(|a| a.eq_ignore_ascii_case(&arg)) {
                        list.push(arg.clone());
                    }
                    // Moved to the end: a category rule since may have cleared it.
                    let rule = format!("+{parent}|{}", String::from_utf8_lossy(&arg));
                    if !self.bit(p) {
                        self.rules.retain(|r| *r != rule);
                        self.rules.push(rule);
                    }
                    return Ok(());
                }
            }
            _ => {
                // `-cmd|sub` names a subcommand; `-cmd|x|y` and unknown names are errors.
                let i = t.lookup_full(&name).filter(|_| name.matches('|').count() <= 1).ok_or(RuleError::Unknown)?;
                self.change(i, allow);
                target = name.clone();
            }
        }
        if (self.bits.clone(), self.firstargs.clone()) != before {
            let nested = format!("{target}|");
            self.rules.retain(|r| r[1..] != target && !r[1..].starts_with(&nested));
            self.rules.push(format!("{}{target}", if allow { '+' } else { '-' }));
        }
        Ok(())
    }

    /// The command rules (`+@all -debug ...`).
    pub fn describe_commands(&self) -> String {
        let mut s = String::from(if self.future() { "+@all" } else { "-@all" });
        for r in &self.rules {
            s.push(' ');
            s.push_str(r);
        }
        s
    }

    /// The key patterns as ACL GETUSER shows them (`~*` for all keys).
    pub fn describe_keys(&self) -> String {
        if self.allkeys {
            return "~*".into();
        }
        self.keys.iter().map(KeyPattern::describe).collect::<Vec<_>>().join(" ")
    }

    /// The channel patterns as ACL GETUSER shows them (`&*` for all channels).
    pub fn describe_channels(&self) -> String {
        if self.allchannels {
            return "&*".into();
        }
        self.channels.iter().map(|c| format!("&{}", String::from_utf8_lossy(c))).collect::<Vec<_>>().join(" ")
    }

    /// Keys, channels and commands as ACL LIST shows them (Redis's `ACLDescribeSelector`).
    fn describe(&self) -> String {
        let mut s = String::new();
        if self.allkeys {
            s.push_str("~* ");
        } else {
            for k in &self.keys {
                s.push_str(&k.describe());
                s.push(' ');
            }
        }
        if self.allchannels {
            s.push_str("&* ");
        } else {
            s.push_str("resetchannels ");
            for c in &self.channels {
                s.push('&');
                s.push_str(&String::from_utf8_lossy(c));
                s.push(' ');
            }
        }
        s.push_str(&self.describe_commands());
        s
    }

    /// Redis's `ACLSelectorCheckCmd`: Ok, or the refusal with the argument it is about.
    fn check(&self, i: usize, args: &[&[u8]]) -> Result<(), Denied> {
        let t = table();
        if !self.allcommands && t.specs[i].flags & NO_AUTH == 0 && !self.bit(i) {
            let at = if t.is_subcommand(i) { 2 } else { 1 };
            let allowed = args.len() >= 2
                && self
                    .firstargs
                    .get(&i)
                    .is_some_and(|l| l.iter().any(|a| args.get(at).is_some_and(|x| x.eq_ignore_ascii_case(a))));
            if !allowed {
                return Err(Denied::Command);
            }
        }
        if !self.allkeys {
            for (pos, need) in crate::families::server::acl_keys(i, args) {
                if !self.key_allowed(args[pos], need) {
                    return Err(Denied::Key(pos));
                }
            }
        }
        if !self.allchannels {
            for (pos, pattern) in channels(i, args) {
                if !self.channel_allowed(args[pos], pattern) {
                    return Err(Denied::Channel(pos));
                }
            }
        }
        Ok(())
    }

    /// Redis's `ACLSelectorCheckKey`: a pattern with the permissions `need` matches the key.
    fn key_allowed(&self, key: &[u8], need: u8) -> bool {
        self.allkeys
            || self.keys.iter().any(|k| k.perms & need == need && larder_engine::glob_match(&k.pattern, key, false))
    }

    /// Redis's `ACLCheckChannelAgainstList`: a channel matches the patterns; a PSUBSCRIBE
    /// pattern must be one of them literally.
    fn channel_allowed(&self, channel: &[u8], pattern: bool) -> bool {
        self.allchannels
            || self.channels.iter().any(|c| {
                if pattern {
                    c[..] == *channel
                } else {
                    larder_engine::glob_match(c, channel, false)
                }
            })
    }

    /// Redis's `ACLSelectorHasUnrestrictedKeyAccess`: `~*`-like access with `need`.
    fn all_keys_with(&self, need: u8) -> bool {
        self.allkeys || self.keys.iter().any(|k| k.perms & need == need && k.pattern == b"*")
    }
}

/// The channels a command names that ACLs check (publish and subscribe, not unsubscribe):
/// argument positions, and whether each is a PSUBSCRIBE pattern.
fn channels(i: usize, args: &[&[u8]]) -> Vec<(usize, bool)> {
    match table().specs[i].name {
        "publish" | "spublish" => vec![(1, false)],
        "subscribe" | "ssubscribe" => (1..args.len()).map(|p| (p, false)).collect(),
        "psubscribe" => (1..args.len()).map(|p| (p, true)).collect(),
        _ => Vec::new(),
    }
}

/// Why a command was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Denied {
    Command,
    /// The argument position of the key or channel.
    Key(usize),
    Channel(usize),
}

impl Denied {
    /// Redis's ACL_DENIED_* order, for picking the error of several selectors.
    fn rank(self) -> (u8, usize) {
        match self {
            Denied::Command => (1, 0),
            Denied::Key(p) => (2, p),
            Denied::Channel(p) => (4, p),
        }
    }

    /// Why a command a script called was refused, after "The user executing the script "
    /// (Redis's `getAclErrorMessage`).
    pub fn script_reason(self) -> &'static str {
        match self {
            Denied::Command => "can't run this command or subcommand",
            Denied::Key(_) => "can't access at least one of the keys mentioned in the command arguments",
            Denied::Channel(_) => "can't publish to the channel mentioned in the command",
        }
    }

    /// The error a refused command gets (Redis's `processCommand`).
    pub fn error(self, cmd: usize) -> String {
        match self {
            Denied::Command => {
                format!("NOPERM this user has no permissions to run the '{}' command", table().specs[cmd].name)
            }
            Denied::Key(_) => "NOPERM this user has no permissions to access one of the keys used as arguments".into(),
            Denied::Channel(_) => {
                "NOPERM this user has no permissions to access one of the channels used as arguments".into()
            }
        }
    }

    /// The reason inside EXEC, when the rules changed after the command was queued.
    pub fn exec_error(self) -> String {
        let reason = match self {
            Denied::Command => "no permission to execute the command or subcommand",
            Denied::Key(_) => "no permission to touch the specified keys",
            Denied::Channel(_) => "no permission to access one of the channels used as arguments",
        };
        format!("NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call. This command is no longer allowed for the following reason: {reason}")
    }
}

/// Whether a new user's selectors start with all channels (`acl-pubsub-default`).
pub fn pubsub_default_all(config: &crate::Config) -> bool {
    config.get("acl-pubsub-default").as_deref() == Some("allchannels")
}

/// A user's flags, passwords and selectors.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rules {
    pub on: bool,
    pub nopass: bool,
    /// `sanitize-payload` (Some(true)) or `skip-sanitize-payload` (Some(false)); a new user
    /// has neither.
    pub sanitize: Option<bool>,
    /// SHA-256 hashes, in lowercase hex.
    pub passwords: Vec<String>,
    /// The root selector first.
    pub selectors: Vec<Selector>,
}

impl Rules {
    /// A new user: off, no passwords, no permissions.
    pub fn new(allchannels: bool) -> Rules {
        Rules {
            on: false,
            nopass: false,
            sanitize: None,
            passwords: Vec::new(),
            selectors: vec![Selector::new(allchannels)],
        }
    }

    /// The default user: on, no password, everything.
    pub fn everything() -> Rules {
        let mut r = Rules::new(false);
        for op in ["+@all", "~*", "&*", "on", "nopass"] {
            let _ = r.apply(op.as_bytes(), false);
        }
        r
    }

    /// Applies one rule (Redis's `ACLSetUser`); `allchannels` is `acl-pubsub-default`.
    pub fn apply(&mut self, op: &[u8], allchannels: bool) -> Result<(), RuleError> {
        let is = |w: &str| op.eq_ignore_ascii_case(w.as_bytes());
        if op.is_empty() {
        } else if is("on") {
            self.on = true;
        } else if is("off") {
            self.on = false;
        } else if is("skip-sanitize-payload") {
            self.sanitize = Some(false);
        } else if is("sanitize-payload") {
            self.sanitize = Some(true);
        } else if is("nopass") {
            self.nopass = true;
            self.passwords.clear();
        } else if is("resetpass") {
            self.nopass = false;
            self.passwords.clear();
        } else if op[0] == b'>' || op[0] == b'#' {
            let hash = if op[0] == b'>' { hash_password(&op[1..]) } else { checked_hash(&op[1..])? };
            if !self.passwords.contains(&hash) {
                self.passwords.push(hash);
            }
            self.nopass = false;
        } else if op[0] == b'<' || op[0] == b'!' {
            let hash = if op[0] == b'<' { hash_password(&op[1..]) } else { checked_hash(&op[1..])? };
            let at = self.passwords.iter().position(|p| *p == hash).ok_or(RuleError::NoSuchPassword)?;
            self.passwords.remove(at);
        } else if op[0] == b'(' && op[op.len() - 1] == b')' {
            let mut s = Selector::new(allchannels);
            let inner = &op[1..op.len() - 1];
            for part in split_args(inner).ok_or(RuleError::Syntax)? {
                s.apply(&part)?;
            }
            self.selectors.push(s);
        } else if is("clearselectors") {
            self.selectors.truncate(1);
        } else if is("reset") {
            let root = &mut self.selectors[0];
            for op in ["resetkeys", "resetchannels", "-@all"] {
                let _ = root.apply(op.as_bytes());
            }
            if allchannels {
                let _ = root.apply(b"allchannels");
            }
            self.nopass = false;
            self.passwords.clear();
            self.on = false;
            self.sanitize = Some(true);
            self.selectors.truncate(1);
        } else {
            self.selectors[0].apply(op)?;
        }
        Ok(())
    }

    /// Redis's `ACLDescribeUser` (what follows `user <name> ` in ACL LIST).
    pub fn describe(&self) -> String {
        let mut s = String::from(if self.on { "on " } else { "off " });
        if self.nopass {
            s.push_str("nopass ");
        }
        match self.sanitize {
            Some(false) => s.push_str("skip-sanitize-payload "),
            Some(true) => s.push_str("sanitize-payload "),
            None => {}
        }
        for p in &self.passwords {
            s.push('#');
            s.push_str(p);
            s.push(' ');
        }
        s.push_str(&self.selectors[0].describe());
        for sel in &self.selectors[1..] {
            s.push_str(&format!(" ({})", sel.describe()));
        }
        s
    }

    /// The flags ACL GETUSER lists.
    pub fn flags(&self) -> Vec<&'static str> {
        let mut f = vec![if self.on { "on" } else { "off" }];
        if self.nopass {
            f.push("nopass");
        }
        match self.sanitize {
            Some(false) => f.push("skip-sanitize-payload"),
            Some(true) => f.push("sanitize-payload"),
            None => {}
        }
        f
    }

    /// Whether `password` logs in (the user must be on).
    fn accepts(&self, password: &[u8]) -> bool {
        if !self.on {
            return false;
        }
        if self.nopass {
            return true;
        }
        let h = hash_password(password);
        // Compare every byte of every hash, whatever the outcome (Redis's
        // `time_independent_strcmp`).
        self.passwords
            .iter()
            .fold(false, |found, p| found | (p.bytes().zip(h.bytes()).fold(0, |d, (a, b)| d | (a ^ b)) == 0))
    }

    /// Redis's `ACLCheckAllUserCommandPerm`.
    pub fn check(&self, i: usize, args: &[&[u8]]) -> Result<(), Denied> {
        let mut worst = Denied::Command;
        for s in &self.selectors {
            match s.check(i, args) {
                Ok(()) => return Ok(()),
                Err(d) if d.rank() > worst.rank() => worst = d,
                Err(_) => {}
            }
        }
        Err(worst)
    }

    /// Redis's `ACLUserCheckCmdWithUnrestrictedKeyAccess`: a selector that allows the
    /// command also reads (`need`) every key (SORT's BY and GET patterns).
    pub fn check_all_keys(&self, i: usize, args: &[&[u8]], need: u8) -> bool {
        self.selectors.iter().any(|s| s.check(i, args).is_ok() && s.all_keys_with(need))
    }

    /// Whether a selector allows every channel.
    fn all_channels(&self) -> bool {
        self.selectors.iter().any(|s| s.allchannels)
    }

    fn channel_patterns(&self) -> Vec<&[u8]> {
        self.selectors.iter().flat_map(|s| s.channels.iter().map(|c| &c[..])).collect()
    }
}

/// The SHA-256 of a password, in lowercase hex (Redis's `ACLHashPassword`).
pub fn hash_password(p: &[u8]) -> String {
    Sha256::digest(p).iter().map(|b| format!("{b:02x}")).collect()
}

/// A `#hash` rule's hash: 64 lowercase hex digits.
fn checked_hash(h: &[u8]) -> Result<String, RuleError> {
    if h.len() != 64 || !h.iter().all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(c)) {
        return Err(RuleError::BadHash);
    }
    Ok(String::from_utf8_lossy(h).into_owned())
}

/// Redis's `sdssplitargs` as a selector's rules need it: words separated by spaces, with
/// double or single quotes (None: unbalanced quotes).
fn split_args(s: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < s.len() {
        while i < s.len() && s[i].is_ascii_whitespace() {
            i += 1;
        }
        if i == s.len() {
            break;
        }
        let mut word = Vec::new();
        while i < s.len() && !s[i].is_ascii_whitespace() {
            if s[i] == b'"' || s[i] == b'\'' {
                let q = s[i];
                let end = s[i + 1..].iter().position(|&c| c == q)? + i + 1;
                word.extend_from_slice(&s[i + 1..end]);
                i = end + 1;
            } else {
                word.push(s[i]);
                i += 1;
            }
        }
        out.push(word);
    }
    Some(out)
}

/// Redis's `ACLMergeSelectorArguments`: a selector spread over several arguments
/// (`(~key`, `+get)`) is joined into one; Err(argument) for an unclosed one.
pub fn merge_selector_args(args: &[&[u8]]) -> Result<Vec<Vec<u8>>, Vec<u8>> {
    let mut out = Vec::new();
    let mut open: Option<(Vec<u8>, usize)> = None;
    for (j, &a) in args.iter().enumerate() {
        if let Some((sel, _)) = &mut open {
            sel.push(b' ');
            sel.extend_from_slice(a);
            if a.last() == Some(&b')') {
                out.push(open.take().map(|(s, _)| s).unwrap_or_default());
            }
            continue;
        }
        if a.first() == Some(&b'(') && a.last() != Some(&b')') {
            open = Some((a.to_vec(), j));
            continue;
        }
        out.push(a.to_vec());
    }
    match open {
        Some((_, j)) => Err(args[j].to_vec()),
        None => Ok(out),
    }
}

/// One user. Clients hold it by `Arc`; its rules change in place (ACL SETUSER).
#[derive(Debug)]
pub struct User {
    pub name: Vec<u8>,
    /// Some selector allows every command, key and channel: the user's commands are not
    /// checked. The one load a command pays for ACLs.
    open: AtomicBool,
    /// On with `nopass`: a new connection of the default user is authenticated.
    free: AtomicBool,
    rules: RwLock<Rules>,
}

impl User {
    pub fn new(name: &[u8], rules: Rules) -> User {
        let u = User {
            name: name.to_vec(),
            open: AtomicBool::new(false),
            free: AtomicBool::new(false),
            rules: RwLock::new(Rules::new(false)),
        };
        u.set_rules(rules);
        u
    }

    /// Whether every command, key and channel is allowed (no check needed).
    #[inline(always)]
    pub fn is_open(&self) -> bool {
        self.open.load(Ordering::Relaxed)
    }

    /// On, with no password needed.
    pub fn is_free(&self) -> bool {
        self.free.load(Ordering::Relaxed)
    }

    pub fn rules(&self) -> std::sync::RwLockReadGuard<'_, Rules> {
        self.rules.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Replaces the rules; every worker's next command sees them.
    pub fn set_rules(&self, r: Rules) {
        let open = r.selectors.iter().any(Selector::is_open);
        let free = r.on && r.nopass;
        let mut w = self.rules.write().unwrap_or_else(|e| e.into_inner());
        *w = r;
        self.open.store(open, Ordering::SeqCst);
        self.free.store(free, Ordering::SeqCst);
    }

    pub fn name_str(&self) -> String {
        String::from_utf8_lossy(&self.name).into_owned()
    }
}

/// What a log entry is about (Redis's ACL_DENIED_*).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    Command,
    Key,
    Channel,
    Auth,
}

impl Reason {
    fn name(self) -> &'static str {
        match self {
            Reason::Command => "command",
            Reason::Key => "key",
            Reason::Channel => "channel",
            Reason::Auth => "auth",
        }
    }
}

/// Where the refusal happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Context {
    Toplevel,
    Multi,
    Lua,
}

impl Context {
    fn name(self) -> &'static str {
        match self {
            Context::Toplevel => "toplevel",
            Context::Multi => "multi",
            Context::Lua => "lua",
        }
    }
}

/// One ACL LOG entry.
#[derive(Clone, Debug)]
pub struct LogEntry {
    pub count: u64,
    pub reason: Reason,
    pub context: Context,
    pub object: Vec<u8>,
    pub username: Vec<u8>,
    pub ms: u64,
    pub client_info: String,
}

impl LogEntry {
    /// The fields ACL LOG shows, in order (the age as a double).
    pub fn fields(&self, now_ms: u64) -> [(&'static str, LogValue<'_>); 7] {
        [
            ("count", LogValue::Int(self.count as i64)),
            ("reason", LogValue::Text(self.reason.name().as_bytes())),
            ("context", LogValue::Text(self.context.name().as_bytes())),
            ("object", LogValue::Text(&self.object)),
            ("username", LogValue::Text(&self.username)),
            ("age-seconds", LogValue::Double(now_ms.saturating_sub(self.ms) as f64 / 1000.0)),
            ("client-info", LogValue::Text(self.client_info.as_bytes())),
        ]
    }
}

pub enum LogValue<'a> {
    Int(i64),
    Text(&'a [u8]),
    Double(f64),
}

/// The users and the log, shared by every worker.
pub struct Acl {
    users: RwLock<BTreeMap<Vec<u8>, Arc<User>>>,
    /// Always there; ACL LOAD changes its rules, not the object (clients keep it).
    pub default: Arc<User>,
    log: Mutex<VecDeque<LogEntry>>,
}

impl Default for Acl {
    fn default() -> Acl {
        let default = Arc::new(User::new(b"default", Rules::everything()));
        let mut users = BTreeMap::new();
        users.insert(b"default".to_vec(), default.clone());
        Acl { users: RwLock::new(users), default, log: Mutex::new(VecDeque::new()) }
    }
}

impl Acl {
    pub fn get(&self, name: &[u8]) -> Option<Arc<User>> {
        self.users.read().unwrap_or_else(|e| e.into_inner()).get(name).cloned()
    }

    /// Every user, in name order (ACL USERS / LIST).
    pub fn all(&self) -> Vec<Arc<User>> {
        self.users.read().unwrap_or_else(|e| e.into_inner()).values().cloned().collect()
    }

    /// The user these credentials log in as, if they do (Redis's `ACLCheckUserCredentials`).
    pub fn login(&self, name: &[u8], password: &[u8]) -> Option<Arc<User>> {
        self.get(name).filter(|u| u.rules().accepts(password))
    }

    /// ACL SETUSER: applies `ops` to a copy of the user (a new one if absent) and, if all of
    /// them were valid, makes it the user's rules. Returns the old and new rules of an
    /// existing user (to close subscribers that lost channels), or the error text.
    pub fn set_user(
        &self,
        name: &[u8],
        ops: &[&[u8]],
        allchannels: bool,
    ) -> Result<Option<(Rules, Arc<User>)>, String> {
        let merged = merge_selector_args(ops).map_err(|a| {
            format!("Unmatched parenthesis in acl selector starting at '{}'.", String::from_utf8_lossy(&a))
        })?;
        // One writer at a time, so two SETUSERs of one user do not lose either's rules.
        let mut users = self.users.write().unwrap_or_else(|e| e.into_inner());
        let existing = users.get(name).cloned();
        let mut rules = existing.as_ref().map_or_else(|| Rules::new(allchannels), |u| u.rules().clone());
        for op in &merged {
            rules.apply(op, allchannels).map_err(|e| {
                format!("Error in ACL SETUSER modifier '{}': {}", String::from_utf8_lossy(op), e.text())
            })?;
        }
        Ok(match existing {
            Some(u) => {
                let old = u.rules().clone();
                u.set_rules(rules);
                Some((old, u))
            }
            None => {
                users.insert(name.to_vec(), Arc::new(User::new(name, rules)));
                None
            }
        })
    }

    /// ACL DELUSER of one user (not `default`): the user, if it existed.
    pub fn delete(&self, name: &[u8]) -> Option<Arc<User>> {
        self.users.write().unwrap_or_else(|e| e.into_inner()).remove(name)
    }

    /// `requirepass`: the default user's password (Redis's `ACLUpdateDefaultUserPassword`).
    pub fn set_default_password(&self, password: &[u8]) {
        let mut r = self.default.rules().clone();
        let _ = r.apply(b"resetpass", false);
        if password.is_empty() {
            let _ = r.apply(b"nopass", false);
        } else {
            let mut op = b">".to_vec();
            op.extend_from_slice(password);
            let _ = r.apply(&op, false);
        }
        self.default.set_rules(r);
    }

    /// Replaces every user at once (ACL LOAD, startup): `lines` are `user <name> <rules>...`
    /// lines. On any error nothing changes and the errors are returned, as Redis words them.
    /// Returns the users replaced (their clients must be closed).
    pub fn load(&self, lines: &[(String, usize, String)], allchannels: bool) -> Result<Vec<Arc<User>>, String> {
        let mut errors = String::new();
        let mut fresh: BTreeMap<Vec<u8>, Rules> = BTreeMap::new();
        for (file, n, line) in lines {
            let argv: Vec<&str> =
                line.trim_matches([' ', '\t', '\r', '\n']).split(' ').filter(|w| !w.is_empty()).collect();
            if argv.is_empty() {
                continue;
            }
            if argv[0] != "user" || argv.len() < 2 {
                errors.push_str(&format!("{file}:{n} should start with user keyword followed by the username. "));
                continue;
            }
            let name = argv[1].as_bytes();
            if fresh.contains_key(name) {
                errors.push_str(&format!("WARNING: Duplicate user '{}' found on line {n}. ", argv[1]));
                continue;
            }
            let ops: Vec<&[u8]> = argv[2..].iter().map(|a| a.as_bytes()).collect();
            let Ok(merged) = merge_selector_args(&ops) else {
                errors.push_str(&format!("{file}:{n}: Unmatched parenthesis in selector definition."));
                continue;
            };
            let mut rules = Rules::new(allchannels);
            let mut syntax = false;
            for op in &merged {
                if let Err(e) = rules.apply(op, allchannels) {
                    if e == RuleError::Unknown {
                        errors.push_str(&format!(
                            "{file}:{n}: Error in applying operation '{}': {}. ",
                            String::from_utf8_lossy(op),
                            e.text()
                        ));
                    } else if !syntax {
                        errors.push_str(&format!("{file}:{n}: {}. ", e.text()));
                        syntax = true;
                    }
                }
            }
            fresh.insert(name.to_vec(), rules);
        }
        if !errors.is_empty() {
            errors.push_str("WARNING: ACL errors detected, no change to the previously active ACL rules was performed");
            return Err(errors);
        }
        let mut users = self.users.write().unwrap_or_else(|e| e.into_inner());
        let old: Vec<Arc<User>> = users.values().filter(|u| !Arc::ptr_eq(u, &self.default)).cloned().collect();
        let default_rules = fresh.remove(&b"default"[..]).unwrap_or_else(Rules::everything);
        self.default.set_rules(default_rules);
        users.clear();
        users.insert(b"default".to_vec(), self.default.clone());
        for (name, rules) in fresh {
            users.insert(name.clone(), Arc::new(User::new(&name, rules)));
        }
        Ok(old)
    }

    /// ACL SAVE's text: one `user` line per user.
    pub fn save_text(&self) -> String {
        self.all().iter().map(|u| format!("user {} {}\n", u.name_str(), u.rules().describe())).collect()
    }

    /// Adds an entry to the ACL log, or counts it on a like one of the last ten within a
    /// minute (Redis's `addACLLogEntry`).
    pub fn log(&self, mut e: LogEntry, max_len: usize) {
        let mut log = self.log.lock().unwrap_or_else(|e| e.into_inner());
        let like = log.iter().take(10).position(|x| {
            x.reason == e.reason
                && x.context == e.context
                && x.ms.abs_diff(e.ms) <= 60_000
                && x.object == e.object
                && x.username == e.username
        });
        if let Some(at) = like {
            if let Some(mut x) = log.remove(at) {
                x.count += 1;
                x.ms = e.ms;
                x.client_info = std::mem::take(&mut e.client_info);
                log.push_front(x);
            }
            return;
        }
        log.push_front(e);
        log.truncate(max_len);
    }

    /// The newest `count` entries.
    pub fn log_entries(&self, count: usize) -> Vec<LogEntry> {
        self.log.lock().unwrap_or_else(|e| e.into_inner()).iter().take(count).cloned().collect()
    }

    pub fn log_reset(&self) {
        self.log.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }
}

/// Whether a subscriber with these subscriptions would lose some under the new rules, as
/// Redis's `ACLKillPubsubClientsIfNeeded` decides: not if the new rules allow all channels
/// or keep every old channel pattern; else if one of its channels no longer matches (a
/// pattern subscription must be a pattern of the new rules literally).
pub fn loses_channels<'a>(old: &Rules, new: &'a Rules) -> Option<impl Fn(&[u8], bool) -> bool + 'a> {
    if new.all_channels() {
        return None;
    }
    let upcoming = new.channel_patterns();
    let kept = !old.all_channels() && old.channel_patterns().iter().all(|c| upcoming.contains(c));
    if kept {
        return None;
    }
    Some(move |channel: &[u8], pattern: bool| {
        !upcoming.iter().any(|c| if pattern { *c == channel } else { larder_engine::glob_match(c, channel, false) })
    })
}

/// The users a server starts with: the default user with `requirepass`, then the config
/// file's `user` lines, then the `aclfile` (Redis's `ACLLoadUsersAtStartup`; both at once
/// is refused, as Redis refuses it).
pub fn startup(config: &crate::Config) -> Result<Acl, String> {
    let acl = Acl::default();
    if let Some(pw) = config.get("requirepass").filter(|p| !p.is_empty()) {
        acl.set_default_password(pw.as_bytes());
    }
    let allchannels = pubsub_default_all(config);
    let file = config.get("aclfile").unwrap_or_default();
    if !file.is_empty() && !config.users.is_empty() {
        return Err("Configuring Redis with users defined in redis.conf and at the same setting an ACL file path is invalid. This setup is very likely to lead to configuration errors and security holes, please define either an ACL file or declare users directly in your redis.conf, but not both.".into());
    }
    let mut seen: Vec<&str> = Vec::new();
    for line in &config.users {
        let argv: Vec<&str> = line.split_whitespace().collect();
        let Some((&name, ops)) = argv.split_first() else { return Err("user: a user name is needed".into()) };
        if seen.contains(&name) {
            return Err(format!("user {name}: Duplicate user found. A user can only be defined once in config files"));
        }
        seen.push(name);
        let ops: Vec<&[u8]> = ops.iter().map(|o| o.as_bytes()).collect();
        let merged = merge_selector_args(&ops).map_err(|_| format!("user {name}: Unmatched parenthesis"))?;
        let mut rules = match acl.get(name.as_bytes()) {
            Some(u) => u.rules().clone(),
            None => Rules::new(allchannels),
        };
        let _ = rules.apply(b"reset", allchannels);
        for op in &merged {
            rules.apply(op, allchannels).map_err(|e| {
                format!(
                    "Error loading ACL rule '{}' for the user named '{name}': {}",
                    String::from_utf8_lossy(op),
                    e.text()
                )
            })?;
        }
        match acl.get(name.as_bytes()) {
            Some(u) => u.set_rules(rules),
            None => {
                acl.users
                    .write()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(name.as_bytes().to_vec(), Arc::new(User::new(name.as_bytes(), rules)));
            }
        }
    }
    if !file.is_empty() {
        load_file(&acl, &file, allchannels)
            .map_err(|e| format!("Aborting Redis startup because of ACL errors: {e}"))?;
    }
    Ok(acl)
}

/// ACL LOAD: every user from the file at `path`, or the errors (nothing changed then).
/// Returns the users replaced.
pub fn load_file(acl: &Acl, path: &str, allchannels: bool) -> Result<Vec<Arc<User>>, String> {
    let text = std::fs::read(path).map_err(|e| {
        let why = e.to_string();
        let why = why.split(" (os error").next().unwrap_or(&why).to_string();
        format!("Error loading ACLs, opening file '{path}': {why}")
    })?;
    let text = String::from_utf8_lossy(&text);
    let lines: Vec<(String, usize, String)> =
        text.split('\n').enumerate().map(|(n, l)| (path.to_string(), n + 1, l.to_string())).collect();
    acl.load(&lines, allchannels)
}

/// ACL SAVE: writes every user to `path` (a temporary file renamed over it).
pub fn save_file(acl: &Acl, path: &str) -> std::io::Result<()> {
    let tmp = format!("{path}.tmp-{}-{}", std::process::id(), larder_engine::now_ms());
    let r = std::fs::write(&tmp, acl.save_text()).and_then(|_| std::fs::rename(&tmp, path));
    if r.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(ops: &str) -> Result<Rules, RuleError> {
        let mut r = Rules::new(false);
        let args: Vec<&[u8]> = ops.split(' ').filter(|w| !w.is_empty()).map(str::as_bytes).collect();
        for op in merge_selector_args(&args).map_err(|_| RuleError::Syntax)? {
            r.apply(&op, false)?;
        }
        Ok(r)
    }

    fn idx(name: &str) -> usize {
        table().lookup_full(name).unwrap()
    }

    fn check(r: &Rules, args: &[&str]) -> Result<(), Denied> {
        let a: Vec<&[u8]> = args.iter().map(|s| s.as_bytes()).collect();
        r.check(table().lookup_argv(&a).unwrap(), &a)
    }

    #[test]
    fn a_new_user_is_off_and_may_do_nothing() {
        let r = Rules::new(false);
        assert_eq!(r.describe(), "off resetchannels -@all");
        assert_eq!(check(&r, &["get", "k"]), Err(Denied::Command));
        assert_eq!(check(&r, &["auth", "a", "b"]), Ok(()), "no-auth commands are always allowed");
        assert_eq!(Rules::everything().describe(), "on nopass ~* &* +@all");
        assert!(Rules::everything().selectors[0].is_open());
    }

    #[test]
    fn commands_categories_and_subcommands() {
        let r = rules("+@all -@string +incr").unwrap();
        assert_eq!(check(&r, &["incr", "k"]), Err(Denied::Key(1)), "the command passes, the key does not");
        let r = rules("+@all -@string +incr ~*").unwrap();
        assert_eq!(check(&r, &["set", "k", "v"]), Err(Denied::Command));
        assert_eq!(check(&r, &["incr", "k"]), Ok(()));
        assert_eq!(check(&r, &["sadd", "k", "m"]), Ok(()));
        assert_eq!(r.selectors[0].describe_commands(), "+@all -@string +incr");
        let r = rules("-@all +client|id ~*").unwrap();
        assert_eq!(check(&r, &["client", "id"]), Ok(()));
        assert_eq!(check(&r, &["client", "kill", "x"]), Err(Denied::Command));
        let r = rules("+@all -client|kill").unwrap();
        assert_eq!(r.selectors[0].describe_commands(), "+@all -client|kill");
        let r = rules("-@all +memory|doctor +memory").unwrap();
        assert_eq!(r.selectors[0].describe_commands(), "-@all +memory");
        let r = rules("-@all +memory|doctor +@all +client|id").unwrap();
        assert_eq!(r.selectors[0].describe_commands(), "+@all");
        // A first argument of a command without subcommands.
        let r = rules("-@all +select|0").unwrap();
        assert_eq!(check(&r, &["select", "0"]), Ok(()));
        assert_eq!(check(&r, &["select", "1"]), Err(Denied::Command));
        assert_eq!(r.selectors[0].describe_commands(), "-@all +select|0");
        for (bad, why) in [
            ("+config|get|appendonly", RuleError::FirstArgOfSubcommand),
            ("+config|asdf", RuleError::Unknown),
            ("-config|asdf", RuleError::Unknown),
            ("+get|key1|key2", RuleError::Unknown),
            ("-get|key1|key2", RuleError::Unknown),
            ("+nosuchcommand", RuleError::Unknown),
            ("+@nosuchcategory", RuleError::Unknown),
            ("+select|", RuleError::Syntax),
            ("bogus", RuleError::Syntax),
        ] {
            assert_eq!(rules(bad).err(), Some(why), "{bad}");
        }
    }

    #[test]
    fn every_category_describes_back_as_itself() {
        for c in CATEGORIES {
            let r = rules(&format!("+@all -@{c}")).unwrap();
            assert_eq!(r.selectors[0].describe_commands(), format!("+@all -@{c}"));
            let r = rules(&format!("-@all +@{c}")).unwrap();
            assert_eq!(r.selectors[0].describe_commands(), format!("-@all +@{c}"));
        }
    }

    #[test]
    fn descriptions_replay_to_the_same_permissions() {
        for ops in [
            "+@all -@string +incr -debug +debug|digest",
            "-@all +@string -incr +acl +debug|digest +debug|segfault",
            "-@all +@read -@hash +hget +@hash -@read",
            "+@all -client +client|id +client|setname -@admin +client|kill",
            "-@all +select|0 +select|1 +@fast -ping",
        ] {
            let r = rules(ops).unwrap();
            let again = rules(&r.selectors[0].describe_commands()).unwrap();
            assert_eq!(again.selectors[0].bits, r.selectors[0].bits, "{ops}");
        }
    }

    #[test]
    fn random_rules_describe_back_to_the_same_permissions() {
        // ACL SAVE / LOAD and CONFIG REWRITE round-trip through the description: whatever
        // the rules, it must give back the same commands and first arguments.
        let ops = [
            "+@all",
            "-@all",
            "+@string",
            "-@string",
            "+@read",
            "-@write",
            "+@admin",
            "-@fast",
            "+@slow",
            "-@dangerous",
            "+get",
            "-get",
            "+set",
            "-set",
            "+client",
            "-client",
            "+client|id",
            "-client|kill",
            "+config|get",
            "-config",
            "+select|0",
            "+select|1",
            "+debug|object",
            "-debug",
            "+memory|doctor",
            "+memory",
            "-memory|stats",
            "+acl",
            "-acl|setuser",
            "nocommands",
            "allcommands",
        ];
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..2000 {
            let mut s = Selector::new(false);
            let n = (x % 8) as usize + 1;
            let mut given = Vec::new();
            for _ in 0..n {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let op = ops[(x % ops.len() as u64) as usize];
                given.push(op);
                s.apply(op.as_bytes()).unwrap();
            }
            let text = format!("{} (from {})", s.describe_commands(), given.join(" "));
            let mut again = Selector::new(false);
            for op in s.describe_commands().split(' ') {
                again.apply(op.as_bytes()).unwrap();
            }
            assert_eq!(again.bits, s.bits, "{text}");
            let allowed = |s: &Selector| -> Vec<(usize, Vec<Vec<u8>>)> {
                let on = s.firstargs.iter().filter(|(i, _)| !s.bit(**i));
                on.map(|(i, a)| {
                    (*i, a.iter().cloned().collect::<std::collections::BTreeSet<_>>().into_iter().collect())
                })
                .collect()
            };
            assert_eq!(allowed(&again), allowed(&s), "{text}");
        }
    }

    #[test]
    fn key_patterns_with_read_and_write_permissions() {
        let r = rules("+@all %R~read* %W~write* %RW~rw*").unwrap();
        assert_eq!(r.selectors[0].describe_keys(), "%R~read* %W~write* ~rw*");
        assert_eq!(check(&r, &["get", "read1"]), Ok(()));
        assert_eq!(check(&r, &["get", "write1"]), Err(Denied::Key(1)));
        assert_eq!(check(&r, &["lpush", "write1", "x"]), Ok(()));
        assert_eq!(check(&r, &["lpush", "read1", "x"]), Err(Denied::Key(1)));
        assert_eq!(check(&r, &["copy", "read", "write"]), Ok(()));
        assert_eq!(check(&r, &["copy", "write", "read"]), Err(Denied::Key(1)));
        // Existence and length commands need no particular permission.
        assert_eq!(check(&r, &["exists", "write"]), Ok(()));
        assert_eq!(check(&r, &["exists", "nothing"]), Err(Denied::Key(1)));
        let r = rules("%R~foo %W~foo %RW~bar").unwrap();
        assert_eq!(r.selectors[0].describe_keys(), "~foo ~bar");
        for bad in ["%~", "%", "%X~a", "%RR~a"] {
            assert_eq!(rules(bad).err(), Some(RuleError::Syntax), "{bad}");
        }
        assert_eq!(rules("~* ~foo").err(), Some(RuleError::KeyAfterAll));
        assert_eq!(rules("&* &foo").err(), Some(RuleError::ChannelAfterAll));
    }

    #[test]
    fn channels_match_as_patterns_and_psubscribe_patterns_literally() {
        let r = rules("+@all resetchannels &foo:1 &bar:*").unwrap();
        assert_eq!(check(&r, &["publish", "bar:2", "m"]), Ok(()));
        assert_eq!(check(&r, &["publish", "zap", "m"]), Err(Denied::Channel(1)));
        assert_eq!(check(&r, &["subscribe", "foo:1", "zap"]), Err(Denied::Channel(2)));
        assert_eq!(check(&r, &["psubscribe", "bar:*"]), Ok(()));
        assert_eq!(check(&r, &["psubscribe", "bar:baz"]), Err(Denied::Channel(1)));
        assert_eq!(check(&r, &["unsubscribe", "zap"]), Ok(()));
    }

    #[test]
    fn selectors_are_alternatives_and_the_last_refusal_is_reported() {
        let r = rules("on nopass +mget ~key (+mget ~key ~otherkey)").unwrap();
        assert_eq!(r.selectors.len(), 2);
        assert_eq!(check(&r, &["get", "key"]), Err(Denied::Command));
        assert_eq!(check(&r, &["mget", "otherkey", "someotherkey"]), Err(Denied::Key(2)));
        assert_eq!(check(&r, &["mget", "key", "otherkey"]), Ok(()));
        assert_eq!(r.describe(), "on nopass ~key resetchannels -@all +mget (~key ~otherkey resetchannels -@all +mget)");
        assert_eq!(rules("(this-is-invalid)").err(), Some(RuleError::Syntax));
        let merged = merge_selector_args(&[b"(~a", b"+get", b")", b"x"]).unwrap();
        assert_eq!(merged, vec![b"(~a +get )".to_vec(), b"x".to_vec()]);
        assert_eq!(merge_selector_args(&[b"("]), Err(b"(".to_vec()));
        let r = rules("(~a) (~b) clearselectors").unwrap();
        assert_eq!(r.selectors.len(), 1);
    }

    #[test]
    fn passwords_are_sha256_hashes() {
        assert_eq!(hash_password(b"passwd4"), "34344e4d60c2b6d639b7bd22e18f2b0b91bc34bf0ac5f9952744435093cfb4e6");
        let r = rules("on >passwd1 >passwd2").unwrap();
        assert!(r.accepts(b"passwd1") && r.accepts(b"passwd2") && !r.accepts(b"passwd3"));
        let r = rules("on >passwd1 <passwd1").unwrap();
        assert!(!r.accepts(b"passwd1"));
        assert_eq!(rules("<nope").err(), Some(RuleError::NoSuchPassword));
        assert_eq!(rules("#34344e4d").err(), Some(RuleError::BadHash));
        let r = rules("off >a").unwrap();
        assert!(!r.accepts(b"a"), "a disabled user cannot log in");
        let r = rules("on nopass").unwrap();
        assert!(r.accepts(b"anything"));
    }

    #[test]
    fn every_command_has_the_categories_of_redis_7_0_15() {
        // Redis's ACL CAT of a few categories, for commands Larder has (the whole table is
        // compared by tests/acl.rs against redis-server 7.0.15's lists).
        assert!(in_category(idx("set"), "string") && in_category(idx("set"), "write"));
        assert!(!in_category(idx("set"), "keyspace"));
        assert!(in_category(idx("multi"), "transaction"));
    }
}

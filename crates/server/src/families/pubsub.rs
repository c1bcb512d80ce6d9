//! Pub/sub: SUBSCRIBE UNSUBSCRIBE PSUBSCRIBE PUNSUBSCRIBE SSUBSCRIBE SUNSUBSCRIBE PUBLISH
//! SPUBLISH and PUBSUB with its subcommands, as Redis 7.0 (Larder is not a cluster, so shard
//! channels are simply a third namespace, as in a standalone Redis).
//!
//! ```text
//!   Registry (Shared, one RwLock):  channel -> [subscriber], pattern -> [subscriber],
//!                                   shard channel -> [subscriber]
//!   subscriber = (client id, worker, slot)
//!   PUBLISH on worker A:  read-lock the registry, encode the message once, append
//!                         Msg::Push to the mailbox of each subscriber's worker (one lock
//!                         and one wake per worker), unlock
//!   worker B, woken:      moves each message into the connection's output buffer, applies
//!                         the pubsub output-buffer limit, writes
//! ```
//!
//! Each connection keeps its own subscriptions in [`Subs`] (for UNSUBSCRIBE without
//! arguments, RESET and close); the shared [`ClientInfo`](crate::ClientInfo) counters
//! mirror them for CLIENT LIST, PING and INFO. A message published by a client to a channel
//! it is itself subscribed to (RESP3) is written straight into its own output, before the
//! PUBLISH reply, as Redis does.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::{Arc, RwLock};

use larder_resp::Protocol;

use crate::command::{CmdError, Ctx, Handler, ReplyMode, Spec, FAST, LOADING, MAY_REPLICATE, NOSCRIPT, PUBSUB, STALE};
use crate::families::server::reply_help;
use crate::{Msg, Shared};

const fn spec(name: &'static str, arity: i32, flags: u32, summary: &'static str, handler: Handler) -> Spec {
    Spec { name, arity, flags, first_key: 0, last_key: 0, step: 0, group: "pubsub", summary, handler }
}

const SUB: u32 = PUBSUB | NOSCRIPT | LOADING | STALE;

pub const COMMANDS: &[Spec] = &[
    spec("subscribe", -2, SUB, "Listens for messages published to channels.", cmd_subscribe),
    spec("unsubscribe", -1, SUB, "Stops listening to messages posted to channels.", cmd_unsubscribe),
    spec(
        "psubscribe",
        -2,
        SUB,
        "Listens for messages published to channels that match one or more patterns.",
        cmd_psubscribe,
    ),
    spec(
        "punsubscribe",
        -1,
        SUB,
        "Stops listening to messages published to channels that match one or more patterns.",
        cmd_punsubscribe,
    ),
    Spec {
        name: "ssubscribe",
        arity: -2,
        flags: SUB,
        first_key: 1,
        last_key: -1,
        step: 1,
        group: "pubsub",
        summary: "Listens for messages published to shard channels.",
        handler: cmd_ssubscribe,
    },
    Spec {
        name: "sunsubscribe",
        arity: -1,
        flags: SUB,
        first_key: 1,
        last_key: -1,
        step: 1,
        group: "pubsub",
        summary: "Stops listening to messages posted to shard channels.",
        handler: cmd_sunsubscribe,
    },
    spec("publish", 3, PUBSUB | LOADING | STALE | FAST | MAY_REPLICATE, "Posts a message to a channel.", cmd_publish),
    Spec {
        name: "spublish",
        arity: 3,
        flags: PUBSUB | LOADING | STALE | FAST | MAY_REPLICATE,
        first_key: 1,
        last_key: 1,
        step: 1,
        group: "pubsub",
        summary: "Post a message to a shard channel",
        handler: cmd_spublish,
    },
    spec("pubsub", -2, 0, "A container for Pub/Sub commands.", crate::families::connection::cmd_container),
];

const PS: u32 = PUBSUB | LOADING | STALE;

pub const SUBCOMMANDS: &[Spec] = &[
    spec("pubsub|channels", -2, PS, "Returns the active channels.", cmd_channels),
    spec("pubsub|numsub", -2, PS, "Returns a count of subscribers to channels.", cmd_numsub),
    spec("pubsub|numpat", 2, PS, "Returns a count of unique pattern subscriptions.", cmd_numpat),
    spec("pubsub|shardchannels", -2, PS, "Returns the active shard channels.", cmd_shardchannels),
    spec("pubsub|shardnumsub", -2, PS, "Returns the count of subscribers of shard channels.", cmd_shardnumsub),
    spec("pubsub|help", 2, LOADING | STALE, "Returns helpful text about the different subcommands.", cmd_help),
];

/// The three subscription namespaces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Channel,
    Pattern,
    Shard,
}

impl Kind {
    fn subscribe_word(self) -> &'static [u8] {
        match self {
            Kind::Channel => b"subscribe",
            Kind::Pattern => b"psubscribe",
            Kind::Shard => b"ssubscribe",
        }
    }
    fn unsubscribe_word(self) -> &'static [u8] {
        match self {
            Kind::Channel => b"unsubscribe",
            Kind::Pattern => b"punsubscribe",
            Kind::Shard => b"sunsubscribe",
        }
    }
}

/// Where a subscriber lives: enough for any worker to route a message to it, and its
/// shared info (to count what is on its way to it).
#[derive(Clone, Debug)]
pub struct Subscriber {
    pub client: u64,
    pub worker: u32,
    pub slot: u32,
    pub info: Arc<crate::ClientInfo>,
}

#[derive(Default)]
struct Maps {
    channels: HashMap<Vec<u8>, Vec<Subscriber>>,
    /// Patterns in the order they were first subscribed (PUBLISH matches each).
    patterns: Vec<(Vec<u8>, Vec<Subscriber>)>,
    shard: HashMap<Vec<u8>, Vec<Subscriber>>,
}

/// Every client's subscriptions, by channel and by pattern.
#[derive(Default)]
pub struct Registry {
    maps: RwLock<Maps>,
}

impl Registry {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, Maps> {
        self.maps.read().unwrap_or_else(|e| e.into_inner())
    }
    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Maps> {
        self.maps.write().unwrap_or_else(|e| e.into_inner())
    }

    fn add(&self, kind: Kind, name: &[u8], s: Subscriber) {
        let mut m = self.write();
        match kind {
            Kind::Channel => m.channels.entry(name.to_vec()).or_default().push(s),
            Kind::Shard => m.shard.entry(name.to_vec()).or_default().push(s),
            Kind::Pattern => match m.patterns.iter_mut().find(|(p, _)| p == name) {
                Some((_, v)) => v.push(s),
                None => m.patterns.push((name.to_vec(), vec![s])),
            },
        }
    }

    /// Calls `f` with each subscription of every client (ACL SETUSER closes the subscribers
    /// that lost a channel).
    pub fn each_subscription(&self, mut f: impl FnMut(&Arc<crate::ClientInfo>, Kind, &[u8])) {
        let m = self.read();
        for (kind, map) in [(Kind::Channel, &m.channels), (Kind::Shard, &m.shard)] {
            for (name, subs) in map.iter() {
                subs.iter().for_each(|s| f(&s.info, kind, name));
            }
        }
        for (name, subs) in &m.patterns {
            subs.iter().for_each(|s| f(&s.info, Kind::Pattern, name));
        }
    }

    fn remove(&self, kind: Kind, name: &[u8], client: u64) {
        let mut m = self.write();
        let drop_from = |v: &mut Vec<Subscriber>| v.retain(|s| s.client != client);
        match kind {
            Kind::Channel | Kind::Shard => {
                let map = if kind == Kind::Channel { &mut m.channels } else { &mut m.shard };
                if let Some(v) = map.get_mut(name) {
                    drop_from(v);
                    if v.is_empty() {
                        map.remove(name);
                    }
                }
            }
            Kind::Pattern => {
                if let Some(i) = m.patterns.iter().position(|(p, _)| p == name) {
                    drop_from(&mut m.patterns[i].1);
                    if m.patterns[i].1.is_empty() {
                        m.patterns.remove(i);
                    }
                }
            }
        }
    }

    /// Channels with at least one subscriber (INFO `pubsub_channels`).
    pub fn channel_count(&self) -> usize {
        self.read().channels.len()
    }
    /// Distinct patterns with at least one subscriber (PUBSUB NUMPAT, INFO `pubsub_patterns`).
    pub fn pattern_count(&self) -> usize {
        self.read().patterns.len()
    }
    /// Shard channels with at least one subscriber (INFO `pubsubshard_channels`).
    pub fn shard_count(&self) -> usize {
        self.read().shard.len()
    }
}

/// One connection's subscriptions.
#[derive(Debug, Default)]
pub struct Subs {
    channels: HashSet<Vec<u8>>,
    /// In the order they were subscribed: PUNSUBSCRIBE without arguments goes through them
    /// in that order, as Redis (a list per client there; its channels are a hash table).
    patterns: Vec<Vec<u8>>,
    shard: HashSet<Vec<u8>>,
}

impl Subs {
    /// Adds a subscription; false if it was there.
    fn insert(&mut self, kind: Kind, name: &[u8]) -> bool {
        match kind {
            Kind::Channel => self.channels.insert(name.to_vec()),
            Kind::Shard => self.shard.insert(name.to_vec()),
            Kind::Pattern if self.patterns.iter().any(|p| p == name) => false,
            Kind::Pattern => {
                self.patterns.push(name.to_vec());
                true
            }
        }
    }
    /// Drops a subscription; false if there was none.
    fn remove(&mut self, kind: Kind, name: &[u8]) -> bool {
        match kind {
            Kind::Channel => self.channels.remove(name),
            Kind::Shard => self.shard.remove(name),
            Kind::Pattern => match self.patterns.iter().position(|p| p == name) {
                Some(i) => {
                    self.patterns.remove(i);
                    true
                }
                None => false,
            },
        }
    }
    /// The names of one kind (patterns in subscription order).
    fn names(&self, kind: Kind) -> Vec<Vec<u8>> {
        match kind {
            Kind::Channel => self.channels.iter().cloned().collect(),
            Kind::Shard => self.shard.iter().cloned().collect(),
            Kind::Pattern => self.patterns.clone(),
        }
    }
    /// The count a (un)subscribe reply carries: channels and patterns together, or shard
    /// channels alone (Redis's `clientSubscriptionsCount` / `clientShardSubscriptionsCount`).
    fn count_for(&self, kind: Kind) -> usize {
        match kind {
            Kind::Channel | Kind::Pattern => self.channels.len() + self.patterns.len(),
            Kind::Shard => self.shard.len(),
        }
    }
}

fn me(ctx: &Ctx<'_>) -> Subscriber {
    Subscriber { client: ctx.conn.id, worker: ctx.worker as u32, slot: ctx.conn.slot, info: ctx.conn.info.clone() }
}

/// Mirrors the connection's counts into its shared info; drops the state at zero (which
/// takes a RESP2 client out of the subscribed context).
fn sync_counts(ctx: &mut Ctx<'_>) {
    let info = &ctx.conn.info;
    let (c, p, s) = ctx.conn.subs.as_ref().map_or((0, 0, 0), |s| (s.channels.len(), s.patterns.len(), s.shard.len()));
    info.sub.store(c as u64, Ordering::Relaxed);
    info.psub.store(p as u64, Ordering::Relaxed);
    info.ssub.store(s as u64, Ordering::Relaxed);
    if c + p + s == 0 {
        ctx.conn.subs = None;
    }
}

/// The reply to one (un)subscription: `[kind, name or null, count]`, a push in RESP3.
fn confirm(ctx: &mut Ctx<'_>, word: &[u8], name: Option<&[u8]>, count: usize) {
    ctx.out.push(3).bulk(word);
    match name {
        Some(n) => ctx.out.bulk(n),
        None => ctx.out.null(),
    };
    ctx.out.integer(count as i64);
    // Pub/sub replies are pushes: CLIENT REPLY OFF / SKIP do not silence them.
    ctx.conn.pushed = true;
}

fn subscribe(ctx: &mut Ctx<'_>, kind: Kind) -> Result<(), CmdError> {
    // Redis's CLIENT_DENY_BLOCKING: inside EXEC, SUBSCRIBE and PSUBSCRIBE are allowed for
    // backward compatibility, SSUBSCRIBE is not.
    if ctx.conn.in_exec && kind == Kind::Shard {
        return Err(CmdError::new("ERR SSUBSCRIBE isn't allowed for a DENY BLOCKING client"));
    }
    let who = me(ctx);
    for j in 1..ctx.argc() {
        let name = ctx.arg(j);
        let subs = ctx.conn.subs.get_or_insert_with(Default::default);
        if subs.insert(kind, name) {
            ctx.shared.pubsub.add(kind, name, who.clone());
        }
        let count = subs.count_for(kind);
        confirm(ctx, kind.subscribe_word(), Some(name), count);
    }
    sync_counts(ctx);
    Ok(())
}

fn unsubscribe(ctx: &mut Ctx<'_>, kind: Kind) -> Result<(), CmdError> {
    let names: Vec<Vec<u8>> = if ctx.argc() == 1 {
        ctx.conn.subs.as_ref().map(|s| s.names(kind)).unwrap_or_default()
    } else {
        ctx.argv.iter().skip(1).map(|a| a.to_vec()).collect()
    };
    if names.is_empty() {
        // UNSUBSCRIBE with nothing to unsubscribe from still answers once.
        let count = ctx.conn.subs.as_ref().map_or(0, |s| s.count_for(kind));
        confirm(ctx, kind.unsubscribe_word(), None, count);
    }
    for name in &names {
        let mut count = 0;
        if let Some(subs) = ctx.conn.subs.as_mut() {
            if subs.remove(kind, name) {
                ctx.shared.pubsub.remove(kind, name, ctx.conn.id);
            }
            count = subs.count_for(kind);
        }
        confirm(ctx, kind.unsubscribe_word(), Some(name), count);
    }
    sync_counts(ctx);
    Ok(())
}

/// Drops every subscription of a connection without replying (RESET, connection close).
pub fn forget(shared: &Shared, conn: &mut crate::command::ConnState) {
    let Some(subs) = conn.subs.take() else { return };
    for kind in [Kind::Channel, Kind::Pattern, Kind::Shard] {
        for name in subs.names(kind) {
            shared.pubsub.remove(kind, &name, conn.id);
        }
    }
    conn.info.sub.store(0, Ordering::Relaxed);
    conn.info.psub.store(0, Ordering::Relaxed);
    conn.info.ssub.store(0, Ordering::Relaxed);
}

/// # Format
/// `SUBSCRIBE channel [channel ...]` → for each channel `["subscribe", channel, count]`.
fn cmd_subscribe(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    subscribe(ctx, Kind::Channel)
}

/// # Format
/// `UNSUBSCRIBE [channel ...]` → for each channel (all when none is named)
/// `["unsubscribe", channel, count]`; `["unsubscribe", null, count]` if there is none.
fn cmd_unsubscribe(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    unsubscribe(ctx, Kind::Channel)
}

/// # Format
/// `PSUBSCRIBE pattern [pattern ...]` → for each pattern `["psubscribe", pattern, count]`.
fn cmd_psubscribe(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    subscribe(ctx, Kind::Pattern)
}

/// # Format
/// `PUNSUBSCRIBE [pattern ...]` → as UNSUBSCRIBE, for patterns.
fn cmd_punsubscribe(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    unsubscribe(ctx, Kind::Pattern)
}

/// # Format
/// `SSUBSCRIBE shardchannel [shardchannel ...]` → `["ssubscribe", channel, count]` each.
fn cmd_ssubscribe(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    subscribe(ctx, Kind::Shard)
}

/// # Format
/// `SUNSUBSCRIBE [shardchannel ...]` → as UNSUBSCRIBE, for shard channels.
fn cmd_sunsubscribe(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    unsubscribe(ctx, Kind::Shard)
}

fn encode(parts: &[&[u8]]) -> Vec<u8> {
    let mut v = Vec::with_capacity(16 + parts.iter().map(|p| p.len() + 16).sum::<usize>());
    larder_resp::Writer::new(&mut v, Protocol::Resp2).array(parts.len());
    for p in parts {
        larder_resp::Writer::new(&mut v, Protocol::Resp2).bulk(p);
    }
    v
}

/// The client that publishes, when it may be one of the subscribers: a message to itself
/// goes straight into its output, before its reply (as Redis writes it).
pub struct Own<'o> {
    pub client: u64,
    pub proto: Protocol,
    pub out: &'o mut Vec<u8>,
    /// Set when a message went into `out` (a push: CLIENT REPLY OFF / SKIP do not silence it).
    pub pushed: bool,
}

/// Routes one message to its subscribers: mailboxes of other connections, or the
/// publisher's own output.
struct Router<'o, 'p> {
    own: Option<&'o mut Own<'p>>,
    per_worker: Vec<Vec<Msg>>,
    receivers: i64,
    /// The pubsub class's hard output limit (0: none).
    hard: u64,
    /// Workers that must sweep a subscriber killed here.
    sweep: Vec<bool>,
}

impl Router<'_, '_> {
    fn deliver(&mut self, s: &Subscriber, data: &Arc<Vec<u8>>) {
        self.receivers += 1;
        if let Some(own) = self.own.as_deref_mut().filter(|o| o.client == s.client) {
            // The publisher itself (RESP3, or inside EXEC): straight into its output.
            let start = own.out.len();
            own.out.extend_from_slice(data);
            if own.proto == Protocol::Resp3 {
                own.out[start] = b'>';
            }
            own.pushed = true;
            return;
        }
        // What is in mailboxes for a subscriber counts against its output limit, so one
        // whose worker is stalled cannot pile messages up without bound either: past the
        // hard limit it is killed here and its worker closes it.
        let len = data.len() as u64;
        let pending = s.info.pending.fetch_add(len, Ordering::Relaxed) + len;
        if self.hard > 0 && pending + s.info.obuf.load(Ordering::Relaxed) > self.hard {
            s.info.pending.fetch_sub(len, Ordering::Relaxed);
            if !s.info.killed.swap(true, Ordering::Relaxed) {
                tracing::warn!(client = s.client, "closing client for overcoming of output buffer limits");
            }
            if let Some(w) = self.sweep.get_mut(s.worker as usize) {
                *w = true;
            }
            return;
        }
        if let Some(v) = self.per_worker.get_mut(s.worker as usize) {
            v.push(Msg::Push { client: s.client, slot: s.slot, data: data.clone() });
        }
    }
}

/// PUBLISH / SPUBLISH: the number of clients that received the message.
pub fn publish(ctx: &mut Ctx<'_>, channel: &[u8], message: &[u8], shard: bool) -> i64 {
    let mut own = Own { client: ctx.conn.id, proto: ctx.conn.proto, out: ctx.out.buf(), pushed: false };
    let n = publish_from(ctx.shared, Some(&mut own), channel, message, shard);
    // A push: CLIENT REPLY OFF / SKIP do not silence it (see `reply_count`).
    ctx.conn.pushed |= own.pushed;
    n
}

/// Publishes a message on behalf of `own` (None: no client, as for the keyspace
/// notifications of active expiry); returns the number of receivers.
pub fn publish_from(shared: &Shared, own: Option<&mut Own<'_>>, channel: &[u8], message: &[u8], shard: bool) -> i64 {
    let workers = shared.mailboxes.len();
    let hard = shared.config.pubsub_output_limit.hard.load(Ordering::Relaxed);
    let mut r = Router {
        own,
        per_worker: (0..workers).map(|_| Vec::new()).collect(),
        receivers: 0,
        hard,
        sweep: vec![false; workers],
    };
    {
        let maps = shared.pubsub.read();
        let direct = if shard { maps.shard.get(channel) } else { maps.channels.get(channel) };
        if let Some(subs) = direct {
            let word: &[u8] = if shard { b"smessage" } else { b"message" };
            let data = Arc::new(encode(&[word, channel, message]));
            for s in subs {
                r.deliver(s, &data);
            }
        }
        if !shard {
            for (pat, subs) in &maps.patterns {
                if larder_engine::glob_match(pat, channel, false) {
                    let data = Arc::new(encode(&[b"pmessage", pat, channel, message]));
                    for s in subs {
                        r.deliver(s, &data);
                    }
                }
            }
        }
    }
    let receivers = r.receivers;
    for (w, msgs) in r.per_worker.into_iter().enumerate() {
        if r.sweep[w] {
            shared.mailboxes[w].sweep.store(true, Ordering::Release);
        }
        if !msgs.is_empty() || r.sweep[w] {
            shared.send(w, msgs);
        }
    }
    receivers
}

/// The reply of PUBLISH / SPUBLISH: the number of receivers. When the publisher received
/// the message itself (a push, kept whatever the reply mode: `pushed`), the count is left
/// out under CLIENT REPLY OFF / SKIP, as Redis drops every reply there but pushes.
fn reply_count(ctx: &mut Ctx<'_>, n: i64) {
    if !(ctx.conn.pushed && matches!(ctx.conn.reply, ReplyMode::Off | ReplyMode::Skipping)) {
        ctx.out.integer(n);
    }
}

/// # Format
/// `PUBLISH channel message` → the number of clients that received it.
fn cmd_publish(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let (channel, message) = (ctx.arg(1), ctx.arg(2));
    let n = publish(ctx, channel, message, false);
    reply_count(ctx, n);
    Ok(())
}

/// # Format
/// `SPUBLISH shardchannel message` → the number of clients that received it.
fn cmd_spublish(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let (channel, message) = (ctx.arg(1), ctx.arg(2));
    let n = publish(ctx, channel, message, true);
    reply_count(ctx, n);
    Ok(())
}

fn channel_list(ctx: &mut Ctx<'_>, shard: bool) -> Result<(), CmdError> {
    if ctx.argc() > 3 {
        return Err(CmdError::new(format!(
            "ERR unknown subcommand or wrong number of arguments for '{}'. Try PUBSUB HELP.",
            String::from_utf8_lossy(ctx.arg(1))
        )));
    }
    let pat = (ctx.argc() == 3).then(|| ctx.arg(2));
    let names: Vec<Vec<u8>> = {
        let maps = ctx.shared.pubsub.read();
        let map = if shard { &maps.shard } else { &maps.channels };
        map.keys().filter(|c| pat.is_none_or(|p| larder_engine::glob_match(p, c, false))).cloned().collect()
    };
    ctx.out.array(names.len());
    for n in &names {
        ctx.out.bulk(n);
    }
    Ok(())
}

fn numsub(ctx: &mut Ctx<'_>, shard: bool) -> Result<(), CmdError> {
    let counts: Vec<usize> = {
        let maps = ctx.shared.pubsub.read();
        let map = if shard { &maps.shard } else { &maps.channels };
        ctx.argv.iter().skip(2).map(|c| map.get(c).map_or(0, |v| v.len())).collect()
    };
    ctx.out.array(counts.len() * 2);
    for (j, n) in counts.into_iter().enumerate() {
        let c = ctx.arg(j + 2);
        ctx.out.bulk(c).integer(n as i64);
    }
    Ok(())
}

/// # Format
/// `PUBSUB CHANNELS [pattern]` → the channels with subscribers (matching the pattern).
fn cmd_channels(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    channel_list(ctx, false)
}

/// # Format
/// `PUBSUB SHARDCHANNELS [pattern]` → the shard channels with subscribers.
fn cmd_shardchannels(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    channel_list(ctx, true)
}

/// # Format
/// `PUBSUB NUMSUB [channel ...]` → `[channel, count, ...]` (pattern subscribers excluded).
fn cmd_numsub(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    numsub(ctx, false)
}

/// # Format
/// `PUBSUB SHARDNUMSUB [shardchannel ...]` → `[channel, count, ...]`.
fn cmd_shardnumsub(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    numsub(ctx, true)
}

/// # Format
/// `PUBSUB NUMPAT` → the number of distinct patterns subscribed to.
fn cmd_numpat(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    let n = ctx.shared.pubsub.pattern_count() as i64;
    ctx.out.integer(n);
    Ok(())
}

/// # Format
/// `PUBSUB HELP` → the subcommands, one simple string per line.
fn cmd_help(ctx: &mut Ctx<'_>) -> Result<(), CmdError> {
    reply_help(
        ctx,
        "PUBSUB",
        &[
            "CHANNELS [<pattern>]",
            "    Return the currently active channels matching a <pattern> (default: '*').",
            "NUMPAT",
            "    Return number of subscriptions to patterns.",
            "NUMSUB [<channel> ...]",
            "    Return the number of subscribers for the specified channels, excluding",
            "    pattern subscriptions(default: no channels).",
            "SHARDCHANNELS [<pattern>]",
            "    Return the currently active shard level channels matching a <pattern> (default: '*').",
            "SHARDNUMSUB [<shardchannel> ...]",
            "    Return the number of subscribers for the specified shard level channel(s)",
        ],
    );
    Ok(())
}

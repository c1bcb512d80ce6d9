//! ACLs over real sockets: replies as redis-server 7.0.15 gives them, changes seen by every
//! worker, clients closed with their user, the ACL file, the memcached port's users, and
//! every command's categories against Redis's ACL CAT.
mod common;
use common::*;
#[path = "common/reply.rs"]
mod reply;
use reply::*;

use std::io::Write;

const WRONGPASS: &str = "-WRONGPASS invalid username-password pair or user is disabled.\r\n";
const NOPERM_KEYS: &str = "-NOPERM this user has no permissions to access one of the keys used as arguments\r\n";
const NOPERM_CHANNELS: &str =
    "-NOPERM this user has no permissions to access one of the channels used as arguments\r\n";

fn noperm(cmd: &str) -> String {
    format!("-NOPERM this user has no permissions to run the '{cmd}' command\r\n")
}

#[test]
fn users_rules_and_their_errors() {
    let t = start();
    let mut c = Raw::connect(t.resp);
    ck(&mut c, "ACL WHOAMI", "$7\r\ndefault\r\n");
    ck(&mut c, "ACL SETUSER newuser", "+OK\r\n");
    ck(
        &mut c,
        "ACL LIST",
        "*2\r\n$34\r\nuser default on nopass ~* &* +@all\r\n$36\r\nuser newuser off resetchannels -@all\r\n",
    );
    ck(&mut c, "ACL SETUSER newuser >passwd1", "+OK\r\n");
    ck(&mut c, "AUTH newuser passwd1", WRONGPASS);
    ck(&mut c, "ACL SETUSER newuser on +acl", "+OK\r\n");
    ck(&mut c, "AUTH newuser passwd1", "+OK\r\n");
    ck(&mut c, "ACL WHOAMI", "$7\r\nnewuser\r\n");
    ck(&mut c, "SET foo bar", &noperm("set"));
    ck(&mut c, "ACL SETUSER newuser +set", "+OK\r\n");
    ck(&mut c, "SET foo bar", NOPERM_KEYS);
    ck(&mut c, "ACL SETUSER newuser ~foo:* %R~r:* +get", "+OK\r\n");
    ck(&mut c, "SET foo:1 a", "+OK\r\n");
    ck(&mut c, "GET r:1", "$-1\r\n");
    ck(&mut c, "SET r:1 a", NOPERM_KEYS);
    ck(&mut c, "CLIENT ID", &noperm("client|id"));
    ck(&mut c, "PUBLISH ch m", &noperm("publish"));
    ck(&mut c, "ACL SETUSER newuser +publish &ch*", "+OK\r\n");
    ck(&mut c, "PUBLISH chan m", ":0\r\n");
    ck(&mut c, "PUBLISH other m", NOPERM_CHANNELS);
    // Rule errors change nothing and say which rule.
    ck(
        &mut c,
        "ACL SETUSER newuser -get +nosuch",
        "-ERR Error in ACL SETUSER modifier '+nosuch': Unknown command or category name in ACL\r\n",
    );
    ck(&mut c, "GET r:1", "$-1\r\n");
    ck(&mut c, "ACL SETUSER newuser ~* ~foo", "-ERR Error in ACL SETUSER modifier '~foo': Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns\r\n");
    ck(&mut c, "ACL SETUSER newuser #abc", "-ERR Error in ACL SETUSER modifier '#abc': The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters\r\n");
    ck(
        &mut c,
        "ACL SETUSER newuser +config|get|x",
        "-ERR Error in ACL SETUSER modifier '+config|get|x': Allowing first-arg of a subcommand is not supported\r\n",
    );
    ck(&mut c, "ACL SETUSER newuser (~a", "-ERR Unmatched parenthesis in acl selector starting at '(~a'.\r\n");
    c.check(&cmd(&[b"ACL", b"SETUSER", b"a b"]), b"-ERR Usernames can't contain spaces or null characters\r\n");
    ck(&mut c, "ACL DELUSER default", "-ERR The 'default' user cannot be removed\r\n");
    ck(&mut c, "ACL CAT nosuch", "-ERR Unknown category 'nosuch'\r\n");
    ck(&mut c, "ACL CAT a b", "-ERR unknown subcommand or wrong number of arguments for 'CAT'. Try ACL HELP.\r\n");
    ck(&mut c, "ACL HELP xxx", "-ERR wrong number of arguments for 'acl|help' command\r\n");
    ck(&mut c, "ACL GENPASS 5000", "-ERR ACL GENPASS argument must be the number of bits for the output password, a positive number up to 4096\r\n");
    assert_eq!(call(&mut c, "ACL GENPASS 5").bulk().len(), 2);
    let pass = call(&mut c, "ACL GENPASS").bulk();
    assert!(pass.len() == 64 && pass.iter().all(u8::is_ascii_hexdigit));
    ck(&mut c, "ACL LOAD", "-ERR This Redis instance is not configured to use an ACL file. You may want to specify users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a Redis configuration file set) in order to store users in the Redis configuration.\r\n");
    // GETUSER: hashes, not passwords.
    ck(&mut c, "AUTH default x", "+OK\r\n");
    ck(&mut c, "ACL SETUSER u2 reset on >passwd4 %R~a %W~a ~b (+get ~c)", "+OK\r\n");
    let user = call(&mut c, "ACL GETUSER u2").arr();
    assert_eq!(user[0], Val::Bulk(b"flags".to_vec()));
    assert_eq!(user[1], Val::Arr(vec![Val::Bulk(b"on".to_vec()), Val::Bulk(b"sanitize-payload".to_vec())]));
    assert_eq!(
        user[3],
        Val::Arr(vec![Val::Bulk(b"34344e4d60c2b6d639b7bd22e18f2b0b91bc34bf0ac5f9952744435093cfb4e6".to_vec())])
    );
    assert_eq!(user[5], Val::Bulk(b"-@all".to_vec()));
    assert_eq!(user[7], Val::Bulk(b"~a ~b".to_vec()));
    assert_eq!(user[9], Val::Bulk(b"".to_vec()));
    let sel = user[11].clone().arr();
    assert_eq!(sel[0].clone().arr()[1], Val::Bulk(b"-@all +get".to_vec()));
    ck(&mut c, "ACL GETUSER nosuch", "$-1\r\n");
    ck(&mut c, "ACL DRYRUN u2 get c", "+OK\r\n");
    ck(&mut c, "ACL DRYRUN u2 get d", "$50\r\nThis user has no permissions to access the 'd' key\r\n");
    ck(&mut c, "ACL DRYRUN u2 set c v", "$53\r\nThis user has no permissions to run the 'set' command\r\n");
    ck(&mut c, "ACL DRYRUN u2 set c", "-ERR wrong number of arguments for 'set' command\r\n");
    ck(&mut c, "ACL DRYRUN nosuch get c", "-ERR User 'nosuch' not found\r\n");
    ck(&mut c, "ACL USERS", "*3\r\n$7\r\ndefault\r\n$7\r\nnewuser\r\n$2\r\nu2\r\n");
    ck(&mut c, "ACL DELUSER u2 nosuch", ":1\r\n");
}

#[test]
fn refusals_are_logged_and_counted_as_redis_does() {
    let t = start();
    let mut admin = Raw::connect(t.resp);
    ck(&mut admin, "ACL SETUSER antirez >foo on +set ~object:1234 +multi +exec", "+OK\r\n");
    let mut c = Raw::connect(t.resp);
    ck(&mut c, "AUTH antirez foo", "+OK\r\n");
    ck(&mut c, "GET foo", &noperm("get"));
    ck(&mut c, "GET foo", &noperm("get"));
    ck(&mut c, "SET nope 1", NOPERM_KEYS);
    ck(&mut c, "AUTH antirez wrong", WRONGPASS);
    let log = call(&mut admin, "ACL LOG").arr();
    assert_eq!(log.len(), 3);
    let fields = |e: &Val| -> Vec<Val> { e.clone().arr() };
    let auth = fields(&log[0]);
    let key = fields(&log[1]);
    let command = fields(&log[2]);
    let names: Vec<Val> = auth.iter().step_by(2).cloned().collect();
    assert_eq!(
        names,
        ["count", "reason", "context", "object", "username", "age-seconds", "client-info"]
            .iter()
            .map(|n| Val::Bulk(n.as_bytes().to_vec()))
            .collect::<Vec<_>>()
    );
    assert_eq!(auth[3], Val::Bulk(b"auth".to_vec()));
    assert_eq!(auth[7], Val::Bulk(b"AUTH".to_vec()));
    assert_eq!(key[3], Val::Bulk(b"key".to_vec()));
    assert_eq!(key[7], Val::Bulk(b"nope".to_vec()));
    assert_eq!(command[1], Val::Int(2), "two like refusals are one entry");
    assert_eq!(command[5], Val::Bulk(b"toplevel".to_vec()));
    assert_eq!(command[7], Val::Bulk(b"get".to_vec()));
    let info = String::from_utf8(command[13].clone().bulk()).unwrap();
    assert!(info.contains(" cmd=get user=antirez "), "{info}");
    assert_eq!(call(&mut admin, "ACL LOG 1").arr().len(), 1);
    // Inside MULTI the refusal aborts EXEC; a rule changed after queueing fails the
    // command at EXEC.
    ck(&mut c, "MULTI", "+OK\r\n");
    ck(&mut c, "GET x", &noperm("get"));
    ck(&mut c, "EXEC", "-EXECABORT Transaction discarded because of previous errors.\r\n");
    ck(&mut c, "MULTI", "+OK\r\n");
    ck(&mut c, "SET object:1234 v", "+QUEUED\r\n");
    ck(&mut admin, "ACL SETUSER antirez -set", "+OK\r\n");
    ck(&mut c, "EXEC", "*1\r\n-NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call. This command is no longer allowed for the following reason: no permission to execute the command or subcommand\r\n");
    let entry = call(&mut admin, "ACL LOG 1").arr()[0].clone().arr();
    assert_eq!(entry[5], Val::Bulk(b"multi".to_vec()));
    assert_eq!(entry[7], Val::Bulk(b"set".to_vec()));
    let errors = ask(&mut admin, &[b"INFO", b"errorstats"]);
    assert!(errors.contains("errorstat_NOPERM:count=5\r\n"), "{errors}");
    ck(&mut admin, "CONFIG SET acllog-max-len 1", "+OK\r\n");
    ck(&mut c, "GET a", &noperm("get"));
    ck(&mut c, "INCR a", &noperm("incr"));
    assert_eq!(call(&mut admin, "ACL LOG").arr().len(), 1);
    ck(&mut admin, "ACL LOG RESET", "+OK\r\n");
    ck(&mut admin, "ACL LOG", "*0\r\n");
}

#[test]
fn a_change_is_seen_by_every_worker_before_the_reply() {
    let t = start();
    let (mut a, mut b) = one_per_worker(&t);
    ck(&mut b, "ACL SETUSER u on nopass +@all ~*", "+OK\r\n");
    ck(&mut a, "AUTH u x", "+OK\r\n");
    // Not open yet: a new user has no channels (acl-pubsub-default resetchannels).
    ck(&mut a, "PUBLISH c m", NOPERM_CHANNELS);
    ck(&mut b, "ACL SETUSER u allchannels", "+OK\r\n");
    ck(&mut a, "PUBLISH c m", ":0\r\n");
    for _ in 0..50 {
        ck(&mut b, "ACL SETUSER u -get", "+OK\r\n");
        ck(&mut a, "GET k", &noperm("get"));
        ck(&mut b, "ACL SETUSER u +get", "+OK\r\n");
        ck(&mut a, "GET k", "$-1\r\n");
    }
    // The default user too: its clients are checked from the next command.
    let mut d = Raw::connect(t.resp);
    ck(&mut b, "ACL SETUSER default -get", "+OK\r\n");
    ck(&mut d, "GET k", &noperm("get"));
    ck(&mut b, "ACL SETUSER default +@all", "+OK\r\n");
    ck(&mut d, "GET k", "$-1\r\n");
    // Off: new connections are not authenticated.
    ck(&mut b, "ACL SETUSER default off", "+OK\r\n");
    let mut e = Raw::connect(t.resp);
    ck(&mut e, "PING", "-NOAUTH Authentication required.\r\n");
    ck(&mut b, "ACL SETUSER default on", "+OK\r\n");
}

#[test]
fn deleting_a_user_closes_its_clients() {
    let t = start();
    let (mut a, mut b) = one_per_worker(&t);
    ck(&mut b, "ACL SETUSER gone on nopass +@all ~* &*", "+OK\r\n");
    ck(&mut a, "AUTH gone x", "+OK\r\n");
    ck(&mut a, "CLIENT SETNAME victim", "+OK\r\n");
    let list = ask(&mut b, &[b"CLIENT", b"LIST"]);
    assert!(list.contains("name=victim") && list.contains("user=gone "), "{list}");
    assert!(ask(&mut b, &[b"CLIENT", b"INFO"]).contains(" user=default "));
    ck(&mut b, "ACL DELUSER gone", ":1\r\n");
    assert!(a.closed(), "the deleted user's client on the other worker is closed");
    assert!(!ask(&mut b, &[b"CLIENT", b"LIST"]).contains("name=victim"));
    // The client that deletes its own user gets the reply, then is closed.
    ck(&mut b, "ACL SETUSER self on nopass +acl", "+OK\r\n");
    ck(&mut b, "AUTH self x", "+OK\r\n");
    ck(&mut b, "ACL DELUSER self", ":1\r\n");
    assert!(b.closed());
    // CLIENT KILL USER.
    let mut admin = Raw::connect(t.resp);
    ck(&mut admin, "ACL SETUSER k on nopass +@all", "+OK\r\n");
    let mut k = Raw::connect(t.resp);
    ck(&mut k, "AUTH k x", "+OK\r\n");
    ck(&mut admin, "CLIENT KILL USER nosuch", "-ERR No such user 'nosuch'\r\n");
    ck(&mut admin, "CLIENT KILL USER k", ":1\r\n");
    assert!(k.closed());
}

#[test]
fn subscribers_that_lose_their_channels_are_closed() {
    let t = start();
    let (mut admin, mut s) = one_per_worker(&t);
    ck(&mut admin, "ACL SETUSER ps on nopass +@all resetchannels &foo:1 &bar:*", "+OK\r\n");
    ck(&mut s, "AUTH ps x", "+OK\r\n");
    ck(&mut s, "SUBSCRIBE foo:1", "*3\r\n$9\r\nsubscribe\r\n$5\r\nfoo:1\r\n:1\r\n");
    ck(&mut s, "PSUBSCRIBE bar:*", "*3\r\n$10\r\npsubscribe\r\n$5\r\nbar:*\r\n:2\r\n");
    ck(&mut s, "PSUBSCRIBE bar:x", NOPERM_CHANNELS);
    // Keeping every pattern (and adding some) closes nobody.
    ck(&mut admin, "ACL SETUSER ps &zoo:*", "+OK\r\n");
    ck(&mut admin, "PUBLISH foo:1 hi", ":1\r\n");
    s.check(b"", b"*3\r\n$7\r\nmessage\r\n$5\r\nfoo:1\r\n$2\r\nhi\r\n");
    ck(&mut admin, "ACL SETUSER ps resetchannels &foo:1", "+OK\r\n");
    assert!(s.closed());
}

#[test]
fn memcached_auth_takes_any_acl_user() {
    let t = start();
    let mut admin = Raw::connect(t.resp);
    ck(&mut admin, "CONFIG SET requirepass secret", "+OK\r\n");
    ck(&mut admin, "ACL SETUSER mc on >mcpass", "+OK\r\n");
    let mut m = Raw::connect(t.mc);
    m.check(b"get k\r\n", b"CLIENT_ERROR unauthenticated\r\n");
    m.check(b"set auth 0 0 10\r\nmc badpass\r\n", b"CLIENT_ERROR authentication failure\r\n");
    m.check(b"set auth 0 0 9\r\nmc mcpass\r\n", b"STORED\r\n");
    m.check(b"get k\r\n", b"END\r\n");
    let mut d = Raw::connect(t.mc);
    d.check(b"set auth 0 0 14\r\ndefault secret\r\n", b"STORED\r\n");
}

/// A config file and an ACL file in a fresh directory.
fn dir() -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!(
        "larder-acl-{}-{}",
        std::process::id(),
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos()
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn the_acl_file_is_loaded_and_saved() {
    let d = dir();
    let acl = d.join("users.acl");
    std::fs::write(&acl, "user alice on allcommands allkeys &* >alice\nuser bob on -@all +@set +acl ~set* &* >bob\n")
        .unwrap();
    let conf = d.join("larder.conf");
    std::fs::write(&conf, format!("aclfile {}\n", acl.display())).unwrap();
    let t = start_with(|a| a.config = Some(conf.clone()));
    let mut c = Raw::connect(t.resp);
    ck(&mut c, "ACL USERS", "*3\r\n$5\r\nalice\r\n$3\r\nbob\r\n$7\r\ndefault\r\n");
    let mut bob = Raw::connect(t.resp);
    ck(&mut bob, "AUTH bob bob", "+OK\r\n");
    ck(&mut bob, "SADD set1 a", ":1\r\n");
    ck(&mut bob, "SADD other a", NOPERM_KEYS);
    ck(&mut c, "ACL SETUSER carol on nopass +get", "+OK\r\n");
    ck(&mut c, "ACL SAVE", "+OK\r\n");
    let saved = std::fs::read_to_string(&acl).unwrap();
    assert!(saved.contains("user carol on nopass resetchannels -@all +get\n"), "{saved}");
    // LOAD replaces every user and closes the clients of the old ones.
    std::fs::write(&acl, "user dave on nopass ~* +@all\n").unwrap();
    ck(&mut c, "ACL LOAD", "+OK\r\n");
    ck(&mut c, "ACL USERS", "*2\r\n$4\r\ndave\r\n$7\r\ndefault\r\n");
    assert!(bob.closed());
    // A bad file changes nothing.
    std::fs::write(&acl, "user eve on +nosuch\nbogus\n").unwrap();
    let f = acl.display();
    c.check(
        &cmd(&[b"ACL", b"LOAD"]),
        format!("-ERR {f}:1: Error in applying operation '+nosuch': Unknown command or category name in ACL. {f}:2 should start with user keyword followed by the username. WARNING: ACL errors detected, no change to the previously active ACL rules was performed\r\n").as_bytes(),
    );
    ck(&mut c, "ACL USERS", "*2\r\n$4\r\ndave\r\n$7\r\ndefault\r\n");
    drop(t);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn user_lines_in_the_config_file() {
    let d = dir();
    let conf = d.join("larder.conf");
    std::fs::write(&conf, "requirepass ignored\nuser default on nopass ~* +@all -flushdb\nuser x on >y +get ~*\n")
        .unwrap();
    let t = start_with(|a| a.config = Some(conf.clone()));
    let mut c = Raw::connect(t.resp);
    ck(&mut c, "FLUSHDB", &noperm("flushdb"));
    ck(&mut c, "AUTH x y", "+OK\r\n");
    ck(&mut c, "GET k", "$-1\r\n");
    // CONFIG REWRITE writes the users back, ACL SETUSER's too; they load again.
    ck(&mut c, "AUTH default x", "+OK\r\n");
    ck(&mut c, "ACL SETUSER z on nopass +ping", "+OK\r\n");
    ck(&mut c, "CONFIG REWRITE", "+OK\r\n");
    drop(t);
    let text = std::fs::read_to_string(&conf).unwrap();
    assert!(text.contains("\nuser default on nopass sanitize-payload ~* resetchannels +@all -flushdb\n"), "{text}");
    assert!(text.contains("\nuser z on nopass resetchannels -@all +ping\n"), "{text}");
    let t = start_with(|a| a.config = Some(conf.clone()));
    let mut c = Raw::connect(t.resp);
    ck(&mut c, "FLUSHDB", &noperm("flushdb"));
    ck(&mut c, "AUTH z x", "+OK\r\n");
    drop(t);
    // Both an ACL file and user lines: refused, as Redis refuses it.
    std::fs::write(&conf, "aclfile /nonexistent\nuser x on\n").unwrap();
    let args =
        larder_server::Args { config: Some(conf.clone()), port: Some(0), memcache_port: Some(0), ..Default::default() };
    let config = larder_server::Config::load(&args).unwrap();
    assert!(larder_server::Server::start(config).is_err());
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn acl_cat_lists_what_redis_lists() {
    // crates/server/tests/acl_data/categories.txt: redis-server 7.0.15's ACL CAT <category>
    // for every category; Larder must list the same commands, for the commands it has.
    let t = start();
    let mut c = Raw::connect(t.resp);
    let mut ours: Vec<String> = call(&mut c, "COMMAND LIST").strings();
    for parent in ours.clone() {
        let docs = call(&mut c, &format!("COMMAND INFO {parent}")).arr();
        if let Some(Val::Arr(entry)) = docs.into_iter().next() {
            if let Some(Val::Arr(subs)) = entry.get(9) {
                for s in subs {
                    if let Val::Arr(e) = s {
                        ours.push(String::from_utf8(e[0].clone().bulk()).unwrap());
                    }
                }
            }
        }
    }
    let golden = include_str!("acl_data/categories.txt");
    // Every Redis command is in @fast or @slow: the union of the lists is Redis's commands.
    let redis: Vec<&str> = golden.lines().flat_map(|l| l.split(' ').skip(1)).collect();
    let mut checked = 0;
    for line in golden.lines() {
        let (cat, names) = line.split_once(": ").unwrap();
        let mut want: Vec<&str> = names.split(' ').filter(|n| !n.is_empty() && ours.iter().any(|o| o == n)).collect();
        let mut got: Vec<String> = call(&mut c, &format!("ACL CAT {cat}"))
            .strings()
            .into_iter()
            .filter(|n| redis.contains(&n.as_str()))
            .collect();
        want.sort();
        got.sort();
        assert_eq!(got, want, "@{cat}");
        checked += 1;
    }
    assert_eq!(checked, 21);
    let _ = c.s.flush();
}

#[test]
fn key_specs_are_redis_key_specs() {
    // acl_data/key_specs.txt: redis-server 7.0.15's key-spec flags per command. ACL checks
    // read a key's permissions from these (ACCESS: read; INSERT, DELETE, UPDATE: write), so
    // the key spec COMMAND INFO shows must be Redis's first one.
    let t = start();
    let mut c = Raw::connect(t.resp);
    let golden = include_str!("acl_data/key_specs.txt");
    let mut checked = 0;
    for line in golden.lines().filter(|l| !l.starts_with('#')) {
        let (name, specs) = line.split_once(": ").unwrap();
        // Their key spec's flags depend on the arguments (VARIABLE_FLAGS): COMMAND INFO
        // shows the flags of a plain call, and ACLs look at the arguments.
        if name == "set" || name == "bitfield" {
            continue;
        }
        let Some(Val::Arr(entry)) = call(&mut c, &format!("COMMAND INFO {name}")).arr().into_iter().next() else {
            continue; // a command Larder does not have
        };
        let Some(Val::Arr(ours)) = entry.get(8).cloned() else { continue };
        let Some(Val::Arr(first)) = ours.into_iter().next() else { continue };
        // A flattened map: "flags" and its set (after "notes", where a spec has notes).
        let at = first.iter().position(|v| *v == Val::Bulk(b"flags".to_vec())).expect("a key spec without flags");
        let flags = first[at + 1].clone().arr();
        let mut got: Vec<String> = flags
            .into_iter()
            .map(|v| match v {
                Val::Simple(s) => s,
                Val::Bulk(b) => String::from_utf8(b).unwrap(),
                other => panic!("{other:?}"),
            })
            .collect();
        let mut want: Vec<String> = specs.split(" | ").next().unwrap().split(' ').map(String::from).collect();
        got.sort();
        want.sort();
        assert_eq!(got, want, "{name}");
        checked += 1;
    }
    assert!(checked > 100, "{checked}");
}

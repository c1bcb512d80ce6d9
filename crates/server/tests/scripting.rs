//! EVAL, EVALSHA, EVAL_RO and SCRIPT over real sockets: raw bytes in, exact bytes out (each
//! reply checked against redis-server 7.0.15), with the script's client and other clients
//! on different worker threads.
mod common;
use common::*;

/// Checks EVAL of `body` with `args` (numkeys first).
fn ev(c: &mut Raw, body: &str, args: &[&[u8]], want: &str) {
    let mut full: Vec<&[u8]> = vec![b"EVAL", body.as_bytes()];
    full.extend_from_slice(args);
    c.check(&cmd(&full), want.as_bytes());
}

/// The SHA-1 of `body`, as SCRIPT LOAD answers it.
fn sha(c: &mut Raw, body: &str) -> String {
    let reply = ask(c, &[b"SCRIPT", b"LOAD", body.as_bytes()]);
    reply.lines().nth(1).unwrap().to_string()
}

#[test]
fn eval_converts_replies_both_ways() {
    let t = start();
    let mut c = Raw::connect(t.resp);
    let eval = |c: &mut Raw, args: &[&[u8]], want: &[u8]| {
        let mut full: Vec<&[u8]> = vec![b"EVAL"];
        full.extend_from_slice(args);
        c.check(&cmd(&full), want);
    };
    eval(&mut c, &[b"return {1,2,3,'ciao',{1,2}}", b"0"], b"*5\r\n:1\r\n:2\r\n:3\r\n$4\r\nciao\r\n*2\r\n:1\r\n:2\r\n");
    eval(&mut c, &[b"return redis.call('set',KEYS[1],ARGV[1])", b"1", b"k", b"v"], b"+OK\r\n");
    eval(&mut c, &[b"return redis.call('get',KEYS[1])", b"1", b"k"], b"$1\r\nv\r\n");
    // A missing key is false in Lua, and false is a null reply.
    eval(&mut c, &[b"return type(redis.call('get','nokey'))", b"0"], b"$7\r\nboolean\r\n");
    eval(&mut c, &[b"return redis.call('get','nokey')", b"0"], b"$-1\r\n");
    // Numbers truncate to integers; an array stops at its first nil.
    eval(&mut c, &[b"return {3.99, -2.5, 'x', nil, 5}", b"0"], b"*3\r\n:3\r\n:-2\r\n$1\r\nx\r\n");
    eval(&mut c, &[b"return true", b"0"], b":1\r\n");
    eval(&mut c, &[b"return {err='My Error'}", b"0"], b"-My Error\r\n");
    eval(&mut c, &[b"return redis.error_reply('My Error')", b"0"], b"-My Error\r\n");
    eval(&mut c, &[b"return redis.status_reply('FINE')", b"0"], b"+FINE\r\n");
    eval(&mut c, &[b"return {double=3.14}", b"0"], b"$18\r\n3.1400000000000001\r\n");
    // RESP3 inside the script: a map reply is {map = {...}}, returned as a map (flattened
    // for a RESP2 caller).
    ck(&mut c, "HSET h a 1", ":1\r\n");
    eval(&mut c, &[b"redis.setresp(3) return redis.call('hgetall','h')", b"0"], b"*2\r\n$1\r\na\r\n$1\r\n1\r\n");
    eval(&mut c, &[b"redis.setresp(3) return redis.call('hgetall','h').map.a", b"0"], b"$1\r\n1\r\n");
    eval(&mut c, &[b"redis.setresp(3) return false", b"0"], b":0\r\n");
    let _ = ask(&mut c, &[b"HELLO", b"3"]);
    eval(&mut c, &[b"redis.setresp(3) return {map={a=1}}", b"0"], b"%1\r\n$1\r\na\r\n:1\r\n");
    eval(&mut c, &[b"redis.setresp(3) return false", b"0"], b"#f\r\n");
    eval(&mut c, &[b"return {double=1.5}", b"0"], b",1.5\r\n");
    eval(&mut c, &[b"return nil", b"0"], b"_\r\n");
    // cjson and bit.
    eval(&mut c, &[b"return cjson.encode({1,2,{a='/'}})", b"0"], b"$16\r\n[1,2,{\"a\":\"\\/\"}]\r\n");
    eval(&mut c, &[b"return cjson.decode('[1,2,3]')", b"0"], b"*3\r\n:1\r\n:2\r\n:3\r\n");
    eval(&mut c, &[b"return bit.tohex(65535, -2147483648)", b"0"], b"$8\r\n0000FFFF\r\n");
}

#[test]
fn errors_are_redis_7_0s() {
    let t = start();
    let mut c = Raw::connect(t.resp);
    ck(&mut c, "SET k v", "+OK\r\n");
    let eval = |c: &mut Raw, body: &str, rest: &[&[u8]], want: &str| {
        let mut full: Vec<&[u8]> = vec![b"EVAL", body.as_bytes()];
        full.extend_from_slice(rest);
        c.check(&cmd(&full), want.as_bytes());
    };
    let at = |body: &str, msg: &str| {
        format!("-{msg} script: {}, on @user_script:1.\r\n", larder_server::lua::sha1::sha1_hex(body.as_bytes()))
    };
    eval(&mut c, "return 1", &[b"-1"], "-ERR Number of keys can't be negative\r\n");
    eval(&mut c, "return 1", &[b"2", b"a"], "-ERR Number of keys can't be greater than number of args\r\n");
    eval(&mut c, "return 1", &[b"x"], "-ERR value is not an integer or out of range\r\n");
    for (body, msg) in [
        ("return redis.call('incr',KEYS[1])", "ERR value is not an integer or out of range"),
        ("return redis.call('nosuch')", "ERR Unknown Redis command called from script"),
        ("return redis.call('get')", "ERR Wrong number of args calling Redis command from script"),
        ("return redis.call('subscribe','x')", "ERR This Redis command is not allowed from script"),
        ("return redis.call()", "ERR Please specify at least one argument for this redis lib call"),
        ("return redis.call({})", "ERR Lua redis lib command arguments must be strings or integers"),
        ("return a", "ERR user_script:1: Script attempted to access nonexistent global variable 'a'"),
        ("a = 1", "ERR user_script:1: Attempt to modify a readonly table"),
        ("redis.call = nil", "ERR user_script:1: Attempt to modify a readonly table"),
        ("return cjson.decode('{')", "ERR user_script:1: Expected object key string but found T_END at character 2"),
        ("redis.setresp(4)", "ERR RESP version must be 2 or 3."),
        ("print('x')", "ERR user_script:1: Script attempted to access nonexistent global variable 'print'"),
    ] {
        eval(&mut c, body, &[b"1", b"k"], &at(body, msg));
    }
    // redis.pcall returns the error; pcall turns a raised one into its message.
    eval(
        &mut c,
        "return redis.pcall('incr',KEYS[1])",
        &[b"1", b"k"],
        "-ERR value is not an integer or out of range\r\n",
    );
    eval(
        &mut c,
        "local ok, e = pcall(redis.call, 'incr', KEYS[1]) return e",
        &[b"1", b"k"],
        "$43\r\nERR value is not an integer or out of range\r\n",
    );
    eval(
        &mut c,
        "syntax error here",
        &[b"0"],
        "-ERR Error compiling script (new function): user_script:1: '=' expected near 'error'\r\n",
    );
    eval(&mut c, "return redis.call('set','x','y')", &[b"0"], "+OK\r\n");
    c.check(
        &cmd(&[b"EVAL_RO", b"return redis.call('set','x','y')", b"0"]),
        at("return redis.call('set','x','y')", "ERR Write commands are not allowed from read-only scripts.").as_bytes(),
    );
    c.check(
        &cmd(&[b"EVAL_RO", b"#!lua\nreturn 1", b"0"]),
        b"-ERR Can not execute a script with write flag using *_ro command.\r\n",
    );
    c.check(
        &cmd(&[b"EVAL", b"#!lua flags=bogus\nreturn 1", b"0"]),
        b"-ERR Unexpected flag in script shebang: bogus\r\n",
    );
    c.check(&cmd(&[b"EVAL_RO", b"#!lua flags=no-writes\nreturn 7", b"0"]), b":7\r\n");
}

#[test]
fn the_script_cache() {
    let t = start();
    let (mut a, mut b) = one_per_worker(&t);
    let id = sha(&mut a, "return 'hello'");
    assert_eq!(id, "1b936e3fe509bcbc9cd0664897bbe8fd0cac101b");
    // The cache is the server's: a client on another worker runs it by its SHA-1, in any case.
    b.check(&cmd(&[b"EVALSHA", id.as_bytes(), b"0"]), b"$5\r\nhello\r\n");
    b.check(&cmd(&[b"EVALSHA", id.to_uppercase().as_bytes(), b"0"]), b"$5\r\nhello\r\n");
    b.check(&cmd(&[b"EVALSHA_RO", id.as_bytes(), b"0"]), b"$5\r\nhello\r\n");
    b.check(
        &cmd(&[b"SCRIPT", b"EXISTS", id.as_bytes(), b"ffffffffffffffffffffffffffffffffffffffff"]),
        b"*2\r\n:1\r\n:0\r\n",
    );
    // EVAL caches what it runs.
    ev(&mut a, "return 2", &[b"0"], ":2\r\n");
    let two = larder_server::lua::sha1::sha1_hex(b"return 2");
    b.check(&cmd(&[b"EVALSHA", two.as_bytes(), b"0"]), b":2\r\n");
    let info = ask(&mut a, &[b"INFO", b"memory"]);
    assert!(info.contains("number_of_cached_scripts:2\r\n"), "{info}");
    ck(&mut a, "SCRIPT FLUSH ASYNC", "+OK\r\n");
    for c in [&mut a, &mut b] {
        c.check(&cmd(&[b"EVALSHA", id.as_bytes(), b"0"]), b"-NOSCRIPT No matching script. Please use EVAL.\r\n");
    }
    ck(&mut a, "EVALSHA fff 0", "-NOSCRIPT No matching script. Please use EVAL.\r\n");
    ck(&mut a, "SCRIPT FLUSH foo", "-ERR SCRIPT FLUSH only support SYNC|ASYNC option\r\n");
    ck(&mut a, "SCRIPT KILL", "-NOTBUSY No scripts in execution right now.\r\n");
    ck(&mut a, "SCRIPT DEBUG maybe", "-ERR Use SCRIPT DEBUG YES/SYNC/NO\r\n");
    let info = ask(&mut a, &[b"INFO", b"memory"]);
    assert!(info.contains("number_of_cached_scripts:0\r\n"), "{info}");
}

/// A script that increments two keys many times, on one worker, while a client on the other
/// worker reads both: it never sees one incremented without the other.
#[test]
fn a_script_is_atomic_for_clients_on_other_workers() {
    let t = start();
    let (mut w, mut r) = one_per_worker(&t);
    ask(&mut w, &[b"MSET", b"a", b"0", b"b", b"0"]);
    let body = b"for i = 1, 10 do redis.call('incr', KEYS[1]) redis.call('incr', KEYS[2]) end return 1";
    let writer = std::thread::spawn(move || {
        for _ in 0..400 {
            w.check(&cmd(&[b"EVAL", body, b"2", b"a", b"b"]), b":1\r\n");
        }
    });
    let (mut reads, mut torn) = (0u64, 0u64);
    while !writer.is_finished() {
        let reply = ask(&mut r, &[b"MGET", b"a", b"b"]);
        let vals: Vec<&str> =
            reply.split("\r\n").filter(|l| !l.starts_with('*') && !l.starts_with('$') && !l.is_empty()).collect();
        torn += (vals[0] != vals[1]) as u64;
        reads += 1;
    }
    writer.join().unwrap();
    assert_eq!(torn, 0, "{torn} of {reads} reads saw half a script");
    r.check(&cmd(&[b"MGET", b"a", b"b"]), b"*2\r\n$4\r\n4000\r\n$4\r\n4000\r\n");
}

/// Script commands wake blocked clients, count in commandstats, and run inside EXEC; a
/// SELECT inside a script does not change the caller's database.
#[test]
fn script_commands_are_commands() {
    let t = start();
    let (mut a, mut b) = one_per_worker(&t);
    b.send(&cmd(&[b"BLPOP", b"q", b"0"]));
    wait_blocked(&mut a, 1);
    ev(&mut a, "return redis.call('rpush', KEYS[1], 'x')", &[b"1", b"q"], ":1\r\n");
    assert_eq!(read_reply(&mut b), b"*2\r\n$1\r\nq\r\n$1\r\nx\r\n");
    let stats = ask(&mut a, &[b"INFO", b"commandstats"]);
    assert!(stats.contains("cmdstat_rpush:calls=1,"), "{stats}");
    assert!(stats.contains("cmdstat_eval:calls=1,"), "{stats}");
    // Blocking commands are refused in a script (noscript), and may not block if they were.
    let body = "return redis.call('blpop', 'empty', 0)";
    let sha = larder_server::lua::sha1::sha1_hex(body.as_bytes());
    let want = format!("-ERR This Redis command is not allowed from script script: {sha}, on @user_script:1.\r\n");
    ev(&mut a, body, &[b"0"], &want);
    ev(&mut a, "redis.call('select', 5) return redis.call('set', 'in5', 1)", &[b"0"], "+OK\r\n");
    ck(&mut a, "EXISTS in5", ":0\r\n");
    ck(&mut a, "SELECT 5", "+OK\r\n");
    ck(&mut a, "EXISTS in5", ":1\r\n");
    ck(&mut a, "MULTI", "+OK\r\n");
    ev(&mut a, "return redis.call('incr', 'n')", &[b"0"], "+QUEUED\r\n");
    ev(&mut a, "return redis.call('incr', 'n')", &[b"0"], "+QUEUED\r\n");
    ck(&mut a, "EXEC", "*2\r\n:1\r\n:2\r\n");
    // Keyspace notifications fire for script writes.
    ck(&mut b, "CONFIG SET notify-keyspace-events KEA", "+OK\r\n");
    ck(&mut b, "SUBSCRIBE __keyevent@5__:set", "*3\r\n$9\r\nsubscribe\r\n$18\r\n__keyevent@5__:set\r\n:1\r\n");
    ev(&mut a, "return redis.call('set', 'nk', 1)", &[b"0"], "+OK\r\n");
    assert_eq!(read_reply(&mut b), b"*3\r\n$7\r\nmessage\r\n$18\r\n__keyevent@5__:set\r\n$2\r\nnk\r\n");
}

/// FUNCTION LOAD, FCALL, FCALL_RO, LIST, DELETE: libraries are the server's, and a worker
/// that has not loaded one yet loads it on its first call.
#[test]
fn functions_load_list_call_and_delete() {
    let t = start();
    let (mut a, mut b) = one_per_worker(&t);
    let lib = "#!lua name=mylib\nredis.register_function('incr2', function(keys, args) return redis.call('incrby', keys[1], 2) end)\nredis.register_function{function_name='get1', callback=function(keys) return redis.call('get', keys[1]) end, flags={'no-writes'}, description='reads'}";
    a.check(&cmd(&[b"FUNCTION", b"LOAD", lib.as_bytes()]), b"$5\r\nmylib\r\n");
    a.check(&cmd(&[b"FUNCTION", b"LOAD", lib.as_bytes()]), b"-ERR Library 'mylib' already exists\r\n");
    b.check(&cmd(&[b"FCALL", b"incr2", b"1", b"n"]), b":2\r\n");
    a.check(&cmd(&[b"FCALL_RO", b"get1", b"1", b"n"]), b"$1\r\n2\r\n");
    a.check(
        &cmd(&[b"FCALL_RO", b"incr2", b"1", b"n"]),
        b"-ERR Can not execute a script with write flag using *_ro command.\r\n",
    );
    a.check(&cmd(&[b"FCALL", b"nosuch", b"0"]), b"-ERR Function not found\r\n");
    a.check(&cmd(&[b"FCALL", b"incr2", b"x"]), b"-ERR Bad number of keys provided\r\n");
    ck(&mut a, "SET s abc", "+OK\r\n");
    b.check(
        &cmd(&[b"FCALL", b"incr2", b"1", b"s"]),
        b"-ERR value is not an integer or out of range script: incr2, on @user_function:2.\r\n",
    );
    let list = ask(&mut b, &[b"FUNCTION", b"LIST"]);
    assert_eq!(
        list,
        "*1\r\n*6\r\n$12\r\nlibrary_name\r\n$5\r\nmylib\r\n$6\r\nengine\r\n$3\r\nLUA\r\n$9\r\nfunctions\r\n*2\r\n\
         *6\r\n$4\r\nname\r\n$5\r\nincr2\r\n$11\r\ndescription\r\n$-1\r\n$5\r\nflags\r\n*0\r\n\
         *6\r\n$4\r\nname\r\n$4\r\nget1\r\n$11\r\ndescription\r\n$5\r\nreads\r\n$5\r\nflags\r\n*1\r\n+no-writes\r\n"
    );
    let bad: &[(&str, &str)] = &[
        ("return 1", "-ERR Missing library metadata\r\n"),
        ("#!lua name=x\nreturn 1", "-ERR No functions registered\r\n"),
        ("#!js name=x\nreturn 1", "-ERR Engine 'js' not found\r\n"),
        (
            "#!lua name=x\nredis.call('ping')",
            "-ERR Error registering functions: ERR user_function:2: Script attempted to access nonexistent global variable 'call'\r\n",
        ),
        (
            "#!lua name=x\nredis.register_function('incr2', function() end)",
            "-ERR Function incr2 already exists\r\n",
        ),
    ];
    for (code, want) in bad {
        a.check(&cmd(&[b"FUNCTION", b"LOAD", code.as_bytes()]), want.as_bytes());
    }
    // REPLACE swaps the library for every worker.
    let v2 = "#!lua name=mylib\nredis.register_function('incr2', function() return 'v2' end)";
    a.check(&cmd(&[b"FUNCTION", b"LOAD", b"REPLACE", v2.as_bytes()]), b"$5\r\nmylib\r\n");
    b.check(&cmd(&[b"FCALL", b"incr2", b"0"]), b"$2\r\nv2\r\n");
    b.check(&cmd(&[b"FCALL", b"get1", b"0"]), b"-ERR Function not found\r\n");
    a.check(&cmd(&[b"FUNCTION", b"DELETE", b"mylib"]), b"+OK\r\n");
    a.check(&cmd(&[b"FUNCTION", b"DELETE", b"mylib"]), b"-ERR Library not found\r\n");
    b.check(&cmd(&[b"FCALL", b"incr2", b"0"]), b"-ERR Function not found\r\n");
}

/// A tracking client's script that runs a read-only command remembers the keys the script
/// declared (not those its commands read); a script that only writes remembers none.
#[test]
fn tracking_remembers_a_reading_scripts_declared_keys() {
    let t = start();
    let (mut c, mut w) = one_per_worker(&t);
    let _ = ask(&mut c, &[b"HELLO", b"3"]);
    ck(&mut c, "CLIENT TRACKING on", "+OK\r\n");
    ev(&mut c, "redis.call('set', 'k3', 'bar')", &[b"2", b"k1", b"k2"], "_\r\n");
    ck(&mut w, "MSET k1 1 k2 1 k3 1", "+OK\r\n");
    ev(&mut c, "return redis.call('get', 'k3')", &[b"1", b"k1"], "$1\r\n1\r\n");
    ck(&mut w, "MSET k3 2", "+OK\r\n");
    ck(&mut w, "MSET k1 2", "+OK\r\n");
    assert_eq!(read_reply(&mut c), b">2\r\n$10\r\ninvalidate\r\n*1\r\n$2\r\nk1\r\n");
    ck(&mut c, "PING", "+PONG\r\n");
}

/// COMMAND INFO of the script commands: Redis 7.0.15's flags, categories (a read-only script
/// is not @read) and keynum key spec.
#[test]
fn command_info_of_scripts() {
    let t = start();
    let mut c = Raw::connect(t.resp);
    let info = ask(&mut c, &[b"COMMAND", b"INFO", b"EVAL_RO"]);
    let want = "*1\r\n*10\r\n$7\r\neval_ro\r\n:-3\r\n*6\r\n+readonly\r\n+noscript\r\n+stale\r\n+skip_monitor\r\n\
                +no_mandatory_keys\r\n+movablekeys\r\n:0\r\n:0\r\n:0\r\n*2\r\n+@slow\r\n+@scripting\r\n*0\r\n*1\r\n*8\r\n\
                $5\r\nnotes\r\n$78\r\nWe cannot tell how the keys will be used so we assume the worst, RO and ACCESS\r\n\
                $5\r\nflags\r\n*2\r\n+RO\r\n+access\r\n$12\r\nbegin_search\r\n*4\r\n$4\r\ntype\r\n$5\r\nindex\r\n\
                $4\r\nspec\r\n*2\r\n$5\r\nindex\r\n:2\r\n$9\r\nfind_keys\r\n*4\r\n$4\r\ntype\r\n$6\r\nkeynum\r\n\
                $4\r\nspec\r\n*6\r\n$9\r\nkeynumidx\r\n:0\r\n$8\r\nfirstkey\r\n:1\r\n$7\r\nkeystep\r\n:1\r\n*0\r\n";
    assert_eq!(info, want);
    let keys = ask(&mut c, &[b"COMMAND", b"GETKEYS", b"EVAL", b"return 1", b"2", b"a", b"b", b"c"]);
    assert_eq!(keys, "*2\r\n$1\r\na\r\n$1\r\nb\r\n");
    c.check(&cmd(&[b"COMMAND", b"GETKEYS", b"EVAL", b"return 1", b"0"]), b"*0\r\n");
}

/// A script's commands are checked against the caller's ACL user, as redis-server 7.0.15
/// checks them (errors and ACL LOG's "lua" context), and redis.acl_check_cmd asks the same
/// question without running the command.
#[test]
fn scripts_run_under_the_callers_acl_user() {
    let t = start();
    let mut admin = Raw::connect(t.resp);
    ck(&mut admin, "ACL SETUSER scr on nopass +eval +@string ~a* -get", "+OK\r\n");
    let mut c = Raw::connect(t.resp);
    ck(&mut c, "AUTH scr x", "+OK\r\n");
    let get = "return redis.call('get','a1')";
    let get_sha = sha(&mut admin, get);
    ev(
        &mut c,
        get,
        &[b"0"],
        &format!("-ERR The user executing the script can't run this command or subcommand script: {get_sha}, on @user_script:1.\r\n"),
    );
    ev(
        &mut c,
        "return redis.pcall('set','x','1')",
        &[b"0"],
        "-ERR The user executing the script can't access at least one of the keys mentioned in the command arguments\r\n",
    );
    ev(&mut c, "return redis.call('set','a1','1')", &[b"0"], "+OK\r\n");
    ev(&mut c, "return redis.acl_check_cmd('set','a1','1')", &[b"0"], ":1\r\n");
    ev(&mut c, "return redis.acl_check_cmd('set','x','1')", &[b"0"], "$-1\r\n");
    ev(&mut c, "return redis.acl_check_cmd('get','a1')", &[b"0"], "$-1\r\n");
    // A container alone names the container, as Redis's lookupCommand has it.
    ev(&mut admin, "return redis.acl_check_cmd('config')", &[b"0"], ":1\r\n");
    let bad = "return redis.acl_check_cmd('config','nosub')";
    let bad_sha = sha(&mut admin, bad);
    ev(
        &mut c,
        bad,
        &[b"0"],
        &format!("-ERR Invalid command passed to redis.acl_check_cmd() script: {bad_sha}, on @user_script:1.\r\n"),
    );
    let log = ask(&mut admin, &[b"ACL", b"LOG"]);
    assert!(log.contains("context\r\n$3\r\nlua\r\n$6\r\nobject\r\n$1\r\nx\r\n"), "{log:?}");
    assert!(log.contains("context\r\n$3\r\nlua\r\n$6\r\nobject\r\n$3\r\nget\r\n"), "{log:?}");
}

//! The `cjson` library Redis loads (lua-cjson 2.1.0), in Rust behind the same names:
//! `cjson.encode`, `cjson.decode` and `cjson.null`, with lua-cjson's default settings.
//!
//! - Numbers are written as `%.14g`; NaN and infinities are refused.
//! - A table whose keys are all positive integers is an array (holes become `null`), unless
//!   it is "excessively sparse" (largest index above 10 and above twice the element count);
//!   any other table is an object whose keys are strings or numbers. An empty table is `{}`.
//! - `/` is escaped as `\/`, as lua-cjson does; JSON `null` decodes to `cjson.null` (a light
//!   userdata holding NULL).

use std::cell::Cell;
use std::rc::Rc;

use mlua::{LightUserData, Lua, Result, Table, Value, Variadic};

/// Tables nested deeper than this are refused, by default (lua-cjson's, both directions).
const MAX_DEPTH: usize = 1000;

fn err(msg: impl Into<String>) -> mlua::Error {
    mlua::Error::RuntimeError(msg.into())
}

/// `cjson.null`.
pub fn null() -> Value {
    Value::LightUserData(LightUserData(std::ptr::null_mut()))
}

/// The library table. Its depth limits are settings of the Lua state, as lua-cjson's are
/// (`cjson.encode_max_depth(n)`, `cjson.decode_max_depth(n)`).
pub fn open(lua: &Lua) -> Result<Table> {
    let t = lua.create_table()?;
    let (enc_depth, dec_depth) = (Rc::new(Cell::new(MAX_DEPTH)), Rc::new(Cell::new(MAX_DEPTH)));
    let invalid_numbers = Rc::new(Cell::new(false));
    let (max, invalid) = (enc_depth.clone(), invalid_numbers.clone());
    t.set(
        "encode",
        lua.create_function(move |_, a: Variadic<Value>| {
            if a.len() != 1 {
                return Err(err("bad argument #1 to 'encode' (expected 1 argument)"));
            }
            let mut out = Vec::new();
            encode(&a[0], &mut out, &Encoding { depth: 0, max: max.get(), invalid_numbers: invalid.get() })?;
            Ok(mlua::BString::from(out))
        })?,
    )?;
    let max = dec_depth.clone();
    t.set(
        "decode",
        lua.create_function(move |lua, a: Variadic<Value>| {
            let Some(Value::String(s)) = a.first().filter(|_| a.len() == 1) else {
                return Err(err("bad argument #1 to 'decode' (expected 1 argument)"));
            };
            let bytes = s.as_bytes();
            let mut p = Parser { s: &bytes, i: 0, lua, max: max.get() };
            let v = p.value(0)?;
            p.ws();
            if p.i < p.s.len() {
                return Err(p.unexpected("the end"));
            }
            Ok(v)
        })?,
    )?;
    t.set("null", null())?;
    // lua-cjson's settings: accepted, and answered with the defaults this implementation
    // keeps (scripts call them to be sure of a setting, and expect no error).
    for (name, depth) in [("encode_max_depth", enc_depth), ("decode_max_depth", dec_depth)] {
        let f = lua.create_function(move |_, a: Variadic<Value>| {
            match a.first() {
                Some(Value::Integer(n)) if (1..=i32::MAX as i64).contains(n) => depth.set(*n as usize),
                Some(Value::Number(n)) if (1.0..=i32::MAX as f64).contains(n) => depth.set(*n as usize),
                None | Some(Value::Nil) => {}
                Some(_) => {
                    return Err(err(format!("bad argument #1 to '{name}' (expected integer between 1 and 2147483647)")))
                }
            }
            Ok(depth.get() as i64)
        })?;
        t.set(name, f)?;
    }
    t.set(
        "encode_invalid_numbers",
        lua.create_function(move |_, a: Variadic<Value>| {
            if let Some(Value::Boolean(b)) = a.first() {
                invalid_numbers.set(*b);
            }
            Ok(invalid_numbers.get())
        })?,
    )?;
    for (name, default) in [
        ("encode_keep_buffer", Value::Boolean(true)),
        ("encode_number_precision", Value::Integer(14)),
        ("decode_invalid_numbers", Value::Boolean(true)),
    ] {
        t.set(name, lua.create_function(move |_, _: Variadic<Value>| Ok(default.clone()))?)?;
    }
    t.set("encode_sparse_array", lua.create_function(|_, _: Variadic<Value>| Ok((false, 2, 10)))?)?;
    Ok(t)
}

/// C's `%.14g` (lua-cjson's number format).
pub fn fmt_number(x: f64) -> String {
    crate::lua::format_g(x, 14)
}

/// Where an encoding is: its depth, and the settings it follows.
#[derive(Clone, Copy)]
struct Encoding {
    depth: usize,
    max: usize,
    /// Write NaN and infinities (as `%.14g` prints them) instead of refusing them.
    invalid_numbers: bool,
}

fn encode(v: &Value, out: &mut Vec<u8>, e: &Encoding) -> Result<()> {
    let (depth, max) = (e.depth, e.max);
    let inner = Encoding { depth: depth + 1, ..*e };
    match v {
        Value::Nil => out.extend_from_slice(b"null"),
        Value::LightUserData(p) if p.0.is_null() => out.extend_from_slice(b"null"),
        Value::Boolean(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::Integer(i) => out.extend_from_slice(fmt_number(*i as f64).as_bytes()),
        Value::Number(x) => {
            if !x.is_finite() && !e.invalid_numbers {
                return Err(err("Cannot serialise number: must not be NaN or Inf"));
            }
            out.extend_from_slice(fmt_number(*x).as_bytes())
        }
        Value::String(s) => encode_string(&s.as_bytes(), out),
        Value::Table(t) => {
            if depth >= max {
                return Err(err(format!("Cannot serialise, excessive nesting ({})", depth + 1)));
            }
            match array_length(t)? {
                Some(n) => {
                    out.push(b'[');
                    for i in 1..=n {
                        if i > 1 {
                            out.push(b',');
                        }
                        encode(&t.raw_get::<Value>(i)?, out, &inner)?;
                    }
                    out.push(b']');
                }
                None => {
                    out.push(b'{');
                    let mut first = true;
                    for pair in t.clone().pairs::<Value, Value>() {
                        let (k, v) = pair?;
                        if !first {
                            out.push(b',');
                        }
                        first = false;
                        match k {
                            Value::String(s) => encode_string(&s.as_bytes(), out),
                            Value::Integer(i) => encode_string(fmt_number(i as f64).as_bytes(), out),
                            Value::Number(x) => encode_string(fmt_number(x).as_bytes(), out),
                            k => {
                                return Err(err(format!(
                                    "Cannot serialise {}: table key must be a number or string",
                                    k.type_name()
                                )))
                            }
                        }
                        out.push(b':');
                        encode(&v, out, &inner)?;
                    }
                    out.push(b'}');
                }
            }
        }
        other => return Err(err(format!("Cannot serialise {}: type not supported", other.type_name()))),
    }
    Ok(())
}

/// lua-cjson's `lua_array_length`: Some(largest index) when every key is a positive integer
/// (and the array is not excessively sparse), None for an object.
fn array_length(t: &Table) -> Result<Option<usize>> {
    let (mut max, mut items) = (0usize, 0usize);
    for pair in t.clone().pairs::<Value, Value>() {
        let (k, _) = pair?;
        let n = match k {
            Value::Integer(i) => i as f64,
            Value::Number(x) => x,
            _ => return Ok(None),
        };
        if n < 1.0 || n.floor() != n {
            return Ok(None);
        }
        max = max.max(n as usize);
        items += 1;
    }
    if max > 10 && max > items * 2 {
        return Err(err("Cannot serialise table: excessively sparse array"));
    }
    Ok((max > 0).then_some(max))
}

fn encode_string(s: &[u8], out: &mut Vec<u8>) {
    out.push(b'"');
    for &c in s {
        match c {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'/' => out.extend_from_slice(b"\\/"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0c => out.extend_from_slice(b"\\f"),
            0..=0x1f | 0x7f => out.extend_from_slice(format!("\\u{c:04x}").as_bytes()),
            _ => out.push(c),
        }
    }
    out.push(b'"');
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
    lua: &'a Lua,
    /// The deepest nesting allowed.
    max: usize,
}

impl Parser<'_> {
    fn ws(&mut self) {
        while self.i < self.s.len() && matches!(self.s[self.i], b' ' | b'\t' | b'\n' | b'\r') {
            self.i += 1;
        }
    }

    /// lua-cjson's "Expected X but found Y at character N".
    fn unexpected(&self, expected: &str) -> mlua::Error {
        let found = match self.s.get(self.i) {
            None => "T_END",
            Some(b'{') => "T_OBJ_BEGIN",
            Some(b'}') => "T_OBJ_END",
            Some(b'[') => "T_ARR_BEGIN",
            Some(b']') => "T_ARR_END",
            Some(b',') => "T_COMMA",
            Some(b':') => "T_COLON",
            Some(b'"') => "T_STRING",
            _ => "invalid token",
        };
        err(format!("Expected {expected} but found {found} at character {}", self.i + 1))
    }

    fn value(&mut self, depth: usize) -> Result<Value> {
        self.ws();
        let Some(&c) = self.s.get(self.i) else { return Err(self.unexpected("value")) };
        match c {
            b'{' | b'[' => {
                if depth >= self.max {
                    return Err(err(format!(
                        "Found too many nested data structures ({}) at character {}",
                        depth + 1,
                        self.i + 1
                    )));
                }
                self.i += 1;
                let t = self.lua.create_table()?;
                if c == b'[' {
                    self.array(&t, depth)?;
                } else {
                    self.object(&t, depth)?;
                }
                Ok(Value::Table(t))
            }
            b'"' => Ok(Value::String(self.lua.create_string(self.string()?)?)),
            b't' if self.s[self.i..].starts_with(b"true") => {
                self.i += 4;
                Ok(Value::Boolean(true))
            }
            b'f' if self.s[self.i..].starts_with(b"false") => {
                self.i += 5;
                Ok(Value::Boolean(false))
            }
            b'n' if self.s[self.i..].starts_with(b"null") => {
                self.i += 4;
                Ok(null())
            }
            b'-' | b'0'..=b'9' => {
                let (x, n) = crate::command::strtod_prefix(&self.s[self.i..]);
                let text = &self.s[self.i..self.i + n];
                // strtod takes hex, "inf" and "nan": JSON does not.
                if n == 0 || text.iter().any(|c| c.is_ascii_alphabetic() && !matches!(c, b'e' | b'E')) {
                    return Err(self.unexpected("value"));
                }
                self.i += n;
                Ok(Value::Number(x))
            }
            _ => Err(self.unexpected("value")),
        }
    }

    fn array(&mut self, t: &Table, depth: usize) -> Result<()> {
        self.ws();
        if self.s.get(self.i) == Some(&b']') {
            self.i += 1;
            return Ok(());
        }
        let mut n = 1;
        loop {
            t.raw_set(n, self.value(depth + 1)?)?;
            n += 1;
            self.ws();
            match self.s.get(self.i) {
                Some(b',') => self.i += 1,
                Some(b']') => {
                    self.i += 1;
                    return Ok(());
                }
                _ => return Err(self.unexpected("comma or array end")),
            }
        }
    }

    fn object(&mut self, t: &Table, depth: usize) -> Result<()> {
        self.ws();
        if self.s.get(self.i) == Some(&b'}') {
            self.i += 1;
            return Ok(());
        }
        loop {
            self.ws();
            if self.s.get(self.i) != Some(&b'"') {
                return Err(self.unexpected("object key string"));
            }
            let k = self.string()?;
            self.ws();
            if self.s.get(self.i) != Some(&b':') {
                return Err(self.unexpected("colon"));
            }
            self.i += 1;
            let v = self.value(depth + 1)?;
            t.raw_set(self.lua.create_string(k)?, v)?;
            self.ws();
            match self.s.get(self.i) {
                Some(b',') => self.i += 1,
                Some(b'}') => {
                    self.i += 1;
                    return Ok(());
                }
                _ => return Err(self.unexpected("comma or object end")),
            }
        }
    }

    /// A string token (at its opening quote), unescaped; `\uXXXX` becomes UTF-8.
    fn string(&mut self) -> Result<Vec<u8>> {
        let start = self.i;
        self.i += 1;
        let mut out = Vec::new();
        let bad = |at: usize| err(format!("Expected value but found invalid token at character {}", at + 1));
        loop {
            let Some(&c) = self.s.get(self.i) else { return Err(bad(start)) };
            self.i += 1;
            match c {
                b'"' => return Ok(out),
                b'\\' => {
                    let Some(&e) = self.s.get(self.i) else { return Err(bad(start)) };
                    self.i += 1;
                    match e {
                        b'"' | b'\\' | b'/' => out.push(e),
                        b'b' => out.push(0x08),
                        b'f' => out.push(0x0c),
                        b'n' => out.push(b'\n'),
                        b'r' => out.push(b'\r'),
                        b't' => out.push(b'\t'),
                        b'u' => {
                            let mut cp = self.hex4().ok_or_else(|| bad(start))?;
                            if (0xd800..0xdc00).contains(&cp) && self.s[self.i..].starts_with(b"\\u") {
                                self.i += 2;
                                let lo = self.hex4().ok_or_else(|| bad(start))?;
                                if !(0xdc00..0xe000).contains(&lo) {
                                    return Err(bad(start));
                                }
                                cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                            }
                            let ch = char::from_u32(cp).ok_or_else(|| bad(start))?;
                            out.extend_from_slice(ch.encode_utf8(&mut [0; 4]).as_bytes());
                        }
                        _ => return Err(bad(start)),
                    }
                }
                _ => out.push(c),
            }
        }
    }

    fn hex4(&mut self) -> Option<u32> {
        let h = self.s.get(self.i..self.i + 4)?;
        let v = u32::from_str_radix(std::str::from_utf8(h).ok()?, 16).ok()?;
        self.i += 4;
        Some(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lua() -> Lua {
        let lua = Lua::new();
        lua.globals().set("cjson", open(&lua).unwrap()).unwrap();
        lua
    }

    #[test]
    fn encodes_as_lua_cjson() {
        let lua = lua();
        let enc = |code: &str| lua.load(code).eval::<String>().unwrap();
        assert_eq!(enc("return cjson.encode({1, 2, 'a/b', true})"), r#"[1,2,"a\/b",true]"#);
        assert_eq!(enc("return cjson.encode({})"), "{}");
        assert_eq!(enc("return cjson.encode({a = {b = 1.5}})"), r#"{"a":{"b":1.5}}"#);
        assert_eq!(enc("return cjson.encode({[1] = 1, [3] = 3})"), "[1,null,3]");
        assert_eq!(enc("return cjson.encode(cjson.null)"), "null");
        assert_eq!(enc("return cjson.encode(0.1 + 0.2)"), "0.3");
        assert_eq!(enc("return cjson.encode(1e20)"), "1e+20");
        assert_eq!(enc("return cjson.encode('\\1\\n\"')"), r#""\u0001\n\"""#);
        let e = lua.load("return cjson.encode({[20] = 1})").eval::<String>().unwrap_err().to_string();
        assert!(e.contains("excessively sparse array"), "{e}");
        let e = lua.load("return cjson.encode(function() end)").eval::<String>().unwrap_err().to_string();
        assert!(e.contains("Cannot serialise function: type not supported"), "{e}");
    }

    #[test]
    fn decodes_as_lua_cjson() {
        let lua = lua();
        let code = r#"local t = cjson.decode('{"a":[1,2,{"b":null}],"s":"x\\u00e9\\/","n":-1.5e2,"t":true}')
            return t.a[1] + t.a[2] .. t.s .. t.n .. tostring(t.t) .. tostring(t.a[3].b == cjson.null)"#;
        assert_eq!(lua.load(code).eval::<String>().unwrap(), "3xé/-150truetrue");
        for bad in ["'{'", "'[1,'", "'nul'", "'1 2'", "'{1:2}'", "'0x10'"] {
            let r = lua.load(format!("return cjson.decode({bad})")).eval::<Value>();
            assert!(r.is_err(), "{bad}");
        }
        let e = lua.load("return cjson.decode('{')").eval::<Value>().unwrap_err().to_string();
        assert!(e.contains("Expected object key string but found T_END at character 2"), "{e}");
    }
}

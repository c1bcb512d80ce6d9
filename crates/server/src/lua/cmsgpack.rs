//! The `cmsgpack` library Redis loads (lua-cmsgpack 0.4), in Rust behind the same names:
//! `pack(...)`, `unpack(s)`, `unpack_one(s [, offset])`, `unpack_limit(s, limit [, offset])`.
//!
//! - A number equal to an integer is packed as the smallest MessagePack integer; any other
//!   as a float32 when that is exact, else a float64.
//! - A table whose keys are exactly 1..n is an array (the empty table too), any other a map.
//!   Tables nested deeper than 16 levels are packed as nil (lua-cmsgpack's limit, which
//!   also stops a table that contains itself).
//! - Unpacked integers and floats are Lua numbers; binary strings are strings.

use mlua::{Lua, MultiValue, Result, Table, Value, Variadic};

/// lua-cmsgpack's LUACMSGPACK_MAX_NESTING.
const MAX_NESTING: usize = 16;

fn err(msg: &str) -> mlua::Error {
    mlua::Error::RuntimeError(msg.to_string())
}

/// The library table.
pub fn open(lua: &Lua) -> Result<Table> {
    let t = lua.create_table()?;
    t.set(
        "pack",
        lua.create_function(|_, a: Variadic<Value>| {
            if a.is_empty() {
                return Err(err("MessagePack pack needs input."));
            }
            let mut out = Vec::new();
            for v in a.iter() {
                pack(v, &mut out, 0)?;
            }
            Ok(mlua::BString::from(out))
        })?,
    )?;
    t.set(
        "unpack",
        lua.create_function(|lua, s: mlua::LuaString| {
            let bytes = s.as_bytes();
            let mut r = Reader { s: &bytes, i: 0, lua };
            let mut values = MultiValue::new();
            while r.i < r.s.len() {
                values.push_back(r.value()?);
            }
            Ok(values)
        })?,
    )?;
    t.set(
        "unpack_one",
        lua.create_function(|lua, (s, offset): (mlua::LuaString, Option<i64>)| unpack_limit(lua, &s, 1, offset))?,
    )?;
    t.set(
        "unpack_limit",
        lua.create_function(|lua, (s, limit, offset): (mlua::LuaString, i64, Option<i64>)| {
            unpack_limit(lua, &s, limit, offset)
        })?,
    )?;
    Ok(t)
}

/// Unpacks at most `limit` objects (0: all) from byte `offset`: the offset after them (-1
/// at the end of the input), then the objects.
fn unpack_limit(lua: &Lua, s: &mlua::LuaString, limit: i64, offset: Option<i64>) -> Result<MultiValue> {
    let bytes = s.as_bytes();
    let offset = offset.unwrap_or(0);
    if offset < 0 || limit < 0 {
        return Err(err("Invalid request to unpack with offset of and limit of ."));
    }
    if offset as usize > bytes.len() {
        return Err(err("Start offset greater than input length."));
    }
    let mut r = Reader { s: &bytes, i: offset as usize, lua };
    let mut values = MultiValue::new();
    let mut n = 0;
    while r.i < r.s.len() && (limit == 0 || n < limit) {
        values.push_back(r.value()?);
        n += 1;
    }
    let next = if r.i < r.s.len() { r.i as i64 } else { -1 };
    values.push_front(Value::Integer(next));
    Ok(values)
}

fn pack(v: &Value, out: &mut Vec<u8>, level: usize) -> Result<()> {
    match v {
        Value::Boolean(b) => out.push(if *b { 0xc3 } else { 0xc2 }),
        Value::Integer(i) => pack_int(*i, out),
        Value::Number(x) => {
            if x.is_finite() && (*x as i64) as f64 == *x {
                pack_int(*x as i64, out);
            } else if (*x as f32) as f64 == *x || x.is_nan() {
                out.push(0xca);
                out.extend_from_slice(&(*x as f32).to_be_bytes());
            } else {
                out.push(0xcb);
                out.extend_from_slice(&x.to_be_bytes());
            }
        }
        Value::String(s) => {
            let b = s.as_bytes();
            let n = b.len();
            match n {
                0..=31 => out.push(0xa0 | n as u8),
                32..=0xff => out.extend_from_slice(&[0xd9, n as u8]),
                0x100..=0xffff => {
                    out.push(0xda);
                    out.extend_from_slice(&(n as u16).to_be_bytes());
                }
                _ => {
                    out.push(0xdb);
                    out.extend_from_slice(&(n as u32).to_be_bytes());
                }
            }
            out.extend_from_slice(&b);
        }
        Value::Table(t) if level < MAX_NESTING => match array_len(t)? {
            (true, n) => {
                header(out, n, 0x90, 0xdc, 0xdd);
                for i in 1..=n {
                    pack(&t.raw_get::<Value>(i)?, out, level + 1)?;
                }
            }
            // Pairs are packed as they are read: holding a big table's all at once would
            // take a Lua reference each, past what the state allows.
            (false, n) => {
                header(out, n, 0x80, 0xde, 0xdf);
                for pair in t.clone().pairs::<Value, Value>() {
                    let (k, v) = pair?;
                    pack(&k, out, level + 1)?;
                    pack(&v, out, level + 1)?;
                }
            }
        },
        _ => out.push(0xc0),
    }
    Ok(())
}

/// An array or map header: `fix | n` below 16, else the 16- or 32-bit form.
fn header(out: &mut Vec<u8>, n: usize, fix: u8, b16: u8, b32: u8) {
    if n < 16 {
        out.push(fix | n as u8);
    } else if n <= 0xffff {
        out.push(b16);
        out.extend_from_slice(&(n as u16).to_be_bytes());
    } else {
        out.push(b32);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    }
}

fn pack_int(n: i64, out: &mut Vec<u8>) {
    if n >= 0 {
        match n {
            0..=127 => out.push(n as u8),
            128..=0xff => out.extend_from_slice(&[0xcc, n as u8]),
            0x100..=0xffff => {
                out.push(0xcd);
                out.extend_from_slice(&(n as u16).to_be_bytes());
            }
            0x1_0000..=0xffff_ffff => {
                out.push(0xce);
                out.extend_from_slice(&(n as u32).to_be_bytes());
            }
            _ => {
                out.push(0xcf);
                out.extend_from_slice(&(n as u64).to_be_bytes());
            }
        }
    } else if n >= -32 {
        out.push(n as i8 as u8);
    } else if n >= -128 {
        out.extend_from_slice(&[0xd0, n as i8 as u8]);
    } else if n >= -32768 {
        out.push(0xd1);
        out.extend_from_slice(&(n as i16).to_be_bytes());
    } else if n >= i32::MIN as i64 {
        out.push(0xd2);
        out.extend_from_slice(&(n as i32).to_be_bytes());
    } else {
        out.push(0xd3);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

/// lua-cmsgpack's `table_is_an_array` (true when the keys are exactly 1..n), and the count
/// of keys.
fn array_len(t: &Table) -> Result<(bool, usize)> {
    let (mut max, mut count, mut array) = (0usize, 0usize, true);
    for pair in t.clone().pairs::<Value, Value>() {
        let (k, _) = pair?;
        count += 1;
        let n = match k {
            Value::Integer(i) => i as f64,
            Value::Number(x) => x,
            _ => f64::NAN,
        };
        if n >= 1.0 && n.floor() == n {
            max = max.max(n as usize);
        } else {
            array = false;
        }
    }
    Ok((array && max == count, count))
}

struct Reader<'a> {
    s: &'a [u8],
    i: usize,
    lua: &'a Lua,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8]> {
        let end = self.i.checked_add(n).filter(|&e| e <= self.s.len()).ok_or_else(|| err("Missing bytes in input."))?;
        let b = &self.s[self.i..end];
        self.i = end;
        Ok(b)
    }

    fn uint(&mut self, n: usize) -> Result<u64> {
        Ok(self.take(n)?.iter().fold(0u64, |acc, &b| acc << 8 | b as u64))
    }

    fn value(&mut self) -> Result<Value> {
        let c = self.take(1)?[0];
        let num = |x: f64| Ok(Value::Number(x));
        match c {
            0x00..=0x7f => num(c as f64),
            0xe0..=0xff => num(c as i8 as f64),
            0xc0 => Ok(Value::Nil),
            0xc2 => Ok(Value::Boolean(false)),
            0xc3 => Ok(Value::Boolean(true)),
            0xcc => num(self.uint(1)? as f64),
            0xcd => num(self.uint(2)? as f64),
            0xce => num(self.uint(4)? as f64),
            0xcf => num(self.uint(8)? as f64),
            0xd0 => num(self.uint(1)? as u8 as i8 as f64),
            0xd1 => num(self.uint(2)? as u16 as i16 as f64),
            0xd2 => num(self.uint(4)? as u32 as i32 as f64),
            0xd3 => num(self.uint(8)? as i64 as f64),
            0xca => num(f32::from_bits(self.uint(4)? as u32) as f64),
            0xcb => num(f64::from_bits(self.uint(8)?)),
            0xa0..=0xbf => self.string((c & 0x1f) as usize),
            0xc4 | 0xd9 => {
                let n = self.uint(1)? as usize;
                self.string(n)
            }
            0xc5 | 0xda => {
                let n = self.uint(2)? as usize;
                self.string(n)
            }
            0xc6 | 0xdb => {
                let n = self.uint(4)? as usize;
                self.string(n)
            }
            0x90..=0x9f => self.array((c & 0x0f) as usize),
            0xdc => {
                let n = self.uint(2)? as usize;
                self.array(n)
            }
            0xdd => {
                let n = self.uint(4)? as usize;
                self.array(n)
            }
            0x80..=0x8f => self.map((c & 0x0f) as usize),
            0xde => {
                let n = self.uint(2)? as usize;
                self.map(n)
            }
            0xdf => {
                let n = self.uint(4)? as usize;
                self.map(n)
            }
            _ => Err(err("Bad data format in input.")),
        }
    }

    fn string(&mut self, n: usize) -> Result<Value> {
        let b = self.take(n)?.to_vec();
        Ok(Value::String(self.lua.create_string(b)?))
    }

    fn array(&mut self, n: usize) -> Result<Value> {
        // Every element takes at least one byte: a count past the input is malformed.
        if n > self.s.len() - self.i {
            return Err(err("Missing bytes in input."));
        }
        let t = self.lua.create_table()?;
        for i in 1..=n {
            t.raw_set(i, self.value()?)?;
        }
        Ok(Value::Table(t))
    }

    fn map(&mut self, n: usize) -> Result<Value> {
        if n > self.s.len() - self.i {
            return Err(err("Missing bytes in input."));
        }
        let t = self.lua.create_table()?;
        for _ in 0..n {
            let k = self.value()?;
            let v = self.value()?;
            if !matches!(k, Value::Nil) {
                t.raw_set(k, v)?;
            }
        }
        Ok(Value::Table(t))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lua() -> Lua {
        let lua = Lua::new();
        lua.globals().set("cmsgpack", open(&lua).unwrap()).unwrap();
        lua
    }

    fn hex(lua: &Lua, expr: &str) -> String {
        let s: mlua::LuaString = lua.load(format!("return cmsgpack.pack({expr})")).eval().unwrap();
        s.as_bytes().iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Encodings from Redis's tests and lua-cmsgpack's.
    #[test]
    fn packs_as_lua_cmsgpack() {
        let lua = lua();
        assert_eq!(hex(&lua, "0.1"), "cb3fb999999999999a");
        assert_eq!(hex(&lua, "-1099511627776"), "d3ffffff0000000000");
        assert_eq!(hex(&lua, "1, -1, 200, -200, 70000, 1.5"), "01ffccc8d1ff38ce00011170ca3fc00000");
        assert_eq!(hex(&lua, "{}"), "90");
        assert_eq!(hex(&lua, "{1, 'a'}"), "9201a161");
        assert_eq!(hex(&lua, "{a = true}"), "81a161c3");
        assert_eq!(hex(&lua, "nil, false"), "c0c2");
    }

    #[test]
    fn unpacks_what_it_packs() {
        let lua = lua();
        let code = r#"
            local s = cmsgpack.pack({a = {1, 2, 3}, b = 'x', c = 2^40, d = -5, e = 0.25}, 'tail')
            local t, tail = cmsgpack.unpack(s)
            local off, one = cmsgpack.unpack_one(s)
            local off2, two = cmsgpack.unpack_one(s, off)
            return (t.a[3] + t.d + t.e) .. t.b .. tail .. tostring(one.b) .. two .. off2 .. tostring(t.c == 2^40)"#;
        assert_eq!(lua.load(code).eval::<String>().unwrap(), "-1.75xtailxtail-1true");
        assert!(lua.load("return cmsgpack.unpack('\\220\\255')").eval::<Value>().is_err());
        assert!(lua.load("return cmsgpack.pack()").eval::<Value>().is_err());
    }
}

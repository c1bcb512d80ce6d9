//! The `bit` library Redis loads (LuaBitOp 1.0.2), in Rust behind the same names.
//!
//! Every operation works on 32-bit integers: an argument is first reduced modulo 2^32 the
//! way LuaBitOp does it (add 2^52 + 2^51 and keep the low 32 bits of the double), and the
//! result is returned as a signed 32-bit number.

use mlua::{Lua, Result, Table, Value, Variadic};

/// LuaBitOp's `barg`: a number argument reduced to 32 bits; "bad argument" otherwise.
fn arg(v: Option<&Value>, n: usize, fname: &str) -> Result<i32> {
    let x = match v {
        Some(Value::Number(x)) => *x,
        Some(Value::Integer(x)) => *x as f64,
        Some(Value::String(s)) => match crate::command::parse_f64(&s.as_bytes()) {
            Some(x) => x,
            None => return Err(bad_arg(n, fname, "string")),
        },
        other => return Err(bad_arg(n, fname, other.map_or("no value", |v| v.type_name()))),
    };
    Ok(tobit(x))
}

fn bad_arg(n: usize, fname: &str, got: &str) -> mlua::Error {
    mlua::Error::RuntimeError(format!("bad argument #{n} to '{fname}' (number expected, got {got})"))
}

/// x modulo 2^32 as a signed 32-bit integer, as LuaBitOp computes it.
pub fn tobit(x: f64) -> i32 {
    (x + 6_755_399_441_055_744.0).to_bits() as u32 as i32
}

/// `bit.tohex(x [, n])`: `n` hex digits (default 8, at most 8), uppercase for negative `n`.
pub fn tohex(x: i32, n: i32) -> String {
    // LuaBitOp 1.0.3's fix of -INT32_MIN (Redis's "lua bit.tohex bug" test).
    let n = if n == i32::MIN { i32::MIN + 1 } else { n };
    let (upper, n) = if n < 0 { (true, -n) } else { (false, n) };
    let n = n.min(8) as usize;
    let mut s = format!("{:08x}", x as u32);
    if upper {
        s.make_ascii_uppercase();
    }
    s[8 - n..].to_string()
}

/// The library table.
pub fn open(lua: &Lua) -> Result<Table> {
    let t = lua.create_table()?;
    t.set("tobit", lua.create_function(|_, a: Variadic<Value>| Ok(arg(a.first(), 1, "tobit")? as f64))?)?;
    t.set("bnot", lua.create_function(|_, a: Variadic<Value>| Ok(!arg(a.first(), 1, "bnot")? as f64))?)?;
    t.set("bswap", lua.create_function(|_, a: Variadic<Value>| Ok(arg(a.first(), 1, "bswap")?.swap_bytes() as f64))?)?;
    t.set(
        "tohex",
        lua.create_function(|_, a: Variadic<Value>| {
            let x = arg(a.first(), 1, "tohex")?;
            let n = match a.get(1) {
                None | Some(Value::Nil) => 8,
                v => arg(v, 2, "tohex")?,
            };
            Ok(tohex(x, n))
        })?,
    )?;
    type Fold = fn(i32, i32) -> i32;
    let folds: [(&str, Fold); 3] = [("band", |a, b| a & b), ("bor", |a, b| a | b), ("bxor", |a, b| a ^ b)];
    for (name, op) in folds {
        let f = lua.create_function(move |_, a: Variadic<Value>| {
            let mut acc = arg(a.first(), 1, name)?;
            for i in 1..a.len() {
                acc = op(acc, arg(a.get(i), i + 1, name)?);
            }
            Ok(acc as f64)
        })?;
        t.set(name, f)?;
    }
    type Shift = fn(i32, u32) -> i32;
    let shifts: [(&str, Shift); 5] = [
        ("lshift", |x, n| ((x as u32) << n) as i32),
        ("rshift", |x, n| ((x as u32) >> n) as i32),
        ("arshift", |x, n| x >> n),
        ("rol", |x, n| (x as u32).rotate_left(n) as i32),
        ("ror", |x, n| (x as u32).rotate_right(n) as i32),
    ];
    for (name, op) in shifts {
        let f = lua.create_function(move |_, a: Variadic<Value>| {
            let x = arg(a.first(), 1, name)?;
            let n = arg(a.get(1), 2, name)? as u32 & 31;
            Ok(op(x, n) as f64)
        })?;
        t.set(name, f)?;
    }
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values from LuaBitOp's own test suite (bittest.lua).
    #[test]
    fn operations_match_luabitop() {
        assert_eq!(tobit(0xffffffff_u32 as f64), -1);
        assert_eq!(tobit(2f64.powi(32) + 1.0), 1);
        assert_eq!(tobit(-1.0), -1);
        assert_eq!(tohex(65535, i32::MIN), "0000FFFF");
        assert_eq!(tohex(-1, 8), "ffffffff");
        assert_eq!(tohex(0x12345678, -4), "5678");
        assert_eq!(tohex(1, 0), "");
        let lua = Lua::new();
        lua.globals().set("bit", open(&lua).unwrap()).unwrap();
        let eval = |code: &str| lua.load(code).eval::<f64>().unwrap();
        assert_eq!(eval("return bit.band(0x12345678, 0xff)"), 0x78 as f64);
        assert_eq!(eval("return bit.bor(1, 2, 4, 8)"), 15.0);
        assert_eq!(eval("return bit.bxor(3, 5)"), 6.0);
        assert_eq!(eval("return bit.bnot(0)"), -1.0);
        assert_eq!(eval("return bit.lshift(1, 31)"), i32::MIN as f64);
        assert_eq!(eval("return bit.rshift(-1, 28)"), 15.0);
        assert_eq!(eval("return bit.arshift(-256, 4)"), -16.0);
        assert_eq!(eval("return bit.rol(0x12345678, 12)"), 0x45678123 as f64);
        assert_eq!(eval("return bit.ror(0x12345678, 12)"), 0x67812345 as f64);
        assert_eq!(eval("return bit.bswap(0x12345678)"), 0x78563412 as f64);
        assert_eq!(eval("return bit.lshift(1, 33)"), 2.0);
        let err = lua.load("return bit.band('x')").eval::<f64>().unwrap_err().to_string();
        assert!(err.contains("bad argument #1 to 'band' (number expected, got string)"), "{err}");
    }
}

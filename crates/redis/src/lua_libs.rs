//! The libraries Redis adds to its Lua: `bit` (LuaBitOp's semantics) and
//! `cjson` (encode and decode with lua-cjson's formatting), and Lua 5.1's
//! number formatting (`%.14g`), which both and the reply conversions use.
//! (`cmsgpack` and `struct` are not built yet.)

use mlua::{LightUserData, Lua, MultiValue, Table, Value as LuaValue};

/// Deepest nesting `cjson.encode` and `cjson.decode` accept (lua-cjson's
/// default).
const JSON_DEPTH_MAX: usize = 1000;

pub fn install(lua: &Lua) -> mlua::Result<()> {
    let g = lua.globals();
    g.set("bit", bit(lua)?)?;
    g.set("cjson", cjson(lua)?)?;
    Ok(())
}

/// A number as Lua 5.1 prints it (`%.14g`).
pub fn lua_number_text(x: f64) -> String {
    format_g(x, 14)
}

/// C's `%.<precision>g`.
pub fn format_g(x: f64, precision: usize) -> String {
    if x.is_nan() {
        return if x.is_sign_negative() {
            "-nan".into()
        } else {
            "nan".into()
        };
    }
    if x.is_infinite() {
        return if x < 0.0 { "-inf".into() } else { "inf".into() };
    }
    if x == 0.0 {
        return if x.is_sign_negative() {
            "-0".into()
        } else {
            "0".into()
        };
    }
    let p = precision.max(1);
    let sci = format!("{:.*e}", p - 1, x);
    let (mantissa, exp) = sci.split_once('e').expect("exponent");
    let exp: i32 = exp.parse().expect("exponent digits");
    if exp < -4 || exp >= p as i32 {
        let m = trim_zeros(mantissa);
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{m}e{sign}{:02}", exp.abs())
    } else {
        let decimals = (p as i32 - 1 - exp).max(0) as usize;
        trim_zeros(&format!("{x:.decimals$}")).to_string()
    }
}

fn trim_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

fn number(v: &LuaValue) -> Option<f64> {
    match v {
        LuaValue::Integer(n) => Some(*n as f64),
        LuaValue::Number(n) => Some(*n),
        LuaValue::String(s) => std::str::from_utf8(&s.as_bytes()).ok()?.trim().parse().ok(),
        _ => None,
    }
}

/// LuaBitOp's `tobit`: the low 32 bits of the number rounded to an
/// integer, as a signed 32-bit value.
fn tobit(x: f64) -> i32 {
    (x + 6_755_399_441_055_744.0).to_bits() as u32 as i32
}

fn bit(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    let arg = |args: &MultiValue, i: usize| -> mlua::Result<i32> {
        args.get(i).and_then(number).map(tobit).ok_or_else(|| {
            mlua::Error::runtime(format!("bad argument #{} (number expected)", i + 1))
        })
    };
    let unary = |f: fn(i32) -> i32| {
        move |_: &Lua, args: MultiValue| -> mlua::Result<f64> { Ok(f64::from(f(arg(&args, 0)?))) }
    };
    t.set("tobit", lua.create_function(unary(|x| x))?)?;
    t.set("bnot", lua.create_function(unary(|x| !x))?)?;
    t.set("bswap", lua.create_function(unary(i32::swap_bytes))?)?;
    let fold = |f: fn(i32, i32) -> i32| {
        move |_: &Lua, args: MultiValue| -> mlua::Result<f64> {
            let mut acc = arg(&args, 0)?;
            for i in 1..args.len() {
                acc = f(acc, arg(&args, i)?);
            }
            Ok(f64::from(acc))
        }
    };
    t.set("band", lua.create_function(fold(|a, b| a & b))?)?;
    t.set("bor", lua.create_function(fold(|a, b| a | b))?)?;
    t.set("bxor", lua.create_function(fold(|a, b| a ^ b))?)?;
    let shift = |f: fn(i32, u32) -> i32| {
        move |_: &Lua, args: MultiValue| -> mlua::Result<f64> {
            let x = arg(&args, 0)?;
            let n = (arg(&args, 1)? & 31) as u32;
            Ok(f64::from(f(x, n)))
        }
    };
    t.set(
        "lshift",
        lua.create_function(shift(|x, n| ((x as u32) << n) as i32))?,
    )?;
    t.set(
        "rshift",
        lua.create_function(shift(|x, n| ((x as u32) >> n) as i32))?,
    )?;
    t.set("arshift", lua.create_function(shift(|x, n| x >> n))?)?;
    t.set(
        "rol",
        lua.create_function(shift(|x, n| (x as u32).rotate_left(n) as i32))?,
    )?;
    t.set(
        "ror",
        lua.create_function(shift(|x, n| (x as u32).rotate_right(n) as i32))?,
    )?;
    t.set(
        "tohex",
        lua.create_function(move |_, args: MultiValue| {
            let x = arg(&args, 0)? as u32;
            let mut n = if args.len() > 1 { arg(&args, 1)? } else { 8 };
            let upper = n < 0;
            if upper {
                n = -n;
            }
            let n = n.clamp(1, 8) as usize;
            let full = if upper {
                format!("{x:08X}")
            } else {
                format!("{x:08x}")
            };
            Ok(full[8 - n..].to_string())
        })?,
    )?;
    Ok(t)
}

fn cjson(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.set(
        "encode",
        lua.create_function(|lua, v: LuaValue| {
            let mut out = Vec::new();
            encode(&v, &mut out, 0).map_err(mlua::Error::runtime)?;
            lua.create_string(&out)
        })?,
    )?;
    t.set(
        "decode",
        lua.create_function(|lua, s: mlua::String| {
            let bytes = s.as_bytes();
            let mut p = Parser { s: &bytes, at: 0 };
            p.ws();
            let v = p.value(lua, 0).map_err(mlua::Error::runtime)?;
            p.ws();
            if p.at < p.s.len() {
                return Err(mlua::Error::runtime(format!(
                    "Expected the end but found invalid token at character {}",
                    p.at + 1
                )));
            }
            Ok(v)
        })?,
    )?;
    t.set(
        "null",
        LuaValue::LightUserData(LightUserData(std::ptr::null_mut())),
    )?;
    Ok(t)
}

fn encode(v: &LuaValue, out: &mut Vec<u8>, depth: usize) -> Result<(), String> {
    match v {
        LuaValue::Nil => out.extend_from_slice(b"null"),
        LuaValue::LightUserData(p) if p.0.is_null() => out.extend_from_slice(b"null"),
        LuaValue::Boolean(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        LuaValue::Integer(n) => out.extend_from_slice(n.to_string().as_bytes()),
        LuaValue::Number(n) => {
            if !n.is_finite() {
                return Err("Cannot serialise number: must not be NaN or Inf".into());
            }
            out.extend_from_slice(lua_number_text(*n).as_bytes());
        }
        LuaValue::String(s) => escape(&s.as_bytes(), out),
        LuaValue::Table(t) => {
            if depth >= JSON_DEPTH_MAX {
                return Err(format!(
                    "Cannot serialise, excessive nesting ({})",
                    depth + 1
                ));
            }
            let pairs: Vec<(LuaValue, LuaValue)> = t
                .clone()
                .pairs()
                .collect::<mlua::Result<_>>()
                .map_err(|e| e.to_string())?;
            match array_len(&pairs) {
                Some(n) if n > 0 => {
                    out.push(b'[');
                    for i in 1..=n {
                        if i > 1 {
                            out.push(b',');
                        }
                        let v = t.raw_get::<LuaValue>(i).map_err(|e| e.to_string())?;
                        encode(&v, out, depth + 1)?;
                    }
                    out.push(b']');
                }
                _ => {
                    out.push(b'{');
                    for (i, (k, v)) in pairs.iter().enumerate() {
                        if i > 0 {
                            out.push(b',');
                        }
                        match k {
                            LuaValue::String(s) => escape(&s.as_bytes(), out),
                            LuaValue::Integer(n) => escape(n.to_string().as_bytes(), out),
                            LuaValue::Number(n) => escape(lua_number_text(*n).as_bytes(), out),
                            _ => {
                                return Err(
                                    "Cannot serialise table: table key must be a number or string"
                                        .into(),
                                )
                            }
                        }
                        out.push(b':');
                        encode(v, out, depth + 1)?;
                    }
                    out.push(b'}');
                }
            }
        }
        other => {
            return Err(format!(
                "Cannot serialise {}: type not supported",
                other.type_name()
            ));
        }
    }
    Ok(())
}

/// lua-cjson's array test: every key a positive integer, and not
/// excessively sparse (more than half holes past 10 elements): the
/// length, or `None` for an object.
fn array_len(pairs: &[(LuaValue, LuaValue)]) -> Option<usize> {
    let mut max = 0usize;
    for (k, _) in pairs {
        let n = match k {
            LuaValue::Integer(n) => *n as f64,
            LuaValue::Number(n) => *n,
            _ => return None,
        };
        if n < 1.0 || n.fract() != 0.0 {
            return None;
        }
        max = max.max(n as usize);
    }
    if max > 10 && max > pairs.len() * 2 {
        return None;
    }
    Some(max)
}

fn escape(s: &[u8], out: &mut Vec<u8>) {
    out.push(b'"');
    for &b in s {
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'/' => out.extend_from_slice(b"\\/"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0c => out.extend_from_slice(b"\\f"),
            0..=0x1f | 0x7f => out.extend_from_slice(format!("\\u{b:04x}").as_bytes()),
            _ => out.push(b),
        }
    }
    out.push(b'"');
}

struct Parser<'a> {
    s: &'a [u8],
    at: usize,
}

impl Parser<'_> {
    fn ws(&mut self) {
        while self.at < self.s.len() && matches!(self.s[self.at], b' ' | b'\t' | b'\n' | b'\r') {
            self.at += 1;
        }
    }

    fn invalid(&self, what: &str) -> String {
        format!(
            "Expected {what} but found invalid token at character {}",
            self.at + 1
        )
    }

    fn value(&mut self, lua: &Lua, depth: usize) -> Result<LuaValue, String> {
        if depth >= JSON_DEPTH_MAX {
            return Err(format!(
                "Found too many nested data structures ({}) at character {}",
                depth + 1,
                self.at + 1
            ));
        }
        let lit = |p: &mut Self, word: &[u8], v: LuaValue| {
            if p.s[p.at..].starts_with(word) {
                p.at += word.len();
                Ok(v)
            } else {
                Err(p.invalid("value"))
            }
        };
        match self.s.get(self.at) {
            None => Err(self.invalid("value")),
            Some(b'{') => {
                self.at += 1;
                let t = lua.create_table().map_err(|e| e.to_string())?;
                self.ws();
                if self.s.get(self.at) == Some(&b'}') {
                    self.at += 1;
                    return Ok(LuaValue::Table(t));
                }
                loop {
                    self.ws();
                    if self.s.get(self.at) != Some(&b'"') {
                        return Err(self.invalid("object key string"));
                    }
                    let k = self.string()?;
                    self.ws();
                    if self.s.get(self.at) != Some(&b':') {
                        return Err(self.invalid("colon"));
                    }
                    self.at += 1;
                    self.ws();
                    let v = self.value(lua, depth + 1)?;
                    let k = lua.create_string(&k).map_err(|e| e.to_string())?;
                    t.raw_set(k, v).map_err(|e| e.to_string())?;
                    self.ws();
                    match self.s.get(self.at) {
                        Some(b',') => self.at += 1,
                        Some(b'}') => {
                            self.at += 1;
                            return Ok(LuaValue::Table(t));
                        }
                        _ => return Err(self.invalid("comma or object end")),
                    }
                }
            }
            Some(b'[') => {
                self.at += 1;
                let t = lua.create_table().map_err(|e| e.to_string())?;
                self.ws();
                if self.s.get(self.at) == Some(&b']') {
                    self.at += 1;
                    return Ok(LuaValue::Table(t));
                }
                let mut i = 1;
                loop {
                    self.ws();
                    let v = self.value(lua, depth + 1)?;
                    t.raw_set(i, v).map_err(|e| e.to_string())?;
                    i += 1;
                    self.ws();
                    match self.s.get(self.at) {
                        Some(b',') => self.at += 1,
                        Some(b']') => {
                            self.at += 1;
                            return Ok(LuaValue::Table(t));
                        }
                        _ => return Err(self.invalid("comma or array end")),
                    }
                }
            }
            Some(b'"') => {
                let s = self.string()?;
                Ok(LuaValue::String(
                    lua.create_string(&s).map_err(|e| e.to_string())?,
                ))
            }
            Some(b't') => lit(self, b"true", LuaValue::Boolean(true)),
            Some(b'f') => lit(self, b"false", LuaValue::Boolean(false)),
            Some(b'n') => lit(
                self,
                b"null",
                LuaValue::LightUserData(LightUserData(std::ptr::null_mut())),
            ),
            Some(_) => {
                let start = self.at;
                while self.at < self.s.len()
                    && matches!(
                        self.s[self.at],
                        b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9'
                    )
                {
                    self.at += 1;
                }
                std::str::from_utf8(&self.s[start..self.at])
                    .ok()
                    .and_then(|t| t.parse::<f64>().ok())
                    .map(LuaValue::Number)
                    .ok_or_else(|| {
                        self.at = start;
                        self.invalid("value")
                    })
            }
        }
    }

    fn string(&mut self) -> Result<Vec<u8>, String> {
        self.at += 1;
        let mut out = Vec::new();
        loop {
            let Some(&b) = self.s.get(self.at) else {
                return Err(format!(
                    "Expected string but found unexpected end of string at character {}",
                    self.at + 1
                ));
            };
            self.at += 1;
            match b {
                b'"' => return Ok(out),
                b'\\' => {
                    let Some(&e) = self.s.get(self.at) else {
                        return Err(self.invalid("string"));
                    };
                    self.at += 1;
                    match e {
                        b'"' | b'\\' | b'/' => out.push(e),
                        b'b' => out.push(0x08),
                        b'f' => out.push(0x0c),
                        b'n' => out.push(b'\n'),
                        b'r' => out.push(b'\r'),
                        b't' => out.push(b'\t'),
                        b'u' => {
                            let hex = |p: &mut Self| -> Option<u32> {
                                let h = std::str::from_utf8(p.s.get(p.at..p.at + 4)?).ok()?;
                                let v = u32::from_str_radix(h, 16).ok()?;
                                p.at += 4;
                                Some(v)
                            };
                            let Some(mut c) = hex(self) else {
                                return Err(self.invalid("string"));
                            };
                            if (0xD800..0xDC00).contains(&c)
                                && self.s[self.at..].starts_with(b"\\u")
                            {
                                self.at += 2;
                                let Some(lo) = hex(self) else {
                                    return Err(self.invalid("string"));
                                };
                                c = 0x10000
                                    + ((c - 0xD800) << 10)
                                    + (lo.wrapping_sub(0xDC00) & 0x3ff);
                            }
                            let ch = char::from_u32(c).unwrap_or('\u{fffd}');
                            let mut buf = [0u8; 4];
                            out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                        }
                        _ => return Err(self.invalid("string")),
                    }
                }
                _ => out.push(b),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_print_as_lua_5_1() {
        assert_eq!(format_g(3.0, 14), "3");
        assert_eq!(format_g(0.1, 14), "0.1");
        assert_eq!(format_g(1e20, 14), "1e+20");
        assert_eq!(format_g(123456789012345.0, 14), "1.2345678901234e+14");
        assert_eq!(format_g(1.5e-5, 14), "1.5e-05");
        assert_eq!(format_g(-2.5, 14), "-2.5");
        assert_eq!(format_g(99999999999999.9, 14), "1e+14");
    }

    #[test]
    fn tobit_wraps_as_luabitop() {
        assert_eq!(tobit(4294967295.0), -1);
        assert_eq!(tobit(2147483648.0), i32::MIN);
        assert_eq!(tobit(-1.0), -1);
        assert_eq!(tobit(1.0), 1);
    }
}

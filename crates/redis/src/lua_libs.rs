//! The libraries Redis adds to its Lua: `bit` (LuaBitOp's semantics) and
//! `cjson` (encode and decode with lua-cjson's formatting), and Lua 5.1's
//! number formatting (`%.14g`), which both and the reply conversions use.
//! (`cmsgpack` is in `lua_msgpack.rs`, `struct` in `lua_struct.rs`, over
//! this file's helpers.)

use mlua::{LightUserData, Lua, MultiValue, Table, Value as LuaValue};

/// Deepest nesting `cjson.encode` and `cjson.decode` accept (lua-cjson's
/// default).
const JSON_DEPTH_MAX: usize = 1000;

/// Installs `bit` and `cjson`, and what every library's functions need
/// to raise their errors (`cmsgpack` and `struct`, which use these
/// helpers, are installed by the VM through [`raising_table`]).
pub fn install(lua: &Lua) -> mlua::Result<()> {
    let g = lua.globals();
    // For the bootstrap's own C-framed functions (it removes them).
    // SAFETY: see `wrap`.
    g.set("__nv_wrap", unsafe { lua.create_c_function(wrap)? })?;
    g.set("__nv_raise", raise_marker())?;
    g.set(
        "__nv_raise_bare",
        LuaValue::LightUserData(LightUserData(std::ptr::addr_of!(RAISE_BARE) as *mut _)),
    )?;
    g.set("bit", raising_table(lua, bit(lua)?)?)?;
    g.set("cjson", raising_table(lua, cjson(lua)?)?)?;
    Ok(())
}

/// What a library function returns first to raise the error message it
/// returns second (see [`raising`]).
static RAISE: u8 = 0;
/// The same, raising the message without a position (as Lua's own C
/// functions' runtime errors, such as a refused `rawset`).
static RAISE_BARE: u8 = 0;

fn raise_marker() -> LuaValue {
    LuaValue::LightUserData(LightUserData(std::ptr::addr_of!(RAISE) as *mut _))
}

/// A library function: `f`'s error becomes the raise marker and the
/// message, which [`raising`] raises.
pub(super) fn lib_fn<F>(lua: &Lua, f: F) -> mlua::Result<mlua::Function>
where
    F: Fn(&Lua, MultiValue) -> Result<MultiValue, String> + 'static,
{
    lua.create_function(move |lua, args: MultiValue| match f(lua, args) {
        Ok(v) => Ok(v),
        Err(msg) => Ok(MultiValue::from_iter([
            raise_marker(),
            LuaValue::String(lua.create_string(&msg)?),
        ])),
    })
}

pub(super) fn one(v: LuaValue) -> MultiValue {
    MultiValue::from_iter([v])
}

/// Every function of `t` wrapped by [`raising`].
pub(super) fn raising_table(lua: &Lua, t: Table) -> mlua::Result<Table> {
    // SAFETY: `wrap` and `raising` follow the Lua C API's rules (see
    // them).
    let wrap = unsafe { lua.create_c_function(wrap)? };
    for pair in t.clone().pairs::<LuaValue, LuaValue>() {
        let (k, v) = pair?;
        if let LuaValue::Function(f) = v {
            t.raw_set(k, wrap.call::<mlua::Function>(f)?)?;
        }
    }
    Ok(t)
}

/// `wrap(f)`: a C closure over `f` that raises what `f` reports.
unsafe extern "C-unwind" fn wrap(state: *mut mlua::lua_State) -> std::os::raw::c_int {
    use mlua::ffi;
    ffi::lua_settop(state, 1);
    ffi::lua_pushcclosure(state, raising, 1);
    1
}

/// Calls its upvalue with its arguments; if that returns the raise
/// marker and a message, raises the message with the caller's position
/// (a C function's frame keeps the script's line even in a tail call),
/// else returns what it returned.
unsafe extern "C-unwind" fn raising(state: *mut mlua::lua_State) -> std::os::raw::c_int {
    use mlua::ffi;
    let n = ffi::lua_gettop(state);
    ffi::lua_pushvalue(state, ffi::lua_upvalueindex(1));
    ffi::lua_insert(state, 1);
    ffi::lua_call(state, n, ffi::LUA_MULTRET);
    let top = ffi::lua_gettop(state);
    let marker = std::ptr::addr_of!(RAISE) as *mut std::ffi::c_void;
    let bare = std::ptr::addr_of!(RAISE_BARE) as *mut std::ffi::c_void;
    if top >= 2 && ffi::lua_touserdata(state, 1) == marker {
        ffi::luaL_where(state, 1);
        ffi::lua_pushvalue(state, 2);
        ffi::lua_concat(state, 2);
        ffi::lua_error(state)
    }
    if top >= 2 && ffi::lua_touserdata(state, 1) == bare {
        ffi::lua_pushvalue(state, 2);
        ffi::lua_error(state)
    }
    top
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
    // An integer of at most `p` digits prints as itself: the common case
    // (`redis.call('EXPIRE', key, 3600)`), where the exact float
    // formatting below cost 7 % of a script's CPU.
    if p <= 18 && x.fract() == 0.0 && x.abs() < 10f64.powi(p as i32) {
        return (x as i64).to_string();
    }
    format_g_general(x, p)
}

/// [`format_g`] of a finite, non-zero `x`, by way of Rust's exact
/// scientific formatting.
fn format_g_general(x: f64, p: usize) -> String {
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

type Unary = fn(i32) -> i32;
type Fold = fn(i32, i32) -> i32;
type Shift = fn(i32, u32) -> i32;

fn bit(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    fn arg(args: &MultiValue, i: usize, name: &str) -> Result<i32, String> {
        match args.get(i) {
            Some(v) => number(v).map(tobit).ok_or_else(|| {
                format!(
                    "bad argument #{} to '{name}' (number expected, got {})",
                    i + 1,
                    v.type_name()
                )
            }),
            None => Err(format!(
                "bad argument #{} to '{name}' (number expected, got no value)",
                i + 1
            )),
        }
    }
    let num = |x: i32| Ok(one(LuaValue::Number(f64::from(x))));
    let unary: [(&str, Unary); 3] = [
        ("tobit", |x| x),
        ("bnot", |x| !x),
        ("bswap", i32::swap_bytes),
    ];
    for (name, f) in unary {
        t.set(name, lib_fn(lua, move |_, a| num(f(arg(&a, 0, name)?)))?)?;
    }
    let folds: [(&str, Fold); 3] = [
        ("band", |a, b| a & b),
        ("bor", |a, b| a | b),
        ("bxor", |a, b| a ^ b),
    ];
    for (name, f) in folds {
        t.set(
            name,
            lib_fn(lua, move |_, a| {
                let mut acc = arg(&a, 0, name)?;
                for i in 1..a.len() {
                    acc = f(acc, arg(&a, i, name)?);
                }
                num(acc)
            })?,
        )?;
    }
    let shifts: [(&str, Shift); 5] = [
        ("lshift", |x, n| ((x as u32) << n) as i32),
        ("rshift", |x, n| ((x as u32) >> n) as i32),
        ("arshift", |x, n| x >> n),
        ("rol", |x, n| (x as u32).rotate_left(n) as i32),
        ("ror", |x, n| (x as u32).rotate_right(n) as i32),
    ];
    for (name, f) in shifts {
        t.set(
            name,
            lib_fn(lua, move |_, a| {
                let x = arg(&a, 0, name)?;
                let n = (arg(&a, 1, name)? & 31) as u32;
                num(f(x, n))
            })?,
        )?;
    }
    t.set(
        "tohex",
        lib_fn(lua, |lua, a| {
            let x = arg(&a, 0, "tohex")? as u32;
            let mut n = if a.len() > 1 { arg(&a, 1, "tohex")? } else { 8 };
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
            let s = lua
                .create_string(&full[8 - n..])
                .map_err(|e| e.to_string())?;
            Ok(one(LuaValue::String(s)))
        })?,
    )?;
    Ok(t)
}

fn cjson(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.set(
        "encode",
        lib_fn(lua, |lua, a| {
            if a.len() != 1 {
                return Err("expected 1 argument".into());
            }
            let mut out = Vec::new();
            encode(&a[0], &mut out, 0)?;
            Ok(one(LuaValue::String(
                lua.create_string(&out).map_err(|e| e.to_string())?,
            )))
        })?,
    )?;
    t.set(
        "decode",
        lib_fn(lua, |lua, a| {
            let Some(LuaValue::String(s)) = a.front() else {
                return Err("expected 1 argument".into());
            };
            let bytes = s.as_bytes();
            let mut p = Parser { s: &bytes, at: 0 };
            p.ws();
            let v = p.value(lua, 0)?;
            p.ws();
            if p.at < p.s.len() {
                return Err(format!(
                    "Expected the end but found invalid token at character {}",
                    p.at + 1
                ));
            }
            Ok(one(v))
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
        LuaValue::Integer(n) => out.extend_from_slice(lua_number_text(*n as f64).as_bytes()),
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
                Some(n) if n > 10 && n > pairs.len() * 2 => {
                    return Err("Cannot serialise table: excessively sparse array".into());
                }
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
                            LuaValue::Integer(n) => {
                                escape(lua_number_text(*n as f64).as_bytes(), out)
                            }
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

/// lua-cjson's array test: every key a positive integer: the largest
/// (the caller refuses an excessively sparse one), or `None` for an
/// object.
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
            "Expected {what} but found {} at character {}",
            self.found(),
            self.at + 1
        )
    }

    /// lua-cjson's name of the token at the cursor.
    fn found(&self) -> &'static str {
        let rest = &self.s[self.at.min(self.s.len())..];
        match rest.first() {
            None => "T_END",
            Some(b'{') => "T_OBJ_BEGIN",
            Some(b'}') => "T_OBJ_END",
            Some(b'[') => "T_ARR_BEGIN",
            Some(b']') => "T_ARR_END",
            Some(b':') => "T_COLON",
            Some(b',') => "T_COMMA",
            Some(b'"') => "T_STRING",
            Some(b'-' | b'0'..=b'9') => "T_NUMBER",
            _ if rest.starts_with(b"true") || rest.starts_with(b"false") => "T_BOOLEAN",
            _ if rest.starts_with(b"null") => "T_NULL",
            _ => "invalid token",
        }
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

/// A Lua string or number as bytes (numbers as Lua prints them).
pub(super) fn text(v: &LuaValue) -> Option<Vec<u8>> {
    match v {
        LuaValue::String(s) => Some(s.as_bytes().to_vec()),
        LuaValue::Integer(n) => Some(super::lua_libs::lua_number_text(*n as f64).into_bytes()),
        LuaValue::Number(n) => Some(super::lua_libs::lua_number_text(*n).into_bytes()),
        _ => None,
    }
}

/// C's `(long long)` of a double as x86-64 computes it, which is what
/// Redis answers: out of range or NaN gives the minimum.
pub(super) fn c_long_long(n: f64) -> i64 {
    if !(-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&n) {
        i64::MIN
    } else {
        n as i64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_print_as_lua_5_1() {
        assert_eq!(format_g(3.0, 14), "3");
        assert_eq!(format_g(3600.0, 17), "3600");
        assert_eq!(format_g(-42.0, 17), "-42");
        assert_eq!(format_g(1e16, 17), "10000000000000000");
        assert_eq!(format_g(99999999999999999.0, 17), "1e+17");
        assert_eq!(format_g(1e17, 17), "1e+17");
        assert_eq!(format_g(-0.0, 17), "-0");
        // The integer shortcut answers as the general path would.
        let mut x: f64 = 1.0;
        for i in 0..2000 {
            x = (x * 1.37 + i as f64).trunc();
            for v in [x, -x] {
                for p in [14, 17] {
                    if v.abs() < 10f64.powi(p as i32) {
                        assert_eq!(format_g(v, p), format_g_general(v, p), "{v} at {p}");
                    }
                }
            }
        }
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

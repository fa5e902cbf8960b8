//! `cmsgpack`, the MessagePack library Redis gives scripts (lua-cmsgpack
//! 0.4.0, which job queues such as BullMQ use to pass options to their
//! scripts): `pack(...)`, `unpack(s)`, `unpack_one(s [, offset])`,
//! `unpack_limit(s, limit [, offset])`, with its encodings (smallest
//! integer form, float32 when exact, arrays for tables keyed 1..n, nil past
//! 16 levels of nesting) and its errors.

use mlua::{Lua, MultiValue, Table, Value as LuaValue};

use super::lua_libs::{lib_fn, one};

/// Deepest nesting `pack` follows; deeper tables are packed as nil.
const NESTING_MAX: usize = 16;

pub fn library(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.set(
        "pack",
        lib_fn(lua, |lua, args| {
            if args.is_empty() {
                return Err("bad argument #0 to 'pack' (MessagePack pack needs input.)".into());
            }
            let mut out = Vec::new();
            for v in args.iter() {
                encode(v, &mut out, 0);
            }
            Ok(one(LuaValue::String(
                lua.create_string(&out).map_err(|e| e.to_string())?,
            )))
        })?,
    )?;
    t.set(
        "unpack",
        lib_fn(lua, |lua, args| unpack(lua, &args, 0, 0, false))?,
    )?;
    t.set(
        "unpack_one",
        lib_fn(lua, |lua, args| {
            let offset = int_arg(&args, 1)?;
            unpack(lua, &args, 1, offset, true)
        })?,
    )?;
    t.set(
        "unpack_limit",
        lib_fn(lua, |lua, args| {
            let limit = int_arg(&args, 1)?;
            let offset = int_arg(&args, 2)?;
            unpack(lua, &args, limit, offset, true)
        })?,
    )?;
    Ok(t)
}

fn int_arg(args: &MultiValue, i: usize) -> Result<i64, String> {
    match args.get(i) {
        None | Some(LuaValue::Nil) => Ok(0),
        Some(LuaValue::Integer(n)) => Ok(*n),
        Some(LuaValue::Number(n)) => Ok(*n as i64),
        Some(v) => Err(format!(
            "bad argument #{} (number expected, got {})",
            i + 1,
            v.type_name()
        )),
    }
}

fn encode(v: &LuaValue, out: &mut Vec<u8>, level: usize) {
    match v {
        LuaValue::Boolean(b) => out.push(if *b { 0xc3 } else { 0xc2 }),
        LuaValue::Integer(n) => encode_int(*n, out),
        LuaValue::Number(n) => {
            let n = *n;
            // C's `(int64_t)n == n` on x86-64 (out of range is not).
            if super::lua_libs::c_long_long(n) as f64 == n {
                encode_int(n as i64, out);
            } else if f64::from(n as f32) == n || n.is_nan() {
                out.push(0xca);
                out.extend_from_slice(&(n as f32).to_be_bytes());
            } else {
                out.push(0xcb);
                out.extend_from_slice(&n.to_be_bytes());
            }
        }
        LuaValue::String(s) => {
            let b = s.as_bytes();
            let n = b.len();
            if n < 32 {
                out.push(0xa0 | n as u8);
            } else if n <= 0xff {
                out.extend_from_slice(&[0xd9, n as u8]);
            } else if n <= 0xffff {
                out.push(0xda);
                out.extend_from_slice(&(n as u16).to_be_bytes());
            } else {
                out.push(0xdb);
                out.extend_from_slice(&(n as u32).to_be_bytes());
            }
            out.extend_from_slice(&b);
        }
        LuaValue::Table(t) if level < NESTING_MAX => {
            let pairs: Vec<(LuaValue, LuaValue)> =
                t.clone().pairs().filter_map(Result::ok).collect();
            if is_array(&pairs) {
                let n = t.raw_len();
                header(out, n, 0x90, 0xdc, 0xdd);
                for i in 1..=n {
                    let v = t.raw_get::<LuaValue>(i).unwrap_or(LuaValue::Nil);
                    encode(&v, out, level + 1);
                }
            } else {
                header(out, pairs.len(), 0x80, 0xde, 0xdf);
                for (k, v) in &pairs {
                    encode(k, out, level + 1);
                    encode(v, out, level + 1);
                }
            }
        }
        _ => out.push(0xc0),
    }
}

fn header(out: &mut Vec<u8>, n: usize, fix: u8, b16: u8, b32: u8) {
    if n <= 15 {
        out.push(fix | n as u8);
    } else if n <= 0xffff {
        out.push(b16);
        out.extend_from_slice(&(n as u16).to_be_bytes());
    } else {
        out.push(b32);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    }
}

fn encode_int(n: i64, out: &mut Vec<u8>) {
    if n >= 0 {
        if n <= 127 {
            out.push(n as u8);
        } else if n <= 0xff {
            out.extend_from_slice(&[0xcc, n as u8]);
        } else if n <= 0xffff {
            out.push(0xcd);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        } else if n <= 0xffff_ffff {
            out.push(0xce);
            out.extend_from_slice(&(n as u32).to_be_bytes());
        } else {
            out.push(0xcf);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    } else if n >= -32 {
        out.push(n as i8 as u8);
    } else if n >= -128 {
        out.extend_from_slice(&[0xd0, n as i8 as u8]);
    } else if n >= -32768 {
        out.push(0xd1);
        out.extend_from_slice(&(n as i16).to_be_bytes());
    } else if n >= -2_147_483_648 {
        out.push(0xd2);
        out.extend_from_slice(&(n as i32).to_be_bytes());
    } else {
        out.push(0xd3);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

/// lua-cmsgpack's array test: every key a positive integer, as many keys
/// as the largest (no holes).
fn is_array(pairs: &[(LuaValue, LuaValue)]) -> bool {
    let mut max = 0f64;
    for (k, _) in pairs {
        let n = match k {
            LuaValue::Integer(n) => *n as f64,
            LuaValue::Number(n) => *n,
            _ => return false,
        };
        if n.fract() != 0.0 || n < 1.0 {
            return false;
        }
        max = max.max(n);
    }
    max as usize == pairs.len()
}

/// `unpack`'s three forms: every object (`limit` 0), or at most `limit`
/// from `offset`, with the offset to go on from first (`with_offset`).
fn unpack(
    lua: &Lua,
    args: &MultiValue,
    limit: i64,
    offset: i64,
    with_offset: bool,
) -> Result<MultiValue, String> {
    let Some(LuaValue::String(s)) = args.front() else {
        return Err("bad argument #1 to 'unpack' (string expected)".into());
    };
    let bytes = s.as_bytes();
    if offset < 0 || limit < 0 {
        return Err(format!(
            "Invalid request to unpack with offset of {offset} and limit of {limit}."
        ));
    }
    let offset = offset as usize;
    if offset > bytes.len() {
        return Err("Start offset greater than input length.".into());
    }
    let mut d = Decoder {
        s: &bytes,
        at: offset,
    };
    let mut values = Vec::new();
    while d.at < d.s.len() && (limit == 0 || (values.len() as i64) < limit) {
        values.push(d.value(lua)?);
    }
    let mut out = Vec::new();
    if with_offset {
        let next = if d.at >= d.s.len() { -1 } else { d.at as i64 };
        out.push(LuaValue::Number(next as f64));
    }
    out.extend(values);
    Ok(MultiValue::from_iter(out))
}

struct Decoder<'a> {
    s: &'a [u8],
    at: usize,
}

impl Decoder<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], String> {
        if self.s.len() - self.at < n {
            return Err("Missing bytes in input.".into());
        }
        let b = &self.s[self.at..self.at + n];
        self.at += n;
        Ok(b)
    }

    fn uint(&mut self, n: usize) -> Result<u64, String> {
        Ok(self
            .take(n)?
            .iter()
            .fold(0u64, |acc, &b| acc << 8 | u64::from(b)))
    }

    fn value(&mut self, lua: &Lua) -> Result<LuaValue, String> {
        let err = |e: mlua::Error| e.to_string();
        let t = self.take(1)?[0];
        let num = |n: f64| Ok(LuaValue::Number(n));
        match t {
            0x00..=0x7f => num(f64::from(t)),
            0xe0..=0xff => num(f64::from(t as i8)),
            0xcc => num(self.uint(1)? as f64),
            0xcd => num(self.uint(2)? as f64),
            0xce => num(self.uint(4)? as f64),
            0xcf => num(self.uint(8)? as f64),
            0xd0 => num(f64::from(self.uint(1)? as u8 as i8)),
            0xd1 => num(f64::from(self.uint(2)? as u16 as i16)),
            0xd2 => num(f64::from(self.uint(4)? as u32 as i32)),
            0xd3 => num(self.uint(8)? as i64 as f64),
            0xc0 => Ok(LuaValue::Nil),
            0xc2 => Ok(LuaValue::Boolean(false)),
            0xc3 => Ok(LuaValue::Boolean(true)),
            0xca => num(f64::from(f32::from_bits(self.uint(4)? as u32))),
            0xcb => num(f64::from_bits(self.uint(8)?)),
            0xa0..=0xbf | 0xd9 | 0xda | 0xdb | 0xc4 | 0xc5 | 0xc6 => {
                let n = match t {
                    0xa0..=0xbf => usize::from(t & 0x1f),
                    0xd9 | 0xc4 => self.uint(1)? as usize,
                    0xda | 0xc5 => self.uint(2)? as usize,
                    _ => self.uint(4)? as usize,
                };
                let b = self.take(n)?;
                Ok(LuaValue::String(lua.create_string(b).map_err(err)?))
            }
            0x90..=0x9f | 0xdc | 0xdd => {
                let n = match t {
                    0x90..=0x9f => usize::from(t & 0x0f),
                    0xdc => self.uint(2)? as usize,
                    _ => self.uint(4)? as usize,
                };
                let table = lua.create_table().map_err(err)?;
                for i in 1..=n {
                    let v = self.value(lua)?;
                    table.raw_set(i, v).map_err(err)?;
                }
                Ok(LuaValue::Table(table))
            }
            0x80..=0x8f | 0xde | 0xdf => {
                let n = match t {
                    0x80..=0x8f => usize::from(t & 0x0f),
                    0xde => self.uint(2)? as usize,
                    _ => self.uint(4)? as usize,
                };
                let table = lua.create_table().map_err(err)?;
                for _ in 0..n {
                    let k = self.value(lua)?;
                    let v = self.value(lua)?;
                    if !matches!(k, LuaValue::Nil) {
                        table.raw_set(k, v).map_err(err)?;
                    }
                }
                Ok(LuaValue::Table(table))
            }
            _ => Err("Bad data format in input.".into()),
        }
    }
}

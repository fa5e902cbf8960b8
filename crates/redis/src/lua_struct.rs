//! `struct`, the binary packing library Redis gives scripts (Roberto
//! Ierusalimschy's lua-struct as Redis 7.0 ships it): `pack(fmt, ...)`,
//! `unpack(fmt, s [, pos])`, `size(fmt)`, with its format options
//! (`<` `>` `!n` endianness and alignment, `b B h H l L T i[n] I[n]`
//! integers, `f d` floats, `c[n]` `s` strings, `x` padding) and errors.

use mlua::{Lua, MultiValue, Table, Value as LuaValue};

use super::lua_libs::{lib_fn, one};

/// Largest integer size `i`/`I` accept.
const MAXINTSIZE: usize = 32;
/// `!` without a number: the platform's largest alignment.
const MAXALIGN: usize = 8;

pub fn library(lua: &Lua) -> mlua::Result<Table> {
    let t = lua.create_table()?;
    t.set("pack", lib_fn(lua, pack)?)?;
    t.set("unpack", lib_fn(lua, unpack)?)?;
    t.set("size", lib_fn(lua, size)?)?;
    Ok(t)
}

struct Header {
    big: bool,
    align: usize,
}

struct Format<'a> {
    f: &'a [u8],
    at: usize,
}

impl Format<'_> {
    fn next(&mut self) -> Option<u8> {
        let c = *self.f.get(self.at)?;
        self.at += 1;
        Some(c)
    }

    fn num(&mut self, default: usize) -> Result<usize, String> {
        if !self.f.get(self.at).is_some_and(u8::is_ascii_digit) {
            return Ok(default);
        }
        let mut a: usize = 0;
        while let Some(&d) = self.f.get(self.at).filter(|d| d.is_ascii_digit()) {
            let d = usize::from(d - b'0');
            if a > (i32::MAX as usize) / 10 || a * 10 > i32::MAX as usize - d {
                return Err("integral size overflow".into());
            }
            a = a * 10 + d;
            self.at += 1;
        }
        Ok(a)
    }

    fn size(&mut self, opt: u8) -> Result<usize, String> {
        Ok(match opt {
            b'B' | b'b' => 1,
            b'H' | b'h' => 2,
            b'L' | b'l' | b'T' | b'd' => 8,
            b'f' => 4,
            b'x' => 1,
            b'c' => self.num(1)?,
            b'i' | b'I' => {
                let n = self.num(4)?;
                if n > MAXINTSIZE {
                    return Err(format!(
                        "integral size {n} is larger than limit of {MAXINTSIZE}"
                    ));
                }
                n
            }
            _ => 0,
        })
    }

    /// The options that change the header; an error for an unknown one.
    fn control(&mut self, opt: u8, h: &mut Header, func: &str) -> Result<(), String> {
        match opt {
            b' ' => {}
            b'>' => h.big = true,
            b'<' => h.big = false,
            b'!' => {
                let a = self.num(MAXALIGN)?;
                if !a.is_power_of_two() {
                    return Err(format!("alignment {a} is not a power of 2"));
                }
                h.align = a;
            }
            _ => {
                return Err(format!(
                    "bad argument #1 to '{func}' (invalid format option '{}')",
                    opt as char
                ))
            }
        }
        Ok(())
    }
}

fn to_align(len: usize, h: &Header, opt: u8, size: usize) -> usize {
    if size == 0 || opt == b'c' {
        return 0;
    }
    let size = size.min(h.align);
    (size - (len & (size - 1))) & (size - 1)
}

fn number(v: Option<&LuaValue>, arg: usize, func: &str) -> Result<f64, String> {
    match v {
        Some(LuaValue::Integer(n)) => Ok(*n as f64),
        Some(LuaValue::Number(n)) => Ok(*n),
        Some(LuaValue::String(s)) => std::str::from_utf8(&s.as_bytes())
            .ok()
            .and_then(|t| t.trim().parse().ok())
            .ok_or_else(|| {
                format!("bad argument #{arg} to '{func}' (number expected, got string)")
            }),
        Some(v) => Err(format!(
            "bad argument #{arg} to '{func}' (number expected, got {})",
            v.type_name()
        )),
        None => Err(format!(
            "bad argument #{arg} to '{func}' (number expected, got no value)"
        )),
    }
}

/// Argument `i` (0-based) as a string, as `luaL_checklstring` takes it
/// (a number as Lua prints it).
fn string_arg(args: &MultiValue, i: usize, func: &str) -> Result<Vec<u8>, String> {
    match args.get(i) {
        Some(v) => super::lua_libs::text(v).ok_or_else(|| {
            format!(
                "bad argument #{} to '{func}' (string expected, got {})",
                i + 1,
                v.type_name()
            )
        }),
        None => Err(format!(
            "bad argument #{} to '{func}' (string expected, got no value)",
            i + 1
        )),
    }
}

fn format_arg(args: &MultiValue, func: &str) -> Result<Vec<u8>, String> {
    string_arg(args, 0, func)
}

fn pack(lua: &Lua, args: MultiValue) -> Result<MultiValue, String> {
    let f = format_arg(&args, "pack")?;
    let mut fmt = Format { f: &f, at: 0 };
    let mut h = Header {
        big: false,
        align: 1,
    };
    let mut out = Vec::new();
    let mut arg = 1usize; // index into args (0 is the format)
    while let Some(opt) = fmt.next() {
        let mut size = fmt.size(opt)?;
        let pad = to_align(out.len(), &h, opt, size);
        out.resize(out.len() + pad, 0);
        match opt {
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                let n = number(args.get(arg), arg + 1, "pack")?;
                arg += 1;
                let mut v: u64 = if n < 0.0 { (n as i64) as u64 } else { n as u64 };
                let mut bytes = Vec::with_capacity(size);
                for _ in 0..size {
                    bytes.push(v as u8);
                    v = v.checked_shr(8).unwrap_or(0);
                }
                if h.big {
                    bytes.reverse();
                }
                out.extend_from_slice(&bytes);
            }
            b'x' => out.push(0),
            b'f' => {
                let n = number(args.get(arg), arg + 1, "pack")? as f32;
                arg += 1;
                out.extend_from_slice(&if h.big {
                    n.to_be_bytes()
                } else {
                    n.to_le_bytes()
                });
            }
            b'd' => {
                let n = number(args.get(arg), arg + 1, "pack")?;
                arg += 1;
                out.extend_from_slice(&if h.big {
                    n.to_be_bytes()
                } else {
                    n.to_le_bytes()
                });
            }
            b'c' | b's' => {
                let s = string_arg(&args, arg, "pack")?;
                arg += 1;
                if size == 0 {
                    size = s.len();
                }
                if s.len() < size {
                    return Err(format!(
                        "bad argument #{} to 'pack' (string too short)",
                        arg + 1
                    ));
                }
                out.extend_from_slice(&s[..size]);
                if opt == b's' {
                    out.push(0);
                }
                continue;
            }
            _ => fmt.control(opt, &mut h, "pack")?,
        }
    }
    Ok(one(LuaValue::String(
        lua.create_string(&out).map_err(|e| e.to_string())?,
    )))
}

fn unpack(lua: &Lua, args: MultiValue) -> Result<MultiValue, String> {
    let f = format_arg(&args, "unpack")?;
    let data = match args.get(1) {
        Some(LuaValue::String(s)) => s.as_bytes().to_vec(),
        Some(v) => {
            return Err(format!(
                "bad argument #2 to 'unpack' (string expected, got {})",
                v.type_name()
            ))
        }
        None => return Err("bad argument #2 to 'unpack' (string expected, got no value)".into()),
    };
    let start = match args.get(2) {
        None | Some(LuaValue::Nil) => 1.0,
        v => number(v, 3, "unpack")?,
    };
    let ld = data.len();
    if start < 1.0 || (start as usize) - 1 > ld {
        return Err("bad argument #3 to 'unpack' (offset must be 1 or greater)".into());
    }
    let mut pos = start as usize - 1;
    let mut fmt = Format { f: &f, at: 0 };
    let mut h = Header {
        big: false,
        align: 1,
    };
    let mut out: Vec<LuaValue> = Vec::new();
    let short = || "bad argument #2 to 'unpack' (data string too short)".to_string();
    while let Some(opt) = fmt.next() {
        let mut size = fmt.size(opt)?;
        pos += to_align(pos, &h, opt, size);
        if size > ld || pos > ld - size {
            return Err(short());
        }
        match opt {
            b'b' | b'B' | b'h' | b'H' | b'l' | b'L' | b'T' | b'i' | b'I' => {
                let mut bytes = data[pos..pos + size].to_vec();
                if h.big {
                    bytes.reverse();
                }
                let mut l: u64 = 0;
                for &b in bytes.iter().rev() {
                    l = l.checked_shl(8).unwrap_or(0) | u64::from(b);
                }
                let v = if opt.is_ascii_lowercase() {
                    if size < 8 {
                        let mask = u64::MAX << (size * 8 - 1);
                        if l & mask != 0 {
                            l |= mask;
                        }
                    }
                    (l as i64) as f64
                } else {
                    l as f64
                };
                out.push(LuaValue::Number(v));
            }
            b'x' => {}
            b'f' => {
                let b: [u8; 4] = data[pos..pos + 4].try_into().expect("4 bytes");
                let v = if h.big {
                    f32::from_be_bytes(b)
                } else {
                    f32::from_le_bytes(b)
                };
                out.push(LuaValue::Number(f64::from(v)));
            }
            b'd' => {
                let b: [u8; 8] = data[pos..pos + 8].try_into().expect("8 bytes");
                let v = if h.big {
                    f64::from_be_bytes(b)
                } else {
                    f64::from_le_bytes(b)
                };
                out.push(LuaValue::Number(v));
            }
            b'c' => {
                if size == 0 {
                    let Some(LuaValue::Number(n)) = out.last() else {
                        return Err("format 'c0' needs a previous size".into());
                    };
                    size = *n as usize;
                    out.pop();
                    if size > ld || pos > ld - size {
                        return Err(short());
                    }
                }
                let s = lua
                    .create_string(&data[pos..pos + size])
                    .map_err(|e| e.to_string())?;
                out.push(LuaValue::String(s));
            }
            b's' => {
                let Some(e) = data[pos..].iter().position(|&b| b == 0) else {
                    return Err("unfinished string in data".into());
                };
                let s = lua
                    .create_string(&data[pos..pos + e])
                    .map_err(|e| e.to_string())?;
                out.push(LuaValue::String(s));
                size = e + 1;
            }
            _ => fmt.control(opt, &mut h, "unpack")?,
        }
        pos += size;
    }
    out.push(LuaValue::Number((pos + 1) as f64));
    Ok(MultiValue::from_iter(out))
}

fn size(_: &Lua, args: MultiValue) -> Result<MultiValue, String> {
    let f = format_arg(&args, "size")?;
    let mut fmt = Format { f: &f, at: 0 };
    let mut h = Header {
        big: false,
        align: 1,
    };
    let mut pos = 0usize;
    while let Some(opt) = fmt.next() {
        let size = fmt.size(opt)?;
        pos += to_align(pos, &h, opt, size);
        if opt == b's' {
            return Err("bad argument #1 to 'size' (option 's' has no fixed size)".into());
        }
        if opt == b'c' && size == 0 {
            return Err("bad argument #1 to 'size' (option 'c0' has no fixed size)".into());
        }
        if !opt.is_ascii_alphanumeric() {
            fmt.control(opt, &mut h, "size")?;
        }
        pos += size;
    }
    Ok(one(LuaValue::Number(pos as f64)))
}

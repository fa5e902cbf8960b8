//! Redis 7.0 functions: FUNCTION LOAD / LIST / DELETE / FLUSH / STATS /
//! KILL, FCALL and FCALL_RO.
//!
//! A library is Lua code under a `#!lua name=<library>` line that calls
//! `redis.register_function` when it is loaded. The Lua thread loads it
//! (`Vm::load_library`, in an environment whose `redis` table offers only
//! registration and logging, as Redis's does), keeps the registry and the
//! compiled functions, and answers every FUNCTION subcommand, so the
//! registry needs no lock. Libraries persist in the store itself: their
//! code, in the engine namespace `redis-functions` under one key, written
//! (durably) by each LOAD, DELETE and FLUSH and loaded again when the Lua
//! thread starts.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use mlua::{Function, MultiValue, Table, Value as LuaValue};
use nvdepot_resp::{errors, Reply, Version};

use super::lua::{FunctionDef, Vm};
use super::session::Shared;

/// The engine namespace holding the libraries' code.
const NAMESPACE: &str = "redis-functions";
const KEY: &[u8] = b"libraries";

/// Flags a function may declare.
const FLAGS: &[&str] = &[
    "no-writes",
    "allow-oom",
    "allow-stale",
    "no-cluster",
    "allow-cross-slot-keys",
];

/// What a library's first line says: its name.
fn metadata(code: &[u8]) -> Result<String, String> {
    if !code.starts_with(b"#!") {
        return Err("ERR Missing library metadata".into());
    }
    let end = code.iter().position(|&b| b == b'\n').unwrap_or(code.len());
    let line = String::from_utf8_lossy(&code[2..end]).into_owned();
    let mut parts = line.split(' ').filter(|p| !p.is_empty());
    let engine = parts.next().unwrap_or("");
    if !engine.eq_ignore_ascii_case("lua") {
        return Err(format!("ERR Engine '{engine}' not found"));
    }
    let mut name = None;
    for p in parts {
        match p.strip_prefix("name=") {
            Some(_) if name.is_some() => {
                return Err(
                    "ERR Invalid metadata value, name argument was given multiple times".into(),
                )
            }
            Some(n) => name = Some(n.to_string()),
            None => return Err(format!("ERR Invalid metadata value given: {p}")),
        }
    }
    let name = name.ok_or("ERR Library name was not given")?;
    if !valid_name(name.as_bytes()) {
        return Err(NAME_RULE.into());
    }
    Ok(name)
}

const NAME_RULE: &str = "ERR Library names can only contain letters, numbers, or underscores(_) \
                         and must be at least one character long";

fn valid_name(n: &[u8]) -> bool {
    !n.is_empty() && n.iter().all(|&b| b.is_ascii_alphanumeric() || b == b'_')
}

/// A function being registered during a load.
struct Pending {
    name: String,
    callback: Function,
    description: Option<Vec<u8>>,
    flags: Vec<&'static str>,
}

/// `redis.register_function(name, callback)` or
/// `redis.register_function{function_name=…, callback=…, flags=…,
/// description=…}`.
fn register(args: MultiValue) -> Result<Pending, String> {
    let text = super::lua_libs::text;
    let (name, callback, description, flags) = match args.len() {
        1 => {
            let Some(LuaValue::Table(t)) = args.front() else {
                return Err(
                    "calling redis.register_function with a single argument is only \
                            applicable to Lua table (representing named arguments)."
                        .into(),
                );
            };
            let mut name = None;
            let mut callback = None;
            let mut description = None;
            let mut flags = Vec::new();
            for pair in t.clone().pairs::<LuaValue, LuaValue>() {
                let (k, v) = pair.map_err(|e| e.to_string())?;
                let key = text(&k).unwrap_or_default();
                match key.as_slice() {
                    b"function_name" => name = Some(text(&v).ok_or(
                        "function_name argument given to redis.register_function must be a string",
                    )?),
                    b"callback" => match v {
                        LuaValue::Function(f) => callback = Some(f),
                        _ => return Err(
                            "callback argument given to redis.register_function must be a function"
                                .into(),
                        ),
                    },
                    b"description" => description = Some(text(&v).ok_or(
                        "description argument given to redis.register_function must be a string",
                    )?),
                    b"flags" => {
                        let LuaValue::Table(list) = v else {
                            return Err("flags argument to redis.register_function must be a table representing function flags".into());
                        };
                        for f in list.sequence_values::<LuaValue>() {
                            let f = f.map_err(|e| e.to_string())?;
                            let f = text(&f).unwrap_or_default();
                            match FLAGS.iter().find(|&&x| x.as_bytes() == f.as_slice()) {
                                Some(&x) => flags.push(x),
                                None => return Err("unknown flag given".into()),
                            }
                        }
                    }
                    _ => return Err("unknown argument given to redis.register_function".into()),
                }
            }
            let name = name.ok_or("redis.register_function must get a function name argument")?;
            let callback =
                callback.ok_or("redis.register_function must get a callback argument")?;
            (name, callback, description, flags)
        }
        2 => {
            let mut it = args.into_iter();
            let name = it
                .next()
                .and_then(|v| text(&v))
                .ok_or("first argument to redis.register_function must be a string")?;
            let Some(LuaValue::Function(callback)) = it.next() else {
                return Err("second argument to redis.register_function must be a function".into());
            };
            (name, callback, None, Vec::new())
        }
        _ => return Err("wrong number of arguments to redis.register_function".into()),
    };
    if !valid_name(&name) {
        // (Redis 7.0 names the library in this message too.)
        return Err(NAME_RULE.trim_start_matches("ERR ").into());
    }
    Ok(Pending {
        name: String::from_utf8_lossy(&name).into_owned(),
        callback,
        description,
        flags,
    })
}

/// The load-time environment's `redis` table: registration, logging and
/// the constants; anything else is the undefined-global error.
const LOAD_ENV: &str = r#"
local register, log, raw_g = ...
local api = {register_function = register, log = log, LOG_DEBUG = 0, LOG_VERBOSE = 1,
             LOG_NOTICE = 2, LOG_WARNING = 3, REDIS_VERSION = redis.REDIS_VERSION,
             REDIS_VERSION_NUM = redis.REDIS_VERSION_NUM}
local loading = true
local runtime = redis
local proxy = {}
setmetatable(proxy, {__index = function(_, k)
  if not loading then return runtime[k] end
  local v = rawget(api, k)
  if v == nil then
    error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
  end
  return v
end, __newindex = function() error('Attempt to modify a readonly table', 2) end})
local env = {}
setmetatable(env, {__index = function(_, k)
  if k == 'redis' then return proxy end
  return raw_g[k]
end, __newindex = function() error('Attempt to modify a readonly table', 2) end})
return env, function(on) loading = on end
"#;

impl Vm {
    /// Reads the libraries back from the store, once.
    pub(super) fn restore_functions(&mut self, shared: &Shared) {
        if self.registry.restored {
            return;
        }
        self.registry.restored = true;
        let engine = shared.store.cache().engine();
        let Some(ns) = engine.namespace(NAMESPACE) else {
            return;
        };
        let blob = match engine.get(ns, KEY) {
            Ok(Some(b)) => b,
            Ok(None) => return,
            Err(e) => {
                tracing::error!("resp: the function libraries could not be read: {e}");
                return;
            }
        };
        let mut at = 0;
        while at + 4 <= blob.len() {
            let n = u32::from_le_bytes(blob[at..at + 4].try_into().expect("4 bytes")) as usize;
            let Some(code) = blob.get(at + 4..at + 4 + n) else {
                break;
            };
            if let Err(e) = self.load_library(code, true) {
                tracing::error!("resp: a stored function library failed to load: {e}");
            }
            at += 4 + n;
        }
    }

    /// Writes the libraries' code to the store (durably).
    fn persist_functions(&self, shared: &Shared) -> Result<(), String> {
        let engine = shared.store.cache().engine();
        let ns = match engine.namespace(NAMESPACE) {
            Some(ns) => ns,
            None => engine
                .create_namespace(NAMESPACE)
                .map_err(|e| e.to_string())?,
        };
        let mut blob = Vec::new();
        for code in self.registry.libraries.values() {
            blob.extend_from_slice(&(code.len() as u32).to_le_bytes());
            blob.extend_from_slice(code);
        }
        let done = if blob.is_empty() {
            engine.delete(ns, KEY).map(|_| ())
        } else {
            engine.put(ns, KEY, &blob)
        };
        done.map_err(|e| format!("ERR the function libraries could not be stored: {e}"))
    }

    /// FUNCTION LOAD: the library's name, or the error reply's text.
    pub(super) fn load_library(&mut self, code: &[u8], replace: bool) -> Result<String, String> {
        let name = metadata(code)?;
        if self.registry.libraries.contains_key(&name) && !replace {
            return Err(format!("ERR Library '{name}' already exists"));
        }
        // The shebang line blanked: line numbers stay the code's.
        let end = code.iter().position(|&b| b == b'\n').unwrap_or(code.len());
        let chunk = self
            .lua
            .load(&code[end..])
            .set_name("@user_function")
            .into_function()
            .map_err(|e| {
                format!(
                    "ERR Error compiling function: {}",
                    super::lua::compile_message(&e)
                )
            })?;
        let pending = Rc::new(RefCell::new(Vec::<Pending>::new()));
        let failed = Rc::new(RefCell::new(None::<String>));
        let (p, f) = (Rc::clone(&pending), Rc::clone(&failed));
        let lua_err = |e: mlua::Error| format!("ERR {e}");
        let register_fn = self
            .lua
            .create_function(move |_, args: MultiValue| {
                match register(args) {
                    Ok(reg) => {
                        if p.borrow().iter().any(|x| x.name == reg.name) {
                            *f.borrow_mut() = Some("Function already exists in the library".into());
                        } else {
                            p.borrow_mut().push(reg);
                            return Ok(());
                        }
                    }
                    Err(e) => *f.borrow_mut() = Some(e),
                }
                Err(mlua::Error::runtime("register_function failed"))
            })
            .map_err(lua_err)?;
        let log: Function = self
            .lua
            .globals()
            .raw_get::<Table>("redis")
            .and_then(|r| r.raw_get("log"))
            .map_err(lua_err)?;
        let setup: (Table, Function) = self
            .lua
            .load(LOAD_ENV)
            .set_name("=nvdepot")
            .call((register_fn, log, self.lua.globals()))
            .map_err(lua_err)?;
        let (env, set_loading) = setup;
        chunk.set_environment(env).map_err(lua_err)?;
        let ran: mlua::Result<(bool, LuaValue)> = self
            .lua
            .load("local f = ... return xpcall(f, function(e) return e end)")
            .set_name("=nvdepot")
            .call(chunk);
        set_loading.call::<()>(false).map_err(lua_err)?;
        if let Some(e) = failed.borrow_mut().take() {
            return Err(format!("ERR Error registering functions: ERR {e}"));
        }
        match ran {
            Ok((true, _)) => {}
            Ok((false, e)) => {
                let msg = match &e {
                    LuaValue::Table(t) => t
                        .raw_get::<Option<String>>("err")
                        .ok()
                        .flatten()
                        .unwrap_or_else(|| "ERR unknown error".into()),
                    v => format!("ERR {}", v.to_string().unwrap_or_default()),
                };
                return Err(format!("ERR Error registering functions: {msg}"));
            }
            Err(e) => return Err(format!("ERR Error registering functions: ERR {e}")),
        }
        let pending = std::mem::take(&mut *pending.borrow_mut());
        if pending.is_empty() {
            return Err("ERR No functions registered".into());
        }
        for p in &pending {
            if let Some(other) = self.registry.functions.get(&p.name) {
                if other.library != name {
                    return Err(format!("ERR Function {} already exists", p.name));
                }
            }
        }
        self.registry.functions.retain(|_, f| f.library != name);
        for p in pending {
            self.registry.functions.insert(
                p.name,
                FunctionDef {
                    callback: p.callback,
                    library: name.clone(),
                    description: p.description,
                    flags: p.flags,
                },
            );
        }
        self.registry
            .libraries
            .insert(name.clone(), Arc::from(code));
        Ok(name)
    }

    /// Every FUNCTION subcommand: the reply, composed in `version`.
    pub(super) fn function_command(
        &mut self,
        shared: &Shared,
        args: &[Vec<u8>],
        version: Version,
    ) -> Vec<u8> {
        self.restore_functions(shared);
        let mut out = Vec::new();
        let mut r = Reply::new(&mut out, version);
        let sub = args
            .get(1)
            .map(|a| a.to_ascii_uppercase())
            .unwrap_or_default();
        let wrong = |r: &mut Reply<'_>| r.error(errors::wrong_sub_arity("function", &sub));
        match sub.as_slice() {
            b"LOAD" => {
                let (replace, code) = match args.len() {
                    3 => (false, &args[2]),
                    4 if args[2].eq_ignore_ascii_case(b"REPLACE") => (true, &args[3]),
                    4 => {
                        r.error(format!(
                            "ERR Unknown option given: {}",
                            String::from_utf8_lossy(&args[2])
                        ));
                        return out;
                    }
                    _ => {
                        wrong(&mut r);
                        return out;
                    }
                };
                let before = (
                    self.registry.libraries.clone(),
                    self.registry.functions.len(),
                );
                match self.load_library(code, replace) {
                    Ok(name) => match self.persist_functions(shared) {
                        Ok(()) => r.bulk(name.as_bytes()),
                        Err(e) => {
                            // Not stored: not loaded either.
                            self.registry.libraries = before.0;
                            r.error(e)
                        }
                    },
                    Err(e) => r.error(e),
                }
            }
            b"DELETE" => {
                if args.len() != 3 {
                    wrong(&mut r);
                    return out;
                }
                let name = String::from_utf8_lossy(&args[2]).into_owned();
                if self.registry.libraries.remove(&name).is_none() {
                    r.error("ERR Library not found");
                    return out;
                }
                self.registry.functions.retain(|_, f| f.library != name);
                match self.persist_functions(shared) {
                    Ok(()) => r.ok(),
                    Err(e) => r.error(e),
                }
            }
            b"FLUSH" => {
                if args.len() > 3 {
                    wrong(&mut r);
                    return out;
                }
                if let Some(mode) = args.get(2) {
                    if !mode.eq_ignore_ascii_case(b"ASYNC") && !mode.eq_ignore_ascii_case(b"SYNC") {
                        r.error("ERR FUNCTION FLUSH only supports SYNC|ASYNC option");
                        return out;
                    }
                }
                self.registry.libraries.clear();
                self.registry.functions.clear();
                match self.persist_functions(shared) {
                    Ok(()) => r.ok(),
                    Err(e) => r.error(e),
                }
            }
            b"LIST" => self.function_list(args, &mut r),
            b"STATS" => {
                if args.len() != 2 {
                    wrong(&mut r);
                    return out;
                }
                r.map(2);
                r.bulk(b"running_script");
                r.null();
                r.bulk(b"engines");
                r.map(1);
                r.bulk(b"LUA");
                r.map(2);
                r.bulk(b"libraries_count");
                r.integer(self.registry.libraries.len() as i64);
                r.bulk(b"functions_count");
                r.integer(self.registry.functions.len() as i64);
            }
            b"DUMP" => {
                if args.len() != 2 {
                    wrong(&mut r);
                    return out;
                }
                // Redis's payload: each library's code as RDB_OPCODE_FUNCTION2
                // and an RDB string, then the RDB version and a CRC-64.
                let mut items = Vec::new();
                for code in self.registry.libraries.values() {
                    items.push(super::dump::OPCODE_FUNCTION2);
                    super::dump::put_string(&mut items, code);
                }
                r.bulk(&super::dump::seal(items));
            }
            b"RESTORE" => {
                if args.len() < 3 {
                    wrong(&mut r);
                    return out;
                }
                match self.function_restore(shared, args) {
                    Ok(()) => r.ok(),
                    Err(e) => r.error(e),
                }
            }
            b"HELP" if args.len() == 2 => r.simple_lines(&[
            "FUNCTION <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "LOAD [REPLACE] <FUNCTION CODE>",
            "    Create a new library with the given library name and code.",
            "DELETE <LIBRARY NAME>",
            "    Delete the given library.",
            "LIST [LIBRARYNAME PATTERN] [WITHCODE]",
            "    Return general information on all the libraries:",
            "    * Library name",
            "    * The engine used to run the Library",
            "    * Library description",
            "    * Functions list",
            "    * Library code (if WITHCODE is given)",
            "    It also possible to get only function that matches a pattern using LIBRARYNAME argument.",
            "STATS",
            "    Return information about the current function running:",
            "    * Function name",
            "    * Command used to run the function",
            "    * Duration in MS that the function is running",
            "    If no function is running, return nil",
            "    In addition, returns a list of available engines.",
            "KILL",
            "    Kill the current running function.",
            "FLUSH [ASYNC|SYNC]",
            "    Delete all the libraries.",
            "    When called without the optional mode argument, the behavior is determined by the",
            "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
            "    * ASYNC: Asynchronously flush the libraries.",
            "    * SYNC: Synchronously flush the libraries.",
            "DUMP",
            "    Return a serialized payload representing the current libraries, can be restored using FUNCTION RESTORE command",
            "RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]",
            "    Restore the libraries represented by the given payload, it is possible to give a restore policy to",
            "    control how to handle existing libraries (default APPEND):",
            "    * FLUSH: delete all existing libraries.",
            "    * APPEND: appends the restored libraries to the existing libraries. On collision, abort.",
            "    * REPLACE: appends the restored libraries to the existing libraries, On collision, replace the old",
            "      libraries with the new libraries (notice that even on this option there is a chance of failure",
            "      in case of functions name collision with another library).",
            "HELP",
            "    Prints this help.",
            ]),
            _ => r.error(errors::unknown_subcommand(
                "FUNCTION",
                args.get(1).map_or(&b""[..], Vec::as_slice),
            )),
        }
        out
    }

    /// `FUNCTION RESTORE payload [FLUSH|APPEND|REPLACE]`, all or nothing:
    /// a payload of FUNCTION DUMP, from nvdepot or redis-server.
    fn function_restore(&mut self, shared: &Shared, args: &[Vec<u8>]) -> Result<(), String> {
        if args.len() > 4 {
            return Err(format!(
                "ERR unknown subcommand or wrong number of arguments for '{}'. Try FUNCTION HELP.",
                String::from_utf8_lossy(&args[1])
            ));
        }
        #[derive(PartialEq)]
        enum Policy {
            Append,
            Replace,
            Flush,
        }
        let policy = match args.get(3).map(|a| a.to_ascii_uppercase()).as_deref() {
            None | Some(b"APPEND") => Policy::Append,
            Some(b"REPLACE") => Policy::Replace,
            Some(b"FLUSH") => Policy::Flush,
            Some(_) => {
                return Err(
                    "ERR Wrong restore policy given, value should be either FLUSH, \
                            APPEND or REPLACE."
                        .into(),
                )
            }
        };
        let items = super::dump::verify(&args[2])
            .ok_or("ERR DUMP payload version or checksum are wrong")?;
        let mut reader = super::dump::Reader::new(items);
        let mut codes = Vec::new();
        while !reader.done() {
            match reader.byte() {
                Some(super::dump::OPCODE_FUNCTION2) => {}
                // (246: 7.0's release candidates' format, not read here.)
                _ => return Err("ERR given type is not a function".into()),
            }
            let code = reader
                .string()
                .ok_or("ERR failed loading the given functions payload")?;
            codes.push(code);
        }
        let before = (
            self.registry.libraries.clone(),
            self.registry.functions.clone(),
        );
        if policy == Policy::Flush {
            self.registry.libraries.clear();
            self.registry.functions.clear();
        }
        let mut loaded = Vec::new();
        let mut result = Ok(());
        for code in &codes {
            let name = match metadata(code) {
                Ok(n) => n,
                Err(e) => {
                    result = Err(e);
                    break;
                }
            };
            // A library twice in one payload, or (APPEND) one already here.
            if loaded.contains(&name)
                || (policy == Policy::Append && self.registry.libraries.contains_key(&name))
            {
                result = Err(format!("ERR Library {name} already exists"));
                break;
            }
            if let Err(e) = self.load_library(code, true) {
                result = Err(e);
                break;
            }
            loaded.push(name);
        }
        let result = result.and_then(|()| self.persist_functions(shared));
        if result.is_err() {
            self.registry.libraries = before.0;
            self.registry.functions = before.1;
        }
        result
    }

    /// `FUNCTION LIST [WITHCODE] [LIBRARYNAME pattern]`.
    fn function_list(&self, args: &[Vec<u8>], r: &mut Reply<'_>) {
        let mut with_code = false;
        let mut pattern: Option<&[u8]> = None;
        let mut i = 2;
        while i < args.len() {
            if args[i].eq_ignore_ascii_case(b"WITHCODE") && !with_code {
                with_code = true;
                i += 1;
            } else if args[i].eq_ignore_ascii_case(b"LIBRARYNAME")
                && pattern.is_none()
                && i + 1 < args.len()
            {
                pattern = Some(&args[i + 1]);
                i += 2;
            } else {
                return r.error(format!(
                    "ERR Unknown argument {}",
                    String::from_utf8_lossy(&args[i])
                ));
            }
        }
        let libs: Vec<(&String, &Arc<[u8]>)> = self
            .registry
            .libraries
            .iter()
            .filter(|(n, _)| pattern.is_none_or(|p| super::glob::matches_strictly(p, n.as_bytes())))
            .collect();
        r.array(libs.len());
        for (name, code) in libs {
            r.map(if with_code { 4 } else { 3 });
            r.bulk(b"library_name");
            r.bulk(name.as_bytes());
            r.bulk(b"engine");
            r.bulk(b"LUA");
            r.bulk(b"functions");
            let fns: Vec<(&String, &FunctionDef)> = self
                .registry
                .functions
                .iter()
                .filter(|(_, f)| &f.library == name)
                .collect();
            r.array(fns.len());
            for (fname, f) in fns {
                r.map(3);
                r.bulk(b"name");
                r.bulk(fname.as_bytes());
                r.bulk(b"description");
                match &f.description {
                    Some(d) => r.bulk(d),
                    None => r.null(),
                }
                r.bulk(b"flags");
                r.set(f.flags.len());
                for flag in &f.flags {
                    r.simple(flag);
                }
            }
            if with_code {
                r.bulk(b"library_code");
                r.bulk(code);
            }
        }
    }
}

//! The Lua VM that runs EVAL scripts, as Redis 7.0 sets its VM up: Lua
//! 5.1 with the base, table, string, math and coroutine libraries, Redis's
//! `bit` and `cjson`, the `redis` table, globals read-only, and Redis's
//! error handler (a script's error names the script and the line).
//!
//! EVAL scripts run on the worker that received them, in a VM of that
//! worker's own ([`run_here`]); a call's command is driven to completion
//! on the worker's ring while the worker's other tasks run on
//! (`nvdepot_io::uring::drive`). FUNCTION and FCALL, whose libraries live
//! in one VM, run on a Lua thread of their own ([`serve`]), which is not
//! a worker and runs the commands to completion with blocking IO
//! (`crate::block_on`), as the engine does outside a runtime. Either way
//! a script is atomic: the calling session holds the exclusive pass of
//! the gate while it runs.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use std::os::raw::c_int;

use mlua::{
    ffi, Function, HookTriggers, Lua, LuaOptions, MultiValue, StdLib, Table, Value as LuaValue,
    VmState,
};
use nvdepot_cache::staging::{self, Staging};
use nvdepot_resp::{Reply, Version};

use super::lua_call::{error_text, Running};
use super::lua_libs::{c_long_long, text};
use super::script_state::{LuaTask, ScriptState, Sha, ShaMap, SPIN};
use super::session::Shared;

/// Instructions between two checks of the time limit and SCRIPT KILL.
const HOOK_EVERY: u32 = 100_000;
/// Scripts between two collection steps, and the step's size (Redis's
/// `LUA_GC_CYCLE_PERIOD`).
const GC_CYCLE_PERIOD: u32 = 50;
/// Deepest table nesting a script's reply may have.
const REPLY_DEPTH_MAX: usize = 1000;

/// The set-up run once: Redis's error handler (with `debug.getinfo`
/// captured, then `debug` removed), the `redis.call` and `redis.pcall`
/// wrappers over the raw call, and the read-only globals.
const BOOTSTRAP: &str = r#"
local dbg = debug
debug = nil
function __redis__err__handler(err)
  local lvl = 2
  local i = dbg.getinfo(lvl, 'nSl')
  while i and (i.what == 'C' or i.source == '=nvdepot') do
    lvl = lvl + 1
    i = dbg.getinfo(lvl, 'nSl')
  end
  if type(err) ~= 'table' then
    err = {err = 'ERR ' .. tostring(err)}
  end
  if i then
    err['source'] = i.source
    err['line'] = i.currentline
  end
  return err
end
local raw_setresp = redis.setresp
redis.setresp = function(...)
  local e = raw_setresp(...)
  if e then error(e, 0) end
end
local raw_log = redis.log
redis.log = function(...)
  local e = raw_log(...)
  if e then error(e, 0) end
end
-- Redis's pcall: an error table caught gives its message.
local lua_pcall = pcall
local function pack(...) return {n = select('#', ...), ...} end
pcall = function(...)
  local r = pack(lua_pcall(...))
  if not r[1] and type(r[2]) == 'table' then
    local e = r[2].err
    if type(e) == 'string' or type(e) == 'number' then r[2] = e end
  end
  return unpack(r, 1, r.n)
end
local run_handler = __redis__err__handler
function __nv_run(f)
  return xpcall(f, run_handler)
end
function __nv_run_fn(f, keys, args)
  return xpcall(function() return f(keys, args) end, run_handler)
end
for _, name in ipairs({'getfenv', 'setfenv', 'newproxy', 'dofile', 'loadfile', 'print',
                       'module', 'require', 'gcinfo'}) do
  _G[name] = nil
end
-- Read-only globals and libraries, as Redis 7.0's patched Lua has them:
-- assignment, rawset and setmetatable are refused; getmetatable shows
-- nothing; reading a global that does not exist is an error.
local readonly = setmetatable({}, {__mode = 'k'})
local lua_setmetatable, lua_getmetatable, lua_rawset = setmetatable, getmetatable, rawset
local function refuse_write() error('Attempt to modify a readonly table', 2) end
for _, name in ipairs({'string', 'table', 'math', 'coroutine', 'bit', 'cjson', 'cmsgpack', 'struct', 'redis'}) do
  local t = _G[name]
  readonly[t] = true
  lua_setmetatable(t, {__newindex = refuse_write})
end
local wrap, raise_bare = __nv_wrap, __nv_raise_bare
__nv_wrap, __nv_raise, __nv_raise_bare = nil, nil, nil
setmetatable = wrap(function(t, mt)
  if readonly[t] then return raise_bare, 'Attempt to modify a readonly table' end
  return lua_setmetatable(t, mt)
end)
getmetatable = wrap(function(t)
  if readonly[t] then return nil end
  return lua_getmetatable(t)
end)
rawset = wrap(function(t, k, v)
  if readonly[t] then return raise_bare, 'Attempt to modify a readonly table' end
  return lua_rawset(t, k, v)
end)
readonly[_G] = true
lua_setmetatable(_G, {
  __index = function(_, k)
    error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
  end,
  __newindex = refuse_write,
})
"#;

/// The VM and the scripts compiled into it.
pub struct Vm {
    pub(super) lua: Lua,
    compiled: ShaMap<Function>,
    /// The script running, for `redis.call` (see `lua_call.rs`).
    calls: Rc<super::lua_call::Calls>,
    run: Function,
    /// `__nv_run_fn`: runs a registered function with its keys and args.
    run_fn: Function,
    /// FUNCTION's libraries (see `functions.rs`).
    pub(super) registry: Registry,
    /// SCRIPT FLUSH's count when `compiled` was last emptied.
    flushed: u64,
    /// Scripts run since the last collection step.
    since_gc: u32,
    /// The script the count hook watches (set for each run).
    watch: Rc<Watch>,
}

/// What the count hook, installed once per VM, checks every
/// [`HOOK_EVERY`] instructions: the script running (none: nothing to do)
/// and when it started. Installing the hook for each script cost an
/// allocation and two `lua_sethook`s per script.
#[derive(Default)]
struct Watch {
    running: RefCell<Option<(Instant, Arc<ScriptState>)>>,
    on_worker: std::cell::Cell<bool>,
}

impl Watch {
    /// The hook: past `busy-reply-threshold` the script is marked busy
    /// (on a worker, the worker's other connections are served between
    /// instructions); SCRIPT KILL stops it.
    fn check(&self) -> mlua::Result<VmState> {
        let Some((started, state)) = self.running.borrow().clone() else {
            return Ok(VmState::Continue);
        };
        let elapsed = started.elapsed().as_millis() as u64;
        if elapsed >= state.threshold_ms.load(Ordering::Relaxed) {
            state.busy.store(true, Ordering::Release);
            if self.on_worker.get() {
                // As Redis's processEventsWhileBlocked: the worker's other
                // connections are answered BUSY (and may send SCRIPT
                // KILL) while this runs.
                staging::hidden(nvdepot_io::uring::pump);
            }
        }
        if state.kill.swap(false, Ordering::AcqRel) {
            state.killed.store(true, Ordering::Release);
            return Err(mlua::Error::runtime(super::script_state::KILLED));
        }
        Ok(VmState::Continue)
    }
}

impl Vm {
    pub fn new() -> mlua::Result<Vm> {
        // SAFETY: the debug library is loaded only so that the error
        // handler can capture `debug.getinfo`; BOOTSTRAP removes `debug`
        // from the globals before any script runs, as Redis does.
        let lua = unsafe {
            Lua::unsafe_new_with(
                StdLib::TABLE | StdLib::STRING | StdLib::MATH | StdLib::DEBUG,
                LuaOptions::new(),
            )
        };
        let calls = Rc::new(super::lua_call::Calls::default());
        let g = lua.globals();
        let redis = lua.create_table()?;
        super::lua_call::install(&lua, &redis, &calls)?;
        redis.set(
            "error_reply",
            lua.create_function(|lua, msg: LuaValue| match msg {
                LuaValue::String(s) => {
                    let mut m = s.as_bytes().to_vec();
                    if !m.starts_with(b"-") {
                        m.insert(0, b'-');
                    }
                    error_table(lua, &m)
                }
                _ => Err(mlua::Error::runtime("wrong number or type of arguments")),
            })?,
        )?;
        redis.set(
            "status_reply",
            lua.create_function(|lua, msg: LuaValue| match msg {
                LuaValue::String(s) => {
                    let t = lua.create_table()?;
                    t.raw_set("ok", s)?;
                    Ok(t)
                }
                _ => Err(mlua::Error::runtime("wrong number or type of arguments")),
            })?,
        )?;
        redis.set(
            "sha1hex",
            lua.create_function(|_, s: mlua::String| {
                Ok(super::script_state::sha1_hex(&s.as_bytes()))
            })?,
        )?;
        redis.set(
            "log",
            lua.create_function(|lua, args: MultiValue| {
                if args.len() < 2 {
                    return Ok(Some(error_table(
                        lua,
                        b"redis.log() requires two arguments or more.",
                    )?));
                }
                let text: Vec<String> = args
                    .iter()
                    .skip(1)
                    .map(|v| v.to_string().unwrap_or_default())
                    .collect();
                tracing::info!("script: {}", text.join(" "));
                Ok(None)
            })?,
        )?;
        let c = Rc::clone(&calls);
        redis.set(
            "setresp",
            lua.create_function(move |lua, args: MultiValue| {
                if args.len() != 1 {
                    return Ok(Some(error_table(
                        lua,
                        b"redis.setresp() requires one argument.",
                    )?));
                }
                let n = match args.front() {
                    Some(LuaValue::Integer(n)) => *n as f64,
                    Some(LuaValue::Number(n)) => *n,
                    _ => 0.0,
                };
                if n != 2.0 && n != 3.0 {
                    return Ok(Some(error_table(lua, b"RESP version must be 2 or 3.")?));
                }
                if let Some(run) = c.running.borrow_mut().as_mut() {
                    run.resp3 = n == 3.0;
                }
                Ok(None)
            })?,
        )?;
        redis.set("set_repl", lua.create_function(|_, _: MultiValue| Ok(()))?)?;
        redis.set(
            "replicate_commands",
            lua.create_function(|_, _: MultiValue| Ok(true))?,
        )?;
        redis.set(
            "breakpoint",
            lua.create_function(|_, _: MultiValue| Ok(false))?,
        )?;
        redis.set("debug", lua.create_function(|_, _: MultiValue| Ok(()))?)?;
        redis.set(
            "acl_check_cmd",
            lua.create_function(|_, args: MultiValue| {
                let Some(LuaValue::String(name)) = args.front() else {
                    return Err(mlua::Error::runtime(
                        "Please specify at least one argument for this redis lib call",
                    ));
                };
                match super::commands::find(&name.as_bytes().to_ascii_uppercase()) {
                    Some(_) => Ok(true),
                    None => Err(mlua::Error::runtime(
                        "Invalid command passed to redis.acl_check_cmd()",
                    )),
                }
            })?,
        )?;
        for (k, v) in [
            ("LOG_DEBUG", 0),
            ("LOG_VERBOSE", 1),
            ("LOG_NOTICE", 2),
            ("LOG_WARNING", 3),
            ("REPL_NONE", 0),
            ("REPL_AOF", 1),
            ("REPL_SLAVE", 2),
            ("REPL_REPLICA", 2),
            ("REPL_ALL", 3),
        ] {
            redis.set(k, v)?;
        }
        redis.set("REDIS_VERSION", super::session::REDIS_VERSION)?;
        redis.set("REDIS_VERSION_NUM", 0x0007_0000)?;
        g.set("redis", redis)?;
        super::lua_libs::install(&lua)?;
        let libraries = [
            ("cmsgpack", super::lua_msgpack::library(&lua)?),
            ("struct", super::lua_struct::library(&lua)?),
        ];
        for (name, library) in libraries {
            let library = super::lua_libs::raising_table(&lua, library)?;
            g.set(name, library)?;
        }
        lua.load(BOOTSTRAP).set_name("=nvdepot").exec()?;
        let run: Function = g.raw_get("__nv_run")?;
        let run_fn: Function = g.raw_get("__nv_run_fn")?;
        let watch = Rc::new(Watch::default());
        let hook_watch = Rc::clone(&watch);
        lua.set_hook(
            HookTriggers::new().every_nth_instruction(HOOK_EVERY),
            move |_, _| hook_watch.check(),
        );
        Ok(Vm {
            lua,
            compiled: ShaMap::default(),
            calls,
            run,
            run_fn,
            registry: Default::default(),
            flushed: 0,
            since_gc: 0,
            watch,
        })
    }

    /// Runs one EVAL/EVALSHA job: the reply, composed in the client's
    /// protocol.
    pub fn run(&mut self, job: Job) -> Outcome {
        let mut out = Vec::new();
        let mut outcome = self.run_into(job, &mut out);
        outcome.reply = out;
        outcome
    }

    /// [`Vm::run`] with the reply appended to `out` (the outcome's own
    /// `reply` left empty): a script on a worker composes straight into
    /// its connection's reply buffer.
    pub fn run_into(&mut self, job: Job, out: &mut Vec<u8>) -> Outcome {
        let state = Arc::clone(&job.shared.scripts);
        let flushes = state.flushes.load(Ordering::Acquire);
        if flushes != self.flushed {
            self.compiled.clear();
            self.flushed = flushes;
            self.lua.gc_collect().ok();
        }
        let mut r = Reply::new(out, job.version);
        let mut read_only = job.read_only;
        let f = if let Some(name) = &job.function {
            self.restore_functions(&job.shared);
            let found = self
                .registry
                .functions
                .get(name)
                .map(|d| (d.callback.clone(), d.no_writes()));
            match found {
                None => {
                    r.error("ERR Function not found");
                    return Outcome {
                        reply: Vec::new(),
                        wakes: Vec::new(),
                        compiled: false,
                        owed: None,
                    };
                }
                Some((_, false)) if job.read_only => {
                    r.error("ERR Can not execute a script with write flag using *_ro command.");
                    return Outcome {
                        reply: Vec::new(),
                        wakes: Vec::new(),
                        compiled: false,
                        owed: None,
                    };
                }
                Some((f, no_writes)) => {
                    read_only |= no_writes;
                    f
                }
            }
        } else {
            match self.compiled.get(&job.sha) {
                Some(f) => f.clone(),
                None => {
                    let chunk = self.lua.load(&job.body[..]).set_name("@user_script");
                    match chunk.into_function() {
                        Ok(f) => {
                            self.compiled.insert(job.sha, f.clone());
                            f
                        }
                        Err(e) => {
                            r.error(format!(
                                "ERR Error compiling script (new function): {}",
                                compile_message(&e)
                            ));
                            return Outcome {
                                reply: Vec::new(),
                                wakes: Vec::new(),
                                compiled: false,
                                owed: None,
                            };
                        }
                    }
                }
            }
        };
        if let Err(e) = self.set_args(&job) {
            r.error(format!("ERR {e}"));
            return Outcome {
                reply: Vec::new(),
                wakes: Vec::new(),
                compiled: true,
                owed: None,
            };
        }
        // The script's writes are staged and written at its end as one
        // crash-atomic batch (`nvdepot_cache::staging`), unless it runs
        // inside a transaction's staging (EVAL inside MULTI), whose end
        // writes them with the transaction's.
        let (staging, own_staging) = match &job.staging {
            Some(s) => (Arc::clone(s), false),
            None => (Arc::new(Staging::default()), true),
        };
        *self.calls.running.borrow_mut() = Some(Running {
            staging: Arc::clone(&staging),
            shared: Arc::clone(&job.shared),
            db: job.db,
            read_only,
            started_ms: nvdepot_cache::resp::unix_now_ms(),
            resp3: false,
            wakes: Vec::new(),
            state: Arc::clone(&state),
            owed: None,
        });
        let on_worker = nvdepot_io::uring::in_runtime();
        self.watch.on_worker.set(on_worker);
        *self.watch.running.borrow_mut() = Some((Instant::now(), Arc::clone(&state)));
        // The script's puts wait for their durability once, after it
        // (see `nvdepot_engine::defer_durability`). On a worker each call
        // defers its own (`lua_call::call_from_script`): a deferral around
        // the whole script would also cover the worker's other tasks,
        // which run while a call waits.
        let call = || match &job.function {
            None => self.run.call::<(bool, LuaValue)>(f),
            Some(_) => {
                let keys = self.lua.globals().raw_get::<LuaValue>("KEYS")?;
                let argv = self.lua.globals().raw_get::<LuaValue>("ARGV")?;
                self.run_fn.call::<(bool, LuaValue)>((f, keys, argv))
            }
        };
        let (result, owed) = if on_worker {
            (call(), None)
        } else {
            staging::stage(&staging, || nvdepot_engine::defer_durability(call))
        };
        *self.watch.running.borrow_mut() = None;
        let running = self.calls.running.borrow_mut().take();
        let mut owed = owed.max(running.as_ref().and_then(|r| r.owed));
        if own_staging && !staging.is_empty() {
            let commit = job.shared.store.cache().commit_staged(&staging);
            let (done, lsn) = if on_worker {
                staging::hidden(|| {
                    nvdepot_io::uring::drive(nvdepot_engine::defer_durability_async(commit))
                })
            } else {
                nvdepot_engine::defer_durability(|| crate::block_on(commit))
            };
            owed = owed.max(lsn);
            if let Err(e) = done {
                r.error(format!("ERR the script's writes could not be written: {e}"));
                return Outcome {
                    reply: Vec::new(),
                    wakes: running.map(|r| r.wakes).unwrap_or_default(),
                    compiled: true,
                    owed,
                };
            }
        }
        let resp3_script = running.as_ref().is_some_and(|r| r.resp3);
        match result {
            Ok((true, v)) => reply_from_lua(&v, &mut r, resp3_script, 0),
            Ok((false, LuaValue::Table(t))) => {
                let msg = if state.killed.load(Ordering::Acquire) {
                    Some(super::script_state::KILLED.as_bytes().to_vec())
                } else {
                    t.raw_get::<LuaValue>("err").ok().and_then(|v| text(&v))
                };
                let source = t.raw_get::<LuaValue>("source").ok().and_then(|v| text(&v));
                let line = t.raw_get::<LuaValue>("line").ok().and_then(|v| text(&v));
                let msg = msg.unwrap_or_else(|| b"ERR unknown error".to_vec());
                let mut e = msg;
                e.extend_from_slice(
                    format!(
                        " script: {}, on {}:{}.",
                        job.function.as_deref().unwrap_or(job.sha.as_str()),
                        source.map_or_else(
                            || "?".into(),
                            |s| String::from_utf8_lossy(&s).into_owned()
                        ),
                        line.map_or_else(
                            || "?".into(),
                            |s| String::from_utf8_lossy(&s).into_owned()
                        ),
                    )
                    .as_bytes(),
                );
                r.error(e);
            }
            Ok((false, v)) => r.error(format!("ERR {}", v.to_string().unwrap_or_default())),
            Err(e) => r.error(format!("ERR Error running script: {e}")),
        }
        // As Redis (script_lua.c): a collection step of 50 every 50
        // scripts; a step after each cost 4 % of a script's CPU.
        self.since_gc += 1;
        if self.since_gc == GC_CYCLE_PERIOD {
            self.since_gc = 0;
            self.lua.gc_step_kbytes(GC_CYCLE_PERIOD as i32).ok();
        }
        Outcome {
            reply: Vec::new(),
            wakes: running.map(|r| r.wakes).unwrap_or_default(),
            compiled: true,
            owed,
        }
    }

    /// Compiles a script without running it (SCRIPT LOAD): the error
    /// reply's text if it does not compile.
    pub fn compile(&mut self, sha: &Sha, body: &[u8]) -> Result<(), String> {
        if self.compiled.contains_key(sha) {
            return Ok(());
        }
        match self.lua.load(body).set_name("@user_script").into_function() {
            Ok(f) => {
                self.compiled.insert(*sha, f);
                Ok(())
            }
            Err(e) => Err(format!(
                "ERR Error compiling script (new function): {}",
                compile_message(&e)
            )),
        }
    }

    /// KEYS and ARGV, set raw (the globals are read-only to scripts),
    /// through the C API: mlua's tables and strings cost 4 % of a 3-call
    /// script's CPU.
    fn set_args(&self, job: &Job) -> mlua::Result<()> {
        let lists: [(&[u8], &Args<'_>); 2] = [(b"KEYS", &job.keys), (b"ARGV", &job.argv)];
        // SAFETY: uses at most three stack slots (name, table, item), which
        // `exec_raw` checked; nothing here owns memory, so a memory error
        // (a longjmp to `exec_raw`'s protected call) skips no destructor.
        unsafe {
            self.lua.exec_raw::<()>((), |state| {
                for (name, items) in lists {
                    ffi::lua_pushlstring(state, name.as_ptr() as *const _, name.len());
                    let size = items.len().min(c_int::MAX as usize) as c_int;
                    ffi::lua_createtable(state, size, 0);
                    for i in 0..items.len() {
                        let a = items.get(i);
                        ffi::lua_pushlstring(state, a.as_ptr() as *const _, a.len());
                        ffi::lua_rawseti(state, -2, i as ffi::lua_Integer + 1);
                    }
                    ffi::lua_rawset(state, ffi::LUA_GLOBALSINDEX);
                }
            })
        }
    }
}

/// A compile error's message as Lua gives it (`user_script:1: …`).
pub(super) fn compile_message(e: &mlua::Error) -> String {
    match e {
        mlua::Error::SyntaxError { message, .. } => message.clone(),
        e => e.to_string(),
    }
}

/// Redis's error table for an error message (`luaPushErrorBuff`): a
/// leading `-` is dropped and the first word taken as the code; a message
/// without one gets `ERR`; trailing CR/LF trimmed.
pub fn error_table(lua: &Lua, msg: &[u8]) -> mlua::Result<Table> {
    let final_msg = error_text(msg);
    let t = lua.create_table()?;
    t.raw_set("err", lua.create_string(&final_msg)?)?;
    Ok(t)
}

/// A script's result as a reply (Redis's `luaReplyToRedisReply`).
fn reply_from_lua(v: &LuaValue, r: &mut Reply<'_>, resp3_script: bool, depth: usize) {
    if depth > REPLY_DEPTH_MAX {
        return r.error("ERR reached lua stack limit");
    }
    match v {
        LuaValue::String(s) => r.bulk(&s.as_bytes()),
        LuaValue::Boolean(b) => {
            if resp3_script {
                r.boolean(*b)
            } else if *b {
                r.integer(1)
            } else {
                r.null()
            }
        }
        LuaValue::Integer(n) => r.integer(*n),
        LuaValue::Number(n) => r.integer(c_long_long(*n)),
        LuaValue::Table(t) => {
            let field = |k: &str| t.raw_get::<LuaValue>(k).unwrap_or(LuaValue::Nil);
            if let LuaValue::String(e) = field("err") {
                let mut m = e.as_bytes().to_vec();
                if !m.starts_with(b"-") {
                    m.insert(0, b'-');
                }
                // `-%s`: the message as it is, its code included.
                return r.error(&m[1..]);
            }
            if let LuaValue::String(s) = field("ok") {
                let text: String = String::from_utf8_lossy(&s.as_bytes())
                    .chars()
                    .map(|c| if c == '\r' || c == '\n' { ' ' } else { c })
                    .collect();
                return r.simple(&text);
            }
            if let LuaValue::Number(d) = field("double") {
                return r.double(d);
            }
            if let LuaValue::Integer(d) = field("double") {
                return r.double(d as f64);
            }
            if let LuaValue::String(s) = field("big_number") {
                return r.big_number(&String::from_utf8_lossy(&s.as_bytes()));
            }
            if let LuaValue::Table(m) = field("map") {
                let pairs: Vec<(LuaValue, LuaValue)> = m.pairs().filter_map(Result::ok).collect();
                r.map(pairs.len());
                for (k, v) in &pairs {
                    reply_from_lua(k, r, resp3_script, depth + 1);
                    reply_from_lua(v, r, resp3_script, depth + 1);
                }
                return;
            }
            if let LuaValue::Table(s) = field("set") {
                let keys: Vec<LuaValue> = s
                    .pairs::<LuaValue, LuaValue>()
                    .filter_map(Result::ok)
                    .map(|(k, _)| k)
                    .collect();
                r.set(keys.len());
                for k in &keys {
                    reply_from_lua(k, r, resp3_script, depth + 1);
                }
                return;
            }
            let mut items = Vec::new();
            for i in 1.. {
                match t.raw_get::<LuaValue>(i) {
                    Ok(LuaValue::Nil) | Err(_) => break,
                    Ok(v) => items.push(v),
                }
            }
            r.array(items.len());
            for v in &items {
                reply_from_lua(v, r, resp3_script, depth + 1);
            }
        }
        _ => r.null(),
    }
}

thread_local! {
    /// The VM of this worker thread (see [`run_here`]).
    static WORKER_VM: RefCell<Option<Vm>> = const { RefCell::new(None) };
}

/// Runs an EVAL/EVALSHA job on this worker thread's own VM, made on first
/// use: no hand-off to the Lua thread and back (two sleeps and wake-ups
/// per script, which made scripts 3-4x slower than Redis's at 16
/// clients). The caller holds the exclusive pass of the gate, so no other
/// command runs until the script ends; the script's calls are driven on
/// this thread's ring (`nvdepot_io::uring::drive`).
pub fn run_here(job: Job, out: &mut Vec<u8>) -> Outcome {
    WORKER_VM.with(|cell| {
        let mut vm = cell.borrow_mut();
        if vm.is_none() {
            match Vm::new() {
                Ok(v) => *vm = Some(v),
                Err(e) => {
                    let msg = format!("ERR the Lua VM could not start: {e}");
                    return Outcome::error(job.version, &msg);
                }
            }
        }
        vm.as_mut().expect("made above").run_into(job, out)
    })
}

/// The script thread: runs jobs in arrival order, forever.
pub fn serve(jobs: std::sync::mpsc::Receiver<LuaTask>) {
    let vm = Vm::new().map_err(|e| {
        tracing::error!("resp: the Lua VM could not start: {e}");
        format!("ERR the Lua VM could not start: {e}")
    });
    LUA_THREAD_VM.with_borrow_mut(|slot| *slot = Some(vm));
    loop {
        // Spin a little for the next script before sleeping (see
        // `script_state::SPIN`).
        let spin_until = Instant::now() + SPIN;
        let task = loop {
            match jobs.try_recv() {
                Ok(w) => break Some(w),
                Err(std::sync::mpsc::TryRecvError::Disconnected) => break None,
                Err(std::sync::mpsc::TryRecvError::Empty) if Instant::now() < spin_until => {
                    std::hint::spin_loop()
                }
                Err(std::sync::mpsc::TryRecvError::Empty) => break jobs.recv().ok(),
            }
        };
        match task {
            Some(task) => task(),
            None => return,
        }
    }
}

thread_local! {
    /// The Lua thread's VM (where function libraries live), or why it
    /// could not start; `None` on every other thread.
    static LUA_THREAD_VM: std::cell::RefCell<Option<Result<Vm, String>>> =
        const { std::cell::RefCell::new(None) };
}

/// Runs `f` with the Lua thread's VM, or the error to refuse with when
/// called elsewhere (the Lua thread had stopped) or the VM did not start.
pub fn on_lua_thread<R>(f: impl FnOnce(Result<&mut Vm, &str>) -> R) -> R {
    LUA_THREAD_VM.with_borrow_mut(|slot| match slot {
        Some(Ok(vm)) => f(Ok(vm)),
        Some(Err(e)) => f(Err(e)),
        None => f(Err("ERR the Lua thread has stopped")),
    })
}

/// One registered function.
#[derive(Clone)]
pub struct FunctionDef {
    pub callback: Function,
    pub library: String,
    pub description: Option<Vec<u8>>,
    pub flags: Vec<&'static str>,
}

impl FunctionDef {
    pub fn no_writes(&self) -> bool {
        self.flags.contains(&"no-writes")
    }
}

/// The libraries and their functions (on the Lua thread).
#[derive(Default)]
pub struct Registry {
    /// Library name → its code, as loaded.
    pub libraries: BTreeMap<String, Arc<[u8]>>,
    pub functions: BTreeMap<String, FunctionDef>,
    /// The libraries were read back from the store.
    pub(super) restored: bool,
}

/// One script to run.
pub struct Job<'a> {
    pub shared: Arc<Shared>,
    pub sha: Sha,
    pub body: Arc<[u8]>,
    pub keys: Args<'a>,
    pub argv: Args<'a>,
    pub db: usize,
    /// The calling client's protocol: the reply is composed in it.
    pub version: Version,
    pub read_only: bool,
    /// FCALL: the registered function to run instead of the body.
    pub function: Option<String>,
    /// The staging of the transaction the script runs in (EVAL inside
    /// MULTI): its writes join the transaction's. `None`: a staging of
    /// its own, written at its end.
    pub staging: Option<Arc<nvdepot_cache::staging::Staging>>,
}

impl Job<'_> {
    /// The job with its arguments copied: for the Lua thread.
    pub fn owned(self) -> Job<'static> {
        Job {
            shared: self.shared,
            sha: self.sha,
            body: self.body,
            keys: self.keys.owned(),
            argv: self.argv.owned(),
            db: self.db,
            version: self.version,
            read_only: self.read_only,
            function: self.function,
            staging: self.staging,
        }
    }
}

/// A script's KEYS or ARGV: the client's arguments where they lie for a
/// script run on its worker, copies for one sent to the Lua thread.
pub enum Args<'a> {
    Borrowed(&'a [&'a [u8]]),
    Owned(Vec<Vec<u8>>),
}

impl Args<'_> {
    pub fn len(&self) -> usize {
        match self {
            Args::Borrowed(a) => a.len(),
            Args::Owned(a) => a.len(),
        }
    }

    pub fn get(&self, i: usize) -> &[u8] {
        match self {
            Args::Borrowed(a) => a[i],
            Args::Owned(a) => &a[i],
        }
    }

    /// The same arguments, owned.
    pub fn owned(&self) -> Args<'static> {
        Args::Owned((0..self.len()).map(|i| self.get(i).to_vec()).collect())
    }
}

/// What a script left.
pub struct Outcome {
    /// Its reply, composed.
    pub reply: Vec<u8>,
    /// Keys written that may wake blocked clients.
    pub wakes: Vec<(usize, Vec<u8>)>,
    /// It compiled (SCRIPT LOAD caches only then).
    pub compiled: bool,
    /// The log position its writes must reach on the device before the
    /// reply is sent (their durability was deferred).
    pub owed: Option<u64>,
}

impl Outcome {
    /// A script that did not run: only an error reply.
    pub fn error(version: Version, msg: &str) -> Outcome {
        let mut reply = Vec::new();
        Reply::new(&mut reply, version).error(msg);
        Outcome {
            reply,
            wakes: Vec::new(),
            compiled: false,
            owed: None,
        }
    }
}

//! `redis.call` and `redis.pcall`: a command called from a script, as
//! Redis's `luaRedisGenericCommand` runs it. They are C functions on the
//! Lua stack, as Redis's are: the arguments are read where Lua keeps them
//! (no copy of a string argument), the command composes its reply in RESP
//! into a buffer the VM keeps, and the reply is pushed onto the Lua stack
//! from that buffer item by item (`nvdepot_resp::Reader`), with no value
//! tree between. Going through mlua's callbacks (a registry reference per
//! argument, a `MultiValue`, a parsed `Value` and its conversion) cost a
//! fifth of a 3-call script's CPU.
//!
//! A Lua error is a `longjmp` past every frame between the raise and the
//! protected call, which runs no Rust destructor. So the work is split in
//! two: [`run_call`] does everything that owns memory and returns with all
//! of it dropped; only then does [`call_command`], whose frames own
//! nothing, push values (a memory error raises) and raise the call's error.

use std::cell::RefCell;
use std::os::raw::{c_int, c_void};
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use mlua::{ffi, Function, Lua, Table};
use nvdepot_cache::staging::Staging;
use nvdepot_resp::{errors, Item, Reader, Reply, Version};

use super::script_state::ScriptState;
use super::session::Shared;

/// A reply buffer grown past this is dropped after the call instead of
/// kept for the next one.
const KEPT_REPLY_BYTES: usize = 1 << 20;

/// What the calls of one VM share: the script running, and the reply of
/// the call in progress.
#[derive(Default)]
pub(super) struct Calls {
    pub running: RefCell<Option<Running>>,
    /// The call's reply in RESP, or its error's text (see [`Called`]).
    reply: RefCell<Vec<u8>>,
}

/// How a call ended; its reply or error is in [`Calls::reply`].
enum Called {
    /// A reply, in RESP, to push.
    Reply,
    /// An error (the text of Redis's error table: code, space, message):
    /// the command's error reply, or the call refused.
    Error,
}

/// Sets `redis.call` and `redis.pcall` in `redis`: C closures over
/// `calls`, which the Lua state keeps alive (its app data) as long as
/// itself.
pub(super) fn install(lua: &Lua, redis: &Table, calls: &Rc<Calls>) -> mlua::Result<()> {
    lua.set_app_data(Rc::clone(calls));
    let ptr = Rc::as_ptr(calls) as *mut c_void;
    let call: [(&str, ffi::lua_CFunction); 2] = [("call", redis_call), ("pcall", redis_pcall)];
    for (name, f) in call {
        // SAFETY: pushes one light userdata and one closure over it, within
        // the stack `exec_raw` checked; the pointer stays valid for the
        // closure's life, since the state owns an `Rc` of it (above).
        let function: Function = unsafe {
            lua.exec_raw((), |state| {
                ffi::lua_pushlightuserdata(state, ptr);
                ffi::lua_pushcclosure(state, f, 1);
            })
        }?;
        redis.set(name, function)?;
    }
    Ok(())
}

/// `redis.call`: an error raises (naming the script's line even when the
/// script tail-calls it, `return redis.call(…)`, as this is a C function).
unsafe extern "C-unwind" fn redis_call(state: *mut ffi::lua_State) -> c_int {
    call_command(state, true)
}

/// `redis.pcall`: an error is returned as its error table.
unsafe extern "C-unwind" fn redis_pcall(state: *mut ffi::lua_State) -> c_int {
    call_command(state, false)
}

/// Runs the call whose arguments are on the stack and pushes its reply
/// (or error table). Owns nothing: see the module's comment.
unsafe fn call_command(state: *mut ffi::lua_State, raise: bool) -> c_int {
    // SAFETY: the upvalue is the pointer `install` closed over.
    let calls = &*(ffi::lua_touserdata(state, ffi::lua_upvalueindex(1)) as *const Calls);
    let base = ffi::lua_gettop(state);
    let called = run_call(state, calls);
    let (ptr, len) = {
        let reply = calls.reply.borrow();
        (reply.as_ptr(), reply.len())
    };
    // SAFETY: the buffer is not touched again until the next call, which
    // cannot start before this one has pushed its reply (commands called
    // from a script do not run scripts).
    let bytes = std::slice::from_raw_parts(ptr, len);
    match called {
        Called::Reply => {
            if push_value(state, &mut Reader::new(bytes), 0) {
                return 1;
            }
            ffi::lua_settop(state, base);
            push_error_table(state, b"ERR the command's reply could not be read");
        }
        Called::Error => push_error_table(state, bytes),
    }
    if raise {
        ffi::lua_error(state);
    }
    1
}

/// Runs the call: its reply or error into `calls.reply`. Every value it
/// makes is dropped before it returns; it raises no Lua error (it only
/// reads the stack: `lua_tolstring` of a string does not allocate).
unsafe fn run_call(state: *mut ffi::lua_State, calls: &Calls) -> Called {
    let mut reply = calls.reply.borrow_mut();
    if reply.capacity() > KEPT_REPLY_BYTES {
        *reply = Vec::new();
    }
    reply.clear();
    let called = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        call(state, calls, &mut reply)
    }));
    let error = match called {
        Ok(Ok(())) if reply.first() == Some(&b'-') => error_text(&reply),
        Ok(Ok(())) => return Called::Reply,
        Ok(Err(message)) => error_text(message.as_bytes()),
        // The panic was logged by the hook; the script sees an error.
        Err(_) => error_text(b"ERR the command failed inside the server (see its log)"),
    };
    reply.clear();
    reply.extend_from_slice(&error);
    Called::Error
}

/// The call's arguments from the stack, and the command run with them.
unsafe fn call(
    state: *mut ffi::lua_State,
    calls: &Calls,
    reply: &mut Vec<u8>,
) -> Result<(), String> {
    let n = ffi::lua_gettop(state);
    // Numbers as `%.17g`, as Redis 7.0 (Lua's own `%.14g` loses digits).
    let mut numbers: Vec<Vec<u8>> = Vec::new();
    for i in 1..=n {
        match ffi::lua_type(state, i) {
            ffi::LUA_TSTRING => {}
            ffi::LUA_TNUMBER => numbers
                .push(super::lua_libs::format_g(ffi::lua_tonumber(state, i), 17).into_bytes()),
            _ => return Err("Lua redis lib command arguments must be strings or integers".into()),
        }
    }
    if n == 0 {
        return Err("Please specify at least one argument for this redis lib call".into());
    }
    let mut numbers = numbers.iter();
    let mut args: Vec<&[u8]> = Vec::with_capacity(n as usize);
    for i in 1..=n {
        if ffi::lua_type(state, i) == ffi::LUA_TSTRING {
            let mut len = 0;
            let p = ffi::lua_tolstring(state, i, &mut len);
            // SAFETY: a string on the stack stays alive (and unmoved) until
            // this C function returns.
            args.push(std::slice::from_raw_parts(p as *const u8, len));
        } else {
            args.push(numbers.next().expect("one per number").as_slice());
        }
    }
    let mut guard = calls.running.borrow_mut();
    let Some(run) = guard.as_mut() else {
        return Err("ERR redis.call outside a script".into());
    };
    let version = if run.resp3 {
        Version::Resp3
    } else {
        Version::Resp2
    };
    call_from_script(run, &args, &mut Reply::new(reply, version))
}

/// `{err = text}`, Redis's error table.
unsafe fn push_error_table(state: *mut ffi::lua_State, text: &[u8]) {
    ffi::lua_createtable(state, 0, 1);
    push_bytes(state, b"err");
    push_bytes(state, text);
    ffi::lua_rawset(state, -3);
}

unsafe fn push_bytes(state: *mut ffi::lua_State, b: &[u8]) {
    ffi::lua_pushlstring(state, b.as_ptr() as *const _, b.len());
}

/// A table of one field `key` whose value is pushed next: the caller
/// pushes it, then calls `lua_rawset(state, -3)`.
unsafe fn single(state: *mut ffi::lua_State, key: &[u8]) {
    ffi::lua_createtable(state, 0, 1);
    push_bytes(state, key);
}

/// Pushes the value `reader` is at as Lua sees a command's reply (Redis's
/// `redisProtocolToLuaType`): integers as numbers, null bulk and null
/// array as `false`, RESP3 null as `nil`, status and error as `{ok=…}`
/// and `{err=…}`, RESP3 types as Redis 7.0's tables (`{double=…}`,
/// `{map={…}}`, `{set={…}}`, `{big_number=…}`, `{verbatim_string=…}`).
/// `false` if the reply cannot be read (nothing to clean: the caller
/// resets the stack).
unsafe fn push_value(state: *mut ffi::lua_State, reader: &mut Reader<'_>, depth: usize) -> bool {
    if depth > nvdepot_resp::NESTING_MAX || ffi::lua_checkstack(state, 5) == 0 {
        return false;
    }
    let Ok(Some(item)) = reader.read() else {
        return false;
    };
    // An aggregate's length bounded by what is left to read (each item
    // takes 3 bytes at least): a bad header cannot size a huge table.
    let size = |n: usize| n.min(reader.remaining() / 3).min(c_int::MAX as usize) as c_int;
    match item {
        Item::Integer(n) => ffi::lua_pushnumber(state, n as f64),
        Item::Bulk(Some(b)) => push_bytes(state, b),
        Item::Bulk(None) | Item::NullArray => ffi::lua_pushboolean(state, 0),
        Item::Null => ffi::lua_pushnil(state),
        Item::Boolean(b) => ffi::lua_pushboolean(state, c_int::from(b)),
        Item::Simple(s) => {
            single(state, b"ok");
            push_bytes(state, s);
            ffi::lua_rawset(state, -3);
        }
        Item::Error(e) | Item::BulkError(e) => {
            single(state, b"err");
            push_bytes(state, e);
            ffi::lua_rawset(state, -3);
        }
        Item::Double(d) => {
            single(state, b"double");
            ffi::lua_pushnumber(state, d);
            ffi::lua_rawset(state, -3);
        }
        Item::BigNumber(b) => {
            single(state, b"big_number");
            push_bytes(state, b);
            ffi::lua_rawset(state, -3);
        }
        Item::Verbatim(format, text) => {
            single(state, b"verbatim_string");
            ffi::lua_createtable(state, 0, 2);
            push_bytes(state, b"format");
            push_bytes(state, format);
            ffi::lua_rawset(state, -3);
            push_bytes(state, b"string");
            push_bytes(state, text);
            ffi::lua_rawset(state, -3);
            ffi::lua_rawset(state, -3);
        }
        Item::Array(n) | Item::Push(n) => {
            ffi::lua_createtable(state, size(n), 0);
            for i in 1..=n {
                if !push_value(state, reader, depth + 1) {
                    return false;
                }
                ffi::lua_rawseti(state, -2, i as ffi::lua_Integer);
            }
        }
        Item::Map(n) => {
            single(state, b"map");
            ffi::lua_createtable(state, 0, size(n));
            for _ in 0..n {
                if !push_value(state, reader, depth + 1) || !push_value(state, reader, depth + 1) {
                    return false;
                }
                ffi::lua_rawset(state, -3);
            }
            ffi::lua_rawset(state, -3);
        }
        Item::Set(n) => {
            single(state, b"set");
            ffi::lua_createtable(state, 0, size(n));
            for _ in 0..n {
                if !push_value(state, reader, depth + 1) {
                    return false;
                }
                ffi::lua_pushboolean(state, 1);
                ffi::lua_rawset(state, -3);
            }
            ffi::lua_rawset(state, -3);
        }
    }
    true
}

/// Commands a script may not call (Redis's `noscript` flag, and the
/// session-bound commands nvdepot serves only to clients).
fn refused_in_scripts(name: &[u8]) -> bool {
    matches!(
        name,
        b"EVAL"
            | b"EVALSHA"
            | b"EVAL_RO"
            | b"EVALSHA_RO"
            | b"FCALL"
            | b"FCALL_RO"
            | b"SCRIPT"
            | b"FUNCTION"
            | b"MULTI"
            | b"EXEC"
            | b"DISCARD"
            | b"WATCH"
            | b"UNWATCH"
            | b"SUBSCRIBE"
            | b"UNSUBSCRIBE"
            | b"PSUBSCRIBE"
            | b"PUNSUBSCRIBE"
            | b"SSUBSCRIBE"
            | b"SUNSUBSCRIBE"
            | b"AUTH"
            | b"HELLO"
            | b"RESET"
            | b"QUIT"
            | b"SHUTDOWN"
            | b"SAVE"
            | b"BGSAVE"
            | b"WAIT"
            | b"CLIENT"
            | b"CONFIG"
            | b"CLUSTER"
            | b"CLUSTERX"
            | b"READONLY"
            | b"READWRITE"
            | b"ASKING"
            | b"DEBUG"
            | b"SWAPDB"
            | b"INFO"
            | b"BLPOP"
            | b"BRPOP"
            | b"BRPOPLPUSH"
            | b"BLMOVE"
            | b"BZPOPMIN"
            | b"BZPOPMAX"
            | b"BZMPOP"
    )
}

/// Runs one command a script calls (`redis.call`), composing its reply
/// into `r`; an error for the script (Redis's wording, without the
/// code) if the call itself is refused.
pub(super) fn call_from_script(
    run: &mut Running,
    args: &[&[u8]],
    r: &mut Reply<'_>,
) -> Result<(), String> {
    let upper = super::args::upper(args[0]);
    let name: &[u8] = &upper;
    let Some(spec) = super::commands::find(name) else {
        return Err("Unknown Redis command called from script".into());
    };
    let n = args.len() as i32;
    if (spec.arity > 0 && n != spec.arity) || n < -spec.arity {
        return Err("Wrong number of args calling Redis command from script".into());
    }
    // A container's subcommand is looked up and checked as Redis's
    // scriptCall does: unknown, then its arity.
    match super::command_info::check_subcommand(name, args) {
        Ok(()) => {}
        Err(super::command_info::Refused::UnknownSubcommand) => {
            return Err("Unknown Redis command called from script".into());
        }
        Err(super::command_info::Refused::Arity(_)) => {
            return Err("Wrong number of args calling Redis command from script".into());
        }
    }
    if refused_in_scripts(name) {
        return Err("This Redis command is not allowed from script".into());
    }
    if matches!(name, b"XREAD" | b"XREADGROUP")
        && args.iter().any(|a| a.eq_ignore_ascii_case(b"BLOCK"))
    {
        return Err(format!(
            "{} command is not allowed with BLOCK option from scripts",
            String::from_utf8_lossy(name).to_ascii_lowercase()
        ));
    }
    if spec.write {
        if run.read_only {
            return Err("Write commands are not allowed from read-only scripts.".into());
        }
        run.state.wrote.store(true, Ordering::Release);
    }
    let shared = Arc::clone(&run.shared);
    shared.monitors.feed(run.db, || "lua".into(), args);
    if let Some(cluster) = &shared.cluster {
        let keys = super::commands::keys(name, args);
        if !matches!(cluster.route(&keys, false), super::cluster::Route::Local) {
            return Err("Script attempted to access a non local key in a cluster node".into());
        }
    }
    match name {
        b"PING" => match args.get(1) {
            Some(m) => r.bulk(m),
            None => r.simple("PONG"),
        },
        b"ECHO" => r.bulk(args[1]),
        b"TIME" => super::admin::time(r),
        b"SELECT" => match super::args::int_arg(args[1]) {
            Some(db) if db >= 0 && (db as usize) < shared.store.databases() => {
                run.db = db as usize;
                r.ok();
            }
            Some(_) => r.error(errors::INVALID_DB),
            None => r.error(errors::NOT_INTEGER),
        },
        // Run here, not through `complete`: with the script's staging
        // current all the same (its writes count; a flush drops them).
        b"DBSIZE" => {
            let staged = Arc::clone(&run.staging);
            let n = nvdepot_cache::staging::stage(&staged, || shared.store.dbsize(run.db));
            r.integer(n as i64)
        }
        b"PUBLISH" => r.integer(shared.hub.publish(args[1], args[2]) as i64),
        b"SPUBLISH" => r.integer(shared.hub.spublish(args[1], args[2]) as i64),
        b"FLUSHDB" | b"FLUSHALL" => {
            let staged = Arc::clone(&run.staging);
            nvdepot_cache::staging::stage(&staged, || {
                super::keys::flush(&shared, run.db, name == b"FLUSHALL", r)
            })
        }
        b"COMMAND" => super::command_info::command(args, r),
        b"MEMORY" => {
            let db = run.db;
            complete(
                run,
                std::pin::pin!(super::admin::memory(&shared, db, args, r)),
            );
        }
        // Redis 7.0 lets BLMPOP run in a script, as LMPOP.
        b"BLMPOP" => {
            let mut a: Vec<&[u8]> = vec![b"LMPOP"];
            a.extend_from_slice(&args[2..]);
            let db = run.db;
            complete(
                run,
                std::pin::pin!(super::keys::execute(&shared, db, b"LMPOP", &a, r)),
            );
        }
        _ => {
            let db = run.db;
            // The keymiss wrapper holds the command pinned, not moved
            // into it (the command's future is 5 KB).
            let command = std::pin::pin!(super::keys::execute(&shared, db, name, args, r));
            let command = super::notify::reporting_misses(
                &shared.store,
                shared.notifies(super::notify::KEY_MISS),
                name,
                args,
                command,
            );
            if !complete(run, std::pin::pin!(command)) {
                return Err("Unknown Redis command called from script".into());
            }
        }
    }
    if super::blocking::may_wake(name) {
        for k in super::commands::keys(name, args) {
            run.wakes.push((run.db, k.to_vec()));
        }
    }
    Ok(())
}

/// Runs a called command to completion: on a worker, driven on its ring
/// with the durability of its puts deferred to the script's end (only
/// while it is polled: the worker's other tasks run in between); on the
/// Lua thread, with blocking IO inside the script's deferral.
/// The command comes pinned where it is made: its future (the largest of
/// every command's) is not moved again, here or into each wrapper.
fn complete<F: std::future::Future>(
    run: &mut Running,
    command: std::pin::Pin<&mut F>,
) -> F::Output {
    // The script's time, fixed for its calls (`clock.rs`).
    let command = std::pin::pin!(super::clock::fixed_at(run.started_ms, command));
    if !nvdepot_io::uring::in_runtime() {
        return crate::block_on(command);
    }
    // The ring's other tasks, run while the command waits, are not the
    // script's: only the command is polled with the script's staging.
    let staged = nvdepot_cache::staging::stage_async(&run.staging, command);
    let (out, owed) = nvdepot_cache::staging::hidden(|| {
        nvdepot_io::uring::drive(nvdepot_engine::defer_durability_async(staged))
    });
    run.owed = run.owed.max(owed);
    out
}

/// What the calls of the script running now need.
pub(super) struct Running {
    /// Where the script's writes wait for its end (see `Vm::run`).
    pub staging: Arc<Staging>,
    pub shared: Arc<Shared>,
    pub db: usize,
    pub read_only: bool,
    /// Unix ms when the script started: the time its calls read.
    pub started_ms: u64,
    /// `redis.setresp`: the protocol the called commands answer in.
    pub resp3: bool,
    /// Keys of commands that may wake blocked clients, signalled after.
    pub wakes: Vec<(usize, Vec<u8>)>,
    pub state: Arc<ScriptState>,
    /// The highest log position the calls' puts deferred their durability
    /// to (on a worker, where each call defers its own: see `run`).
    pub owed: Option<u64>,
}

pub(super) fn error_text(msg: &[u8]) -> Vec<u8> {
    let (code, rest): (&[u8], &[u8]) = if let Some(m) = msg.strip_prefix(b"-") {
        match m.iter().position(|&b| b == b' ') {
            Some(i) => (&m[..i], &m[i + 1..]),
            None => (b"ERR", m),
        }
    } else {
        (b"ERR", msg)
    };
    let mut rest = rest;
    while let Some((&last, init)) = rest.split_last() {
        if last == b'\r' || last == b'\n' {
            rest = init;
        } else {
            break;
        }
    }
    let mut out = code.to_vec();
    out.push(b' ');
    out.extend_from_slice(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A RESP reply as a script would see it, printed by a Lua function
    /// (tables with their keys sorted), or `unreadable`.
    fn seen(lua: &Lua, resp: &[u8]) -> String {
        // SAFETY: pushes one value within the stack `exec_raw` checked.
        let v: mlua::Value = unsafe {
            lua.exec_raw((), |state| {
                if !push_value(state, &mut Reader::new(resp), 0) {
                    ffi::lua_settop(state, 0);
                    push_bytes(state, b"unreadable");
                }
            })
        }
        .unwrap();
        let show: Function = lua
            .load(
                r#"
                local function show(v)
                  if type(v) ~= 'table' then return type(v) .. ':' .. tostring(v) end
                  local keys = {}
                  for k in pairs(v) do keys[#keys + 1] = k end
                  table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
                  local out = {}
                  for _, k in ipairs(keys) do out[#out + 1] = tostring(k) .. '=' .. show(v[k]) end
                  return '{' .. table.concat(out, ',') .. '}'
                end
                return show"#,
            )
            .eval()
            .unwrap();
        show.call(v).unwrap()
    }

    #[test]
    fn replies_reach_lua_as_redis_converts_them() {
        let lua = Lua::new();
        assert_eq!(seen(&lua, b":-7\r\n"), "number:-7");
        assert_eq!(seen(&lua, b"$3\r\nabc\r\n"), "string:abc");
        assert_eq!(seen(&lua, b"$-1\r\n"), "boolean:false");
        assert_eq!(seen(&lua, b"*-1\r\n"), "boolean:false");
        assert_eq!(seen(&lua, b"_\r\n"), "nil:nil");
        assert_eq!(seen(&lua, b"+OK\r\n"), "{ok=string:OK}");
        assert_eq!(seen(&lua, b"#t\r\n"), "boolean:true");
        assert_eq!(seen(&lua, b",2.5\r\n"), "{double=number:2.5}");
        assert_eq!(seen(&lua, b"(12\r\n"), "{big_number=string:12}");
        assert_eq!(
            seen(&lua, b"=7\r\ntxt:abc\r\n"),
            "{verbatim_string={format=string:txt,string=string:abc}}"
        );
        assert_eq!(
            seen(&lua, b"*3\r\n:1\r\n-ERR x\r\n!1\r\ny\r\n"),
            "{1=number:1,2={err=string:ERR x},3={err=string:y}}"
        );
        assert_eq!(
            seen(&lua, b"%2\r\n$1\r\na\r\n:1\r\n$1\r\nb\r\n*0\r\n"),
            "{map={a=number:1,b={}}}"
        );
        assert_eq!(
            seen(&lua, b"~2\r\n$1\r\nx\r\n:3\r\n"),
            "{set={3=boolean:true,x=boolean:true}}"
        );
        assert_eq!(seen(&lua, b">1\r\n+p\r\n"), "{1={ok=string:p}}");
    }

    #[test]
    fn bad_replies_are_refused_without_harm() {
        let lua = Lua::new();
        // Cut, bogus, too deep, and a header promising more than follows.
        for resp in [
            &b"*2\r\n:1\r\n"[..],
            b"?\r\n",
            b"",
            b"*1000000000\r\n:1\r\n",
        ] {
            assert_eq!(seen(&lua, resp), "string:unreadable", "{resp:?}");
        }
        let deep = "*1\r\n".repeat(200) + ":1\r\n";
        assert_eq!(seen(&lua, deep.as_bytes()), "string:unreadable");
        let ok = "*1\r\n".repeat(100) + ":1\r\n";
        assert!(seen(&lua, ok.as_bytes()).starts_with("{1={1="));
    }
}

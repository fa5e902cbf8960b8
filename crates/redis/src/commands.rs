//! The command table: every command `nvdepot serve` knows, with Redis 7.0's
//! arity, key positions and flags. It names what `COMMAND` describes
//! (`command_info.rs`, from Redis's own descriptions), checks queued
//! commands' arity inside `MULTI`, and gives cluster routing each
//! command's keys.

/// One command, as Redis's `COMMAND` describes it.
pub struct Spec {
    pub name: &'static str,
    /// Exact argument count (command name included) when positive, a
    /// minimum when negative.
    pub arity: i32,
    /// First key's argument index (0: no keys).
    pub first: i32,
    /// Last key's index; negative counts from the end (-1: the last).
    pub last: i32,
    /// Distance between keys.
    pub step: i32,
    /// Changes data (`write`) or only reads it.
    pub write: bool,
}

const fn spec(name: &'static str, arity: i32, first: i32, last: i32, step: i32) -> Spec {
    Spec {
        name,
        arity,
        first,
        last,
        step,
        write: false,
    }
}

const fn write(name: &'static str, arity: i32, first: i32, last: i32, step: i32) -> Spec {
    Spec {
        write: true,
        ..spec(name, arity, first, last, step)
    }
}

pub const COMMANDS: &[Spec] = &[
    spec("PING", -1, 0, 0, 0),
    spec("ECHO", 2, 0, 0, 0),
    spec("QUIT", -1, 0, 0, 0),
    spec("RESET", 1, 0, 0, 0),
    spec("HELLO", -1, 0, 0, 0),
    spec("AUTH", -2, 0, 0, 0),
    spec("SELECT", 2, 0, 0, 0),
    spec("CLIENT", -2, 0, 0, 0),
    spec("COMMAND", -1, 0, 0, 0),
    spec("INFO", -1, 0, 0, 0),
    spec("DBSIZE", 1, 0, 0, 0),
    write("FLUSHDB", -1, 0, 0, 0),
    write("FLUSHALL", -1, 0, 0, 0),
    write("SWAPDB", 3, 0, 0, 0),
    spec("TIME", 1, 0, 0, 0),
    write("SORT", -2, 1, 1, 1),
    spec("SORT_RO", -2, 1, 1, 1),
    spec("SLOWLOG", -2, 0, 0, 0),
    spec("LATENCY", -2, 0, 0, 0),
    spec("ROLE", 1, 0, 0, 0),
    spec("MONITOR", 1, 0, 0, 0),
    spec("MEMORY", -2, 0, 0, 0),
    spec("MODULE", -2, 0, 0, 0),
    spec("LOLWUT", -1, 0, 0, 0),
    spec("BGREWRITEAOF", 1, 0, 0, 0),
    spec("CONFIG", -2, 0, 0, 0),
    spec("WAIT", 3, 0, 0, 0),
    spec("SAVE", 1, 0, 0, 0),
    spec("BGSAVE", -1, 0, 0, 0),
    spec("LASTSAVE", 1, 0, 0, 0),
    spec("SHUTDOWN", -1, 0, 0, 0),
    spec("DEBUG", -2, 0, 0, 0),
    spec("MULTI", 1, 0, 0, 0),
    spec("EXEC", 1, 0, 0, 0),
    spec("DISCARD", 1, 0, 0, 0),
    spec("WATCH", -2, 1, -1, 1),
    spec("UNWATCH", 1, 0, 0, 0),
    spec("CLUSTER", -2, 0, 0, 0),
    spec("CLUSTERX", -2, 0, 0, 0),
    spec("READONLY", 1, 0, 0, 0),
    spec("READWRITE", 1, 0, 0, 0),
    spec("ASKING", 1, 0, 0, 0),
    spec("GET", 2, 1, 1, 1),
    write("SET", -3, 1, 1, 1),
    write("SETNX", 3, 1, 1, 1),
    write("SETEX", 4, 1, 1, 1),
    write("PSETEX", 4, 1, 1, 1),
    write("GETDEL", 2, 1, 1, 1),
    write("GETEX", -2, 1, 1, 1),
    spec("MGET", -2, 1, -1, 1),
    write("MSET", -3, 1, -1, 2),
    write("APPEND", 3, 1, 1, 1),
    spec("STRLEN", 2, 1, 1, 1),
    write("INCR", 2, 1, 1, 1),
    write("DECR", 2, 1, 1, 1),
    write("INCRBY", 3, 1, 1, 1),
    write("DECRBY", 3, 1, 1, 1),
    spec("GETRANGE", 4, 1, 1, 1),
    spec("SUBSTR", 4, 1, 1, 1),
    write("GETSET", 3, 1, 1, 1),
    write("SETRANGE", 4, 1, 1, 1),
    write("INCRBYFLOAT", 3, 1, 1, 1),
    write("MSETNX", -3, 1, -1, 2),
    write("RENAME", 3, 1, 2, 1),
    write("RENAMENX", 3, 1, 2, 1),
    write("DEL", -2, 1, -1, 1),
    write("UNLINK", -2, 1, -1, 1),
    spec("EXISTS", -2, 1, -1, 1),
    spec("TOUCH", -2, 1, -1, 1),
    write("COPY", -3, 1, 2, 1),
    write("MOVE", 3, 1, 1, 1),
    spec("DUMP", 2, 1, 1, 1),
    write("RESTORE", -4, 1, 1, 1),
    write("RESTORE-ASKING", -4, 1, 1, 1),
    write("MIGRATE", -6, 3, 3, 1),
    spec("OBJECT", -2, 2, 2, 1),
    spec("TYPE", 2, 1, 1, 1),
    write("EXPIRE", -3, 1, 1, 1),
    write("PEXPIRE", -3, 1, 1, 1),
    write("EXPIREAT", -3, 1, 1, 1),
    write("PEXPIREAT", -3, 1, 1, 1),
    spec("TTL", 2, 1, 1, 1),
    spec("PTTL", 2, 1, 1, 1),
    spec("EXPIRETIME", 2, 1, 1, 1),
    spec("PEXPIRETIME", 2, 1, 1, 1),
    write("PERSIST", 2, 1, 1, 1),
    spec("KEYS", 2, 0, 0, 0),
    spec("SCAN", -2, 0, 0, 0),
    spec("RANDOMKEY", 1, 0, 0, 0),
    write("HSET", -4, 1, 1, 1),
    write("HMSET", -4, 1, 1, 1),
    write("HSETNX", 4, 1, 1, 1),
    spec("HGET", 3, 1, 1, 1),
    spec("HMGET", -3, 1, 1, 1),
    spec("HGETALL", 2, 1, 1, 1),
    spec("HKEYS", 2, 1, 1, 1),
    spec("HVALS", 2, 1, 1, 1),
    write("HDEL", -3, 1, 1, 1),
    spec("HLEN", 2, 1, 1, 1),
    spec("HEXISTS", 3, 1, 1, 1),
    spec("HSTRLEN", 3, 1, 1, 1),
    write("HINCRBY", 4, 1, 1, 1),
    write("HINCRBYFLOAT", 4, 1, 1, 1),
    spec("HRANDFIELD", -2, 1, 1, 1),
    spec("HSCAN", -3, 1, 1, 1),
    write("SADD", -3, 1, 1, 1),
    write("SREM", -3, 1, 1, 1),
    spec("SISMEMBER", 3, 1, 1, 1),
    spec("SMISMEMBER", -3, 1, 1, 1),
    spec("SMEMBERS", 2, 1, 1, 1),
    spec("SCARD", 2, 1, 1, 1),
    write("SPOP", -2, 1, 1, 1),
    spec("SRANDMEMBER", -2, 1, 1, 1),
    write("SMOVE", 4, 1, 2, 1),
    spec("SINTER", -2, 1, -1, 1),
    spec("SINTERCARD", -3, 0, 0, 0),
    spec("SUNION", -2, 1, -1, 1),
    spec("SDIFF", -2, 1, -1, 1),
    write("SINTERSTORE", -3, 1, -1, 1),
    write("SUNIONSTORE", -3, 1, -1, 1),
    write("SDIFFSTORE", -3, 1, -1, 1),
    spec("SSCAN", -3, 1, 1, 1),
    write("LPUSH", -3, 1, 1, 1),
    write("RPUSH", -3, 1, 1, 1),
    write("LPUSHX", -3, 1, 1, 1),
    write("RPUSHX", -3, 1, 1, 1),
    write("LPOP", -2, 1, 1, 1),
    write("RPOP", -2, 1, 1, 1),
    spec("LLEN", 2, 1, 1, 1),
    spec("LINDEX", 3, 1, 1, 1),
    spec("LRANGE", 4, 1, 1, 1),
    write("LSET", 4, 1, 1, 1),
    write("LREM", 4, 1, 1, 1),
    write("LTRIM", 4, 1, 1, 1),
    write("LINSERT", 5, 1, 1, 1),
    spec("LPOS", -3, 1, 1, 1),
    write("LMOVE", 5, 1, 2, 1),
    write("RPOPLPUSH", 3, 1, 2, 1),
    write("LMPOP", -4, 0, 0, 0),
    write("BLPOP", -3, 1, -2, 1),
    write("BRPOP", -3, 1, -2, 1),
    write("BLMOVE", 6, 1, 2, 1),
    write("BRPOPLPUSH", 4, 1, 2, 1),
    write("BLMPOP", -5, 0, 0, 0),
    write("ZADD", -4, 1, 1, 1),
    write("ZINCRBY", 4, 1, 1, 1),
    write("ZREM", -3, 1, 1, 1),
    spec("ZSCORE", 3, 1, 1, 1),
    spec("ZMSCORE", -3, 1, 1, 1),
    spec("ZCARD", 2, 1, 1, 1),
    spec("ZCOUNT", 4, 1, 1, 1),
    spec("ZLEXCOUNT", 4, 1, 1, 1),
    spec("ZRANK", 3, 1, 1, 1),
    spec("ZREVRANK", 3, 1, 1, 1),
    spec("ZRANGE", -4, 1, 1, 1),
    write("ZRANGESTORE", -5, 1, 2, 1),
    spec("ZREVRANGE", -4, 1, 1, 1),
    spec("ZRANGEBYSCORE", -4, 1, 1, 1),
    spec("ZREVRANGEBYSCORE", -4, 1, 1, 1),
    spec("ZRANGEBYLEX", -4, 1, 1, 1),
    spec("ZREVRANGEBYLEX", -4, 1, 1, 1),
    write("ZREMRANGEBYRANK", 4, 1, 1, 1),
    write("ZREMRANGEBYSCORE", 4, 1, 1, 1),
    write("ZREMRANGEBYLEX", 4, 1, 1, 1),
    write("ZPOPMIN", -2, 1, 1, 1),
    write("ZPOPMAX", -2, 1, 1, 1),
    write("BZPOPMIN", -3, 1, -2, 1),
    write("BZPOPMAX", -3, 1, -2, 1),
    write("ZMPOP", -4, 0, 0, 0),
    write("BZMPOP", -5, 0, 0, 0),
    spec("ZUNION", -3, 0, 0, 0),
    spec("ZINTER", -3, 0, 0, 0),
    spec("ZDIFF", -3, 0, 0, 0),
    write("ZUNIONSTORE", -4, 1, 1, 1),
    write("ZINTERSTORE", -4, 1, 1, 1),
    write("ZDIFFSTORE", -4, 1, 1, 1),
    spec("ZINTERCARD", -3, 0, 0, 0),
    spec("ZRANDMEMBER", -2, 1, 1, 1),
    spec("ZSCAN", -3, 1, 1, 1),
    write("XADD", -5, 1, 1, 1),
    spec("XLEN", 2, 1, 1, 1),
    spec("XRANGE", -4, 1, 1, 1),
    spec("XREVRANGE", -4, 1, 1, 1),
    write("XDEL", -3, 1, 1, 1),
    write("XTRIM", -4, 1, 1, 1),
    write("XSETID", -3, 1, 1, 1),
    spec("XREAD", -4, 0, 0, 0),
    write("XREADGROUP", -7, 0, 0, 0),
    write("XGROUP", -2, 2, 2, 1),
    write("XACK", -4, 1, 1, 1),
    spec("XPENDING", -3, 1, 1, 1),
    write("XCLAIM", -6, 1, 1, 1),
    write("XAUTOCLAIM", -6, 1, 1, 1),
    spec("XINFO", -2, 2, 2, 1),
    write("SETBIT", 4, 1, 1, 1),
    spec("GETBIT", 3, 1, 1, 1),
    spec("BITCOUNT", -2, 1, 1, 1),
    spec("BITPOS", -3, 1, 1, 1),
    write("BITOP", -4, 2, -1, 1),
    write("BITFIELD", -2, 1, 1, 1),
    spec("BITFIELD_RO", -2, 1, 1, 1),
    spec("LCS", -3, 1, 2, 1),
    write("GEOADD", -5, 1, 1, 1),
    spec("GEODIST", -4, 1, 1, 1),
    spec("GEOHASH", -2, 1, 1, 1),
    spec("GEOPOS", -2, 1, 1, 1),
    spec("GEOSEARCH", -7, 1, 1, 1),
    write("GEOSEARCHSTORE", -8, 1, 2, 1),
    write("GEORADIUS", -6, 1, 1, 1),
    write("GEORADIUSBYMEMBER", -5, 1, 1, 1),
    spec("GEORADIUS_RO", -6, 1, 1, 1),
    spec("GEORADIUSBYMEMBER_RO", -5, 1, 1, 1),
    write("PFADD", -2, 1, 1, 1),
    spec("PFCOUNT", -2, 1, -1, 1),
    write("PFMERGE", -2, 1, -1, 1),
    write("PFDEBUG", 3, 2, 2, 1),
    spec("PFSELFTEST", 1, 0, 0, 0),
    spec("SUBSCRIBE", -2, 0, 0, 0),
    spec("UNSUBSCRIBE", -1, 0, 0, 0),
    spec("PSUBSCRIBE", -2, 0, 0, 0),
    spec("PUNSUBSCRIBE", -1, 0, 0, 0),
    spec("PUBLISH", 3, 0, 0, 0),
    spec("PUBSUB", -2, 0, 0, 0),
    // Shard channels route as keys (a cluster sends them to the slot's
    // node).
    spec("SSUBSCRIBE", -2, 1, -1, 1),
    spec("SUNSUBSCRIBE", -1, 1, -1, 1),
    spec("SPUBLISH", 3, 1, 1, 1),
    // Scripts' keys are the `numkeys` arguments after it (see `keys`).
    write("EVAL", -3, 0, 0, 0),
    write("EVALSHA", -3, 0, 0, 0),
    spec("EVAL_RO", -3, 0, 0, 0),
    spec("EVALSHA_RO", -3, 0, 0, 0),
    spec("SCRIPT", -2, 0, 0, 0),
    write("FCALL", -3, 0, 0, 0),
    spec("FCALL_RO", -3, 0, 0, 0),
    spec("FUNCTION", -2, 0, 0, 0),
];

/// The subcommands implemented, by lower-case full name as Redis 7.0's
/// `COMMAND LIST` names them (each described by `command_info`).
pub const SUBCOMMANDS: &[&str] = &[
    "client|caching",
    "client|getname",
    "client|getredir",
    "client|help",
    "client|id",
    "client|info",
    "client|kill",
    "client|list",
    "client|no-evict",
    "client|pause",
    "client|reply",
    "client|setname",
    "client|tracking",
    "client|trackinginfo",
    "client|unblock",
    "client|unpause",
    "cluster|addslots",
    "cluster|addslotsrange",
    "cluster|bumpepoch",
    "cluster|count-failure-reports",
    "cluster|countkeysinslot",
    "cluster|delslots",
    "cluster|delslotsrange",
    "cluster|failover",
    "cluster|flushslots",
    "cluster|forget",
    "cluster|getkeysinslot",
    "cluster|help",
    "cluster|info",
    "cluster|keyslot",
    "cluster|links",
    "cluster|meet",
    "cluster|myid",
    "cluster|nodes",
    "cluster|replicas",
    "cluster|replicate",
    "cluster|reset",
    "cluster|saveconfig",
    "cluster|set-config-epoch",
    "cluster|setslot",
    "cluster|shards",
    "cluster|slaves",
    "cluster|slots",
    "command|count",
    "command|docs",
    "command|getkeys",
    "command|getkeysandflags",
    "command|help",
    "command|info",
    "command|list",
    "config|get",
    "config|help",
    "config|resetstat",
    "config|rewrite",
    "config|set",
    "function|delete",
    "function|dump",
    "function|flush",
    "function|help",
    "function|kill",
    "function|list",
    "function|load",
    "function|restore",
    "function|stats",
    "latency|doctor",
    "latency|help",
    "latency|history",
    "latency|latest",
    "latency|reset",
    "memory|doctor",
    "memory|help",
    "memory|malloc-stats",
    "memory|purge",
    "memory|stats",
    "memory|usage",
    "module|help",
    "module|list",
    "module|load",
    "module|loadex",
    "module|unload",
    "object|encoding",
    "object|freq",
    "object|help",
    "object|idletime",
    "object|refcount",
    "pubsub|channels",
    "pubsub|help",
    "pubsub|numpat",
    "pubsub|numsub",
    "pubsub|shardchannels",
    "pubsub|shardnumsub",
    "script|debug",
    "script|exists",
    "script|flush",
    "script|help",
    "script|kill",
    "script|load",
    "slowlog|get",
    "slowlog|help",
    "slowlog|len",
    "slowlog|reset",
    "xgroup|create",
    "xgroup|createconsumer",
    "xgroup|delconsumer",
    "xgroup|destroy",
    "xgroup|help",
    "xgroup|setid",
    "xinfo|consumers",
    "xinfo|groups",
    "xinfo|help",
    "xinfo|stream",
];

/// The slot of command `name` (upper case) in [`COMMANDS`] (a hash probe:
/// every command run looks itself up, for `INFO commandstats`).
pub fn index(name: &[u8]) -> Option<usize> {
    static BY_NAME: std::sync::OnceLock<super::name_map::NameMap> = std::sync::OnceLock::new();
    BY_NAME
        .get_or_init(|| {
            super::name_map::NameMap::new(
                COMMANDS
                    .iter()
                    .enumerate()
                    .map(|(i, c)| (c.name.as_bytes(), i)),
            )
        })
        .get(name)
}

/// The spec of command `name` (upper case).
pub fn find(name: &[u8]) -> Option<&'static Spec> {
    index(name).map(|i| &COMMANDS[i])
}

/// The arity of command `name` (upper case), or `None` if unknown.
pub fn arity_of(name: &[u8]) -> Option<i32> {
    find(name).map(|c| c.arity)
}

/// The keys of a command (`args[0]` its upper-cased name), by its spec.
pub fn keys<'a>(name: &[u8], args: &[&'a [u8]]) -> Vec<&'a [u8]> {
    if matches!(
        name,
        b"EVAL" | b"EVALSHA" | b"EVAL_RO" | b"EVALSHA_RO" | b"FCALL" | b"FCALL_RO"
    ) {
        let n = args
            .get(2)
            .and_then(|a| std::str::from_utf8(a).ok()?.parse::<usize>().ok())
            .unwrap_or(0);
        return args.iter().skip(3).take(n).copied().collect();
    }
    if name == b"SORT" {
        return sort_keys(args);
    }
    if name == b"MIGRATE" {
        return args.get(migrate_keys(args)).unwrap_or_default().to_vec();
    }
    let Some(c) = find(name) else {
        return Vec::new();
    };
    if c.first == 0 || args.len() <= c.first as usize {
        return Vec::new();
    }
    let last = if c.last < 0 {
        args.len() as i64 + i64::from(c.last)
    } else {
        i64::from(c.last).min(args.len() as i64 - 1)
    };
    let mut out = Vec::new();
    let mut i = i64::from(c.first);
    while i <= last {
        out.push(args[i as usize]);
        i += i64::from(c.step.max(1));
    }
    out
}

/// Where a MIGRATE command's keys are in `args`, as Redis's
/// `migrateGetKeys`: the key argument, or every argument after `KEYS`
/// (skipping the options' arguments before it); none if `KEYS` comes
/// with a key argument that is not empty.
pub fn migrate_keys(args: &[&[u8]]) -> std::ops::Range<usize> {
    let mut i = 6;
    while i < args.len() {
        let a = args[i];
        if a.eq_ignore_ascii_case(b"KEYS") {
            if args.get(3).is_some_and(|k| !k.is_empty()) {
                return 0..0;
            }
            return i + 1..args.len();
        }
        if a.eq_ignore_ascii_case(b"AUTH") {
            i += 1;
        } else if a.eq_ignore_ascii_case(b"AUTH2") {
            i += 2;
        }
        i += 1;
    }
    3..4
}

/// The keys of a SORT command: the sorted key and a STORE destination
/// (as Redis's `sortGetKeys`, skipping the options' arguments).
pub fn sort_keys<'a>(args: &[&'a [u8]]) -> Vec<&'a [u8]> {
    let mut out = Vec::new();
    if args.len() < 2 {
        return out;
    }
    out.push(args[1]);
    let mut i = 2;
    while i < args.len() {
        let skip = match args[i].to_ascii_uppercase().as_slice() {
            b"LIMIT" => 2,
            b"GET" | b"BY" => 1,
            b"STORE" => {
                if let Some(dest) = args.get(i + 1) {
                    out.push(dest);
                }
                1
            }
            _ => 0,
        };
        i += 1 + skip;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_by_spec() {
        let a: Vec<&[u8]> = vec![b"MSET", b"a", b"1", b"b", b"2"];
        assert_eq!(keys(b"MSET", &a), vec![&b"a"[..], b"b"]);
        let a: Vec<&[u8]> = vec![b"DEL", b"a", b"b", b"c"];
        assert_eq!(keys(b"DEL", &a).len(), 3);
        let a: Vec<&[u8]> = vec![b"SET", b"k", b"v", b"EX", b"5"];
        assert_eq!(keys(b"SET", &a), vec![&b"k"[..]]);
        assert!(keys(b"PING", &[b"PING"]).is_empty());
        assert!(keys(b"GET", &[b"GET"]).is_empty());
    }
}

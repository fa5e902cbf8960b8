//! `CLUSTERX`: the administrator's cluster commands (Kvrocks's names where
//! they exist), and slot migration.
//!
//! - `CLUSTERX SETNODES "<id> <ip> <port> master - <slots>…\n…" <version> [FORCE]`
//!   sets the topology (a higher version replaces a lower one);
//! - `CLUSTERX SETNODEID <id>`, `CLUSTERX MYID`, `CLUSTERX VERSION`;
//! - `CLUSTERX MIGRATE <slots> <node-id>` moves slots (`N`, `A-B`, comma
//!   separated) from this node to another, with live traffic, and answers
//!   at once; `CLUSTER INFO` follows it (`migrating_state`);
//! - `CLUSTERX IMPORTING <slots> <node-id>` and `CLUSTERX SETSLOTS <slots>
//!   NODE <node-id>`, which a migrating node sends to its destination.
//!
//! A migration, as Redis's `MIGRATE`-based resharding: the source marks the
//! slots migrating (a command for a key still here is served here; for a
//! key not here it answers `-ASK <slot> <dst>`), the destination marks
//! them importing (it serves a command after `ASKING`). A thread then
//! repeatedly scans the source for keys of the slots and moves them in
//! batches of 64, each holding the exclusive pass of the isolation gate
//! (as Redis's `MIGRATE` blocks its server): read here, copied to the
//! destination (`ASKING`, `SET key value [PXAT expiry]`, or for a
//! collection `CLUSTERX RESTORE key type expiry data`, durable there
//! when answered), deleted here — so no command comes between the copy
//! and the delete, and no command's presence check straddles them. A key
//! absent here stays absent: commands for it are asked of the
//! destination. When a scan finds no key, the
//! destination takes the slots, then the source gives them up (`-MOVED`
//! from then on). No key is ever absent from both nodes: it is deleted
//! here only once the destination holds it durably. The administrator
//! then sends every node the new topology (`CLUSTERX SETNODES`, version
//! + 1).

use std::sync::Arc;

use nvdepot_cache::resp::{unix_now_ms, Change, Kind};
use nvdepot_resp::{Reply, Value};
use tracing::{info, warn};

use super::block_on;
use super::cluster::{keys_in_slots, parse_slots, Cluster, MigrationStatus};
use super::node_client::{encode, Client};
use super::session::Shared;

/// `CLUSTERX <subcommand> …`.
pub fn clusterx(shared: &Arc<Shared>, cluster: &Arc<Cluster>, args: &[&[u8]], r: &mut Reply<'_>) {
    let text = |i: usize| args.get(i).map(|a| String::from_utf8_lossy(a).into_owned());
    let sub = text(1).unwrap_or_default().to_ascii_uppercase();
    let done = |r: &mut Reply<'_>, res: Result<(), String>| match res {
        Ok(()) => r.ok(),
        Err(e) => r.error(format!("ERR {e}")),
    };
    match (sub.as_str(), args.len()) {
        ("MYID", 2) => r.bulk(cluster.myid().as_bytes()),
        ("VERSION", 2) => r.integer(cluster.version()),
        ("SETNODEID", 3) => done(r, cluster.set_myid(&text(2).unwrap_or_default())),
        ("SETNODES", 4 | 5) => {
            let force = match text(4) {
                None => false,
                Some(f) if f.eq_ignore_ascii_case("force") => true,
                Some(_) => return r.error("ERR syntax error"),
            };
            match text(3).and_then(|v| v.parse::<i64>().ok()) {
                None => r.error("ERR Invalid version"),
                Some(v) => done(r, cluster.set_nodes(&text(2).unwrap_or_default(), v, force)),
            }
        }
        ("IMPORTING", 4) => done(
            r,
            parse_slots(&text(2).unwrap_or_default())
                .map(|s| cluster.set_importing(&s, Some(&text(3).unwrap_or_default()))),
        ),
        ("SETSLOTS", 5) if text(3).is_some_and(|t| t.eq_ignore_ascii_case("node")) => done(
            r,
            parse_slots(&text(2).unwrap_or_default())
                .and_then(|s| cluster.give_slots(&s, &text(4).unwrap_or_default())),
        ),
        ("MIGRATE", 4) => done(
            r,
            start_migration(
                shared,
                cluster,
                &text(2).unwrap_or_default(),
                &text(3).unwrap_or_default(),
            ),
        ),
        _ => r.error(format!(
            "ERR unknown subcommand or wrong number of arguments for 'clusterx|{}'",
            sub.to_ascii_lowercase()
        )),
    }
}

/// `CLUSTERX RESTORE key type-code expire-at-ms data` (`args` from the
/// key on): stores a collection moved here by a migration (strings move
/// as SET), after checking its data decodes as its type. Async, unlike
/// the other subcommands: it writes the store from the worker.
pub async fn restore(shared: &Shared, args: &[&[u8]]) -> Result<(), String> {
    let [key, code, at, data] = args else {
        return Err("RESTORE takes key, type, expiry and data".into());
    };
    let number = |a: &[u8]| {
        std::str::from_utf8(a)
            .ok()
            .and_then(|t| t.parse::<u64>().ok())
    };
    let kind = number(code)
        .and_then(|c| u32::try_from(c).ok())
        .and_then(Kind::from_code)
        .filter(|k| *k != Kind::String)
        .ok_or("RESTORE: not a collection type code")?;
    let at = number(at).ok_or("RESTORE: bad expiry")?;
    super::types::check(kind, data).map_err(|e| format!("RESTORE: {e}"))?;
    shared
        .store
        .set_kind(0, key, kind, data, at)
        .await
        .map_err(|e| e.to_string())?;
    shared.notify(super::notify::GENERIC, "restore", 0, key);
    Ok(())
}

fn start_migration(
    shared: &Arc<Shared>,
    cluster: &Arc<Cluster>,
    slots_text: &str,
    dst_id: &str,
) -> Result<(), String> {
    let slots = parse_slots(slots_text)?;
    if slots.is_empty() {
        return Err("no slots given".into());
    }
    let Some(dst) = cluster.node(dst_id) else {
        return Err(format!("Unknown node {dst_id}"));
    };
    if dst_id == cluster.myid() {
        return Err("Can't migrate slots to myself".into());
    }
    if !cluster.owns_all(&slots) {
        return Err(format!(
            "Can't migrate slots {slots_text}: not all served by this node"
        ));
    }
    let mut running = false;
    cluster.update_migration(|m| running = m.state == "start");
    if running {
        return Err("a migration is already running".into());
    }
    cluster.set_migrating(&slots, Some(dst_id));
    cluster.set_migration(MigrationStatus {
        slots: slots_text.to_string(),
        destination: dst_id.to_string(),
        state: "start".into(),
        keys_moved: 0,
    });
    let (shared, cluster) = (Arc::clone(shared), Arc::clone(cluster));
    let addr = dst.addr();
    let dst_id = dst_id.to_string();
    std::thread::Builder::new()
        .name("serve-migrate".into())
        .spawn(move || {
            let result = migrate(&shared, &cluster, &slots, &addr, &dst_id);
            match &result {
                Ok(n) => info!("cluster: slots moved to {dst_id} ({addr}), {n} keys"),
                Err(e) => {
                    warn!("cluster: migration to {dst_id} ({addr}) failed: {e}");
                    cluster.set_migrating(&slots, None);
                }
            }
            cluster.update_migration(|m| {
                m.state = match &result {
                    Ok(_) => "success".into(),
                    Err(e) => format!("fail: {e}"),
                }
            });
        })
        .map_err(|e| format!("starting the migration thread: {e}"))?;
    Ok(())
}

/// Moves every key of `slots` to the node at `addr`, then the slots.
/// Returns the keys moved.
fn migrate(
    shared: &Shared,
    cluster: &Cluster,
    slots: &[(u16, u16)],
    addr: &str,
    dst_id: &str,
) -> Result<u64, String> {
    let text = slots
        .iter()
        .map(|&(a, b)| format!("{a}-{b}"))
        .collect::<Vec<_>>()
        .join(",");
    let mut dst = Client::connect(addr, shared.config.password.as_deref())?;
    let myid = cluster.myid();
    dst.expect_ok(&[b"CLUSTERX", b"IMPORTING", text.as_bytes(), myid.as_bytes()])?;
    let inside = |s: u16| slots.iter().any(|&(a, b)| a <= s && s <= b);
    let mut moved = 0u64;
    loop {
        let keys =
            keys_in_slots(&shared.store, unix_now_ms(), inside).map_err(|e| e.to_string())?;
        if keys.is_empty() {
            break;
        }
        for batch in keys.chunks(64) {
            moved += move_batch(shared, &mut dst, batch)?;
            cluster.update_migration(|m| m.keys_moved = moved);
        }
    }
    // The destination serves the slots first, then this node redirects
    // to it: a client is never sent back and forth.
    dst.expect_ok(&[
        b"CLUSTERX",
        b"SETSLOTS",
        text.as_bytes(),
        b"NODE",
        dst_id.as_bytes(),
    ])?;
    let _pass = block_on(shared.gate.exclusive());
    cluster.give_slots(slots, dst_id)?;
    Ok(moved)
}

/// Copies `keys` to the destination, then deletes them here, holding the
/// exclusive pass of the gate throughout.
fn move_batch(shared: &Shared, dst: &mut Client, keys: &[Vec<u8>]) -> Result<u64, String> {
    let _pass = block_on(shared.gate.exclusive());
    let now = unix_now_ms();
    let mut copied = Vec::new();
    for k in keys {
        let v = block_on(shared.store.get(0, k, now)).map_err(|e| e.to_string())?;
        if let Some(v) = v {
            // A paged collection goes whole, in the compact layout.
            let whole = block_on(super::types::compact_data(&shared.store, 0, k, &v))
                .map_err(|e| e.to_string())?;
            copied.push((
                k,
                v.kind(),
                whole.unwrap_or_else(|| v.data().to_vec()),
                v.expire_at_ms(),
                v.version(),
            ));
        }
    }
    let mut pipeline = Vec::new();
    let mut sent = 0;
    for (k, kind, data, at, _) in &copied {
        // An item expiring within the second is not worth sending: it is
        // deleted here only (expired, it reads as absent either way).
        if *at != 0 && *at <= now + 1000 {
            continue;
        }
        encode(&mut pipeline, &[b"ASKING"]);
        let at_text = at.to_string();
        if *kind != Kind::String {
            let code = (*kind as u32).to_string();
            let args: [&[u8]; 6] = [
                b"CLUSTERX",
                b"RESTORE",
                k,
                code.as_bytes(),
                at_text.as_bytes(),
                data,
            ];
            encode(&mut pipeline, &args);
        } else if *at == 0 {
            encode(&mut pipeline, &[b"SET", k, data]);
        } else {
            encode(
                &mut pipeline,
                &[b"SET", k, data, b"PXAT", at_text.as_bytes()],
            );
        }
        sent += 2;
    }
    dst.send(&pipeline)?;
    for _ in 0..sent {
        match dst.read()? {
            Value::Simple(s) if s == b"OK" => {}
            other => return Err(format!("destination answered {other:?}")),
        }
    }
    let mut deleted = 0;
    for (k, _, _, _, version) in &copied {
        let (gone, _) = block_on(shared.store.update(0, k, now, |cur| match cur {
            Some(c) if c.version() == *version => (Change::Delete, true),
            _ => (Change::Keep, false),
        }))
        .map_err(|e| e.to_string())?;
        if gone {
            // As Redis's MIGRATE deletes a moved key.
            shared.notify(super::notify::GENERIC, "del", 0, k);
        }
        deleted += u64::from(gone);
    }
    Ok(deleted)
}

//! SWAPDB (Redis 7.0's `swapdbCommand`): two databases exchange their
//! contents in O(1), whatever they hold, by exchanging the engine
//! namespaces behind them (`nvdepot_cache`'s `db_map.rs`: one durable
//! record). It runs holding the exclusive pass of the gate, so no command
//! sees one database swapped and not the other. Clients WATCHing a key
//! that exists in either database abort their EXEC (its version there is
//! not the one watched), as Redis touches such keys; clients blocked on
//! keys of either database are woken to look again, as Redis's
//! `scanDatabaseForReadyKeys`.

use nvdepot_resp::{errors, Reply};

use super::args::{arity, int_arg};
use super::session::Shared;

/// `SWAPDB index1 index2`.
pub async fn swapdb(shared: &Shared, args: &[&[u8]], r: &mut Reply<'_>) {
    if !arity(args, 3, Some(3), r) {
        return;
    }
    if shared.cluster.is_some() {
        r.error("ERR SWAPDB is not allowed in cluster mode");
        return;
    }
    let index = |a: &[u8]| int_arg(a).filter(|&n| i32::try_from(n).is_ok());
    let Some(a) = index(args[1]) else {
        return r.error("ERR invalid first DB index");
    };
    let Some(b) = index(args[2]) else {
        return r.error("ERR invalid second DB index");
    };
    let store = &shared.store;
    let dbs = store.databases() as i64;
    if a < 0 || b < 0 || a >= dbs || b >= dbs {
        return r.error(errors::INVALID_DB);
    }
    if nvdepot_cache::staging::current().is_some() {
        // Inside MULTI or a script the other writes are staged and land
        // together at the end; the swap cannot be one of them.
        return r.error("ERR SWAPDB inside MULTI or a script is not supported by nvdepot");
    }
    let (a, b) = (a as usize, b as usize);
    if a != b {
        if let Err(e) = store.swap_databases(a, b).await {
            return r.error(format!("ERR {e}"));
        }
        for db in [a, b] {
            shared.blocked.signal_db(db);
        }
    }
    r.ok();
}

//! Redis Cluster for `nvdepot serve --cluster-enabled`: the 16 384 hash
//! slots, `-MOVED`/`-ASK`/`-CROSSSLOT` redirections, and the `CLUSTER`
//! commands cluster-aware clients read (SLOTS, SHARDS, NODES, INFO, MYID,
//! KEYSLOT, COUNTKEYSINSLOT, GETKEYSINSLOT), so that they route by
//! themselves as they do with Redis.
//!
//! There is no cluster bus (no gossip, no failover): as with Kvrocks, the
//! topology is static, set by an administrator or a script on every node
//! with `CLUSTERX SETNODES "<id> <ip> <port> master - <slots>…\n…" <version>`
//! (a higher version replaces a lower one) and persisted with the store in
//! the cluster configuration file, so a restarted node comes back with
//! it. Moving slots between nodes is `CLUSTERX MIGRATE` (migrate.rs).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use nvdepot_cache::resp::{unix_now_ms, RespStore};

use nvdepot_resp::slot::{key_slot, SLOTS};
use nvdepot_resp::Reply;

/// One master of the topology.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    pub id: String,
    pub ip: String,
    pub port: u16,
    /// Inclusive slot ranges, ascending.
    pub slots: Vec<(u16, u16)>,
}

impl Node {
    pub fn addr(&self) -> String {
        format!("{}:{}", self.ip, self.port)
    }
}

/// The cluster as set by `CLUSTERX SETNODES`.
#[derive(Clone, Debug, Default)]
pub struct Topology {
    pub version: i64,
    pub nodes: Vec<Node>,
}

const UNASSIGNED: u16 = u16::MAX;

/// Parses a slot list: `N`, `A-B`, several separated by spaces or commas.
pub fn parse_slots(text: &str) -> Result<Vec<(u16, u16)>, String> {
    let mut out = Vec::new();
    for part in text.split([' ', ',']).filter(|p| !p.is_empty()) {
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (a, b),
            None => (part, part),
        };
        let parse = |s: &str| {
            s.parse::<u16>()
                .ok()
                .filter(|&n| n < SLOTS)
                .ok_or_else(|| format!("Invalid slot range: {part}"))
        };
        let (a, b) = (parse(a)?, parse(b)?);
        if a > b {
            return Err(format!("Invalid slot range: {part}"));
        }
        out.push((a, b));
    }
    Ok(out)
}

fn is_node_id(id: &str) -> bool {
    id.len() == 40 && id.bytes().all(|b| b.is_ascii_hexdigit())
}

impl Topology {
    /// Parses `CLUSTERX SETNODES` text: one node a line, `<id> <ip> <port>
    /// master - <slot or range>…` (Kvrocks's format). Replicas (`slave`
    /// lines) are refused: there is no replication.
    pub fn parse(text: &str, version: i64) -> Result<Topology, String> {
        let mut nodes: Vec<Node> = Vec::new();
        for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() < 5 {
                return Err(format!("Invalid cluster node line: {line}"));
            }
            if !is_node_id(f[0]) {
                return Err(format!("Invalid node id: {}", f[0]));
            }
            if f[3] != "master" {
                return Err(format!(
                    "Invalid node role {} (nvdepot has no replicas; every node is a master)",
                    f[3]
                ));
            }
            let port = f[2]
                .parse::<u16>()
                .ok()
                .filter(|&p| p > 0)
                .ok_or_else(|| format!("Invalid port: {}", f[2]))?;
            if nodes.iter().any(|n| n.id == f[0]) {
                return Err(format!("Duplicate node id: {}", f[0]));
            }
            nodes.push(Node {
                id: f[0].to_string(),
                ip: f[1].to_string(),
                port,
                slots: parse_slots(&f[5..].join(" "))?,
            });
        }
        let t = Topology { version, nodes };
        t.owners()?;
        Ok(t)
    }

    /// The owner (node index) of every slot; an error if two nodes claim
    /// one.
    fn owners(&self) -> Result<Vec<u16>, String> {
        let mut owner = vec![UNASSIGNED; usize::from(SLOTS)];
        for (i, n) in self.nodes.iter().enumerate() {
            for &(a, b) in &n.slots {
                for s in a..=b {
                    if owner[usize::from(s)] != UNASSIGNED && owner[usize::from(s)] != i as u16 {
                        return Err(format!("Slot {s} is assigned to two nodes"));
                    }
                    owner[usize::from(s)] = i as u16;
                }
            }
        }
        Ok(owner)
    }

    /// The SETNODES text of this topology.
    pub fn render(&self) -> String {
        let mut s = String::new();
        for n in &self.nodes {
            let _ = write!(s, "{} {} {} master -", n.id, n.ip, n.port);
            for &(a, b) in &n.slots {
                if a == b {
                    let _ = write!(s, " {a}");
                } else {
                    let _ = write!(s, " {a}-{b}");
                }
            }
            s.push('\n');
        }
        s
    }

    /// Gives the slots in `moved` to node `to` (merging ranges).
    pub fn reassign(&mut self, moved: &[(u16, u16)], to: usize) {
        let inside = |s: u16| moved.iter().any(|&(a, b)| a <= s && s <= b);
        for (i, n) in self.nodes.iter_mut().enumerate() {
            let mut all: Vec<u16> = n
                .slots
                .iter()
                .flat_map(|&(a, b)| a..=b)
                .filter(|&s| !inside(s))
                .collect();
            if i == to {
                all.extend(moved.iter().flat_map(|&(a, b)| a..=b));
            }
            all.sort_unstable();
            all.dedup();
            n.slots = ranges(&all);
        }
    }
}

/// Sorted distinct slots as inclusive ranges.
fn ranges(slots: &[u16]) -> Vec<(u16, u16)> {
    let mut out: Vec<(u16, u16)> = Vec::new();
    for &s in slots {
        match out.last_mut() {
            Some((_, b)) if *b + 1 == s => *b = s,
            _ => out.push((s, s)),
        }
    }
    out
}

/// A node's cluster state.
pub struct Cluster {
    /// This node's id (40 hex digits), kept in the configuration file.
    myid: RwLock<String>,
    conf: PathBuf,
    state: RwLock<State>,
}

#[derive(Default)]
struct State {
    topo: Topology,
    owner: Vec<u16>,
    /// Slots this node is moving out, to the node (id) taking them.
    migrating: BTreeMap<u16, String>,
    /// Slots this node is taking in (commands after `ASKING` are served).
    importing: BTreeMap<u16, String>,
    /// What the last `CLUSTERX MIGRATE` did (`CLUSTER INFO`).
    migration: Option<MigrationStatus>,
}

#[derive(Clone, Debug)]
pub struct MigrationStatus {
    pub slots: String,
    pub destination: String,
    /// `start`, `success` or `fail: <why>`.
    pub state: String,
    pub keys_moved: u64,
}

/// Where a command must go instead of here.
pub enum Redirect {
    Moved(u16, String),
    Ask(u16, String),
    CrossSlot,
    TryAgain,
    Down,
}

impl Redirect {
    pub fn message(&self) -> String {
        match self {
            Redirect::Moved(s, a) => format!("MOVED {s} {a}"),
            Redirect::Ask(s, a) => format!("ASK {s} {a}"),
            Redirect::CrossSlot => "CROSSSLOT Keys in request don't hash to the same slot".into(),
            Redirect::TryAgain => "TRYAGAIN Multiple keys request during rehashing of slot".into(),
            Redirect::Down => "CLUSTERDOWN Hash slot not served".into(),
        }
    }
}

/// How a key command's slot stands here.
pub enum Route {
    /// Served here.
    Local,
    /// Served here only if its keys exist here; otherwise `-ASK` to the
    /// node taking the slot (which is migrating).
    IfPresent(u16, String),
    Redirect(Redirect),
}

/// A new node id: 40 random hex digits, as Redis's.
fn random_id() -> String {
    rand::random::<[u8; 20]>()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

impl Cluster {
    /// Opens the cluster state kept in `conf`, creating it (with a new
    /// node id and no topology) when missing.
    pub fn open(conf: &Path) -> Result<Cluster, String> {
        let (myid, topo) = match std::fs::read_to_string(conf) {
            Ok(text) => parse_conf(&text).map_err(|e| format!("{}: {e}", conf.display()))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                (random_id(), Topology::default())
            }
            Err(e) => return Err(format!("reading {}: {e}", conf.display())),
        };
        let owner = topo.owners()?;
        let c = Cluster {
            myid: RwLock::new(myid),
            conf: conf.to_path_buf(),
            state: RwLock::new(State {
                topo,
                owner,
                ..State::default()
            }),
        };
        c.save()?;
        Ok(c)
    }

    pub fn myid(&self) -> String {
        self.myid.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    // A panic elsewhere while holding a lock leaves the state usable:
    // every change to it is made whole under one guard.
    fn state(&self) -> RwLockReadGuard<'_, State> {
        self.state.read().unwrap_or_else(|p| p.into_inner())
    }

    fn state_mut(&self) -> RwLockWriteGuard<'_, State> {
        self.state.write().unwrap_or_else(|p| p.into_inner())
    }

    /// Writes the configuration file (atomically: a temporary file
    /// renamed over it, then the directory synced).
    fn save(&self) -> Result<(), String> {
        let st = self.state();
        let text = format!(
            "# nvdepot cluster configuration: written by nvdepot serve, do not edit while it runs\n\
             myid {}\nversion {}\n{}",
            self.myid(),
            st.topo.version,
            st.topo.render()
        );
        drop(st);
        let tmp = self.conf.with_extension("tmp");
        let write = || -> std::io::Result<()> {
            use std::io::Write;
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(text.as_bytes())?;
            f.sync_all()?;
            std::fs::rename(&tmp, &self.conf)?;
            let dir = self.conf.parent().filter(|d| !d.as_os_str().is_empty());
            if let Ok(d) = std::fs::File::open(dir.unwrap_or(Path::new("."))) {
                let _ = d.sync_all();
            }
            Ok(())
        };
        write().map_err(|e| format!("writing {}: {e}", self.conf.display()))
    }

    /// Replaces the topology (`CLUSTERX SETNODES`): `version` must be
    /// higher than the current one unless `force`.
    pub fn set_nodes(&self, text: &str, version: i64, force: bool) -> Result<(), String> {
        let topo = Topology::parse(text, version)?;
        {
            let mut st = self.state_mut();
            if !force && version <= st.topo.version {
                return Err(format!(
                    "Invalid cluster version: {version} is not above the current {}",
                    st.topo.version
                ));
            }
            st.owner = topo.owners()?;
            st.topo = topo;
            // Slots now owned here stop importing; slots no longer owned
            // here stop migrating.
            let myid = self.myid();
            let mine = st.topo.nodes.iter().position(|n| n.id == myid);
            let owner = st.owner.clone();
            let owned = |s: u16| mine.is_some_and(|m| owner[usize::from(s)] == m as u16);
            st.importing.retain(|&s, _| !owned(s));
            st.migrating.retain(|&s, _| owned(s));
        }
        self.save()
    }

    pub fn version(&self) -> i64 {
        self.state().topo.version
    }

    /// Sets this node's id (`CLUSTERX SETNODEID`).
    pub fn set_myid(&self, id: &str) -> Result<(), String> {
        if !is_node_id(id) {
            return Err(format!("Invalid node id: {id}"));
        }
        *self.myid.write().unwrap_or_else(|p| p.into_inner()) = id.to_string();
        self.save()
    }

    /// The node with `id`.
    pub fn node(&self, id: &str) -> Option<Node> {
        self.state().topo.nodes.iter().find(|n| n.id == id).cloned()
    }

    /// Whether this node owns every slot of `slots`.
    pub fn owns_all(&self, slots: &[(u16, u16)]) -> bool {
        let st = self.state();
        let myid = self.myid();
        let Some(me) = st.topo.nodes.iter().position(|n| n.id == myid) else {
            return false;
        };
        slots
            .iter()
            .flat_map(|&(a, b)| a..=b)
            .all(|s| st.owner[usize::from(s)] == me as u16)
    }

    /// Marks `slots` as moving to `dst` (or, `None`, not moving).
    pub fn set_migrating(&self, slots: &[(u16, u16)], dst: Option<&str>) {
        let mut st = self.state_mut();
        for s in slots.iter().flat_map(|&(a, b)| a..=b) {
            match dst {
                Some(d) => {
                    st.migrating.insert(s, d.to_string());
                }
                None => {
                    st.migrating.remove(&s);
                }
            }
        }
    }

    /// Marks `slots` as coming from `src` (or, `None`, not coming).
    pub fn set_importing(&self, slots: &[(u16, u16)], src: Option<&str>) {
        let mut st = self.state_mut();
        for s in slots.iter().flat_map(|&(a, b)| a..=b) {
            match src {
                Some(d) => {
                    st.importing.insert(s, d.to_string());
                }
                None => {
                    st.importing.remove(&s);
                }
            }
        }
    }

    /// Hands `slots` to node `to` in this node's topology (same version:
    /// the administrator's next SETNODES makes it everyone's), persisted.
    pub fn give_slots(&self, slots: &[(u16, u16)], to: &str) -> Result<(), String> {
        {
            let mut st = self.state_mut();
            let Some(i) = st.topo.nodes.iter().position(|n| n.id == to) else {
                return Err(format!("Unknown node {to}"));
            };
            st.topo.reassign(slots, i);
            st.owner = st.topo.owners()?;
            for s in slots.iter().flat_map(|&(a, b)| a..=b) {
                st.migrating.remove(&s);
                st.importing.remove(&s);
            }
        }
        self.save()
    }

    pub fn set_migration(&self, m: MigrationStatus) {
        self.state_mut().migration = Some(m);
    }

    pub fn update_migration(&self, f: impl FnOnce(&mut MigrationStatus)) {
        if let Some(m) = self.state_mut().migration.as_mut() {
            f(m);
        }
    }

    /// How a command on `keys` stands here (`asking`: an `ASKING` came
    /// just before it).
    pub fn route(&self, keys: &[&[u8]], asking: bool) -> Route {
        let Some(first) = keys.first() else {
            return Route::Local;
        };
        let slot = key_slot(first);
        if keys[1..].iter().any(|k| key_slot(k) != slot) {
            return Route::Redirect(Redirect::CrossSlot);
        }
        let st = self.state();
        let owner = st.owner[usize::from(slot)];
        if owner == UNASSIGNED {
            return Route::Redirect(Redirect::Down);
        }
        let node = &st.topo.nodes[usize::from(owner)];
        if node.id == self.myid() {
            return match st
                .migrating
                .get(&slot)
                .and_then(|d| st.topo.nodes.iter().find(|n| &n.id == d))
            {
                Some(dst) => Route::IfPresent(slot, dst.addr()),
                None => Route::Local,
            };
        }
        if asking && st.importing.contains_key(&slot) {
            return Route::Local;
        }
        Route::Redirect(Redirect::Moved(slot, node.addr()))
    }

    /// `CLUSTER <subcommand>`; `count_keys`/`keys_in_slot` answer the
    /// subcommands that need the store (keys of db 0 in a slot).
    pub fn cluster_command(
        &self,
        args: &[&[u8]],
        keys_in_slot: &dyn Fn(u16) -> Result<Vec<Vec<u8>>, String>,
        r: &mut Reply<'_>,
    ) {
        let sub = args
            .get(1)
            .map(|a| String::from_utf8_lossy(a).to_ascii_uppercase())
            .unwrap_or_default();
        let st = self.state();
        let myid = self.myid();
        match sub.as_str() {
            "MYID" => r.bulk(myid.as_bytes()),
            "KEYSLOT" if args.len() == 3 => r.integer(i64::from(key_slot(args[2]))),
            "INFO" => {
                let assigned = st.owner.iter().filter(|&&o| o != UNASSIGNED).count();
                let ok = assigned == usize::from(SLOTS);
                let mut s = format!(
                    "cluster_state:{}\r\ncluster_slots_assigned:{assigned}\r\ncluster_slots_ok:{assigned}\r\n\
                     cluster_slots_pfail:0\r\ncluster_slots_fail:0\r\ncluster_known_nodes:{}\r\n\
                     cluster_size:{}\r\ncluster_current_epoch:{}\r\ncluster_my_epoch:{}\r\n\
                     cluster_stats_messages_sent:0\r\ncluster_stats_messages_received:0\r\n\
                     total_cluster_links_buffer_limit_exceeded:0\r\n",
                    if ok { "ok" } else { "fail" },
                    st.topo.nodes.len(),
                    st.topo.nodes.iter().filter(|n| !n.slots.is_empty()).count(),
                    st.topo.version.max(0),
                    st.topo.version.max(0),
                );
                if let Some(m) = &st.migration {
                    let _ = write!(
                        s,
                        "migrating_slot:{}\r\ndestination_node:{}\r\nmigrating_state:{}\r\nmigrated_keys:{}\r\n",
                        m.slots, m.destination, m.state, m.keys_moved
                    );
                }
                r.verbatim("txt", s.as_bytes());
            }
            "SLOTS" => {
                let entries: Vec<(&Node, u16, u16)> = st
                    .topo
                    .nodes
                    .iter()
                    .flat_map(|n| n.slots.iter().map(move |&(a, b)| (n, a, b)))
                    .collect();
                r.array(entries.len());
                for (n, a, b) in entries {
                    r.array(3);
                    r.integer(i64::from(a));
                    r.integer(i64::from(b));
                    r.array(4);
                    r.bulk(n.ip.as_bytes());
                    r.integer(i64::from(n.port));
                    r.bulk(n.id.as_bytes());
                    r.map(0);
                }
            }
            "SHARDS" => {
                r.array(st.topo.nodes.len());
                for n in &st.topo.nodes {
                    r.map(2);
                    r.bulk(b"slots");
                    r.array(n.slots.len() * 2);
                    for &(a, b) in &n.slots {
                        r.integer(i64::from(a));
                        r.integer(i64::from(b));
                    }
                    r.bulk(b"nodes");
                    r.array(1);
                    r.map(7);
                    r.bulk(b"id");
                    r.bulk(n.id.as_bytes());
                    r.bulk(b"port");
                    r.integer(i64::from(n.port));
                    r.bulk(b"ip");
                    r.bulk(n.ip.as_bytes());
                    r.bulk(b"endpoint");
                    r.bulk(n.ip.as_bytes());
                    r.bulk(b"role");
                    r.bulk(b"master");
                    r.bulk(b"replication-offset");
                    r.integer(0);
                    r.bulk(b"health");
                    r.bulk(b"online");
                }
            }
            "NODES" => {
                let mut s = String::new();
                for n in &st.topo.nodes {
                    let flags = if n.id == myid { "myself,master" } else { "master" };
                    let _ = write!(
                        s,
                        "{} {}:{}@{} {flags} - 0 0 {} connected",
                        n.id,
                        n.ip,
                        n.port,
                        u32::from(n.port) + 10000,
                        st.topo.version.max(0)
                    );
                    for &(a, b) in &n.slots {
                        if a == b {
                            let _ = write!(s, " {a}");
                        } else {
                            let _ = write!(s, " {a}-{b}");
                        }
                    }
                    if n.id == myid {
                        for (slot, dst) in &st.migrating {
                            let _ = write!(s, " [{slot}->-{dst}]");
                        }
                        for (slot, src) in &st.importing {
                            let _ = write!(s, " [{slot}-<-{src}]");
                        }
                    }
                    s.push('\n');
                }
                r.verbatim("txt", s.as_bytes());
            }
            "COUNTKEYSINSLOT" | "GETKEYSINSLOT" => {
                let Some(slot) = args
                    .get(2)
                    .and_then(|a| std::str::from_utf8(a).ok())
                    .and_then(|s| s.parse::<u16>().ok())
                    .filter(|&s| s < SLOTS)
                else {
                    r.error("ERR Invalid slot");
                    return;
                };
                let count = if sub == "GETKEYSINSLOT" {
                    match args.get(3).and_then(|a| std::str::from_utf8(a).ok()) {
                        Some(c) => match c.parse::<usize>() {
                            Ok(c) => Some(c),
                            Err(_) => {
                                r.error("ERR Invalid number of keys");
                                return;
                            }
                        },
                        None => {
                            r.error(nvdepot_resp::errors::wrong_arity(b"cluster|getkeysinslot"));
                            return;
                        }
                    }
                } else {
                    None
                };
                drop(st);
                match keys_in_slot(slot) {
                    Err(e) => r.error(format!("ERR {e}")),
                    Ok(keys) => match count {
                        None => r.integer(keys.len() as i64),
                        Some(c) => {
                            let n = keys.len().min(c);
                            r.array(n);
                            for k in &keys[..n] {
                                r.bulk(k);
                            }
                        }
                    },
                }
            }
            "RESET" | "MEET" | "ADDSLOTS" | "DELSLOTS" | "FAILOVER" | "REPLICATE" | "FORGET"
            | "SETSLOT" => r.error(format!(
                "ERR CLUSTER {sub} is not supported: nvdepot's topology is set with CLUSTERX SETNODES"
            )),
            _ => r.error(format!(
                "ERR unknown subcommand or wrong number of arguments for '{}'. Try CLUSTER HELP.",
                String::from_utf8_lossy(args.get(1).copied().unwrap_or_default())
            )),
        }
    }
}

fn parse_conf(text: &str) -> Result<(String, Topology), String> {
    let mut myid = None;
    let mut version = 0;
    let mut nodes = String::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some(id) = line.strip_prefix("myid ") {
            if !is_node_id(id.trim()) {
                return Err(format!("bad node id {id}"));
            }
            myid = Some(id.trim().to_string());
        } else if let Some(v) = line.strip_prefix("version ") {
            version = v.trim().parse().map_err(|_| format!("bad version {v}"))?;
        } else {
            nodes.push_str(line);
            nodes.push('\n');
        }
    }
    let myid = myid.ok_or("no myid line")?;
    Ok((myid, Topology::parse(&nodes, version)?))
}

/// The live keys of database 0 whose slot passes `inside` (a read of
/// every key: COUNTKEYSINSLOT, GETKEYSINSLOT, a migration's pass).
pub fn keys_in_slots(
    store: &RespStore,
    now_ms: u64,
    inside: impl Fn(u16) -> bool,
) -> Result<Vec<Vec<u8>>, nvdepot_cache::Error> {
    let mut keys = store.keys(0, now_ms)?;
    keys.retain(|k| inside(key_slot(k)));
    Ok(keys)
}

/// Cluster routing of a command, run holding its pass of the isolation
/// gate (so a migration's deletes, made under the exclusive pass, cannot
/// come between the presence check and the command): the error to answer
/// instead of running it, if any.
pub(super) async fn redirect(
    store: &RespStore,
    cluster: &Cluster,
    name: &[u8],
    args: &[&[u8]],
    asking: bool,
) -> Option<String> {
    let keys = super::commands::keys(name, args);
    match cluster.route(&keys, asking) {
        Route::Local => None,
        Route::Redirect(d) => Some(d.message()),
        Route::IfPresent(slot, addr) => {
            // The slot is moving out: a key still here is served here;
            // one already moved (or never here) is asked of the new node.
            let now = unix_now_ms();
            let mut present = 0;
            for k in &keys {
                match store.get(0, k, now).await {
                    Ok(Some(_)) => present += 1,
                    Ok(None) => {}
                    Err(e) => return Some(format!("ERR {e}")),
                }
            }
            if present == keys.len() {
                None
            } else if present == 0 {
                Some(Redirect::Ask(slot, addr).message())
            } else {
                Some(Redirect::TryAgain.message())
            }
        }
    }
}

/// Cluster routing of a command queued inside MULTI: only the redirects
/// that do not depend on the data (MOVED, CROSSSLOT, CLUSTERDOWN).
pub fn queue_redirect(cluster: Option<&Cluster>, name: &[u8], args: &[&[u8]]) -> Option<String> {
    match cluster?.route(&super::commands::keys(name, args), false) {
        Route::Redirect(d) => Some(d.message()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    const B: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

    #[test]
    fn topology_round_trip_and_errors() {
        let text = format!(
            "{A} 127.0.0.11 7000 master - 0-8191\n{B} 127.0.0.12 7000 master - 8192-16383\n"
        );
        let t = Topology::parse(&text, 3).unwrap();
        assert_eq!(t.render(), text);
        assert_eq!(t.owners().unwrap()[8192], 1);
        let bad = format!("{A} 127.0.0.11 7000 master - 0-10\n{B} 127.0.0.12 7000 master - 5-20\n");
        assert!(Topology::parse(&bad, 1).unwrap_err().contains("two nodes"));
        assert!(Topology::parse("xyz 1.2.3.4 1 master - 0", 1).is_err());
        assert!(Topology::parse(&format!("{A} h 1 slave {B} 0"), 1).is_err());
        assert!(parse_slots("5-3").is_err());
        assert!(parse_slots("16384").is_err());
        assert_eq!(
            parse_slots("1,3-4 9").unwrap(),
            vec![(1, 1), (3, 4), (9, 9)]
        );
    }

    #[test]
    fn reassign_merges_ranges() {
        let text = format!("{A} h 1 master - 0-99\n{B} h 2 master - 100-199\n");
        let mut t = Topology::parse(&text, 1).unwrap();
        t.reassign(&[(50, 99)], 1);
        assert_eq!(t.nodes[0].slots, vec![(0, 49)]);
        assert_eq!(t.nodes[1].slots, vec![(50, 199)]);
    }

    #[test]
    fn conf_survives_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let conf = dir.path().join("nodes.conf");
        let c = Cluster::open(&conf).unwrap();
        let id = c.myid();
        let text = format!("{id} 127.0.0.1 7000 master - 0-16383\n");
        c.set_nodes(&text, 2, false).unwrap();
        assert!(
            c.set_nodes(&text, 2, false).is_err(),
            "same version refused"
        );
        drop(c);
        let c = Cluster::open(&conf).unwrap();
        assert_eq!(c.myid(), id);
        assert_eq!(c.version(), 2);
        assert!(matches!(c.route(&[b"foo"], false), Route::Local));
    }
}

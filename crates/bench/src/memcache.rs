//! The memcache load generator: connections spread over a few threads,
//! each thread driving its connections with non-blocking sockets and one
//! epoll loop (`epoll.rs`), every connection keeping `pipeline` requests
//! outstanding (memtier_benchmark's model).
//!
//! A run is [`Bench::connect`], optionally [`Bench::preload`] (every key
//! set once, pipelined), then [`Bench::run`] (gets and sets in a ratio, for
//! a time or a number of requests). Each phase returns a [`PhaseReport`]
//! with counts and HDR latency histograms; a latency is measured from the
//! moment the request is queued on its connection to the moment its whole
//! reply has been read.

use std::collections::VecDeque;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use crate::epoll::Epoll;
use crate::proto::{self, Op, Reply, Values};
use crate::rng::{Distribution, KeyPicker, Rng};
use crate::BenchError;

/// When the measured phase stops issuing requests.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Stop {
    /// After this long (outstanding requests are then drained).
    Duration(Duration),
    /// After this many requests in all (0: no measured phase).
    Requests(u64),
}

/// What to run; [`Config::new`] gives the defaults.
#[derive(Debug, Clone)]
pub struct Config {
    pub server: SocketAddr,
    /// The protocol spoken. Default memcache.
    pub protocol: Protocol,
    /// TCP connections. Default: 16.
    pub connections: usize,
    /// Client threads the connections are spread over. Default:
    /// [`default_threads`].
    pub threads: usize,
    /// Requests outstanding per connection in the measured phase. Default 1.
    pub pipeline: usize,
    /// Requests outstanding per connection during the preload. Default 16.
    pub preload_pipeline: usize,
    /// Gets to sets, e.g. 9:1 (the default).
    pub ratio: (u32, u32),
    /// Value length of every set. Default 1024.
    pub value_bytes: usize,
    /// Key space: `key:0000000000` .. `key:{keys-1}`. Default 100 000.
    pub keys: u64,
    /// How gets and sets pick their keys. Default uniform.
    pub distribution: Distribution,
    /// Look-aside cache: a get that misses is followed by a set of its key
    /// (on the same connection, before the next drawn request), so a
    /// cache's hit ratio shows what its eviction policy keeps. Default off.
    pub set_on_miss: bool,
    pub stop: Stop,
    /// Share of gets whose value bytes are checked against the key
    /// (every hit's length and key are checked). Default 0.01.
    pub verify_fraction: f64,
    /// Seed of every random choice (connection `i` uses `seed + i`).
    pub seed: u64,
    /// A phase fails when no reply arrives for this long while requests
    /// are outstanding. Default 30 s.
    pub stall_timeout: Duration,
    /// Requests per second of the measured phase, over all connections
    /// (an open-loop pace for soak runs); `None`: as fast as replies come.
    pub rate: Option<f64>,
}

impl Config {
    pub fn new(server: SocketAddr) -> Config {
        Config {
            server,
            protocol: Protocol::Memcache,
            connections: 16,
            threads: default_threads(16),
            pipeline: 1,
            preload_pipeline: 16,
            ratio: (9, 1),
            value_bytes: 1024,
            keys: 100_000,
            distribution: Distribution::Uniform,
            set_on_miss: false,
            stop: Stop::Duration(Duration::from_secs(10)),
            verify_fraction: 0.01,
            seed: 1,
            stall_timeout: Duration::from_secs(30),
            rate: None,
        }
    }

    fn validate(&self) -> Result<(), BenchError> {
        let bad = |what: String| Err(BenchError::Config(what));
        if self.connections == 0 || self.threads == 0 {
            return bad("connections and threads must be at least 1".into());
        }
        if self.pipeline == 0 || self.preload_pipeline == 0 {
            return bad("pipeline depth must be at least 1".into());
        }
        if self.ratio == (0, 0) {
            return bad("the get:set ratio 0:0 issues nothing".into());
        }
        if self.keys == 0 {
            return bad("the key space must hold at least one key".into());
        }
        if !(0.0..=1.0).contains(&self.verify_fraction) {
            return bad(format!(
                "verify fraction {} is not in [0, 1]",
                self.verify_fraction
            ));
        }
        Ok(())
    }
}

/// `min(connections, clamp(cores, 2, 4))`: enough threads to keep a few
/// cores busy without taking every core from the server under test.
pub fn default_threads(connections: usize) -> usize {
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    connections.clamp(1, cores.clamp(2, 4))
}

/// Latency percentiles of one operation kind, in microseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Latency {
    pub count: u64,
    pub mean_us: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
}

impl Latency {
    fn of(h: &Histogram<u64>) -> Latency {
        if h.is_empty() {
            return Latency::default();
        }
        let us = |ns: u64| ns as f64 / 1000.0;
        Latency {
            count: h.len(),
            mean_us: h.mean() / 1000.0,
            p50_us: us(h.value_at_quantile(0.50)),
            p99_us: us(h.value_at_quantile(0.99)),
            p999_us: us(h.value_at_quantile(0.999)),
            max_us: us(h.max()),
        }
    }
}

/// What one phase did.
#[derive(Debug, Clone, Default)]
pub struct PhaseReport {
    /// From the first request to the last reply.
    pub seconds: f64,
    pub gets: u64,
    pub sets: u64,
    /// Gets answered with a value.
    pub hits: u64,
    /// Gets answered with just `END`.
    pub misses: u64,
    /// Hits whose value bytes were compared with the expected ones.
    pub verified: u64,
    /// Hits with the wrong key, length or (when verified) bytes. Must be 0.
    pub mismatches: u64,
    /// `ERROR`, `CLIENT_ERROR`, `SERVER_ERROR` replies.
    pub errors: u64,
    /// `NOT_STORED`, `EXISTS`, `NOT_FOUND` replies to sets.
    pub not_stored: u64,
    /// The first error line seen, for the report.
    pub first_error: Option<String>,
    pub get_latency: Latency,
    pub set_latency: Latency,
}

impl PhaseReport {
    pub fn ops(&self) -> u64 {
        self.gets + self.sets
    }

    pub fn ops_per_sec(&self) -> f64 {
        rate(self.ops(), self.seconds)
    }

    /// Hits / gets (0 without gets).
    pub fn hit_ratio(&self) -> f64 {
        if self.gets == 0 {
            0.0
        } else {
            self.hits as f64 / self.gets as f64
        }
    }
}

pub(crate) fn rate(count: u64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        count as f64 / seconds
    } else {
        0.0
    }
}

/// Connected clients, ready to run phases.
pub struct Bench {
    config: Config,
    values: Values,
    picker: KeyPicker,
    /// `groups[t]`: the connections thread `t` drives.
    groups: Vec<Vec<Conn>>,
}

impl Bench {
    /// Opens every connection (5 s timeout each).
    pub fn connect(config: &Config) -> Result<Bench, BenchError> {
        config.validate()?;
        let threads = config.threads.min(config.connections);
        let mut groups: Vec<Vec<Conn>> = (0..threads).map(|_| Vec::new()).collect();
        for i in 0..config.connections {
            let stream = TcpStream::connect_timeout(&config.server, Duration::from_secs(5))
                .map_err(|source| BenchError::Connect {
                    addr: config.server,
                    source,
                })?;
            let io = |op: &'static str| move |source| BenchError::Io { op, source };
            stream
                .set_nodelay(true)
                .map_err(io("setsockopt TCP_NODELAY"))?;
            stream.set_nonblocking(true).map_err(io("set O_NONBLOCK"))?;
            groups[i % threads].push(Conn::new(stream, i));
        }
        Ok(Bench {
            config: config.clone(),
            values: Values::new(config.value_bytes),
            picker: KeyPicker::new(config.keys, config.distribution),
            groups,
        })
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Sets every key once, each connection a contiguous range of keys,
    /// `preload_pipeline` requests outstanding per connection.
    pub fn preload(&mut self) -> Result<PhaseReport, BenchError> {
        let n = self.config.connections as u64;
        let keys = self.config.keys;
        for conn in self.groups.iter_mut().flatten() {
            let i = conn.index as u64;
            conn.work = Work::Preload {
                next: keys * i / n,
                end: keys * (i + 1) / n,
            };
        }
        let depth = self.config.preload_pipeline;
        self.phase(depth, None)
    }

    /// The measured phase: gets and sets in the configured ratio.
    pub fn run(&mut self) -> Result<PhaseReport, BenchError> {
        let n = self.config.connections as u64;
        let (deadline, quota) = match self.config.stop {
            Stop::Duration(d) => (Some(d), None),
            Stop::Requests(r) => (None, Some(r)),
        };
        for conn in self.groups.iter_mut().flatten() {
            let i = conn.index as u64;
            conn.work = Work::Mixed {
                left: quota.map(|r| r / n + u64::from(i < r % n)),
            };
            conn.rng = Rng::new(self.config.seed.wrapping_add(i));
        }
        let rate = self.config.rate;
        let threads = self.groups.len().max(1) as f64;
        self.phase_paced(self.config.pipeline, deadline, rate.map(|r| r / threads))
    }

    /// Runs one phase on every thread; merges their tallies.
    fn phase(&mut self, depth: usize, limit: Option<Duration>) -> Result<PhaseReport, BenchError> {
        self.phase_paced(depth, limit, None)
    }

    fn phase_paced(
        &mut self,
        depth: usize,
        limit: Option<Duration>,
        rate_per_thread: Option<f64>,
    ) -> Result<PhaseReport, BenchError> {
        let start = Instant::now();
        let shared = Shared {
            config: &self.config,
            values: &self.values,
            picker: &self.picker,
            depth,
            deadline: limit.map(|d| start + d),
            start,
            rate_per_thread,
        };
        let results: Vec<Result<Tally, BenchError>> = std::thread::scope(|s| {
            let handles: Vec<_> = self
                .groups
                .iter_mut()
                .map(|conns| {
                    let shared = &shared;
                    s.spawn(move || drive(shared, conns))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("a bench thread panicked"))
                .collect()
        });
        let seconds = start.elapsed().as_secs_f64();
        let mut total = Tally::new();
        for result in results {
            total.merge(result?);
        }
        Ok(total.report(seconds))
    }
}

/// The protocol a load is sent in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// The memcached text protocol: `get`/`set` (crate::proto).
    Memcache,
    /// The Redis protocol: `GET`/`SET` (crate::resp_proto).
    Resp,
}

impl Protocol {
    fn write_get(self, out: &mut Vec<u8>, key: u64) {
        match self {
            Protocol::Memcache => proto::write_get(out, key),
            Protocol::Resp => crate::resp_proto::write_get(out, key),
        }
    }

    fn write_set(self, out: &mut Vec<u8>, key: u64, values: &Values) {
        match self {
            Protocol::Memcache => proto::write_set(out, key, values),
            Protocol::Resp => crate::resp_proto::write_set(out, key, values),
        }
    }

    fn parse_reply(
        self,
        buf: &[u8],
        op: Op,
    ) -> Result<Option<(Reply<'_>, usize)>, proto::Malformed> {
        match self {
            Protocol::Memcache => proto::parse_reply(buf, op),
            Protocol::Resp => crate::resp_proto::parse_reply(buf, op),
        }
    }

    /// Whether a hit names its key (memcache's `VALUE key …`; RESP's does not).
    fn hit_names_key(self) -> bool {
        self == Protocol::Memcache
    }
}

/// What every thread of a phase reads.
struct Shared<'a> {
    config: &'a Config,
    values: &'a Values,
    picker: &'a KeyPicker,
    depth: usize,
    deadline: Option<Instant>,
    start: Instant,
    /// Requests per second each thread may issue (`Config::rate`).
    rate_per_thread: Option<f64>,
}

/// What a connection issues next.
#[derive(Debug, Clone, Copy)]
enum Work {
    Idle,
    /// Sets of keys `next..end`.
    Preload {
        next: u64,
        end: u64,
    },
    /// Random gets and sets; `left` requests (None: until the deadline).
    Mixed {
        left: Option<u64>,
    },
}

/// A request sent and not yet answered.
#[derive(Debug, Clone, Copy)]
struct Pending {
    op: Op,
    key: u64,
    queued: Instant,
    verify: bool,
}

struct Conn {
    index: usize,
    stream: TcpStream,
    out: Vec<u8>,
    /// Bytes of `out` already written.
    sent: usize,
    /// Receive buffer: `input[parsed..filled]` is read and not yet parsed.
    input: Vec<u8>,
    filled: usize,
    parsed: usize,
    pending: VecDeque<Pending>,
    /// Keys whose get missed, to be set next (`Config::set_on_miss`).
    refill: VecDeque<u64>,
    work: Work,
    rng: Rng,
}

/// Read granularity (and the least free room kept in `input`).
const READ_BYTES: usize = 64 << 10;

impl Conn {
    fn new(stream: TcpStream, index: usize) -> Conn {
        Conn {
            index,
            stream,
            out: Vec::with_capacity(READ_BYTES),
            sent: 0,
            input: vec![0; READ_BYTES],
            filled: 0,
            parsed: 0,
            pending: VecDeque::new(),
            refill: VecDeque::new(),
            work: Work::Idle,
            rng: Rng::new(index as u64),
        }
    }

    /// Queues requests until `depth` are outstanding, the work is done or
    /// `budget` (the pace's allowance) is spent.
    fn fill(&mut self, shared: &Shared<'_>, issuing: bool, budget: &mut u64) {
        while issuing && self.pending.len() < shared.depth && *budget > 0 {
            *budget -= 1;
            let Some((op, key)) = self.next_request(shared) else {
                return;
            };
            match op {
                Op::Get => shared.config.protocol.write_get(&mut self.out, key),
                Op::Set => shared
                    .config
                    .protocol
                    .write_set(&mut self.out, key, shared.values),
            }
            let verify = op == Op::Get
                && shared.config.verify_fraction > 0.0
                && self.rng.unit() < shared.config.verify_fraction;
            self.pending.push_back(Pending {
                op,
                key,
                queued: Instant::now(),
                verify,
            });
        }
    }

    fn next_request(&mut self, shared: &Shared<'_>) -> Option<(Op, u64)> {
        match &mut self.work {
            Work::Idle => None,
            Work::Preload { next, end } => {
                if next >= end {
                    return None;
                }
                *next += 1;
                Some((Op::Set, *next - 1))
            }
            Work::Mixed { left } => {
                if let Some(left) = left {
                    if *left == 0 {
                        return None;
                    }
                    *left -= 1;
                }
                if let Some(key) = self.refill.pop_front() {
                    return Some((Op::Set, key));
                }
                let (gets, sets) = shared.config.ratio;
                let op = if self.rng.below(u64::from(gets + sets)) < u64::from(gets) {
                    Op::Get
                } else {
                    Op::Set
                };
                Some((op, shared.picker.pick(&mut self.rng)))
            }
        }
    }

    /// Whether this connection has nothing more to issue.
    fn exhausted(&self) -> bool {
        match self.work {
            Work::Idle => true,
            Work::Preload { next, end } => next >= end,
            Work::Mixed { left } => left == Some(0),
        }
    }

    fn wants_write(&self) -> bool {
        self.sent < self.out.len()
    }

    /// Writes what the socket takes now.
    fn flush(&mut self) -> Result<(), BenchError> {
        while self.sent < self.out.len() {
            match self.stream.write(&self.out[self.sent..]) {
                Ok(0) => return Err(closed()),
                Ok(n) => self.sent += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(source) => return Err(BenchError::Io { op: "send", source }),
            }
        }
        self.out.clear();
        self.sent = 0;
        Ok(())
    }

    /// Reads what has arrived and accounts every complete reply.
    fn receive(&mut self, shared: &Shared<'_>, tally: &mut Tally) -> Result<usize, BenchError> {
        loop {
            if self.input.len() - self.filled < READ_BYTES / 4 {
                // Move the unparsed rest to the front; grow if that is not
                // enough (a reply larger than the buffer).
                self.input.copy_within(self.parsed..self.filled, 0);
                self.filled -= self.parsed;
                self.parsed = 0;
                if self.input.len() - self.filled < READ_BYTES / 4 {
                    let len = self.input.len();
                    self.input.resize(2 * len, 0);
                }
            }
            let room = self.input.len() - self.filled;
            match self.stream.read(&mut self.input[self.filled..]) {
                Ok(0) => return Err(closed()),
                Ok(n) => {
                    self.filled += n;
                    if n < room {
                        break;
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(source) => return Err(BenchError::Io { op: "recv", source }),
            }
        }
        let now = Instant::now();
        let mut replies = 0;
        while let Some(&p) = self.pending.front() {
            let parsed = shared
                .config
                .protocol
                .parse_reply(&self.input[self.parsed..self.filled], p.op)
                .map_err(|m| BenchError::Protocol(m.detail))?;
            let Some((reply, n)) = parsed else { break };
            tally.account(shared, &p, &reply, now);
            if shared.config.set_on_miss && matches!(reply, Reply::Miss) {
                self.refill.push_back(p.key);
            }
            self.parsed += n;
            self.pending.pop_front();
            replies += 1;
        }
        if self.parsed == self.filled {
            self.parsed = 0;
            self.filled = 0;
        } else if self.pending.is_empty() {
            let extra = &self.input[self.parsed..self.filled];
            return Err(BenchError::Protocol(format!(
                "{} bytes nobody asked for: {:?}",
                extra.len(),
                String::from_utf8_lossy(&extra[..extra.len().min(80)])
            )));
        }
        Ok(replies)
    }
}

fn closed() -> BenchError {
    BenchError::Io {
        op: "recv",
        source: std::io::Error::new(
            ErrorKind::ConnectionAborted,
            "the server closed the connection",
        ),
    }
}

/// One thread's loop over its connections until they are done.
fn drive(shared: &Shared<'_>, conns: &mut [Conn]) -> Result<Tally, BenchError> {
    let mut tally = Tally::new();
    let epoll_error = |source| BenchError::Io {
        op: "epoll",
        source,
    };
    let mut epoll = Epoll::new(conns.len()).map_err(epoll_error)?;
    // Whether each connection is also watched for room to write.
    let mut watching_output = vec![false; conns.len()];
    for (i, conn) in conns.iter().enumerate() {
        epoll
            .add(conn.stream.as_raw_fd(), i, false)
            .map_err(epoll_error)?;
    }
    let mut last_reply = Instant::now();
    // Requests this thread issued (for the pace).
    let mut issued = 0u64;
    loop {
        let now = Instant::now();
        let issuing = shared.deadline.is_none_or(|d| now < d);
        let mut busy = false;
        let allowed = shared.rate_per_thread.map_or(u64::MAX, |r| {
            (((now - shared.start).as_secs_f64() * r) as u64).saturating_sub(issued)
        });
        let mut budget = allowed;
        for (i, conn) in conns.iter_mut().enumerate() {
            conn.fill(shared, issuing, &mut budget);
            conn.flush()?;
            busy |= !conn.pending.is_empty();
            if conn.wants_write() != watching_output[i] {
                watching_output[i] = conn.wants_write();
                let fd = conn.stream.as_raw_fd();
                epoll
                    .modify(fd, i, watching_output[i])
                    .map_err(epoll_error)?;
            }
        }
        issued += allowed - budget;
        if !busy {
            if !issuing || conns.iter().all(Conn::exhausted) {
                return Ok(tally);
            }
            if budget == 0 {
                // Paced: wait for the next request's turn.
                std::thread::sleep(Duration::from_micros(200));
            }
            continue;
        }
        let mut wait_ms = if shared.rate_per_thread.is_some() {
            1
        } else {
            100
        };
        if let Some(deadline) = shared.deadline.filter(|_| issuing) {
            let left = deadline.saturating_duration_since(now).as_millis();
            wait_ms = wait_ms.min(left as i32 + 1);
        }
        let ready = match epoll.wait(wait_ms) {
            Ok(ready) => ready,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(source) => {
                return Err(BenchError::Io {
                    op: "epoll_wait",
                    source,
                })
            }
        };
        for r in ready {
            // Room to write needs nothing here: the next turn flushes.
            if r.readable && conns[r.token].receive(shared, &mut tally)? > 0 {
                last_reply = Instant::now();
            }
        }
        if last_reply.elapsed() > shared.config.stall_timeout {
            let outstanding: usize = conns.iter().map(|c| c.pending.len()).sum();
            return Err(BenchError::Stalled {
                seconds: shared.config.stall_timeout.as_secs(),
                outstanding,
            });
        }
    }
}

/// One thread's counts and histograms.
struct Tally {
    report: PhaseReport,
    get: Histogram<u64>,
    set: Histogram<u64>,
}

/// Latencies are recorded in nanoseconds, 3 significant digits, up to 100 s.
fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 100_000_000_000, 3).expect("valid histogram bounds")
}

impl Tally {
    fn new() -> Tally {
        Tally {
            report: PhaseReport::default(),
            get: histogram(),
            set: histogram(),
        }
    }

    fn account(&mut self, shared: &Shared<'_>, p: &Pending, reply: &Reply<'_>, now: Instant) {
        let values = shared.values;
        let ns = now.saturating_duration_since(p.queued).as_nanos();
        let ns = u64::try_from(ns).unwrap_or(u64::MAX).max(1);
        let r = &mut self.report;
        match p.op {
            Op::Get => {
                r.gets += 1;
                self.get.saturating_record(ns);
            }
            Op::Set => {
                r.sets += 1;
                self.set.saturating_record(ns);
            }
        }
        match reply {
            Reply::Hit { key, data, .. } => {
                r.hits += 1;
                let mut want = Vec::with_capacity(16);
                proto::write_key(&mut want, p.key);
                let key_ok = !shared.config.protocol.hit_names_key() || *key == want.as_slice();
                let mut ok = key_ok && data.len() == values.bytes();
                if ok && p.verify {
                    r.verified += 1;
                    ok = values.matches(p.key, data);
                }
                if !ok {
                    r.mismatches += 1;
                }
            }
            Reply::Miss => r.misses += 1,
            Reply::Stored => {}
            Reply::NotStored(_) => r.not_stored += 1,
            Reply::Error(line) => {
                r.errors += 1;
                if r.first_error.is_none() {
                    r.first_error = Some(String::from_utf8_lossy(line).into_owned());
                }
            }
        }
    }

    fn merge(&mut self, other: Tally) {
        let (a, b) = (&mut self.report, other.report);
        a.gets += b.gets;
        a.sets += b.sets;
        a.hits += b.hits;
        a.misses += b.misses;
        a.verified += b.verified;
        a.mismatches += b.mismatches;
        a.errors += b.errors;
        a.not_stored += b.not_stored;
        if a.first_error.is_none() {
            a.first_error = b.first_error;
        }
        self.get.add(&other.get).expect("same histogram bounds");
        self.set.add(&other.set).expect("same histogram bounds");
    }

    fn report(self, seconds: f64) -> PhaseReport {
        PhaseReport {
            seconds,
            get_latency: Latency::of(&self.get),
            set_latency: Latency::of(&self.set),
            ..self.report
        }
    }
}

//! The executor: one io_uring and one run queue per thread.
//!
//! A [`Runtime`] is created on, and never leaves, the thread that runs it
//! (thread-per-core: each core runs its own). Tasks are `!Send` futures
//! polled on that thread; an IO operation pushes a submission entry into the
//! ring and parks its task until the completion is reaped. Submissions
//! queue up while tasks run and go to the kernel in one `io_uring_enter`
//! per turn of the loop, which also waits for completions when no task is
//! ready.
//!
//! Wakers may be called from other threads (e.g. the engine's group
//! commit completing on another core): such a wake lands in a shared queue
//! and, if the runtime is asleep in the kernel, writes an eventfd that the
//! ring watches.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::Future;
use std::os::fd::RawFd;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use io_uring::{opcode, squeue, types, IoUring};
use parking_lot::Mutex;

use super::op::{OpSlots, Reaped};
use super::recv_stream::ProvidedBufs;

/// `user_data` of the eventfd read that wakes a sleeping runtime.
const WAKE_TOKEN: u64 = u64::MAX;
/// Task id of the future given to [`Runtime::block_on`].
const MAIN_TASK: usize = usize::MAX;
/// Polls a turn may add for tasks woken during it (see `Core::run_turn`).
const TURN_EXTRA_POLLS: usize = 64;
/// Task id of the future given to [`drive`].
const DRIVEN_TASK: usize = usize::MAX - 1;

/// How to set up a runtime's ring.
#[derive(Clone, Debug)]
pub struct Builder {
    entries: u32,
    sqpoll_idle_ms: Option<u32>,
    iopoll: bool,
    submit_batch: usize,
    recv_buffers: Option<(u16, usize)>,
}

impl Default for Builder {
    fn default() -> Builder {
        Builder {
            entries: 256,
            sqpoll_idle_ms: None,
            iopoll: false,
            submit_batch: 4,
            recv_buffers: None,
        }
    }
}

impl Builder {
    /// Submission queue entries (completion queue gets twice as many).
    pub fn entries(mut self, n: u32) -> Builder {
        self.entries = n.next_power_of_two().max(8);
        self
    }

    /// Hand queued submissions to the kernel as soon as `n` are queued
    /// while tasks run, instead of once per loop turn. Default 4: after a
    /// burst of completions the device gets new IO while the rest of the
    /// burst is processed (4 KiB reads at QD 32 here: 71 k -> 88-91 k/s),
    /// for a quarter of a syscall per operation.
    pub fn submit_batch(mut self, n: usize) -> Builder {
        self.submit_batch = n.max(1);
        self
    }

    /// Give the ring `count` (a power of two) provided buffers of `size`
    /// bytes for multishot receives ([`super::RecvStream`]).
    pub fn recv_buffers(mut self, count: u16, size: usize) -> Builder {
        self.recv_buffers = Some((count, size));
        self
    }

    /// Let a kernel thread poll the submission queue (`IORING_SETUP_SQPOLL`),
    /// sleeping after `idle_ms` without work.
    pub fn sqpoll(mut self, idle_ms: u32) -> Builder {
        self.sqpoll_idle_ms = Some(idle_ms);
        self
    }

    /// Busy-poll the device for completions (`IORING_SETUP_IOPOLL`). Only
    /// `O_DIRECT` file IO on a device driver that supports polled queues
    /// works on such a ring; network operations do not.
    pub fn iopoll(mut self, on: bool) -> Builder {
        self.iopoll = on;
        self
    }

    /// Creates the ring. Fails if the kernel refuses the setup (e.g. SQPOLL
    /// without privileges, or io_uring disabled).
    pub fn build(&self) -> std::io::Result<Runtime> {
        // COOP_TASKRUN (no interrupt to run completion work while we are in
        // user space: we enter the kernel every loop turn anyway) and
        // SINGLE_ISSUER (only this thread submits; a Runtime is !Send) cut
        // CPU per operation by 4-6 % in the memcache server (measured);
        // kernels before 6.0 refuse them, so fall back to a plain ring.
        let ring = match self.ring(true) {
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => self.ring(false)?,
            r => r?,
        };
        let recv_bufs = match self.recv_buffers {
            Some((count, size)) => Some(ProvidedBufs::register(&ring, count, size)?),
            None => None,
        };
        // SAFETY: eventfd takes no pointers; the result is checked.
        let efd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if efd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let core = Rc::new(Core {
            ring: RefCell::new(ring),
            ops: RefCell::new(OpSlots::default()),
            tasks: RefCell::new(Vec::new()),
            free_tasks: RefCell::new(Vec::new()),
            ready: RefCell::new(VecDeque::new()),
            main_woken: Cell::new(true),
            current: Cell::new(MAIN_TASK),
            driving: Cell::new(false),
            driven_woken: Cell::new(false),
            driven_waker: std::cell::OnceCell::new(),
            caller_woken: Cell::new(false),
            remote: Arc::new(Remote {
                queue: Mutex::new(Vec::new()),
                sleeping: AtomicBool::new(false),
                efd,
            }),
            efd_buf: RefCell::new(Box::new(0u64)),
            efd_armed: Cell::new(false),
            iopoll: self.iopoll,
            submit_batch: self.submit_batch,
            files: RefCell::new(Vec::new()),
            stats: RefCell::new(RuntimeStats::default()),
            recv_bufs,
        });
        Ok(Runtime { core })
    }
}

impl Builder {
    fn ring(&self, cooperative: bool) -> std::io::Result<IoUring> {
        let mut b = IoUring::builder();
        b.setup_cqsize(self.entries * 2);
        if let Some(idle) = self.sqpoll_idle_ms {
            b.setup_sqpoll(idle);
        }
        if self.iopoll {
            b.setup_iopoll();
        }
        if cooperative && self.sqpoll_idle_ms.is_none() {
            b.setup_coop_taskrun();
            b.setup_single_issuer();
        }
        b.build(self.entries)
    }
}

/// Counters of one runtime (for benchmarks and tuning).
#[derive(Clone, Copy, Debug, Default)]
pub struct RuntimeStats {
    /// `io_uring_enter` calls made.
    pub enters: u64,
    /// Completions reaped.
    pub completions: u64,
    /// Task polls.
    pub polls: u64,
    /// Multishot receives that found no provided buffer free (each falls
    /// back to one receive into its caller's buffer).
    pub recv_buffers_exhausted: u64,
}

/// An io_uring executor bound to the current thread.
pub struct Runtime {
    core: Rc<Core>,
}

type Task = Pin<Box<dyn Future<Output = ()>>>;

struct TaskSlot {
    future: Option<Task>,
    waker: Waker,
    /// In the ready queue and not yet polled: a second wake adds nothing
    /// (one poll answers every wake before it). Without this, a task whose
    /// futures share its waker (a join of hundreds of per-key writes) is
    /// queued once per wake and polled that many times, and each poll may
    /// register again: the queue grows without bound.
    scheduled: bool,
}

pub(crate) struct Core {
    pub ring: RefCell<IoUring>,
    pub ops: RefCell<OpSlots>,
    tasks: RefCell<Vec<TaskSlot>>,
    free_tasks: RefCell<Vec<usize>>,
    ready: RefCell<VecDeque<usize>>,
    main_woken: Cell<bool>,
    /// The task being polled ([`MAIN_TASK`] between tasks).
    current: Cell<usize>,
    /// A [`drive`] is running (inside the poll of `current`).
    driving: Cell<bool>,
    driven_woken: Cell<bool>,
    /// The waker of [`drive`]'s future, made once: a script's every
    /// `redis.call` is a `drive`, and a waker made per call was an
    /// allocation each.
    driven_waker: std::cell::OnceCell<Waker>,
    /// The task that called [`drive`] or [`pump`] was woken meanwhile:
    /// it is queued again when the call returns.
    caller_woken: Cell<bool>,
    remote: Arc<Remote>,
    efd_buf: RefCell<Box<u64>>,
    efd_armed: Cell<bool>,
    pub iopoll: bool,
    submit_batch: usize,
    /// Registered files: `files[i]` is the fd at fixed slot `i`.
    pub files: RefCell<Vec<RawFd>>,
    pub stats: RefCell<RuntimeStats>,
    /// Provided buffers for multishot receives; declared after `ring` so
    /// they are dropped after it.
    pub recv_bufs: Option<ProvidedBufs>,
}

impl Drop for Core {
    fn drop(&mut self) {
        // Futures of unfinished tasks leak their op data themselves when
        // dropped outside `block_on` (see `Op`'s drop); orphaned ops' data
        // sits in the slots.
        self.tasks.borrow_mut().clear();
        if self.ops.borrow_mut().leak_in_flight() {
            // A multishot receive may still complete into a provided
            // buffer after the ring is closed: keep their memory.
            if let Some(bufs) = self.recv_bufs.take() {
                std::mem::forget(bufs);
            }
        }
        if self.efd_armed.get() {
            // The eventfd read may still complete into this buffer.
            std::mem::forget(std::mem::take(&mut *self.efd_buf.borrow_mut()));
        }
    }
}

/// The part of a runtime other threads may touch: its wake queue.
struct Remote {
    queue: Mutex<Vec<usize>>,
    sleeping: AtomicBool,
    efd: RawFd,
}

impl Drop for Remote {
    fn drop(&mut self) {
        // SAFETY: the eventfd is owned by this struct and closed once.
        unsafe { libc::close(self.efd) };
    }
}

struct TaskWaker {
    id: usize,
    remote: Arc<Remote>,
    /// Address of the owning `Remote`, to recognise a wake from the
    /// runtime's own thread without a lock.
    owner: usize,
}

impl Wake for TaskWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref()
    }

    fn wake_by_ref(self: &Arc<Self>) {
        let local = CURRENT.with(|c| {
            let c = c.borrow();
            match c.as_ref() {
                Some(core) if Arc::as_ptr(&core.remote) as usize == self.owner => {
                    core.wake_local(self.id);
                    true
                }
                _ => false,
            }
        });
        if !local {
            self.remote.queue.lock().push(self.id);
            if self.remote.sleeping.load(Ordering::SeqCst) {
                let one = 1u64;
                // SAFETY: writes 8 bytes from a live u64 to our eventfd; a
                // failure (counter full) still leaves the runtime woken.
                unsafe {
                    libc::write(self.remote.efd, &one as *const u64 as *const _, 8);
                }
            }
        }
    }
}

thread_local! {
    static CURRENT: RefCell<Option<Rc<Core>>> = const { RefCell::new(None) };
}

/// Runs `f` with the current thread's runtime core, if one is running.
pub(crate) fn with_core<R>(f: impl FnOnce(&Rc<Core>) -> R) -> Option<R> {
    CURRENT.with(|c| c.borrow().as_ref().map(f))
}

/// True when the current runtime has other tasks ready to run in this
/// loop turn (false outside a runtime).
pub fn others_ready() -> bool {
    with_core(|core| !core.ready.borrow().is_empty()).unwrap_or(false)
}

/// True if called from inside [`Runtime::block_on`] (so IO goes to a ring).
pub fn in_runtime() -> bool {
    CURRENT.with(|c| c.borrow().is_some())
}

/// Starts `future` as a task on the current thread's runtime. Awaiting the
/// handle gives its output; dropping the handle lets the task run on.
///
/// Panics outside a runtime (a programmer error).
pub fn spawn<T: 'static>(future: impl Future<Output = T> + 'static) -> JoinHandle<T> {
    let shared: Rc<RefCell<Joined<T>>> = Rc::new(RefCell::new(Joined::Running(None)));
    let s2 = shared.clone();
    let task = async move {
        let out = future.await;
        let prev = std::mem::replace(&mut *s2.borrow_mut(), Joined::Done(out));
        if let Joined::Running(Some(w)) = prev {
            w.wake();
        }
    };
    with_core(|core| core.spawn(Box::pin(task)))
        .expect("nvdepot_io::uring::spawn outside a runtime");
    JoinHandle { shared }
}

enum Joined<T> {
    Running(Option<Waker>),
    Done(T),
    Taken,
}

/// The output of a spawned task, once it finishes.
pub struct JoinHandle<T> {
    shared: Rc<RefCell<Joined<T>>>,
}

impl<T> Future for JoinHandle<T> {
    type Output = T;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        let mut s = self.shared.borrow_mut();
        match std::mem::replace(&mut *s, Joined::Taken) {
            Joined::Done(out) => Poll::Ready(out),
            Joined::Running(_) => {
                *s = Joined::Running(Some(cx.waker().clone()));
                Poll::Pending
            }
            Joined::Taken => panic!("JoinHandle polled after it returned"),
        }
    }
}

/// Runs `future` to completion from inside a task (or the main future) of
/// the current thread's runtime, running the thread's other tasks and
/// reaping completions while it waits. For synchronous code inside a task
/// that must finish an async call before it returns (a Lua script's
/// `redis.call` on a worker thread), where blocking the thread would stop
/// the very ring that completes the call. The calling task is not polled
/// again until this returns; a wake of it meanwhile is kept for after.
///
/// The thread's other tasks run inside the caller's poll: the caller must
/// hold nothing they may wait for that only its own progress releases.
///
/// Panics outside a runtime, or inside another `drive` (programmer errors).
pub fn drive<F: Future>(future: F) -> F::Output {
    let core = with_core(Rc::clone).expect("nvdepot_io::uring::drive outside a runtime");
    assert!(!core.driving.replace(true), "drive inside drive");
    struct Exit<'a>(&'a Core, usize);
    impl Drop for Exit<'_> {
        fn drop(&mut self) {
            self.0.driving.set(false);
            self.0.requeue_caller(self.1);
        }
    }
    let caller = core.current.get();
    let _exit = Exit(&core, caller);
    let waker = core.driven_waker.get_or_init(|| core.waker(DRIVEN_TASK));
    let mut future = std::pin::pin!(future);
    core.driven_woken.set(true);
    loop {
        if core.driven_woken.replace(false) {
            core.stats.borrow_mut().polls += 1;
            if let Poll::Ready(out) = future.as_mut().poll(&mut Context::from_waker(waker)) {
                // No submission here: what is queued (other tasks' sends,
                // what the future started) goes with the loop turn's own
                // `io_uring_enter`, as every task's does. A script's
                // `redis.call` drives one command per call: entering here
                // cost a system call per call, a quarter of the server's
                // CPU in a 3-call script (bench/results/ab-script-worker-vm.md).
                return out;
            }
        }
        core.run_turn(caller, 0);
        core.end_turn(&core.driven_woken);
    }
}

/// From inside a task, lets the thread's other tasks run one turn without
/// waiting: submits, reaps completions and runs what is ready (except the
/// caller). What a long synchronous computation inside a task calls now
/// and then so that the worker's other connections are still served (a
/// script past `busy-reply-threshold`, answering them BUSY). Does nothing
/// outside a runtime.
pub fn pump() {
    let Some(core) = with_core(Rc::clone) else {
        return;
    };
    let caller = core.current.get();
    core.drain_remote();
    core.enter(false);
    core.reap();
    core.run_turn(caller, 0);
    core.enter(false);
    core.requeue_caller(caller);
}

/// Drives a future that completes without waiting (async code whose IO is
/// all blocking calls) by polling it once, outside any runtime.
///
/// Panics if the future is pending: it was waiting for something, and
/// nothing here would ever wake it (a programmer error).
pub fn run_ready<F: Future>(future: F) -> F::Output {
    let mut future = std::pin::pin!(future);
    match future
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
    {
        Poll::Ready(out) => out,
        Poll::Pending => panic!("run_ready: the future is waiting for something"),
    }
}

/// Yields to other ready tasks once.
pub fn yield_now() -> impl Future<Output = ()> {
    let mut yielded = false;
    std::future::poll_fn(move |cx| {
        if yielded {
            Poll::Ready(())
        } else {
            yielded = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    })
}

impl Core {
    fn wake_local(&self, id: usize) {
        if id == MAIN_TASK {
            self.main_woken.set(true);
        } else if id == DRIVEN_TASK {
            self.driven_woken.set(true);
        } else {
            self.schedule(id);
        }
    }

    /// The waker of task `id` (or of the main or driven future).
    fn waker(&self, id: usize) -> Waker {
        Waker::from(Arc::new(TaskWaker {
            id,
            remote: self.remote.clone(),
            owner: Arc::as_ptr(&self.remote) as usize,
        }))
    }

    /// Queues task `id` unless it is queued already.
    fn schedule(&self, id: usize) {
        let Ok(mut tasks) = self.tasks.try_borrow_mut() else {
            // Woken while the task table is borrowed (a future dropped
            // inside it): queue it anyway; a duplicate only costs a poll.
            self.ready.borrow_mut().push_back(id);
            return;
        };
        match tasks.get_mut(id) {
            Some(slot) if slot.scheduled => {}
            Some(slot) => {
                slot.scheduled = true;
                drop(tasks);
                self.ready.borrow_mut().push_back(id);
            }
            // A wake of a task slot not made yet cannot happen; ignore it.
            None => {}
        }
    }

    fn spawn(&self, future: Task) {
        let id = self.free_tasks.borrow_mut().pop();
        let mut tasks = self.tasks.borrow_mut();
        let id = match id {
            Some(id) => {
                tasks[id].future = Some(future);
                if tasks[id].scheduled {
                    // A stale wake of the slot's last task is still queued:
                    // it polls this one.
                    return;
                }
                tasks[id].scheduled = true;
                id
            }
            None => {
                let id = tasks.len();
                let waker = self.waker(id);
                tasks.push(TaskSlot {
                    future: Some(future),
                    waker,
                    scheduled: true,
                });
                id
            }
        };
        drop(tasks);
        self.ready.borrow_mut().push_back(id);
    }

    /// Polls one task. The future is taken out of its slot while it runs,
    /// so it may spawn (which borrows the task table).
    fn run_task(&self, id: usize) {
        let (mut future, waker) = {
            let mut tasks = self.tasks.borrow_mut();
            let Some(slot) = tasks.get_mut(id) else {
                return;
            };
            // Wakes from now on (during the poll, too) queue it again.
            slot.scheduled = false;
            // A stale wake of a finished task: nothing to run.
            let Some(f) = slot.future.take() else { return };
            (f, slot.waker.clone())
        };
        self.stats.borrow_mut().polls += 1;
        let mut cx = Context::from_waker(&waker);
        let caller = self.current.replace(id);
        let polled = future.as_mut().poll(&mut cx);
        self.current.set(caller);
        match polled {
            Poll::Ready(()) => self.free_tasks.borrow_mut().push(id),
            Poll::Pending => self.tasks.borrow_mut()[id].future = Some(future),
        }
    }

    /// One turn: runs the tasks ready now, then the ones they woke while
    /// no completion waits to be reaped, up to `extra` more polls. A chain
    /// of local hand-offs (the gate passing from one script to the next)
    /// then runs in one turn and its replies leave together, instead of
    /// one turn, one submission and one wake-up of the client per link;
    /// completions still get reaped between turns.
    ///
    /// `caller` is the task whose poll is running this ([`drive`],
    /// [`pump`]; [`MAIN_TASK`] from the loop itself): it cannot be polled
    /// inside its own poll, so a wake of it is kept in `caller_woken`.
    fn run_turn(&self, caller: usize, extra: usize) {
        let batch = self.ready.borrow().len();
        let mut taken = 0;
        loop {
            if taken >= batch && (taken >= batch + extra || self.completions_waiting()) {
                break;
            }
            let next = self.ready.borrow_mut().pop_front();
            let Some(id) = next else { break };
            taken += 1;
            if id == caller {
                self.caller_woken.set(true);
                continue;
            }
            self.run_task(id);
            if self.queued() >= self.submit_batch {
                self.enter(false);
            }
        }
    }

    /// The end of a loop turn: takes other threads' wakes, submits, and
    /// sleeps in the kernel until a completion or a wake if nothing is
    /// ready (neither a task nor the future `woken` flags), then reaps.
    fn end_turn(&self, woken: &Cell<bool>) {
        self.drain_remote();
        let busy = woken.get() || !self.ready.borrow().is_empty();
        if busy || self.iopoll {
            self.enter(false);
        } else {
            self.arm_eventfd();
            self.remote.sleeping.store(true, Ordering::SeqCst);
            self.drain_remote();
            let busy = woken.get() || !self.ready.borrow().is_empty();
            self.enter(!busy);
            self.remote.sleeping.store(false, Ordering::SeqCst);
        }
        self.reap();
    }

    /// Completions are in the queue, not yet reaped.
    fn completions_waiting(&self) -> bool {
        !self.ring.borrow_mut().completion().is_empty()
    }

    /// Queues `caller` again if it was woken while it ran others.
    fn requeue_caller(&self, caller: usize) {
        if self.caller_woken.replace(false) && caller != MAIN_TASK {
            // Its slot is still marked scheduled (the wake set it): queue
            // it once, for the poll that answers the wake.
            self.ready.borrow_mut().push_back(caller);
        }
    }

    /// Pushes a submission entry, making room by submitting if the queue
    /// is full.
    pub fn push(&self, entry: &squeue::Entry) {
        let mut ring = self.ring.borrow_mut();
        loop {
            // SAFETY: every entry built by this crate points at memory owned
            // by an op slot (or a `Core` field) that lives until its
            // completion is reaped.
            if unsafe { ring.submission().push(entry) }.is_ok() {
                return;
            }
            // Full: hand what is queued to the kernel and retry.
            match ring.submit() {
                Ok(_) => self.stats.borrow_mut().enters += 1,
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                    // Completion queue overflowing: reap to make room.
                    drop(ring);
                    self.reap();
                    ring = self.ring.borrow_mut();
                }
                Err(e) => panic!("io_uring submit failed: {e}"),
            }
        }
    }

    /// Submission entries queued and not yet handed to the kernel.
    fn queued(&self) -> usize {
        self.ring.borrow_mut().submission().len()
    }

    fn arm_eventfd(&self) {
        if self.efd_armed.get() || self.iopoll {
            return;
        }
        let ptr = &mut **self.efd_buf.borrow_mut() as *mut u64 as *mut u8;
        let entry = opcode::Read::new(types::Fd(self.remote.efd), ptr, 8)
            .build()
            .user_data(WAKE_TOKEN);
        self.push(&entry);
        self.efd_armed.set(true);
    }

    /// Moves completions into their op slots and wakes their tasks.
    fn reap(&self) -> usize {
        let mut woken = Vec::new();
        let mut cancels = Vec::new();
        let mut n = 0;
        {
            let mut ring = self.ring.borrow_mut();
            let mut ops = self.ops.borrow_mut();
            for cqe in ring.completion() {
                n += 1;
                if cqe.user_data() == WAKE_TOKEN {
                    self.efd_armed.set(false);
                    continue;
                }
                match ops.complete(cqe.user_data(), cqe.result(), cqe.flags()) {
                    Reaped::Nothing => {}
                    Reaped::Wake(w) => woken.push(w),
                    Reaped::Cancel(w) => {
                        cancels.push(cqe.user_data());
                        woken.extend(w);
                    }
                }
            }
        }
        self.stats.borrow_mut().completions += n as u64;
        for user_data in cancels {
            self.cancel(user_data);
        }
        for w in woken {
            w.wake();
        }
        n
    }

    /// Asks the kernel to cancel the op in slot `user_data`; the cancel's
    /// own completion is dropped.
    pub fn cancel(&self, user_data: u64) {
        let slot = self.ops.borrow_mut().insert_detached();
        let entry = opcode::AsyncCancel::new(user_data)
            .build()
            .user_data(slot as u64);
        self.push(&entry);
    }

    fn drain_remote(&self) {
        let mut q = self.remote.queue.lock();
        if q.is_empty() {
            return;
        }
        for id in q.drain(..) {
            self.wake_local(id);
        }
    }

    /// Submits queued entries; waits for at least one completion if
    /// `wait`.
    fn enter(&self, wait: bool) {
        let ring = self.ring.borrow();
        let r = if wait {
            ring.submit_and_wait(1)
        } else {
            ring.submit()
        };
        self.stats.borrow_mut().enters += 1;
        match r {
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::EINTR) | Some(libc::EBUSY) | Some(libc::EAGAIN)
                ) => {}
            Err(e) => panic!("io_uring_enter failed: {e}"),
        }
    }
}

impl Runtime {
    /// A runtime with the default ring (256 entries, no polling).
    pub fn new() -> std::io::Result<Runtime> {
        Builder::default().build()
    }

    /// Registers files with the ring (`IORING_REGISTER_FILES`): operations
    /// on these descriptors then skip the kernel's per-IO file lookup.
    /// Replaces an earlier registration.
    pub fn register_files(&self, fds: &[RawFd]) -> std::io::Result<()> {
        let ring = self.core.ring.borrow();
        let mut files = self.core.files.borrow_mut();
        if !files.is_empty() {
            ring.submitter().unregister_files()?;
            files.clear();
        }
        if !fds.is_empty() {
            ring.submitter().register_files(fds)?;
            files.extend_from_slice(fds);
        }
        Ok(())
    }

    /// Runs `f` with the ring's submitter (registration calls).
    ///
    /// # Safety
    /// Whatever `f` registers must stay valid while the ring uses it.
    pub(crate) unsafe fn ring_submitter<R>(
        &self,
        f: impl FnOnce(io_uring::Submitter<'_>) -> R,
    ) -> R {
        f(self.core.ring.borrow().submitter())
    }

    /// Counters since the runtime was created.
    pub fn stats(&self) -> RuntimeStats {
        *self.core.stats.borrow()
    }

    /// Runs `future` to completion on this thread, together with every task
    /// it spawns (tasks still pending when it finishes stay queued for the
    /// next `block_on`).
    ///
    /// Panics if a runtime is already running on this thread.
    pub fn block_on<F: Future>(&self, future: F) -> F::Output {
        CURRENT.with(|c| {
            let mut c = c.borrow_mut();
            assert!(c.is_none(), "a runtime is already running on this thread");
            *c = Some(self.core.clone());
        });
        struct Exit;
        impl Drop for Exit {
            fn drop(&mut self) {
                CURRENT.with(|c| c.borrow_mut().take());
            }
        }
        let _exit = Exit;
        let core = &*self.core;
        let main_waker = core.waker(MAIN_TASK);
        let mut future = std::pin::pin!(future);
        core.main_woken.set(true);
        loop {
            if core.main_woken.replace(false) {
                core.stats.borrow_mut().polls += 1;
                if let Poll::Ready(out) =
                    future.as_mut().poll(&mut Context::from_waker(&main_waker))
                {
                    // Hand queued submissions to the kernel so that work
                    // started by the future is not left unsubmitted.
                    core.enter(false);
                    return out;
                }
            }
            core.run_turn(MAIN_TASK, TURN_EXTRA_POLLS);
            core.end_turn(&core.main_woken);
        }
    }
}

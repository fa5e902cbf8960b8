//! The io_uring runtime: device IO, ownership of buffers across dropped
//! futures, wakes from other threads, registered files and buffers, sockets.

use std::cell::Cell;
use std::future::Future;
use std::io::{Read, Write};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use nvdepot_io::uring::{self, FixedPool, Runtime, TcpListenerExt};
use nvdepot_io::{AlignedBuf, Device, FileDevice, MemDevice};
use parking_lot::Mutex;

fn device(dir: &tempfile::TempDir, bytes: u64) -> Arc<FileDevice> {
    Arc::new(FileDevice::open(&dir.path().join("dev"), Some(bytes)).expect("open device"))
}

fn pattern(block: u64, align: usize) -> AlignedBuf {
    let mut b = AlignedBuf::new(align, align);
    for (i, x) in b.iter_mut().enumerate() {
        *x = (block as usize * 31 + i) as u8;
    }
    b
}

#[test]
fn block_on_returns_the_output() {
    let rt = Runtime::new().unwrap();
    assert_eq!(rt.block_on(async { 6 * 7 }), 42);
    assert!(!uring::in_runtime());
}

#[test]
fn writes_flush_and_reads_through_the_ring_in_parallel() {
    let dir = tempfile::tempdir().unwrap();
    let dev = device(&dir, 4 << 20);
    let a = dev.alignment();
    let rt = Runtime::new().unwrap();
    let blocks = 256u64;
    let ok = Rc::new(Cell::new(0));
    rt.block_on(async {
        for b in 0..blocks {
            let (r, _) = uring::write_device(&*dev, pattern(b, a), a, b * a as u64).await;
            r.unwrap();
        }
        uring::flush_device(&*dev).await.unwrap();
        let mut tasks = Vec::new();
        for b in 0..blocks {
            let dev = dev.clone();
            let ok = ok.clone();
            tasks.push(uring::spawn(async move {
                let (r, buf) = uring::read_device(&*dev, AlignedBuf::new(a, a), b * a as u64).await;
                r.unwrap();
                assert_eq!(&buf[..], &pattern(b, a)[..], "block {b}");
                ok.set(ok.get() + 1);
            }));
        }
        for t in tasks {
            t.await;
        }
    });
    assert_eq!(ok.get(), blocks);
    // The blocking path sees the same bytes.
    let mut buf = AlignedBuf::new(a, a);
    dev.read_at(&mut buf, 7 * a as u64).unwrap();
    assert_eq!(&buf[..], &pattern(7, a)[..]);
    let s = rt.stats();
    assert!(s.completions >= 2 * blocks, "{s:?}");
    // Reads were batched: fewer kernel entries than operations.
    assert!(s.enters < s.completions, "{s:?}");
}

#[test]
fn devices_without_a_descriptor_fall_back_to_blocking_calls() {
    let dev = MemDevice::new(1 << 20, 512);
    let rt = Runtime::new().unwrap();
    rt.block_on(async {
        let (r, _) = uring::write_device(&dev, pattern(3, 512), 512, 4096).await;
        r.unwrap();
        uring::flush_device(&dev).await.unwrap();
        let (r, buf) = uring::read_device(&dev, AlignedBuf::new(512, 512), 4096).await;
        r.unwrap();
        assert_eq!(&buf[..], &pattern(3, 512)[..]);
    });
    assert_eq!(rt.stats().completions, 0);
}

#[test]
fn read_past_the_end_reports_the_device() {
    let dir = tempfile::tempdir().unwrap();
    let dev = device(&dir, 1 << 20);
    let a = dev.alignment();
    let rt = Runtime::new().unwrap();
    // Shrink the file under the device: the read comes back short.
    std::fs::OpenOptions::new()
        .write(true)
        .open(dir.path().join("dev"))
        .unwrap()
        .set_len(a as u64)
        .unwrap();
    let (r, _) = rt.block_on(uring::read_device(
        &*dev,
        AlignedBuf::new(a, a),
        8 * a as u64,
    ));
    let e = r.unwrap_err().to_string();
    assert!(e.contains("dev") && e.contains("short read"), "{e}");
}

/// Polls a future once, then drops it: the op is orphaned in flight.
struct PollOnce<F>(Option<Pin<Box<F>>>);
impl<F: Future> Future for PollOnce<F> {
    type Output = bool;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<bool> {
        let mut f = self.0.take().unwrap();
        Poll::Ready(f.as_mut().poll(cx).is_ready())
    }
}

#[test]
fn a_dropped_read_keeps_its_buffer_until_the_kernel_is_done() {
    let dir = tempfile::tempdir().unwrap();
    let dev = device(&dir, 4 << 20);
    let a = dev.alignment();
    let rt = Runtime::new().unwrap();
    rt.block_on(async {
        for i in 0..64u64 {
            let dev2 = dev.clone();
            let f = async move {
                uring::read_device(&*dev2, AlignedBuf::new(64 * 1024, a), i * 65536).await
            };
            // Not ready on the first poll: the future (and its buffer) is
            // dropped while the read is in flight.
            assert!(!PollOnce(Some(Box::pin(f))).await);
        }
        // Later ops still work, and the orphans' completions are reaped.
        let (r, _) = uring::read_device(&*dev, AlignedBuf::new(a, a), 0).await;
        r.unwrap();
        uring::sleep(Duration::from_millis(20)).await;
    });
}

#[test]
fn a_runtime_dropped_with_operations_in_flight_does_not_free_their_buffers() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let client = std::net::TcpStream::connect(addr).unwrap();
    let (server, _) = listener.accept().unwrap();
    {
        use std::os::fd::AsRawFd;
        let fd = server.as_raw_fd();
        let rt = Runtime::new().unwrap();
        rt.block_on(async {
            // A receive left waiting in a task, and one orphaned mid-flight.
            let _pending =
                uring::spawn(async move { uring::recv(fd, Vec::new(), 4096).await.0.is_ok() });
            uring::yield_now().await;
            assert!(!PollOnce(Some(Box::pin(uring::recv(fd, Vec::new(), 4096)))).await);
        });
        drop(rt);
    }
    // Data arriving after the ring is gone lands nowhere it could hurt.
    (&client).write_all(b"late bytes").unwrap();
    std::thread::sleep(Duration::from_millis(20));
    let rt = Runtime::new().unwrap();
    assert_eq!(rt.block_on(async { 7 }), 7);
}

#[test]
fn a_wake_from_another_thread_reaches_a_sleeping_runtime() {
    let rt = Runtime::new().unwrap();
    let slot: Arc<Mutex<(bool, Option<Waker>)>> = Arc::default();
    let s2 = slot.clone();
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50));
        let mut g = s2.lock();
        g.0 = true;
        if let Some(w) = g.1.take() {
            w.wake();
        }
    });
    let start = Instant::now();
    rt.block_on(std::future::poll_fn(|cx| {
        let mut g = slot.lock();
        if g.0 {
            Poll::Ready(())
        } else {
            g.1 = Some(cx.waker().clone());
            Poll::Pending
        }
    }));
    t.join().unwrap();
    assert!(start.elapsed() < Duration::from_secs(5));
}

/// A value another future fills in: the future that waits for it is
/// woken by whoever fills it.
#[derive(Default)]
struct Slot(Mutex<(Option<u32>, Option<Waker>)>);

impl Slot {
    fn fill(&self, v: u32) {
        let w = {
            let mut g = self.0.lock();
            g.0 = Some(v);
            g.1.take()
        };
        if let Some(w) = w {
            w.wake();
        }
    }

    fn wait(self: &Arc<Self>) -> impl Future<Output = u32> {
        let me = self.clone();
        std::future::poll_fn(move |cx| {
            let mut g = me.0.lock();
            match g.0 {
                Some(v) => Poll::Ready(v),
                None => {
                    g.1 = Some(cx.waker().clone());
                    Poll::Pending
                }
            }
        })
    }
}

#[test]
fn drive_inside_a_task_runs_the_other_tasks_until_its_future_is_done() {
    let rt = Runtime::new().unwrap();
    let slot = Arc::new(Slot::default());
    let order = Rc::new(std::cell::RefCell::new(Vec::new()));
    let got = rt.block_on({
        let (slot, order) = (slot.clone(), order.clone());
        async move {
            // The filler is another task of this thread: it runs only if
            // `drive` runs other tasks while it waits.
            let filler = {
                let (slot, order) = (slot.clone(), order.clone());
                uring::spawn(async move {
                    uring::sleep(Duration::from_millis(20)).await;
                    order.borrow_mut().push("filled");
                    slot.fill(7);
                })
            };
            let caller = uring::spawn({
                let order = order.clone();
                async move {
                    // Synchronous code inside a task, as a script's call.
                    let v = uring::drive(slot.wait());
                    order.borrow_mut().push("driven");
                    v
                }
            });
            let v = caller.await;
            filler.await;
            v
        }
    });
    assert_eq!(got, 7);
    assert_eq!(*order.borrow(), vec!["filled", "driven"]);
}

#[test]
fn drive_waits_for_a_wake_from_another_thread_while_the_ring_sleeps() {
    let rt = Runtime::new().unwrap();
    let slot = Arc::new(Slot::default());
    let s2 = slot.clone();
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50));
        s2.fill(9);
    });
    let start = Instant::now();
    let got =
        rt.block_on(async move { uring::spawn(async move { uring::drive(slot.wait()) }).await });
    t.join().unwrap();
    assert_eq!(got, 9);
    assert!(start.elapsed() < Duration::from_secs(5));
}

#[test]
fn a_task_woken_while_it_drives_is_polled_again_after() {
    // The driving task's own wake (here: a second slot it waits on next,
    // filled by the task it lets run) must not be lost.
    let rt = Runtime::new().unwrap();
    let (a, b) = (Arc::new(Slot::default()), Arc::new(Slot::default()));
    let got = rt.block_on({
        let (a, b) = (a.clone(), b.clone());
        async move {
            let caller = uring::spawn({
                let (a, b) = (a.clone(), b.clone());
                async move {
                    // Register with b first: the filler's wake of b comes
                    // while this task is inside `drive`.
                    let mut wait_b = std::pin::pin!(b.wait());
                    let first =
                        std::future::poll_fn(|cx| Poll::Ready(wait_b.as_mut().poll(cx))).await;
                    assert!(first.is_pending());
                    let x = uring::drive(a.wait());
                    // Pending once without registering anew: only the
                    // wake that came during `drive` polls this again.
                    let mut once = true;
                    std::future::poll_fn(|_| {
                        if std::mem::take(&mut once) {
                            Poll::Pending
                        } else {
                            Poll::Ready(())
                        }
                    })
                    .await;
                    x + wait_b.await
                }
            });
            uring::spawn(async move {
                b.fill(2);
                uring::yield_now().await;
                a.fill(1);
            });
            // A lost wake leaves the caller pending for ever: give up
            // after a while instead of hanging.
            let mut caller = std::pin::pin!(caller);
            let mut deadline = std::pin::pin!(uring::sleep(Duration::from_secs(5)));
            std::future::poll_fn(|cx| {
                if let Poll::Ready(v) = caller.as_mut().poll(cx) {
                    return Poll::Ready(Some(v));
                }
                deadline.as_mut().poll(cx).map(|()| None)
            })
            .await
        }
    });
    assert_eq!(got, Some(3), "the wake that came during drive was lost");
}

#[test]
fn pump_lets_other_tasks_run_inside_a_long_computation() {
    let rt = Runtime::new().unwrap();
    let ran = Rc::new(Cell::new(0u32));
    rt.block_on({
        let ran = ran.clone();
        async move {
            let other = {
                let ran = ran.clone();
                uring::spawn(async move {
                    for _ in 0..3 {
                        ran.set(ran.get() + 1);
                        uring::yield_now().await;
                    }
                })
            };
            let busy = uring::spawn({
                let ran = ran.clone();
                async move {
                    // No await: only `pump` lets the other task run.
                    for _ in 0..10 {
                        uring::pump();
                    }
                    ran.get()
                }
            });
            assert_eq!(busy.await, 3);
            other.await;
        }
    });
}

#[test]
fn sleep_waits() {
    let rt = Runtime::new().unwrap();
    let start = Instant::now();
    rt.block_on(uring::sleep(Duration::from_millis(30)));
    assert!(start.elapsed() >= Duration::from_millis(29));
}

#[test]
fn registered_files_and_buffers() {
    use std::os::fd::AsRawFd;
    let dir = tempfile::tempdir().unwrap();
    let dev = device(&dir, 4 << 20);
    let a = dev.alignment();
    for b in 0..8u64 {
        dev.write_at(&pattern(b, a), b * a as u64).unwrap();
    }
    let rt = Runtime::new().unwrap();
    rt.register_files(&[dev.raw_fd().unwrap()]).unwrap();
    let pool = FixedPool::register(&rt, 4, a, a).unwrap();
    let fd = dev.raw_fd().unwrap();
    let _ = std::io::stdin().as_raw_fd();
    rt.block_on(async {
        for b in 0..8u64 {
            let buf = pool.read(fd, a, b * a as u64).await.unwrap().unwrap();
            assert_eq!(&buf[..], &pattern(b, a)[..]);
            assert_eq!(pool.available(), 3);
        }
        assert_eq!(pool.available(), 4);
        // Too big for the pool: the caller falls back.
        assert!(pool.read(fd, 2 * a, 0).await.is_none());
        // A registered file also works for plain reads.
        let (r, buf) = uring::read_device(&*dev, AlignedBuf::new(a, a), 5 * a as u64).await;
        r.unwrap();
        assert_eq!(&buf[..], &pattern(5, a)[..]);
    });
}

#[test]
fn a_dropped_fixed_read_returns_its_buffer_to_the_pool() {
    let dir = tempfile::tempdir().unwrap();
    let dev = device(&dir, 4 << 20);
    let a = dev.alignment();
    let rt = Runtime::new().unwrap();
    let pool = FixedPool::register(&rt, 4, 16 * a, a).unwrap();
    let fd = dev.raw_fd().unwrap();
    rt.block_on(async {
        for i in 0..4u64 {
            let p = pool.clone();
            let f = async move {
                p.read(fd, 16 * a, i * 16 * a as u64)
                    .await
                    .map(|r| r.is_ok())
            };
            assert!(
                !PollOnce(Some(Box::pin(f))).await,
                "read in flight when dropped"
            );
        }
        uring::sleep(Duration::from_millis(50)).await;
        assert_eq!(
            pool.available(),
            4,
            "orphaned reads gave their buffers back"
        );
        assert!(pool.read(fd, a, 0).await.unwrap().is_ok());
    });
}

#[test]
fn sockets_accept_receive_and_send() {
    use std::os::fd::AsRawFd;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let client = std::thread::spawn(move || {
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.write_all(b"hello ring").unwrap();
        let mut back = [0u8; 10];
        s.read_exact(&mut back).unwrap();
        back
    });
    let rt = Runtime::new().unwrap();
    rt.block_on(async {
        let conn = listener.accept_async().await.unwrap();
        let fd = conn.as_raw_fd();
        let mut buf = Vec::new();
        while buf.len() < 10 {
            let (r, b) = uring::recv(fd, buf, 4096).await;
            buf = b;
            assert!(r.unwrap() > 0);
        }
        buf.reverse();
        let (r, _) = uring::send_all(fd, buf, 0).await;
        r.unwrap();
        let (r, _) = uring::recv(fd, Vec::new(), 16).await;
        assert_eq!(r.unwrap(), 0, "peer closed");
    });
    assert_eq!(&client.join().unwrap(), b"gnir olleh");
}

/// A connected pair: (client, server side).
fn socket_pair() -> (std::net::TcpStream, std::net::TcpStream) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (server, _) = listener.accept().unwrap();
    (client, server)
}

fn message(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(7).wrapping_add(seed))
        .collect()
}

/// Receives through `stream` until the peer closes.
async fn recv_to_end(stream: &mut uring::RecvStream, max: usize) -> Vec<u8> {
    let mut got = Vec::new();
    let mut buf = Vec::new();
    loop {
        let n = stream.recv(&mut buf, max).await.unwrap();
        if n == 0 {
            return got;
        }
        got.append(&mut buf);
    }
}

#[test]
fn a_multishot_receive_takes_every_byte_in_order_through_a_small_ring() {
    use std::os::fd::AsRawFd;
    // 8 buffers of 512 bytes for 300 KiB in writes of many sizes: the ring
    // runs dry (falling back to one-shot receives) and every buffer is
    // reused many times.
    let (client, server) = socket_pair();
    let sent: Vec<u8> = (0..200)
        .flat_map(|i| message(1 + (i * 733) % 3000, i as u8))
        .collect();
    let expected = sent.clone();
    let writer = std::thread::spawn(move || {
        let mut c = client;
        for chunk in sent.chunks(1500) {
            c.write_all(chunk).unwrap();
        }
    });
    let rt = uring::Builder::default()
        .recv_buffers(8, 512)
        .build()
        .unwrap();
    let got = rt.block_on(async {
        let mut stream = uring::RecvStream::new(server.as_raw_fd());
        recv_to_end(&mut stream, 4096).await
    });
    writer.join().unwrap();
    assert_eq!(got.len(), expected.len());
    assert!(got == expected, "bytes differ");
    assert!(
        rt.stats().recv_buffers_exhausted > 0,
        "the ring never ran dry: the fallback went untested"
    );
}

#[test]
fn a_multishot_receive_not_read_for_a_while_loses_nothing() {
    use std::os::fd::AsRawFd;
    // A stream whose owner sleeps while 512 KiB arrive holds more than its
    // queue limit (64 arrivals): it is cancelled, then re-armed when read;
    // nothing is lost or reordered, and the ring never runs dry.
    let (client, server) = socket_pair();
    let sent = message(512 << 10, 3);
    let expected = sent.clone();
    let writer = std::thread::spawn(move || {
        let mut c = client;
        c.write_all(&sent).unwrap();
    });
    let rt = uring::Builder::default()
        .recv_buffers(1024, 1024)
        .build()
        .unwrap();
    let got = rt.block_on(async {
        let mut stream = uring::RecvStream::new(server.as_raw_fd());
        let mut buf = Vec::new();
        let first = stream.recv(&mut buf, 1).await.unwrap();
        assert!(first > 0);
        uring::sleep(Duration::from_millis(100)).await;
        let mut got = buf;
        got.extend(recv_to_end(&mut stream, 64 << 10).await);
        got
    });
    writer.join().unwrap();
    assert!(
        got == expected,
        "bytes differ ({} of {})",
        got.len(),
        expected.len()
    );
    assert_eq!(rt.stats().recv_buffers_exhausted, 0);
}

#[test]
fn a_dropped_multishot_receive_gives_its_buffers_back() {
    use std::os::fd::AsRawFd;
    let (client_a, server_a) = socket_pair();
    let (client_b, server_b) = socket_pair();
    let rt = uring::Builder::default()
        .recv_buffers(8, 512)
        .build()
        .unwrap();
    rt.block_on(async {
        // Stream A takes 4 buffers and is dropped unread with its receive
        // still armed; then 4 KiB more arrive for it (every buffer).
        let mut a = uring::RecvStream::new(server_a.as_raw_fd());
        (&client_a).write_all(&message(2048, 1)).unwrap();
        let mut buf = Vec::new();
        assert!(a.recv(&mut buf, 1).await.unwrap() > 0);
        uring::sleep(Duration::from_millis(20)).await;
        drop(a);
        (&client_a).write_all(&message(4096, 2)).unwrap();
        uring::sleep(Duration::from_millis(20)).await;
        // Stream B still finds the ring full of buffers: 7 of them at once
        // (3 would be missing had A's queued ones not come back).
        let mut b = uring::RecvStream::new(server_b.as_raw_fd());
        (&client_b).write_all(&message(3584, 3)).unwrap();
        drop(client_b);
        assert_eq!(recv_to_end(&mut b, 1 << 20).await, message(3584, 3));
    });
    assert_eq!(rt.stats().recv_buffers_exhausted, 0);
    drop(client_a);
}

#[test]
fn a_runtime_dropped_with_a_multishot_receive_armed_is_safe() {
    use std::os::fd::AsRawFd;
    let (client, server) = socket_pair();
    {
        let rt = uring::Builder::default()
            .recv_buffers(8, 512)
            .build()
            .unwrap();
        let fd = server.as_raw_fd();
        rt.block_on(async {
            let _armed = uring::spawn(async move {
                let mut s = uring::RecvStream::new(fd);
                let mut buf = Vec::new();
                s.recv(&mut buf, 4096).await.is_ok()
            });
            uring::yield_now().await;
        });
        drop(rt);
    }
    // Data arriving after the ring is gone lands nowhere it could hurt.
    (&client).write_all(&message(4096, 9)).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    let rt = Runtime::new().unwrap();
    assert_eq!(rt.block_on(async { 7 }), 7);
}

//! SIGTERM and SIGINT for the servers: blocked in every thread before any
//! is started, and taken by one thread with `sigwait`, so no code runs in
//! a signal handler.

use std::io;

use nvdepot_server::Shutdown;
use tracing::{info, warn};

/// Blocks SIGTERM and SIGINT in the calling thread (and so in every thread
/// it starts afterwards); returns the set for `sigwait`.
pub fn block_termination_signals() -> io::Result<libc::sigset_t> {
    // SAFETY: sigset_t is plain data; sigemptyset initialises it before any
    // other use, and sigaddset/pthread_sigmask get valid pointers to it.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGINT);
        let rc = libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        if rc != 0 {
            return Err(io::Error::from_raw_os_error(rc));
        }
        Ok(set)
    }
}

/// A thread that turns the first SIGTERM or SIGINT into a shutdown.
pub fn spawn_signal_thread(
    set: libc::sigset_t,
    shutdown: Shutdown,
    face: &'static str,
) -> io::Result<()> {
    std::thread::Builder::new()
        .name("signals".to_owned())
        .spawn(move || loop {
            let mut signal = 0;
            // SAFETY: `set` is an initialised signal set and `signal` a
            // valid place for the result.
            let rc = unsafe { libc::sigwait(&set, &mut signal) };
            if rc != 0 {
                warn!("sigwait: {}", io::Error::from_raw_os_error(rc));
                return;
            }
            let name = if signal == libc::SIGINT {
                "SIGINT"
            } else {
                "SIGTERM"
            };
            if shutdown.is_triggered() {
                warn!("{face}: {name} again; still shutting down");
            } else {
                info!("{face}: {name}: shutting down");
                shutdown.trigger();
            }
        })
        .map(drop)
}

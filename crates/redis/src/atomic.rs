//! One crash-atomic commit for a command that writes several keys (LMOVE,
//! SMOVE, MOVE, RENAME of a paged collection): its writes are staged
//! (`nvdepot_cache::staging`) and written together as one engine batch,
//! so a crash leaves all of them or none — an element or member in
//! flight is never lost, a moved key never doubled. The command holds the
//! exclusive pass of the gate, which makes staging sound (nothing else
//! writes Redis keys meanwhile). Inside a script's or EXEC's staging the
//! writes simply join it.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use nvdepot_cache::resp::RespStore;
use nvdepot_cache::staging::{self, Staging};
use nvdepot_cache::Error;

/// A staging of one command's writes, or none when one is already current.
pub struct Atomic(Option<Arc<Staging>>);

impl Atomic {
    pub fn begin() -> Atomic {
        Atomic(
            staging::current()
                .is_none()
                .then(|| Arc::new(Staging::default())),
        )
    }

    /// Runs the command's step with its writes staged. The step comes
    /// boxed: these commands' futures are the largest of all (an LMOVE's
    /// five times a GET's), and unboxed they would size the future of
    /// every command, which each dispatch and each script call copies
    /// (`memmove` was 4.5% of a script's CPU).
    pub async fn run<F: Future>(&self, step: Pin<Box<F>>) -> F::Output {
        match &self.0 {
            Some(s) => staging::stage_async(s, step).await,
            None => step.await,
        }
    }

    /// Writes what the step staged (even after an error part way, as the
    /// step's writes would have stood without staging): durable on return.
    pub async fn commit(self, store: &RespStore) -> Result<(), Error> {
        match self.0 {
            Some(s) => store.cache().commit_staged(&s).await,
            None => Ok(()),
        }
    }
}

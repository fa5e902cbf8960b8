//! Pushes and pops of a paged list combined (`combine.rs`): the steps
//! waiting for one list's lock are applied in order to one read of its
//! end pages and committed as one batch, so a hot list's head page and
//! metadata are written once per batch instead of once per step.
//!
//! A step that finds the list not paged (missing, compact, another
//! type), or that comes after a step which emptied it, is answered
//! `None` and runs alone (`list.rs`), as it did before combining.

use std::sync::LazyLock;

use nvdepot_cache::resp::{Kind, RespStore};
use nvdepot_cache::Error;

use super::combine::{self, BatchEdit, Combiner, Opened};
use super::key_locks::KeyGuard;
use super::list_pages::{self as pages, Found, Stop};

/// One push or pop of a paged list.
/// (`left`: at the head; else at the tail. A bool, not `list::End`:
/// `list.rs` calls this file, so this file does not import it.)
pub enum Step {
    Push { left: bool, elems: Vec<Vec<u8>> },
    Pop { left: bool, count: usize },
}

/// What a combined step did.
pub enum Done {
    /// The list's length after the push.
    Pushed(i64),
    /// The elements popped, in pop order.
    Popped(Vec<Vec<u8>>),
}

/// A step's answer: `None` when it must run alone.
type Answer = Result<Option<Done>, Error>;

static COMBINER: LazyLock<Combiner<Step, Answer>> = LazyLock::new(Combiner::default);

/// Runs `step` on paged list `key`, combined with the other steps
/// waiting for it. `Ok(None)`: the list is not paged (or was emptied by
/// an earlier step of the batch); run the step alone.
pub async fn run(store: &RespStore, db: usize, key: &[u8], now: u64, step: Step) -> Answer {
    let scope = combine::scope(store, Kind::List as u8);
    COMBINER
        .run(
            scope,
            db,
            key,
            step,
            combine::interrupted,
            async |batch: Vec<Step>, held| lead(store, db, key, now, &batch, held).await,
        )
        .await
}

/// Applies `batch` in order to one read of the list under `held` (its
/// lock) and commits what changed as one crash-atomic batch
/// (`combine::edit_batch`).
async fn lead(
    store: &RespStore,
    db: usize,
    key: &[u8],
    now: u64,
    batch: &[Step],
    held: KeyGuard<'static>,
) -> Vec<Answer> {
    combine::edit_batch(db, key, batch, held, async || {
        Ok(match pages::find(store, db, key, now).await? {
            Found::Paged(v, m, version) => Opened::Paged(Batch {
                edit: pages::Edit::new(store, db, key, m, version),
                expire_at_ms: v.expire_at_ms(),
            }),
            _ => Opened::NotPaged,
        })
    })
    .await
}

/// A paged list read for a batch, and its expiry.
struct Batch<'a> {
    edit: pages::Edit<'a>,
    expire_at_ms: u64,
}

impl BatchEdit<Step> for Batch<'_> {
    type Answer = Done;

    fn emptied(&self) -> bool {
        self.edit.meta.len == 0
    }

    async fn apply(&mut self, step: &Step) -> Result<(bool, Done), Stop> {
        apply(&mut self.edit, step).await
    }

    async fn commit(self, held: KeyGuard<'static>) -> Result<(), Stop> {
        self.edit.commit(self.expire_at_ms, held).await
    }
}

/// Applies one step to the list being edited (never empty when called):
/// whether it changed the list, and what it did.
async fn apply(edit: &mut pages::Edit<'_>, step: &Step) -> Result<(bool, Done), Stop> {
    match *step {
        Step::Push { left, ref elems } => {
            for e in elems {
                if left {
                    edit.push_front(e).await?;
                } else {
                    edit.push_back(e).await?;
                }
            }
            Ok((!elems.is_empty(), Done::Pushed(edit.meta.len as i64)))
        }
        Step::Pop { left, count } => {
            let mut popped = Vec::with_capacity(count.min(edit.meta.len as usize));
            for _ in 0..count {
                let e = if left {
                    edit.pop_front().await?
                } else {
                    edit.pop_back().await?
                };
                match e {
                    Some(e) => popped.push(e),
                    None => break,
                }
            }
            Ok((!popped.is_empty(), Done::Popped(popped)))
        }
    }
}

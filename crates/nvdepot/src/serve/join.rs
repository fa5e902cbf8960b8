//! Runs a command's per-key storage calls together: their device reads are
//! in flight at once, and their writes share one group commit (an MSET of
//! ten keys waits for one flush, not ten).

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

/// Polls every future until all are done; outputs in input order.
pub async fn join_all<F: Future>(futures: Vec<F>) -> Vec<F::Output> {
    let mut pending: Vec<Option<Pin<Box<F>>>> =
        futures.into_iter().map(|f| Some(Box::pin(f))).collect();
    let mut done: Vec<Option<F::Output>> = (0..pending.len()).map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut waiting = false;
        for (slot, out) in pending.iter_mut().zip(done.iter_mut()) {
            if let Some(f) = slot {
                match f.as_mut().poll(cx) {
                    Poll::Ready(v) => {
                        *out = Some(v);
                        *slot = None;
                    }
                    Poll::Pending => waiting = true,
                }
            }
        }
        if waiting {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
    .await;
    done.into_iter()
        .map(|v| v.expect("every future completed"))
        .collect()
}

/// The indexes of `keys` that are the last occurrence of their key (a
/// later pair of an MSET wins; writes of one key must not race).
pub fn last_of_each(keys: &[&[u8]]) -> Vec<usize> {
    let mut seen = std::collections::HashSet::new();
    let mut keep: Vec<usize> = (0..keys.len())
        .rev()
        .filter(|&i| seen.insert(keys[i]))
        .collect();
    keep.reverse();
    keep
}

#[cfg(test)]
mod tests {
    use super::last_of_each;

    #[test]
    fn later_duplicates_win() {
        let keys: [&[u8]; 4] = [b"a", b"b", b"a", b"c"];
        assert_eq!(last_of_each(&keys), vec![1, 2, 3]);
    }
}

//! Runs a command's per-key storage calls together: their device reads are
//! in flight at once, and their writes share one group commit (an MSET of
//! ten keys waits for one flush, not ten).

use std::future::Future;

use futures_util::StreamExt;

/// How many of a command's per-key calls are in flight at once. Enough to
/// keep the device's queue full and share a flush among many writes; few
/// enough that an MSET of 100 000 pairs holds the buffers of 256 writes,
/// not 100 000 (each write holds an IO buffer until its flush).
pub const IN_FLIGHT_MAX: usize = 256;

/// Runs `futures` together, at most [`IN_FLIGHT_MAX`] at a time, each
/// made only when it starts; outputs in input order. Each future has a
/// waker of its own and only woken ones are polled (`futures_util`'s
/// `buffered`, over `FuturesOrdered`): polling every future on every wake
/// made an MSET of n keys cost n² polls, and each poll of a waiting
/// future could register a waker again (issue 35: an MSET of 400 keys
/// never finished).
pub async fn join_all<F: Future>(futures: impl IntoIterator<Item = F>) -> Vec<F::Output> {
    let mut futures = futures.into_iter();
    // One key (DEL k, EXISTS k, MGET k: the common case, and every call
    // of a script's) needs no stream: its set-up and task nodes were 4%
    // of the CPU of a script calling EXISTS.
    if futures.size_hint() == (1, Some(1)) {
        if let Some(only) = futures.next() {
            return vec![only.await];
        }
        return Vec::new();
    }
    futures_util::stream::iter(futures)
        .buffered(IN_FLIGHT_MAX)
        .collect()
        .await
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
    use super::{join_all, last_of_each};

    /// Outputs in input order, for no, one and many futures (one takes
    /// the path without a stream).
    #[test]
    fn outputs_in_input_order() {
        for n in [0usize, 1, 2, 300] {
            let futures = (0..n).map(|i| async move { i * 2 });
            let out = crate::block_on(join_all(futures));
            assert_eq!(out, (0..n).map(|i| i * 2).collect::<Vec<_>>());
        }
    }

    #[test]
    fn later_duplicates_win() {
        let keys: [&[u8]; 4] = [b"a", b"b", b"a", b"c"];
        assert_eq!(last_of_each(&keys), vec![1, 2, 3]);
    }
}

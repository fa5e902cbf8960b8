//! NVMKV's iterator (begin, next, get current) over the engine's
//! resumable scan.

use std::sync::Arc;

use nvdepot_engine::{Namespace, ScanItem, Store};

use crate::code::Failure;

/// Index entries asked for per page: a page is read whole before its
/// first key is handed out.
const PAGE_HINT: usize = 1024;

/// An iteration over one namespace or all, holding a share of the store.
/// Within one cursor every key present and unmodified for the whole walk
/// comes exactly once; [`Cursor::resume_at`] gives a position to go on
/// from later (another process, after a restart), from which keys of the
/// page under way may come again.
pub struct Cursor {
    store: Arc<Store>,
    ns: Option<Namespace>,
    /// Where the page being handed out started.
    page_at: u64,
    /// The next page's cursor; `None` once the last page was read.
    next: Option<u64>,
    page: std::vec::IntoIter<ScanItem>,
    current: Option<ScanItem>,
}

impl Cursor {
    /// A cursor at `at` (0: the beginning, or a [`Cursor::resume_at`]).
    pub fn new(store: Arc<Store>, ns: Option<Namespace>, at: u64) -> Cursor {
        Cursor {
            store,
            ns,
            page_at: at,
            next: Some(at),
            page: Vec::new().into_iter(),
            current: None,
        }
    }

    /// Moves to the next key; `Ok(false)` at the end.
    pub fn advance(&mut self) -> Result<bool, Failure> {
        loop {
            if let Some(item) = self.page.next() {
                self.current = Some(item);
                return Ok(true);
            }
            self.current = None;
            let Some(at) = self.next else {
                return Ok(false);
            };
            let page = self.store.scan(self.ns, at, PAGE_HINT)?;
            self.page_at = at;
            self.next = page.next;
            self.page = page.items.into_iter();
        }
    }

    /// The key [`Cursor::advance`] moved to.
    pub fn current(&self) -> Option<&ScanItem> {
        self.current.as_ref()
    }

    /// Where to go on from: the start of the page under way, or of the
    /// next page once this one is handed out; `None` when nothing is left.
    pub fn resume_at(&self) -> Option<u64> {
        if self.page.len() > 0 {
            Some(self.page_at)
        } else {
            self.next
        }
    }
}

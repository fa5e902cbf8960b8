//! One page of a paged list (`list_pages.rs`) while an edit works on it.
//!
//! The page's record (its shape byte, then each element's length and
//! bytes, head first: `compact.rs`) is kept with room before it, and the
//! offsets of its items are learnt once, on the first need. So a push or
//! a pop at either end costs the element, not the page: a push at the
//! head writes into the room instead of moving the page's bytes along, a
//! pop at the tail cuts at an offset it knows instead of walking every
//! item to find the last. (A combined batch of 29 RPOPs walked a page of
//! ~3 000 small elements 29 times: 7 % of the worker's samples; an LPUSH
//! moved the whole page once per element.)

use std::collections::VecDeque;

use nvdepot_cache::Error;

use super::compact;

/// Room made before the record when a push at the head finds none: at
/// least this much, and at least half the record, so that pushes at the
/// head move the page's bytes O(1) times per element on average.
const ROOM_MIN_BYTES: usize = 256;

fn damaged(what: &str) -> Error {
    Error::Envelope(format!("paged list: {what}"))
}

/// A page being changed. The record is `buf[lo..]`.
pub struct Page {
    buf: Vec<u8>,
    lo: usize,
    pub count: usize,
    /// Where each item's length prefix starts in `buf`, head first, once
    /// an operation needed one past the head; kept by pushes and pops at
    /// either end, forgotten by a change in the middle.
    starts: Option<VecDeque<usize>>,
}

impl Page {
    /// A page as its record holds it; every item's length checked.
    pub fn parse(bytes: Vec<u8>) -> Result<Page, Error> {
        if bytes.first().is_none_or(|&b| b > 1) {
            return Err(damaged("a page of an unknown shape"));
        }
        let count = compact::items(&bytes).try_fold(0usize, |n, i| i.map(|_| n + 1))?;
        Ok(Page {
            buf: bytes,
            lo: 0,
            count,
            starts: None,
        })
    }

    /// A new page holding `e` alone.
    pub fn with(e: &[u8]) -> Page {
        let mut buf = vec![1u8];
        compact::push_item(&mut buf, e);
        Page {
            buf,
            lo: 0,
            count: 1,
            starts: None,
        }
    }

    /// The record's bytes (the room kept before them left out).
    pub fn record(&self) -> &[u8] {
        &self.buf[self.lo..]
    }

    /// Where item `i`'s length prefix starts in `buf`.
    fn start_of(&mut self, i: usize) -> Result<usize, Error> {
        if i == 0 && self.count > 0 {
            return Ok(self.lo + 1);
        }
        if self.starts.is_none() {
            let mut starts = VecDeque::with_capacity(self.count);
            for item in compact::items(&self.buf[self.lo..]) {
                starts.push_back(self.lo + item?.0);
            }
            if starts.len() != self.count {
                return Err(damaged("a page's count is not its items'"));
            }
            self.starts = Some(starts);
        }
        let starts = self.starts.as_ref().expect("learnt");
        starts
            .get(i)
            .copied()
            .ok_or_else(|| damaged("an index past its page"))
    }

    /// Element `i`: where its item starts and ends in `buf`, and the
    /// element.
    pub fn nth(&mut self, i: usize) -> Result<(usize, usize, &[u8]), Error> {
        let start = self.start_of(i)?;
        let (end, e) = compact::item_at(&self.buf, start)?;
        Ok((start, end, e))
    }

    pub fn push_back(&mut self, e: &[u8]) {
        if let Some(starts) = &mut self.starts {
            starts.push_back(self.buf.len());
        }
        compact::push_item(&mut self.buf, e);
        self.count += 1;
    }

    pub fn push_front(&mut self, e: &[u8]) {
        let (prefix, used) = compact::len_prefix(e.len());
        let need = used + e.len();
        if self.lo < need {
            self.make_room(need);
        }
        let shape = self.buf[self.lo];
        let lo = self.lo - need;
        self.buf[lo] = shape;
        self.buf[lo + 1..lo + 1 + used].copy_from_slice(&prefix[..used]);
        self.buf[lo + 1 + used..self.lo + 1].copy_from_slice(e);
        self.lo = lo;
        if let Some(starts) = &mut self.starts {
            starts.push_front(lo + 1);
        }
        self.count += 1;
    }

    /// Moves the record along so that at least `need` bytes lie before it.
    fn make_room(&mut self, need: usize) {
        let record = self.buf.len() - self.lo;
        let room = need + ROOM_MIN_BYTES.max(record / 2);
        let mut buf = Vec::with_capacity(room + record);
        buf.resize(room, 0);
        buf.extend_from_slice(&self.buf[self.lo..]);
        if let Some(starts) = &mut self.starts {
            for s in starts.iter_mut() {
                *s = *s - self.lo + room;
            }
        }
        self.buf = buf;
        self.lo = room;
    }

    /// Drops the record's first `n` items (fewer than it holds) by moving
    /// its start: the shape byte is written again just before the rest.
    fn cut_front(&mut self, n: usize, end: usize) {
        let shape = self.buf[self.lo];
        self.lo = end - 1;
        self.buf[self.lo] = shape;
        if let Some(starts) = &mut self.starts {
            starts.drain(..n);
        }
        self.count -= n;
    }

    pub fn pop_front(&mut self) -> Result<Vec<u8>, Error> {
        let (_, end, e) = self.nth(0)?;
        let e = e.to_vec();
        self.cut_front(1, end);
        Ok(e)
    }

    pub fn pop_back(&mut self) -> Result<Vec<u8>, Error> {
        let i = self
            .count
            .checked_sub(1)
            .ok_or_else(|| damaged("a pop of an empty page"))?;
        let (start, _, e) = self.nth(i)?;
        let e = e.to_vec();
        self.buf.truncate(start);
        if let Some(starts) = &mut self.starts {
            starts.pop_back();
        }
        self.count -= 1;
        Ok(e)
    }

    /// Replaces element `i` (the items after it move: offsets forgotten).
    pub fn set(&mut self, i: usize, e: &[u8]) -> Result<(), Error> {
        let (start, end, _) = self.nth(i)?;
        let mut item = Vec::with_capacity(e.len() + 5);
        compact::push_item(&mut item, e);
        self.buf.splice(start..end, item);
        self.starts = None;
        Ok(())
    }

    /// Drops the first `n` elements (fewer than it holds).
    pub fn drain_front(&mut self, n: usize) -> Result<(), Error> {
        if n > 0 {
            let (_, end, _) = self.nth(n - 1)?;
            self.cut_front(n, end);
        }
        Ok(())
    }

    /// Keeps the first `keep` elements.
    pub fn truncate(&mut self, keep: usize) -> Result<(), Error> {
        if keep < self.count {
            let (start, _, _) = self.nth(keep)?;
            self.buf.truncate(start);
            if let Some(starts) = &mut self.starts {
                starts.truncate(keep);
            }
            self.count = keep;
        }
        Ok(())
    }

    /// Elements `from..=to`.
    pub fn range(&self, from: usize, to: usize) -> impl Iterator<Item = Result<&[u8], Error>> {
        compact::items(&self.buf[self.lo..])
            .skip(from)
            .take(to + 1 - from)
            .map(|i| i.map(|(_, e)| e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    fn record(items: &VecDeque<Vec<u8>>) -> Vec<u8> {
        let mut out = vec![1u8];
        for e in items {
            compact::push_item(&mut out, e);
        }
        out
    }

    /// Random pushes, pops, sets and trims at both ends against a deque:
    /// the page's record and elements are always the deque's, whether its
    /// offsets are known or not and however often its room was remade.
    #[test]
    fn edits_match_a_deque() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        for round in 0..300 {
            let mut model: VecDeque<Vec<u8>> = (0..rng.gen_range(0..20))
                .map(|i| vec![i as u8; rng.gen_range(0..200)])
                .collect();
            let mut page = Page::parse(record(&model)).unwrap();
            for step in 0..200 {
                let e = vec![(round + step) as u8; rng.gen_range(0..300)];
                match rng.gen_range(0..9) {
                    0 | 1 => {
                        page.push_front(&e);
                        model.push_front(e);
                    }
                    2 => {
                        page.push_back(&e);
                        model.push_back(e);
                    }
                    3 | 4 if !model.is_empty() => {
                        assert_eq!(page.pop_back().unwrap(), model.pop_back().unwrap());
                    }
                    5 if !model.is_empty() => {
                        assert_eq!(page.pop_front().unwrap(), model.pop_front().unwrap());
                    }
                    6 if !model.is_empty() => {
                        let i = rng.gen_range(0..model.len());
                        assert_eq!(page.nth(i).unwrap().2, &model[i][..]);
                        page.set(i, &e).unwrap();
                        model[i] = e;
                    }
                    7 if model.len() > 1 => {
                        let n = rng.gen_range(0..model.len());
                        page.drain_front(n).unwrap();
                        model.drain(..n);
                    }
                    8 if model.len() > 1 => {
                        let keep = rng.gen_range(1..model.len());
                        page.truncate(keep).unwrap();
                        model.truncate(keep);
                    }
                    _ => {}
                }
                assert_eq!(page.count, model.len());
                let all: Vec<&[u8]> = page
                    .range(0, page.count.max(1) - 1)
                    .map(|e| e.unwrap())
                    .collect();
                if !model.is_empty() {
                    assert!(all.iter().zip(&model).all(|(a, b)| *a == &b[..]));
                }
            }
            if !model.is_empty() {
                assert_eq!(page.record(), record(&model));
            }
        }
    }

    /// Damaged pages are errors, never a panic (a page whose count its
    /// reader trusted past its items included).
    #[test]
    fn damage_is_an_error_not_a_panic() {
        assert!(Page::parse(vec![]).is_err());
        assert!(Page::parse(vec![2]).is_err());
        assert!(Page::parse(vec![1, 5, b'a']).is_err());
        let mut page = Page::parse(vec![1, 1, b'a']).unwrap();
        page.count = 3;
        assert!(page.nth(2).is_err());
        let mut empty = Page::parse(vec![1]).unwrap();
        assert!(empty.pop_back().is_err());
        assert!(empty.pop_front().is_err());
    }
}

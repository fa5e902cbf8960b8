//! A fixed table's names to their positions, looked up once per command
//! run (the command table, the settings): the name's xxh3 hash finds the
//! position, and the name there is compared (std's SipHash over a short
//! name cost more than the rest of the lookup).

use std::collections::HashMap;
use std::hash::BuildHasherDefault;

use nvdepot_cache::IdHasher;
use xxhash_rust::xxh3::xxh3_64;

pub struct NameMap {
    /// (name, position) by the name's hash.
    by_hash: HashMap<u64, (&'static [u8], usize), BuildHasherDefault<IdHasher>>,
}

impl NameMap {
    /// Position `i` answers to every name `names` gives for it. Two
    /// names of one hash would make one unreachable: refused here, once,
    /// at the table's first use (the tables are fixed, so a test meets it).
    pub fn new(names: impl IntoIterator<Item = (&'static [u8], usize)>) -> NameMap {
        let mut by_hash = HashMap::default();
        for (name, i) in names {
            let before = by_hash.insert(xxh3_64(name), (name, i));
            assert!(before.is_none(), "two names of one xxh3 hash");
        }
        NameMap { by_hash }
    }

    pub fn get(&self, name: &[u8]) -> Option<usize> {
        let &(known, i) = self.by_hash.get(&xxh3_64(name))?;
        (known == name).then_some(i)
    }
}

#[cfg(test)]
mod tests {
    use super::NameMap;

    #[test]
    fn finds_each_name_and_no_other() {
        let map = NameMap::new([(&b"GET"[..], 0), (b"SET", 1), (b"maxmemory", 2), (b"", 3)]);
        assert_eq!(map.get(b"GET"), Some(0));
        assert_eq!(map.get(b"SET"), Some(1));
        assert_eq!(map.get(b"maxmemory"), Some(2));
        assert_eq!(map.get(b""), Some(3));
        assert_eq!(map.get(b"get"), None);
        assert_eq!(map.get(b"GETX"), None);
    }
}

//! The data operations the skins call: the engine's, with the value
//! cache (when there is one) consulted on reads and kept current on
//! writes (see `value_cache.rs` for why a cached value is never stale).

use nvdepot_engine::{DeleteOutcome, Namespace, PutMode, Store, WriteOp};

use crate::code::Failure;
use crate::handle::Handle;

impl Handle {
    /// The value and version of `key`, or `None`.
    pub fn get_versioned(
        &self,
        ns: Namespace,
        key: &[u8],
    ) -> Result<Option<(Vec<u8>, u64)>, Failure> {
        let Some(cache) = &self.cache else {
            return self.with(|s| s.get_versioned(ns, key));
        };
        let before = match cache.get(ns.id(), key) {
            Ok(hit) => {
                self.with(|_| Ok(()))?; // a closed store answers nothing
                return Ok(Some(hit));
            }
            Err(before) => before,
        };
        let got = self.with(|s| s.get_versioned(ns, key))?;
        if let Some((value, version)) = &got {
            cache.fill(before, ns.id(), key, value, *version);
        }
        Ok(got)
    }

    /// The value of `key`, or `None`.
    pub fn get(&self, ns: Namespace, key: &[u8]) -> Result<Option<Vec<u8>>, Failure> {
        Ok(self.get_versioned(ns, key)?.map(|(v, _)| v))
    }

    /// Bytes `[offset, offset + len)` of the value (clipped), or `None`.
    /// A cached value answers; a miss reads only the range (and caches
    /// nothing: the range is not the value).
    pub fn get_range(
        &self,
        ns: Namespace,
        key: &[u8],
        offset: u64,
        len: usize,
    ) -> Result<Option<Vec<u8>>, Failure> {
        if let Some(cache) = &self.cache {
            if let Ok((value, _)) = cache.get(ns.id(), key) {
                self.with(|_| Ok(()))?;
                let start = (offset.min(value.len() as u64)) as usize;
                let end = start.saturating_add(len).min(value.len());
                return Ok(Some(value[start..end].to_vec()));
            }
        }
        self.with(|s| s.get_range(ns, key, offset, len))
    }

    /// Whether `key` is present.
    pub fn exists(&self, ns: Namespace, key: &[u8]) -> Result<bool, Failure> {
        Ok(self.get_range(ns, key, 0, 0)?.is_some())
    }

    /// The values of several keys; the cache answers what it holds, the
    /// store the rest (their index lookups overlapped).
    pub fn get_many(&self, ns: Namespace, keys: &[&[u8]]) -> Result<Vec<Option<Vec<u8>>>, Failure> {
        let Some(cache) = &self.cache else {
            return self.with(|s| s.get_many(ns, keys));
        };
        let mut out: Vec<Option<Vec<u8>>> = vec![None; keys.len()];
        let mut missed = Vec::new();
        for (i, k) in keys.iter().enumerate() {
            match cache.get(ns.id(), k) {
                Ok((v, _)) => out[i] = Some(v),
                Err(before) => missed.push((i, before)),
            }
        }
        if missed.is_empty() {
            return Ok(out);
        }
        // Versions are needed to cache a value: read the misses one by
        // one when there are few, else in a batch (and cache nothing).
        if missed.len() <= 4 {
            for (i, before) in missed {
                if let Some((v, version)) = self.with(|s| s.get_versioned(ns, keys[i]))? {
                    cache.fill(before, ns.id(), keys[i], &v, version);
                    out[i] = Some(v);
                }
            }
            return Ok(out);
        }
        let wanted: Vec<&[u8]> = missed.iter().map(|(i, _)| keys[*i]).collect();
        let got = self.with(|s| s.get_many(ns, &wanted))?;
        for ((i, _), v) in missed.into_iter().zip(got) {
            out[i] = v;
        }
        Ok(out)
    }

    /// A (conditional) put; the new version, or `None` if the condition
    /// failed.
    pub fn put_versioned(
        &self,
        ns: Namespace,
        key: &[u8],
        value: &[u8],
        mode: PutMode,
    ) -> Result<Option<u64>, Failure> {
        let Some(cache) = &self.cache else {
            return self.with(|s| s.put_versioned(ns, key, value, mode));
        };
        let writing = cache.writing(ns.id(), &[key]);
        let put = self.with(|s| s.put_versioned(ns, key, value, mode))?;
        if let Some(version) = put {
            writing.fill_written(ns.id(), key, value, version);
        }
        Ok(put)
    }

    /// Inserts or overwrites.
    pub fn put(&self, ns: Namespace, key: &[u8], value: &[u8]) -> Result<(), Failure> {
        self.put_versioned(ns, key, value, PutMode::Upsert)
            .map(|_| ())
    }

    /// Deletes `key` (only at `version`, when given).
    pub fn delete_versioned(
        &self,
        ns: Namespace,
        key: &[u8],
        version: Option<u64>,
    ) -> Result<DeleteOutcome, Failure> {
        self.changing(ns, &[key], |s| s.delete_versioned(ns, key, version))
    }

    /// Deletes `key`; whether it was present.
    pub fn delete(&self, ns: Namespace, key: &[u8]) -> Result<bool, Failure> {
        Ok(self.delete_versioned(ns, key, None)? == DeleteOutcome::Deleted)
    }

    /// SETRANGE's partial write; the value's new length.
    pub fn put_range(
        &self,
        ns: Namespace,
        key: &[u8],
        offset: u64,
        data: &[u8],
    ) -> Result<u64, Failure> {
        self.changing(ns, &[key], |s| s.put_range(ns, key, offset, data))
    }

    /// Crash-atomic puts and deletes sharing one flush.
    pub fn write_batch(&self, ns: Namespace, ops: &[WriteOp<'_>]) -> Result<(), Failure> {
        let keys: Vec<&[u8]> = ops
            .iter()
            .map(|op| match op {
                WriteOp::Put { key, .. } | WriteOp::Delete { key } => *key,
            })
            .collect();
        self.changing(ns, &keys, |s| s.write_batch(ns, ops))
    }

    /// Deletes every key of a namespace.
    pub fn clear(&self, ns: Namespace) -> Result<(), Failure> {
        if let Some(cache) = &self.cache {
            cache.change_all();
        }
        let done = self.with(|s| s.clear(ns));
        if let Some(cache) = &self.cache {
            cache.purge(ns.id());
        }
        done
    }

    /// Drops namespace `name` and its keys.
    pub fn drop_namespace(&self, name: &str) -> Result<(), Failure> {
        let ns = self.with(|s| Ok(s.namespace(name)))?;
        if let Some(cache) = &self.cache {
            cache.change_all();
        }
        let done = self.with(|s| s.drop_namespace(name));
        if let (Some(cache), Some(ns)) = (&self.cache, ns) {
            cache.purge(ns.id());
        }
        done
    }

    /// The value cache's (hits, misses), if there is one.
    pub fn cache_counters(&self) -> Option<(u64, u64)> {
        self.cache.as_ref().map(|c| c.counters())
    }

    /// A write of `keys`: their cached values are dropped, and none is
    /// filled until it is over (whatever its outcome).
    fn changing<R>(
        &self,
        ns: Namespace,
        keys: &[&[u8]],
        write: impl FnOnce(&Store) -> Result<R, nvdepot_engine::Error>,
    ) -> Result<R, Failure> {
        let Some(cache) = &self.cache else {
            return self.with(write);
        };
        let _writing = cache.writing(ns.id(), keys);
        self.with(write)
    }
}

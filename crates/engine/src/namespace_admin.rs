//! Namespace administration: create, drop and clear (O(1) for the caller:
//! a registry record, then a purge of the retired physical namespace's
//! index entries, on the GC thread when it runs).

use std::sync::atomic::Ordering;

use nvdepot_index::{Index, Location};

use crate::aio::{now, Mode};
use crate::error::{Error, Result};
use crate::inner::{key_hash, Inner};
use crate::namespace::{self, Namespace, SYSTEM_NS};
use crate::store::PutMode;

impl Inner {
    pub fn create_namespace(&self, name: &str) -> Result<Namespace> {
        validate_ns_name(name)?;
        let _admin = self.ns_admin.lock();
        if self.namespaces.lookup(name).is_some() {
            return Err(Error::NamespaceExists(name.to_string()));
        }
        let id = self.namespaces.allocate_id();
        self.write_registry(name, id, id)?;
        self.namespaces.insert(name, id, id, 0);
        Ok(Namespace(id))
    }

    pub fn drop_namespace(&self, name: &str) -> Result<()> {
        let _admin = self.ns_admin.lock();
        let logical = self
            .namespaces
            .lookup(name)
            .ok_or_else(|| Error::NoSuchNamespace(name.to_string()))?;
        now(self.delete(Mode::Blocking, Namespace(SYSTEM_NS), name.as_bytes(), None))?;
        if let Some(physical) = self.namespaces.remove(logical) {
            self.purge(physical)?;
        }
        Ok(())
    }

    pub fn clear(&self, ns: Namespace) -> Result<()> {
        let _admin = self.ns_admin.lock();
        let name = self
            .namespaces
            .name_of(ns)
            .ok_or_else(|| Error::NoSuchNamespace(format!("id {}", ns.0)))?;
        let new_physical = self.namespaces.allocate_id();
        self.write_registry(&name, ns.0, new_physical)?;
        if let Some(old) = self.namespaces.renew(ns.0, new_physical) {
            self.purge(old)?;
        }
        Ok(())
    }

    /// Durably names `name`'s logical and physical ids in the registry.
    fn write_registry(&self, name: &str, logical: u32, physical: u32) -> Result<()> {
        let value = namespace::encode_registry_value(logical, physical);
        now(self.put(
            Mode::Blocking,
            Namespace(SYSTEM_NS),
            name.as_bytes(),
            &value,
            PutMode::Upsert,
        ))?;
        Ok(())
    }

    /// Removes from the index every record of a retired physical
    /// namespace: now, or (with background GC) soon, on the GC thread, so
    /// that `clear` and `drop_namespace` are O(1) for the caller.
    fn purge(&self, physical: u32) -> Result<()> {
        if self.opts.background_gc {
            self.pending_purge.lock().push(physical);
            self.segments.wake_collector();
            return Ok(());
        }
        self.purge_now(&[physical])
    }

    /// Scans the log once and unlinks the records of retired namespaces.
    pub fn purge_now(&self, retired: &[u32]) -> Result<()> {
        if crate::iter::index_cheaper(self) {
            return self.purge_entries(retired, &crate::iter::index_entries(self));
        }
        for s in 0..self.segments.len() as u32 {
            self.purge_segment(retired, s)?;
        }
        Ok(())
    }

    /// [`Inner::purge_now`] through the index: reads the head of each
    /// entry's record and unlinks those of retired namespaces. For a store
    /// with few keys and much garbage (the usual state after FLUSHDB),
    /// far fewer bytes than a scan of the log. Entries may be stale (GC ran
    /// since they were listed): an entry is removed only if it is still
    /// exactly in the index.
    pub fn purge_entries(&self, retired: &[u32], entries: &[(u64, Location)]) -> Result<()> {
        use crate::read::{Fetched, Span};
        let _pause = self.gc_pause.read();
        for &(fp, loc) in entries {
            let head = Span::Head {
                key_len: u16::MAX as usize,
            };
            let r = match now(self.read_at(Mode::Blocking, loc, head))? {
                Fetched::Record(r) => r,
                Fetched::Invalid(_) => continue,
            };
            if purged(retired, &r.header) {
                self.unlink_purged(fp, loc, &r.header);
            }
        }
        Ok(())
    }

    /// Drops the index entry `(fp, loc)` of a record of a retired
    /// namespace.
    fn unlink_purged(&self, fp: u64, loc: Location, header: &crate::format::RecordHeader) {
        let physical = header.namespace;
        let owner = namespace::owner_of(physical);
        let seg = self.layout.segment_of(loc.pba);
        let _unlinking = self.segments.unlinking(seg);
        if self.index.remove(fp, loc) {
            self.segments.sub_valid(seg, self.grains_of(header));
            // Chunk entries count with the registry's.
            if physical != owner {
                if let Some(c) = self.namespaces.counter(SYSTEM_NS) {
                    c.fetch_sub(1, Ordering::Relaxed);
                }
            }
        }
    }

    /// [`Inner::purge_now`] for one segment. GC may run between segments:
    /// it forgets (never relocates) records of retired namespaces itself,
    /// so none moves from a segment not yet purged to one already done.
    pub fn purge_segment(&self, retired: &[u32], s: u32) -> Result<()> {
        let _pause = self.gc_pause.read();
        if !self.segments.get(s).state().holds_records() {
            return Ok(());
        }
        let seg_seq = self.segments.get(s).seq.load(Ordering::Relaxed);
        crate::iter::scan_segment(&self.layout, s, seg_seq, |rec| {
            if purged(retired, &rec.header) {
                let fp = Index::fingerprint(key_hash(rec.header.namespace, rec.key()));
                let loc = self.location(rec.pba, &rec.header);
                self.unlink_purged(fp, loc, &rec.header);
            }
            Ok(())
        })?;
        Ok(())
    }
}

/// Whether a record with `header` is a value (or a large value's chunk)
/// of one of the `retired` namespaces: what a purge unlinks.
fn purged(retired: &[u32], header: &crate::format::RecordHeader) -> bool {
    header.kind.is_value() && retired.contains(&namespace::owner_of(header.namespace))
}

fn validate_ns_name(name: &str) -> Result<()> {
    if name.is_empty() || name.len() > 255 || name.bytes().any(|b| b < 0x20) {
        return Err(Error::Config(format!(
            "namespace name {name:?} must be 1-255 bytes without control characters"
        )));
    }
    Ok(())
}

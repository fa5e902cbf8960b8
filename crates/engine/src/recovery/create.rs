//! Creating a store: superblocks, free segment headers, the registry of
//! namespaces, on freshly allocated devices.

use super::index_config;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use nvdepot_index::Index;
use nvdepot_io::Device;

use crate::error::{Error, Result};
use crate::format::{Superblock, FORMAT_VERSION};
use crate::inner::Inner;
use crate::layout::Layout;
use crate::namespace::{self, Namespace, Namespaces, DEFAULT_NAME, SYSTEM_NS};
use crate::options::Options;
use crate::segments::Segments;
use crate::store::PutMode;
use crate::writer::GC_RESERVE_SEGMENTS;

pub(crate) fn format_store(devices: Vec<Arc<dyn Device>>, opts: &Options) -> Result<Inner> {
    let align = devices.iter().map(|d| d.alignment()).max().unwrap_or(512);
    let grain = (opts.grain_bytes as usize).max(align);
    if !grain.is_power_of_two() || !(512..=4096).contains(&grain) {
        return Err(Error::Config(format!(
            "grain size {grain} must be a power of two in 512..=4096"
        )));
    }
    let seg = opts.segment_bytes;
    if seg < 1 << 20 || !seg.is_multiple_of(grain as u64) {
        return Err(Error::Config(format!(
            "segment size {seg} must be at least 1 MiB and a multiple of {grain}"
        )));
    }
    let device_bytes = devices.iter().map(|d| d.capacity()).min().unwrap_or(0);
    let segments = Layout::segments_for(device_bytes, devices.len(), seg);
    let need = GC_RESERVE_SEGMENTS as u32 + 3;
    if segments < need {
        return Err(Error::Config(format!(
            "devices too small: {segments} segments of {} MiB fit, at least {need} are needed (1 MiB + {need} × segment size per device)",
            seg >> 20
        )));
    }
    let uuid: u128 = rand::random();
    let created_secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    for (i, d) in devices.iter().enumerate() {
        let mut buf = nvdepot_io::AlignedBuf::new(4096, d.alignment());
        Superblock {
            format_version: FORMAT_VERSION,
            uuid,
            device_index: i as u32,
            device_count: devices.len() as u32,
            grain_bytes: grain as u32,
            segment_bytes: seg,
            device_bytes,
            created_secs,
        }
        .encode(&mut buf);
        d.write_at(&buf, 0)?;
        d.flush()?;
    }
    let layout = Arc::new(Layout {
        devices,
        grain_bytes: grain as u64,
        segment_bytes: seg,
        segments,
        align,
    });
    let segs = Arc::new(Segments::new(segments));
    for s in 0..segments {
        segs.release(s);
    }
    let index = Index::new(index_config(&layout, 0));
    let namespaces = Namespaces::new(2);
    let inner = Inner::new(
        layout,
        segs,
        index,
        Arc::new(AtomicU64::new(1)),
        namespaces,
        opts.clone(),
        uuid,
    );
    let value = namespace::encode_registry_value(1, 1);
    crate::aio::now(inner.put(
        crate::aio::Mode::Blocking,
        Namespace(SYSTEM_NS),
        DEFAULT_NAME.as_bytes(),
        &value,
        PutMode::Upsert,
    ))?;
    inner.namespaces.insert(DEFAULT_NAME, 1, 1, 0);
    Ok(inner)
}

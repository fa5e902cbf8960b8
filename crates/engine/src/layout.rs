//! Where segments and grains live on the devices.
//!
//! Segments are numbered across the store and placed round-robin over the
//! devices (RAID-0 at segment granularity): segment `s` lives on device
//! `s % n` at byte `DEVICE_HEADER_BYTES + (s / n) * segment_bytes`. A grain
//! address (`pba`) is `s * grains_per_segment + grain_in_segment`, so a
//! record never spans two devices.

use std::sync::Arc;

use nvdepot_io::{AlignedBuf, Device};

use crate::aio::{self, now, Mode};
use crate::error::Result;
use crate::format::DEVICE_HEADER_BYTES;

/// The geometry of a store and its devices.
pub(crate) struct Layout {
    pub devices: Vec<Arc<dyn Device>>,
    pub grain_bytes: u64,
    pub segment_bytes: u64,
    pub segments: u32,
    /// Largest alignment any device asks for (≤ the grain size is the
    /// common case; larger means reads widen and flushes pad).
    pub align: usize,
}

impl Layout {
    /// Segments that fit on `devices`, each `device_bytes` long.
    pub fn segments_for(device_bytes: u64, device_count: usize, segment_bytes: u64) -> u32 {
        let per_device = device_bytes.saturating_sub(DEVICE_HEADER_BYTES) / segment_bytes;
        (per_device * device_count as u64).min(u32::MAX as u64) as u32
    }

    /// Grains of the whole store: every pba is below this.
    pub fn grains(&self) -> u64 {
        self.segments as u64 * self.grains_per_segment()
    }

    pub fn grains_per_segment(&self) -> u64 {
        self.segment_bytes / self.grain_bytes
    }

    /// Device index and byte offset of a segment's start.
    pub fn segment_start(&self, segment: u32) -> (usize, u64) {
        let n = self.devices.len() as u64;
        let s = segment as u64;
        (
            (s % n) as usize,
            DEVICE_HEADER_BYTES + (s / n) * self.segment_bytes,
        )
    }

    pub fn segment_of(&self, pba: u64) -> u32 {
        (pba / self.grains_per_segment()) as u32
    }

    pub fn pba(&self, segment: u32, offset_in_segment: u64) -> u64 {
        debug_assert_eq!(offset_in_segment % self.grain_bytes, 0);
        segment as u64 * self.grains_per_segment() + offset_in_segment / self.grain_bytes
    }

    /// Segment and byte offset in it of a grain address.
    pub fn split(&self, pba: u64) -> (u32, u64) {
        let gps = self.grains_per_segment();
        ((pba / gps) as u32, (pba % gps) * self.grain_bytes)
    }

    /// Name of the device and byte offset on it, for error messages.
    pub fn describe(&self, segment: u32, offset_in_segment: u64) -> (String, u64) {
        let (dev, start) = self.segment_start(segment);
        (
            self.devices[dev].name().to_string(),
            start + offset_in_segment,
        )
    }

    pub fn buffer(&self, len: usize) -> AlignedBuf {
        AlignedBuf::new(len, self.align)
    }

    /// Reads `buf.len()` bytes at an aligned offset within a segment.
    pub fn read(&self, segment: u32, offset: u64, buf: &mut [u8]) -> Result<()> {
        debug_assert!(offset + buf.len() as u64 <= self.segment_bytes);
        let (dev, start) = self.segment_start(segment);
        self.devices[dev].read_at(buf, start + offset)?;
        Ok(())
    }

    /// Writes `buf` at an aligned offset within a segment.
    pub fn write(&self, segment: u32, offset: u64, buf: &[u8]) -> Result<()> {
        debug_assert!(offset + buf.len() as u64 <= self.segment_bytes);
        let (dev, start) = self.segment_start(segment);
        self.devices[dev].write_at(buf, start + offset)?;
        Ok(())
    }

    /// Reads the bytes `[offset, offset + len)` of a segment, widening the
    /// read to the device alignment. Returns the buffer and where the
    /// asked-for bytes start in it.
    pub fn read_range(&self, segment: u32, offset: u64, len: usize) -> Result<(AlignedBuf, usize)> {
        now(self.read_range_in(Mode::Blocking, segment, offset, len))
    }

    /// [`Layout::read_range`], waiting as `mode` says.
    pub async fn read_range_in(
        &self,
        mode: Mode,
        segment: u32,
        offset: u64,
        len: usize,
    ) -> Result<(AlignedBuf, usize)> {
        let a = self.align as u64;
        let start = offset / a * a;
        let end = (offset + len as u64).div_ceil(a) * a;
        let end = end.min(self.segment_bytes);
        let buf = AlignedBuf::take((end - start) as usize, self.align);
        debug_assert_eq!(buf.len() as u64, end - start);
        let (dev, seg_start) = self.segment_start(segment);
        let buf = aio::read(mode, &*self.devices[dev], buf, seg_start + start).await?;
        Ok((buf, (offset - start) as usize))
    }

    /// Flushes the devices whose bit is set in `mask` (all if it is `u64::MAX`).
    pub fn flush(&self, mask: u64) -> Result<()> {
        for (i, d) in self.devices.iter().enumerate() {
            if i >= 64 || mask & (1 << i) != 0 {
                d.flush()?;
            }
        }
        Ok(())
    }

    pub fn device_bit(&self, segment: u32) -> u64 {
        let (dev, _) = self.segment_start(segment);
        if dev < 64 {
            1 << dev
        } else {
            u64::MAX
        }
    }
}

//! Opening a store's devices: the data files of a directory (created
//! when missing), and their superblocks, from which the layout is built.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use nvdepot_io::{Device, FileDevice};

use crate::error::{Error, Result};
use crate::format::{DecodeError, Superblock, FORMAT_VERSION};
use crate::layout::Layout;
use crate::options::Options;

/// Name of the n-th data file in a store directory.
pub fn data_file_name(n: usize) -> String {
    format!("nvdepot.{n}")
}

/// Name of the first data file while a store is being created in a
/// directory (see [`Creating`]).
pub fn creating_file_name() -> String {
    format!("{}{CREATING_SUFFIX}", data_file_name(0))
}

/// A store being created in a directory: its data file exists only under
/// a temporary name until the store on it is formatted and flushed, then
/// [`Creating::publish`] renames it. A crash during creation (while the
/// file is zero-filled, or before its superblock is on the device) leaves
/// only the temporary file, which the next start removes and creates
/// again: a store is visible whole or not at all.
pub(crate) struct Creating {
    temporary: PathBuf,
    final_name: PathBuf,
}

/// Suffix of a data file being created.
const CREATING_SUFFIX: &str = ".creating";

impl Creating {
    /// Makes the formatted store visible under its real name, durably
    /// (the directory is synced after the rename).
    pub(crate) fn publish(self) -> Result<()> {
        let fail = |what: &str, e: std::io::Error| Error::NotAStore {
            device: self.final_name.display().to_string(),
            reason: format!("{what}: {e}"),
        };
        std::fs::rename(&self.temporary, &self.final_name)
            .map_err(|e| fail("cannot rename the new data file into place", e))?;
        if let Some(dir) = self.final_name.parent() {
            std::fs::File::open(dir)
                .and_then(|d| d.sync_all())
                .map_err(|e| fail("cannot sync the store directory", e))?;
        }
        Ok(())
    }

    /// Removes the temporary file of a creation that failed (a store too
    /// small for its segments, say), so no store is left half made.
    pub(crate) fn abandon(self) {
        let _ = std::fs::remove_file(&self.temporary);
    }
}

/// A path's devices, and the store being created there if there was none.
pub(crate) type Opened = (Vec<Arc<dyn Device>>, Option<Creating>);

/// Opens the devices behind a path; `Some` if a store is being created
/// there (to be published once formatted).
pub(crate) fn open_paths(path: &Path, opts: &Options) -> Result<Opened> {
    use std::os::unix::fs::FileTypeExt;
    let open = |p: &Path, size: Option<u64>| -> Result<Arc<dyn Device>> {
        let dev = if opts.buffered_io {
            FileDevice::open_buffered(p, size)?
        } else {
            FileDevice::open(p, size)?
        };
        Ok(Arc::new(dev))
    };
    match std::fs::metadata(path) {
        Ok(m) if m.file_type().is_block_device() || m.is_file() => {
            Ok((vec![open(path, None)?], None))
        }
        Ok(m) if !m.is_dir() => Err(Error::NotAStore {
            device: path.display().to_string(),
            reason: "not a directory, regular file or block device".into(),
        }),
        _ => {
            std::fs::create_dir_all(path).map_err(|e| Error::NotAStore {
                device: path.display().to_string(),
                reason: format!("cannot create directory: {e}"),
            })?;
            let mut devices = Vec::new();
            while path.join(data_file_name(devices.len())).exists() {
                devices.push(open(&path.join(data_file_name(devices.len())), None)?);
            }
            if !devices.is_empty() {
                return Ok((devices, None));
            }
            let Some(size) = opts.create_bytes else {
                return Err(Error::NotAStore {
                    device: path.display().to_string(),
                    reason: "no nvdepot store here (no data files); a store is created only when a size is given".into(),
                });
            };
            let final_name = path.join(data_file_name(0));
            let temporary = path.join(creating_file_name());
            // Left by a creation that did not finish: it never held data.
            match std::fs::remove_file(&temporary) {
                Ok(()) => tracing::info!(
                    "removed {}: an unfinished store creation",
                    temporary.display()
                ),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    return Err(Error::NotAStore {
                        device: temporary.display().to_string(),
                        reason: format!("cannot remove an unfinished creation: {e}"),
                    })
                }
            }
            let device = open(&temporary, Some(size))?;
            Ok((
                vec![device],
                Some(Creating {
                    temporary,
                    final_name,
                }),
            ))
        }
    }
}

pub(crate) fn read_block(
    dev: &dyn Device,
    offset: u64,
    len: usize,
) -> Result<nvdepot_io::AlignedBuf> {
    let mut buf = nvdepot_io::AlignedBuf::new(len, dev.alignment());
    let n = buf.len();
    dev.read_at(&mut buf[..n], offset)?;
    Ok(buf)
}

/// Checks the superblocks of a store's devices and builds its layout.
pub(crate) fn load_layout(
    devices: Vec<Arc<dyn Device>>,
    sbs: Vec<std::result::Result<Superblock, DecodeError>>,
) -> Result<(Arc<Layout>, Superblock)> {
    let mut ordered: Vec<Option<(Arc<dyn Device>, Superblock)>> = vec![None; devices.len()];
    let mut first: Option<Superblock> = None;
    for (d, sb) in devices.into_iter().zip(sbs) {
        let sb = match sb {
            Ok(sb) => sb,
            Err(DecodeError::Version(v)) => {
                return Err(Error::FormatVersion {
                    device: d.name().into(),
                    found: v,
                    supported: FORMAT_VERSION,
                })
            }
            Err(e) => {
                return Err(Error::NotAStore {
                    device: d.name().into(),
                    reason: format!("superblock: {e:?}"),
                })
            }
        };
        let f = *first.get_or_insert(sb);
        if sb.uuid != f.uuid
            || sb.device_count != f.device_count
            || sb.segment_bytes != f.segment_bytes
        {
            return Err(Error::NotAStore {
                device: d.name().into(),
                reason: "belongs to another store".into(),
            });
        }
        let i = sb.device_index as usize;
        if i >= ordered.len() || ordered[i].is_some() || sb.device_count as usize != ordered.len() {
            return Err(Error::NotAStore {
                device: d.name().into(),
                reason: format!(
                    "device {} of {}, but {} devices were given",
                    i,
                    sb.device_count,
                    ordered.len()
                ),
            });
        }
        ordered[i] = Some((d, sb));
    }
    let sb = first.expect("at least one device");
    let devices: Vec<Arc<dyn Device>> = ordered
        .into_iter()
        .map(|o| o.expect("all devices present").0)
        .collect();
    let align = devices.iter().map(|d| d.alignment()).max().unwrap_or(512);
    if align as u64 > sb.grain_bytes as u64 {
        return Err(Error::Config(format!(
            "device alignment {align} exceeds the store's grain of {}",
            sb.grain_bytes
        )));
    }
    let layout = Arc::new(Layout {
        segments: Layout::segments_for(sb.device_bytes, devices.len(), sb.segment_bytes),
        devices,
        grain_bytes: sb.grain_bytes as u64,
        segment_bytes: sb.segment_bytes,
        align,
    });
    Ok((layout, sb))
}

/// Reads the superblock of every device.
pub(crate) fn read_superblocks(
    devices: &[Arc<dyn Device>],
) -> Result<Vec<std::result::Result<Superblock, DecodeError>>> {
    let mut sbs = Vec::with_capacity(devices.len());
    for d in devices {
        let buf = read_block(d.as_ref(), 0, 4096)?;
        sbs.push(Superblock::decode(&buf));
    }
    Ok(sbs)
}

//! Removing a store (RocksDB's `DestroyDB`).

use std::io::Read;
use std::path::Path;

use nvdepot_engine::format::SUPERBLOCK_MAGIC;
use nvdepot_engine::{creating_file_name, data_file_name};

use crate::code::{Code, Failure};

/// Removes the store at `path`: a directory's data files (`nvdepot.N`, and
/// one left half created), then the directory if nothing else is in it; a
/// single data file. Each is checked to start with a store's superblock
/// first, so a wrong path destroys nothing. A block device is refused
/// (wipe it with `blkdiscard` or `wipefs`). The store must not be open.
pub fn destroy(path: &Path) -> Result<(), Failure> {
    use std::os::unix::fs::FileTypeExt;
    let meta = std::fs::metadata(path)
        .map_err(|e| Failure::new(Code::NotAStore, format!("{}: {e}", path.display())))?;
    if meta.file_type().is_block_device() {
        return Err(Failure::invalid(format!(
            "{}: will not destroy a block device's store; wipe the device instead",
            path.display()
        )));
    }
    if meta.is_file() {
        check_magic(path)?;
        return remove(path);
    }
    let mut data = Vec::new();
    for n in 0.. {
        let file = path.join(data_file_name(n));
        if !file.exists() {
            break;
        }
        check_magic(&file)?;
        data.push(file);
    }
    let creating = path.join(creating_file_name());
    if data.is_empty() && !creating.exists() {
        return Err(Failure::new(
            Code::NotAStore,
            format!("{}: no nvdepot store here (no data files)", path.display()),
        ));
    }
    for file in data {
        remove(&file)?;
    }
    if creating.exists() {
        remove(&creating)?;
    }
    // Only if empty: the caller's other files stay.
    let _ = std::fs::remove_dir(path);
    Ok(())
}

fn check_magic(file: &Path) -> Result<(), Failure> {
    let mut head = [0u8; 8];
    std::fs::File::open(file)
        .and_then(|mut f| f.read_exact(&mut head))
        .map_err(|e| Failure::new(Code::NotAStore, format!("{}: {e}", file.display())))?;
    if &head != SUPERBLOCK_MAGIC {
        return Err(Failure::new(
            Code::NotAStore,
            format!(
                "{}: not an nvdepot data file (no superblock); nothing removed",
                file.display()
            ),
        ));
    }
    Ok(())
}

fn remove(file: &Path) -> Result<(), Failure> {
    std::fs::remove_file(file)
        .map_err(|e| Failure::new(Code::Io, format!("cannot remove {}: {e}", file.display())))
}

//! torch `.pt` archives (`torch.save` since torch 1.6): a zip holding `<name>/data.pkl`, whose
//! persistent ids `('storage', torch.<Type>Storage, key, location, numel)` name the storages
//! kept as `<name>/data/<key>` (stored, little-endian). Every size is checked against what the
//! archive declares before anything is read, and reading stops at the declared size.

use std::collections::HashMap;
use std::io::{Read, Seek};

use super::tensor::Storage;
use super::{Global, Id, Node, Persistent, Pickle, limits};

/// Reads a torch archive. The error is one line saying what was met.
pub fn read<R: Read + Seek>(reader: R) -> Result<Pickle, String> {
    let mut zip = zip::ZipArchive::new(reader).map_err(|e| {
        format!("not a complete zip archive ({e}): truncated, or not written by torch.save")
    })?;
    let pkl: Vec<String> = zip
        .file_names()
        .filter(|n| n.ends_with("/data.pkl") && n.matches('/').count() == 1)
        .map(str::to_owned)
        .collect();
    let [pkl] = pkl.as_slice() else {
        return Err(format!(
            "a zip archive with {} `<name>/data.pkl` entries, not a torch.save file (it writes one)",
            pkl.len()
        ));
    };
    let prefix = pkl.trim_end_matches("data.pkl").to_owned();
    if let Ok(order) = entry(&mut zip, &format!("{prefix}byteorder"), 16) {
        if order != b"little" {
            return Err(format!(
                "byte order `{}` (only little-endian archives are read)",
                String::from_utf8_lossy(&order)
            ));
        }
    }
    let data = entry(&mut zip, pkl, limits::PICKLE_BYTES)?;
    let mut loader = Storages {
        zip: &mut zip,
        prefix,
        seen: HashMap::new(),
        bytes: 0,
    };
    Pickle::read(&data, &mut loader).map_err(|e| format!("{pkl}: {e}"))
}

/// Entry `name`, at most `max` bytes (declared and read).
fn entry<R: Read + Seek>(
    zip: &mut zip::ZipArchive<R>,
    name: &str,
    max: u64,
) -> Result<Vec<u8>, String> {
    let file = zip
        .by_name(name)
        .map_err(|e| format!("entry {name}: {e}"))?;
    let size = file.size();
    if size > max {
        return Err(format!(
            "entry {name} declares {size} bytes, more than the {max} read"
        ));
    }
    let mut out = Vec::with_capacity(size as usize);
    file.take(size)
        .read_to_end(&mut out)
        .map_err(|e| format!("entry {name}: {e} (the archive is damaged or truncated)"))?;
    if out.len() as u64 != size {
        return Err(format!(
            "entry {name} holds {} of its {size} bytes (the archive is truncated)",
            out.len()
        ));
    }
    Ok(out)
}

struct Storages<'z, R: Read + Seek> {
    zip: &'z mut zip::ZipArchive<R>,
    prefix: String,
    seen: HashMap<String, Storage>,
    bytes: u64,
}

impl<R: Read + Seek> Persistent for Storages<'_, R> {
    fn load(&mut self, p: &Pickle, pid: Id) -> Result<Node, String> {
        let parts = p.items(pid).ok_or("a persistent id that is not a tuple")?;
        let [tag, class, key, _location, numel] = parts else {
            return Err(format!(
                "a persistent id of {} items (torch writes 5)",
                parts.len()
            ));
        };
        if p.str(*tag) != Some("storage") {
            return Err("a persistent id that is not a storage".into());
        }
        let Node::Global(Global::Storage(dtype)) = p.node(*class) else {
            return Err(format!(
                "a storage whose type is a {}",
                p.node(*class).kind()
            ));
        };
        let key = p.str(*key).ok_or("a storage key that is not a string")?;
        let numel = p
            .int(*numel)
            .and_then(|n| u64::try_from(n).ok())
            .ok_or("a storage size that is not a count")?;
        if let Some(s) = self.seen.get(key) {
            if s.dtype != *dtype {
                return Err(format!(
                    "storage {key} read as {} and as {}",
                    s.dtype.name(),
                    dtype.name()
                ));
            }
            return Ok(Node::Storage(s.clone()));
        }
        let want = numel
            .checked_mul(dtype.size() as u64)
            .ok_or("a storage size that overflows")?;
        if self.bytes.saturating_add(want) > limits::STORAGE_BYTES {
            return Err(format!(
                "storages of more than {} bytes in one archive",
                limits::STORAGE_BYTES
            ));
        }
        let name = format!("{}data/{key}", self.prefix);
        let bytes = entry(self.zip, &name, want)?;
        if bytes.len() as u64 != want {
            return Err(format!(
                "entry {name} holds {} bytes, its storage of {numel} {} needs {want}",
                bytes.len(),
                dtype.name()
            ));
        }
        self.bytes += want;
        let storage = Storage {
            dtype: *dtype,
            bytes: bytes.into(),
        };
        self.seen.insert(key.to_owned(), storage.clone());
        Ok(Node::Storage(storage))
    }
}

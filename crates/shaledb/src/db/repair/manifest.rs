//! What repair reads from an old MANIFEST: as much as is intact of it, leniently (an edit
//! that does not fit is skipped, not an error), for the facts tables do not hold: families
//! without tables, dropped families, merge operators, TTL flags, and log numbers (which WALs
//! are already in tables).

use crate::column_family::{DEFAULT_FAMILY, DEFAULT_FAMILY_NAME};
use crate::error::{Error, Result};
use crate::fs::FileSystem;
use crate::log::{LogRead, LogReader};
use crate::version::VersionEdit;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A family as the readable part of a MANIFEST left it.
#[derive(Debug, Clone)]
pub(super) struct OldFamily {
    pub name: String,
    pub merge_operator: Option<String>,
    pub stores_write_times: bool,
    /// WALs below this hold nothing of the family that its tables lack.
    pub log_number: u64,
}

/// The readable part of one MANIFEST.
#[derive(Debug)]
pub(super) struct OldManifest {
    pub path: PathBuf,
    /// Where reading stopped early, and why.
    pub damage: Option<(u64, String)>,
    pub families: BTreeMap<u32, OldFamily>,
    pub dropped: BTreeSet<u32>,
    pub max_column_family: u32,
    pub last_sequence: u64,
    /// Ingested tables' global sequence numbers (MANIFEST tag 18), by file number: their
    /// keys are stored with sequence number 0 and mean this one.
    pub global_seqnos: std::collections::HashMap<u64, u64>,
}

impl OldManifest {
    fn new(path: PathBuf) -> Self {
        let default = OldFamily {
            name: DEFAULT_FAMILY_NAME.to_string(),
            merge_operator: None,
            stores_write_times: false,
            log_number: 0,
        };
        OldManifest {
            path,
            damage: None,
            families: BTreeMap::from([(DEFAULT_FAMILY, default)]),
            dropped: BTreeSet::new(),
            max_column_family: 0,
            last_sequence: 0,
            global_seqnos: Default::default(),
        }
    }

    /// Applies what of `edit` fits the state so far.
    fn apply(&mut self, edit: &VersionEdit) {
        let id = edit.column_family;
        for (_, f) in &edit.new_files {
            if let Some(seq) = f.global_seqno {
                self.global_seqnos.insert(f.number, seq);
            }
        }
        if let Some(n) = edit.max_column_family {
            self.max_column_family = self.max_column_family.max(n);
        }
        if let Some(n) = edit.last_sequence {
            self.last_sequence = self.last_sequence.max(n);
        }
        if let Some(name) = &edit.column_family_add {
            self.max_column_family = self.max_column_family.max(id);
            self.families.insert(id, {
                let mut f = OldFamily {
                    name: name.clone(),
                    merge_operator: None,
                    stores_write_times: false,
                    log_number: 0,
                };
                f.stores_write_times = edit.stores_write_times;
                f
            });
        }
        if edit.column_family_drop && id != DEFAULT_FAMILY {
            self.families.remove(&id);
            self.dropped.insert(id);
            return;
        }
        let Some(f) = self.families.get_mut(&id) else {
            return;
        };
        if let Some(n) = edit.log_number {
            f.log_number = f.log_number.max(n);
        }
        if let Some(op) = &edit.merge_operator {
            f.merge_operator = (!op.is_empty()).then(|| op.clone());
        }
        f.stores_write_times |= edit.stores_write_times;
    }
}

/// Reads the newest MANIFEST among `names` that has at least one intact edit.
pub(super) fn read_newest(
    fs: &dyn FileSystem,
    dir: &Path,
    names: &[(u64, String)],
) -> Result<Option<OldManifest>> {
    for (_, name) in names.iter().rev() {
        if let Some(m) = read_one(fs, dir.join(name))? {
            return Ok(Some(m));
        }
    }
    Ok(None)
}

/// The intact prefix of one MANIFEST, `None` if not even its first edit is readable.
fn read_one(fs: &dyn FileSystem, path: PathBuf) -> Result<Option<OldManifest>> {
    let file = fs
        .open_sequential(&path)
        .map_err(|e| Error::io(format!("opening {}", path.display()), e))?;
    let mut reader = LogReader::new(file, path.clone());
    let mut m = OldManifest::new(path.clone());
    let mut applied = 0usize;
    // The edits of an atomic group apply together, once its last one is read.
    let mut group: Vec<VersionEdit> = Vec::new();
    loop {
        let read = reader
            .read()
            .map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
        let (data, offset) = match read {
            LogRead::Eof => break,
            LogRead::Damaged { offset, detail } => {
                m.damage = Some((offset, detail));
                break;
            }
            LogRead::Record { data, offset } => (data, offset),
        };
        let edit = match VersionEdit::decode(&data) {
            Ok(e) => e,
            Err(d) => {
                m.damage = Some((offset, format!("bad version edit: {d}")));
                break;
            }
        };
        match edit.atomic_group_remaining {
            Some(0) => {
                group.push(edit);
                for e in group.drain(..) {
                    m.apply(&e);
                }
            }
            Some(_) => group.push(edit),
            None => m.apply(&edit),
        }
        applied += 1;
    }
    Ok((applied > 0).then_some(m))
}

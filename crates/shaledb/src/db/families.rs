//! Creating and dropping column families while the database is open.

use super::background::EditKind;
use super::open::new_family_data;
use super::{CfState, DbInner};
use crate::column_family::{check_name, CfOptions, ColumnFamily, DEFAULT_FAMILY};
use crate::error::{Error, Result};
use crate::options::Options;
use crate::version::set::FamilyConfig;
use crate::version::VersionEdit;
use std::sync::atomic::Ordering;
use std::sync::Arc;

impl DbInner {
    /// `Db::create_cf`.
    pub(crate) fn create_cf(&self, name: String, cf: CfOptions) -> Result<ColumnFamily> {
        check_name(&name)?;
        let opts = self.opts.for_family(&cf);
        opts.validate().map_err(|e| match e {
            Error::InvalidArgument(m) => {
                Error::InvalidArgument(format!("column family {name:?}: {m}"))
            }
            e => e,
        })?;
        self.create_family(name, opts)
    }

    /// Creates family `name` with effective options `opts` (checked): a MANIFEST edit, then
    /// an empty memtable on the current WAL.
    pub(crate) fn create_family(&self, name: String, opts: Options) -> Result<ColumnFamily> {
        self.check_writable("creating a column family")?;
        let mut st = self.state.lock();
        if st.closed {
            return Err(Error::Closed);
        }
        if let Some(e) = &st.bg_error {
            return Err(Error::poisoned(e.duplicate()));
        }
        if st.families.values().any(|f| f.data.name == name) {
            return Err(Error::InvalidArgument(format!(
                "column family {name:?} already exists"
            )));
        }
        let id = st
            .versions
            .allocate_family(FamilyConfig::from_options(&opts));
        // Holding the mutex keeps the WAL from switching until the family is in the state:
        // its memtable starts in the WAL that is current now.
        let wal_number = self.wal_number.load(Ordering::Acquire);
        let mut edits = vec![VersionEdit {
            column_family: id,
            column_family_add: Some(name.clone()),
            max_column_family: Some(id),
            log_number: Some(wal_number),
            last_sequence: Some(self.last_sequence.load(Ordering::Acquire)),
            merge_operator: Some(super::open::operator_name(&opts)),
            stores_write_times: opts.ttl.is_some(),
            ..Default::default()
        }];
        self.log_and_apply_all(&mut st, &mut edits, EditKind::Other)?;
        let data = new_family_data(id, name, Arc::new(opts), &self.self_weak(), wal_number);
        let cf = CfState::new(data.clone(), wal_number);
        cf.install_super_version(&st.versions);
        st.families.insert(id, cf);
        Ok(ColumnFamily { data })
    }

    /// `Db::drop_cf`.
    pub(crate) fn drop_cf(&self, name: &str) -> Result<()> {
        self.check_writable("dropping a column family")?;
        let mut st = self.state.lock();
        if st.closed {
            return Err(Error::Closed);
        }
        if let Some(e) = &st.bg_error {
            return Err(Error::poisoned(e.duplicate()));
        }
        let Some(id) = st
            .families
            .values()
            .find(|f| f.data.name == name)
            .map(|f| f.data.id)
        else {
            return Err(Error::InvalidArgument(format!(
                "column family {name:?} does not exist"
            )));
        };
        if id == DEFAULT_FAMILY {
            return Err(Error::InvalidArgument(
                "the default column family cannot be dropped".to_string(),
            ));
        }
        let mut edits = vec![VersionEdit {
            column_family: id,
            column_family_drop: true,
            ..Default::default()
        }];
        if !self.log_and_apply_all(&mut st, &mut edits, EditKind::Other)? {
            // Dropped by another caller while this one waited for the MANIFEST.
            return Err(Error::InvalidArgument(format!(
                "column family {name:?} does not exist"
            )));
        }
        if let Some(f) = st.families.remove(&id) {
            f.data.dropped.store(true, Ordering::Release);
            // Blob files its memtables wrote with their values: no version lists them and no
            // recovery reads them (a dropped family's WAL entries are skipped), so they go
            // now; a reader still holding such a memtable keeps its open file.
            for mem in std::iter::once(&f.mem).chain(f.imms.iter()) {
                let numbers = mem.write_time_blobs().map(|b| b.file_numbers());
                for number in numbers.into_iter().flatten() {
                    self.obsolete.push(crate::version::ObsoleteFile {
                        kind: crate::version::filename::FileKind::Blob,
                        number,
                    });
                }
            }
        }
        self.notify_state_changed();
        Ok(())
    }
}

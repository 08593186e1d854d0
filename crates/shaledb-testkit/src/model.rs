//! The reference model (a `BTreeMap`), the log of attempted and acknowledged operations, the
//! operation generator, and the checker that decides whether a recovered state is allowed.

use rand::Rng;
use shaledb::{ColumnFamily, Db, ReadOptions, WriteBatch, WriteOptions};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// The reference state: what the database should hold.
pub type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// One entry of a batch (or a single write).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    /// Store a value.
    Put(Vec<u8>, Vec<u8>),
    /// Delete a key.
    Delete(Vec<u8>),
    /// Merge an operand (the database must use [`merge_operator`]: string append with ",").
    Merge(Vec<u8>, Vec<u8>),
    /// Delete every key in `[first, second)`.
    DeleteRange(Vec<u8>, Vec<u8>),
}

/// The merge operator the model's `Merge` entries assume: RocksDB's string append with ",".
pub fn merge_operator() -> std::sync::Arc<dyn shaledb::MergeOperator> {
    std::sync::Arc::new(shaledb::merge_operators::StringAppend::new(","))
}

/// One user-level write: a put, a delete or an atomic batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Op {
    /// The entries, applied in order (one entry for a plain put or delete).
    pub entries: Vec<Entry>,
    /// Whether it is written as a batch (`Db::write`) rather than `put_opt`/`delete_opt`.
    pub batch: bool,
    /// `WriteOptions::sync`.
    pub sync: bool,
}

impl Op {
    /// Applies the op to a model.
    pub fn apply(&self, m: &mut Model) {
        for e in &self.entries {
            match e {
                Entry::Put(k, v) => {
                    m.insert(k.clone(), v.clone());
                }
                Entry::Delete(k) => {
                    m.remove(k);
                }
                Entry::Merge(k, v) => {
                    let merged = match m.get(k) {
                        Some(old) => [old.as_slice(), b",", v].concat(),
                        None => v.clone(),
                    };
                    m.insert(k.clone(), merged);
                }
                Entry::DeleteRange(begin, end) => {
                    let doomed: Vec<Vec<u8>> = m
                        .range(begin.clone()..end.clone())
                        .map(|(k, _)| k.clone())
                        .collect();
                    for k in doomed {
                        m.remove(&k);
                    }
                }
            }
        }
    }

    /// Runs the op against the database.
    pub fn run(&self, db: &Db) -> shaledb::Result<()> {
        let wo = WriteOptions {
            sync: self.sync,
            ..Default::default()
        };
        if self.batch {
            let mut b = WriteBatch::new();
            for e in &self.entries {
                match e {
                    Entry::Put(k, v) => b.put(k, v),
                    Entry::Delete(k) => b.delete(k),
                    Entry::Merge(k, v) => b.merge(k, v),
                    Entry::DeleteRange(begin, end) => b.delete_range(begin, end),
                }
            }
            db.write(&wo, &b)
        } else {
            match &self.entries[0] {
                Entry::Put(k, v) => db.put_opt(&wo, k, v),
                Entry::Delete(k) => db.delete_opt(&wo, k),
                Entry::Merge(k, v) => db.merge_opt(&wo, k, v),
                Entry::DeleteRange(begin, end) => db.delete_range_opt(&wo, begin, end),
            }
        }
    }
}

/// Shapes the generated workload.
#[derive(Debug, Clone)]
pub struct GenConfig {
    /// Keys are drawn from `0..key_space`.
    pub key_space: u32,
    /// Fraction of ops that are deletes (plain ops) or delete entries (in batches).
    pub delete_ratio: f64,
    /// Fraction of ops that are batches of 2..=max_batch entries.
    pub batch_ratio: f64,
    /// Largest batch.
    pub max_batch: usize,
    /// Fraction of ops written with `sync = true`.
    pub sync_ratio: f64,
    /// Values are `min..=max` bytes long.
    pub value_len: (usize, usize),
    /// Fraction of non-delete entries that are merges (string append; the database must be
    /// opened with [`merge_operator`]). Default 0.
    pub merge_ratio: f64,
    /// Fraction of delete entries that are range deletes over up to `key_space / 10` keys.
    /// Default 0.
    pub range_delete_ratio: f64,
}

impl Default for GenConfig {
    fn default() -> Self {
        GenConfig {
            key_space: 200,
            delete_ratio: 0.2,
            batch_ratio: 0.2,
            max_batch: 6,
            sync_ratio: 0.3,
            value_len: (8, 120),
            merge_ratio: 0.0,
            range_delete_ratio: 0.0,
        }
    }
}

/// The key for index `i`.
pub fn key(i: u32) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

/// A value that names the op that wrote it, so a wrong value is easy to trace.
pub fn value(op_id: u64, entry: usize, len: usize) -> Vec<u8> {
    let mut v = format!("op{op_id}.{entry}:");
    while v.len() < len {
        let _ = write!(v, "{}", (op_id as usize + v.len()) % 10);
    }
    v.into_bytes()
}

/// Generates op number `id`.
pub fn gen_op(rng: &mut impl Rng, cfg: &GenConfig, id: u64) -> Op {
    let entry = |rng: &mut dyn rand::RngCore, e: usize| {
        let i = rng.gen_range(0..cfg.key_space);
        let k = key(i);
        if rng.gen_bool(cfg.delete_ratio) {
            if cfg.range_delete_ratio > 0.0 && rng.gen_bool(cfg.range_delete_ratio) {
                let end = i + 1 + rng.gen_range(0..cfg.key_space / 10 + 1);
                return Entry::DeleteRange(k, key(end));
            }
            Entry::Delete(k)
        } else if cfg.merge_ratio > 0.0 && rng.gen_bool(cfg.merge_ratio) {
            // Short operands name the op, so a wrong merge is easy to trace.
            Entry::Merge(k, format!("m{id}.{e}").into_bytes())
        } else {
            let len = rng.gen_range(cfg.value_len.0..=cfg.value_len.1);
            Entry::Put(k, value(id, e, len))
        }
    };
    let batch = cfg.max_batch >= 2 && rng.gen_bool(cfg.batch_ratio);
    let n = if batch {
        rng.gen_range(2..=cfg.max_batch)
    } else {
        1
    };
    let entries = (0..n).map(|e| entry(rng, e)).collect();
    Op {
        entries,
        batch,
        sync: rng.gen_bool(cfg.sync_ratio),
    }
}

/// What became of an attempted op.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The call returned `Ok`.
    Acked,
    /// The call returned an error (or never returned): it may or may not be applied.
    Failed,
}

/// The log of every attempted op, in order, with its outcome.
#[derive(Debug, Clone, Default)]
pub struct OpLog {
    /// The ops and what became of them.
    pub ops: Vec<(Op, Outcome)>,
}

/// How much of the log must be in the recovered state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// Power loss: every op acknowledged with `sync = true` (and so everything before it).
    SyncedOnly,
    /// Process crash or clean reopen: every acknowledged op.
    AllAcked,
}

impl OpLog {
    /// Records an attempted op.
    pub fn push(&mut self, op: Op, outcome: Outcome) {
        self.ops.push((op, outcome));
    }

    /// Number of ops that must be in the recovered state: the log's prefix up to the last op
    /// that the durability level covers.
    pub fn required_prefix(&self, d: Durability) -> usize {
        self.ops
            .iter()
            .rposition(|(op, o)| *o == Outcome::Acked && (d == Durability::AllAcked || op.sync))
            .map_or(0, |i| i + 1)
    }

    /// Checks `state` against `base` plus this log: it must equal the state after some prefix
    /// of the log at least `required_prefix(d)` long, where acknowledged ops in the prefix are
    /// applied and failed ones may or may not be. Returns a description of the mismatch.
    pub fn check(&self, base: &Model, state: &Model, d: Durability) -> Result<usize, String> {
        self.check_at_least(base, state, self.required_prefix(d))
    }

    /// [`check`](Self::check) with the shortest allowed prefix given: `state` must equal the
    /// state after some prefix of at least `required` ops (e.g. those acknowledged before a
    /// checkpoint began). Returns the prefix's length.
    pub fn check_at_least(
        &self,
        base: &Model,
        state: &Model,
        required: usize,
    ) -> Result<usize, String> {
        // Candidate states after each prefix; failed ops fork them (kept small by dedup).
        let mut cands: Vec<Model> = vec![base.clone()];
        if required == 0 && cands.iter().any(|c| c == state) {
            return Ok(0);
        }
        for (i, (op, outcome)) in self.ops.iter().enumerate() {
            match outcome {
                Outcome::Acked => cands.iter_mut().for_each(|c| op.apply(c)),
                Outcome::Failed => {
                    let mut more = cands.clone();
                    more.iter_mut().for_each(|c| op.apply(c));
                    for m in more {
                        if !cands.contains(&m) {
                            cands.push(m);
                        }
                    }
                    if cands.len() > 64 {
                        return Err("too many failed ops to enumerate outcomes".into());
                    }
                }
            }
            if i + 1 >= required && cands.iter().any(|c| c == state) {
                return Ok(i + 1);
            }
        }
        // Build a helpful message against the full-log state.
        let mut full = base.clone();
        for (op, o) in &self.ops {
            if *o == Outcome::Acked {
                op.apply(&mut full);
            }
        }
        Err(format!(
            "recovered state ({} keys) matches no allowed prefix of {} ops (required {required}); \
             first difference from the all-acked state: {}",
            state.len(),
            self.ops.len(),
            first_diff(&full, state)
        ))
    }
}

/// A description of the first key where two states differ.
pub fn first_diff(want: &Model, got: &Model) -> String {
    let mut keys: Vec<&Vec<u8>> = want.keys().chain(got.keys()).collect();
    keys.sort();
    keys.dedup();
    for k in keys {
        let (a, b) = (want.get(k), got.get(k));
        if a != b {
            let show = |v: Option<&Vec<u8>>| {
                v.map_or("<absent>".to_string(), |v| {
                    String::from_utf8_lossy(&v[..v.len().min(24)]).into_owned()
                })
            };
            return format!(
                "key {}: expected {}, got {}",
                String::from_utf8_lossy(k),
                show(a),
                show(b)
            );
        }
    }
    "none".into()
}

/// Reads the whole database with a forward scan, and checks that point reads agree with it
/// for every key in the scan and for `probe` keys.
pub fn read_all(db: &Db, probe: &[Vec<u8>]) -> Result<Model, String> {
    let mut m = Model::new();
    for item in db.range(..) {
        let (k, v) = item.map_err(|e| format!("scan failed: {e}"))?;
        if let Some((last, _)) = m.last_key_value() {
            if *last >= k {
                return Err("scan out of order".into());
            }
        }
        m.insert(k, v.into_vec());
    }
    for k in m.keys().chain(probe.iter()) {
        let got = db.get(k).map_err(|e| format!("get failed: {e}"))?;
        if got.as_deref() != m.get(k).map(Vec::as_slice) {
            return Err(format!(
                "get({}) disagrees with the scan",
                String::from_utf8_lossy(k)
            ));
        }
    }
    Ok(m)
}

/// Every key of the generator's key space (for probing point reads).
pub fn all_keys(cfg: &GenConfig) -> Vec<Vec<u8>> {
    (0..cfg.key_space).map(key).collect()
}

// Several column families in one model: a model key is the family's index (one digit), `/`,
// then the key, so the state of every family is one `Model` and `OpLog::check` applies as is.

/// The model key of `key` in the family with index `family` (below 10).
pub fn family_key(family: usize, key: &[u8]) -> Vec<u8> {
    let mut k = format!("{family}/").into_bytes();
    k.extend_from_slice(key);
    k
}

/// The family index and key of a model key made by [`family_key`].
pub fn split_family_key(k: &[u8]) -> Option<(usize, &[u8])> {
    match k {
        [d @ b'0'..=b'9', b'/', rest @ ..] => Some(((d - b'0') as usize, rest)),
        _ => None,
    }
}

/// Moves each entry of `op` (made by [`gen_op`]) to one of `families` families, at random:
/// its keys become [`family_key`]s, a range deletion's two ends in the same family.
pub fn spread_over_families(rng: &mut impl Rng, op: &mut Op, families: usize) {
    for e in &mut op.entries {
        let f = rng.gen_range(0..families.clamp(1, 10));
        match e {
            Entry::Put(k, _) | Entry::Delete(k) | Entry::Merge(k, _) => *k = family_key(f, k),
            Entry::DeleteRange(b, end) => {
                *b = family_key(f, b);
                *end = family_key(f, end);
            }
        }
    }
}

impl Op {
    /// Runs an op whose keys are [`family_key`]s, each entry in its family `cfs[index]`.
    pub fn run_cf(&self, db: &Db, cfs: &[ColumnFamily]) -> shaledb::Result<()> {
        let place = |k: &[u8]| -> shaledb::Result<(&ColumnFamily, Vec<u8>)> {
            split_family_key(k)
                .and_then(|(f, key)| Some((cfs.get(f)?, key.to_vec())))
                .ok_or_else(|| {
                    shaledb::Error::InvalidArgument(format!(
                        "{} names no family of the {} given",
                        String::from_utf8_lossy(k),
                        cfs.len()
                    ))
                })
        };
        // Every op as a batch: entries of one op in several families stay atomic.
        let mut b = WriteBatch::new();
        for e in &self.entries {
            match e {
                Entry::Put(k, v) => {
                    let (cf, k) = place(k)?;
                    b.put_cf(cf, k, v)
                }
                Entry::Delete(k) => {
                    let (cf, k) = place(k)?;
                    b.delete_cf(cf, k)
                }
                Entry::Merge(k, v) => {
                    let (cf, k) = place(k)?;
                    b.merge_cf(cf, k, v)
                }
                Entry::DeleteRange(begin, end) => {
                    let (cf, begin) = place(begin)?;
                    let (_, end) = place(end)?;
                    b.delete_range_cf(cf, begin, end)
                }
            }
        }
        let wo = WriteOptions {
            sync: self.sync,
            ..Default::default()
        };
        db.write(&wo, &b)
    }
}

/// [`read_all`] over families `cfs`: every family scanned (keys become [`family_key`]s) and
/// point reads of the scanned keys and of `probe` keys checked against the scan.
pub fn read_all_cf(db: &Db, cfs: &[ColumnFamily], probe: &[Vec<u8>]) -> Result<Model, String> {
    let mut m = Model::new();
    for (f, cf) in cfs.iter().enumerate() {
        let mut it = db
            .iter_cf(cf, &ReadOptions::default())
            .map_err(|e| format!("family {f}: {e}"))?;
        let mut scanned = Model::new();
        it.seek_to_first();
        while it.valid() {
            scanned.insert(it.key().to_vec(), it.value().to_vec());
            it.next();
        }
        it.status()
            .map_err(|e| format!("family {f}: scan failed: {e}"))?;
        for k in scanned.keys().chain(probe.iter()) {
            let got = db
                .get_cf(cf, k)
                .map_err(|e| format!("family {f}: get failed: {e}"))?;
            if got.as_deref() != scanned.get(k).map(Vec::as_slice) {
                return Err(format!(
                    "family {f}: get({}) disagrees with the scan",
                    String::from_utf8_lossy(k)
                ));
            }
        }
        m.extend(scanned.into_iter().map(|(k, v)| (family_key(f, &k), v)));
    }
    Ok(m)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn put(k: &str, v: &str, sync: bool) -> Op {
        Op {
            entries: vec![Entry::Put(k.into(), v.into())],
            batch: false,
            sync,
        }
    }

    fn model(kv: &[(&str, &str)]) -> Model {
        kv.iter()
            .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec()))
            .collect()
    }

    #[test]
    fn checker_accepts_prefixes_and_rejects_holes() {
        let mut log = OpLog::default();
        log.push(put("a", "1", false), Outcome::Acked);
        log.push(put("b", "1", true), Outcome::Acked);
        log.push(put("c", "1", false), Outcome::Acked);
        log.push(put("a", "2", false), Outcome::Acked);
        let base = Model::new();
        let d = Durability::SyncedOnly;
        assert_eq!(
            log.check(&base, &model(&[("a", "1"), ("b", "1")]), d),
            Ok(2)
        );
        assert_eq!(
            log.check(&base, &model(&[("a", "2"), ("b", "1"), ("c", "1")]), d),
            Ok(4)
        );
        // Synced write missing.
        assert!(log.check(&base, &model(&[("a", "1")]), d).is_err());
        // A hole: op 3 without op 2... (c present, b absent).
        assert!(log
            .check(&base, &model(&[("a", "1"), ("c", "1")]), d)
            .is_err());
        // All-acked needs everything.
        assert!(log
            .check(
                &base,
                &model(&[("a", "1"), ("b", "1")]),
                Durability::AllAcked
            )
            .is_err());
    }

    #[test]
    fn failed_ops_may_go_either_way() {
        let mut log = OpLog::default();
        log.push(put("a", "1", true), Outcome::Acked);
        log.push(put("b", "1", true), Outcome::Failed);
        log.push(put("c", "1", true), Outcome::Acked);
        let base = Model::new();
        let d = Durability::AllAcked;
        assert!(log
            .check(&base, &model(&[("a", "1"), ("c", "1")]), d)
            .is_ok());
        assert!(log
            .check(&base, &model(&[("a", "1"), ("b", "1"), ("c", "1")]), d)
            .is_ok());
        assert!(log
            .check(&base, &model(&[("a", "1"), ("b", "1")]), d)
            .is_err());
    }
}

//! Prefix extractors (RocksDB's `SliceTransform`): how a column family's keys group into
//! prefixes, for prefix iteration (`ReadOptions::prefix_same_as_start`).

/// Maps a key to its prefix, or `None` if the key has none (is outside the extractor's
/// domain). Set one per column family (`Options::prefix_extractor`,
/// `CfOptions::prefix_extractor`).
pub trait PrefixExtractor: Send + Sync {
    /// The extractor's name.
    fn name(&self) -> &str;

    /// The prefix of `key`, a prefix of it, or `None` if `key` has none.
    fn prefix<'a>(&self, key: &'a [u8]) -> Option<&'a [u8]>;

    /// The extractor with its settings, as recorded in the table files whose bloom filters
    /// hold its prefixes: a read uses those filters only if its extractor has the same id.
    /// Two extractors with one id must give every key the same prefix. Default: `name()`.
    fn id(&self) -> String {
        self.name().to_string()
    }

    /// True if every key that starts with `prefix` has the prefix `prefix` has (RocksDB's
    /// `SameResultWhenAppended`). [`Db::prefix`](crate::Db::prefix) uses prefix blooms only
    /// for such a prefix; `false`, the default, is always safe.
    fn same_result_when_appended(&self, prefix: &[u8]) -> bool {
        let _ = prefix;
        false
    }
}

impl std::fmt::Debug for dyn PrefixExtractor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PrefixExtractor({})", self.name())
    }
}

/// The first `n` bytes of a key; keys shorter than `n` have no prefix (RocksDB's
/// `NewFixedPrefixTransform`).
///
/// ```
/// use shaledb::{Db, FixedPrefix, Options, ReadOptions};
/// use std::sync::Arc;
/// let dir = tempfile::tempdir().unwrap();
/// let opts = Options { prefix_extractor: Some(Arc::new(FixedPrefix(4))), ..Default::default() };
/// let db = Db::open(dir.path(), opts).unwrap();
/// for k in ["user1", "user2", "userz", "zoo01"] {
///     db.put(k, b"").unwrap();
/// }
/// let mut it = db.iter(&ReadOptions { prefix_same_as_start: true, ..Default::default() });
/// it.seek(b"user");
/// let mut keys = Vec::new();
/// while it.valid() {
///     keys.push(String::from_utf8(it.key().to_vec()).unwrap());
///     it.next();
/// }
/// assert_eq!(keys, ["user1", "user2", "userz"]);
/// ```
#[derive(Debug, Clone, Copy)]
pub struct FixedPrefix(pub usize);

impl PrefixExtractor for FixedPrefix {
    fn name(&self) -> &str {
        "rocksdb.FixedPrefix"
    }

    fn prefix<'a>(&self, key: &'a [u8]) -> Option<&'a [u8]> {
        key.get(..self.0)
    }

    fn id(&self) -> String {
        format!("rocksdb.FixedPrefix.{}", self.0)
    }

    fn same_result_when_appended(&self, prefix: &[u8]) -> bool {
        prefix.len() >= self.0
    }
}

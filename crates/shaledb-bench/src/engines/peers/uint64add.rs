//! RocksDB's uint64add merge operator written in Rust for RocksDB's C API (the C API has no
//! way to name its built-in one): used by the RocksDB engine for `--merge_operator=uint64add`
//! and by the differential test, which also uses the string-append operator here (RocksDB's
//! `StringAppendOperator` with delimiter ','). Results are boxed slices handed to RocksDB, which gives them
//! back to `delete_value`.

use std::ffi::{c_char, c_int, c_uchar, c_void};

type FullMerge = unsafe extern "C" fn(
    *mut c_void,
    *const c_char,
    usize,
    *const c_char,
    usize,
    *const *const c_char,
    *const usize,
    c_int,
    *mut c_uchar,
    *mut usize,
) -> *mut c_char;
type PartialMerge = unsafe extern "C" fn(
    *mut c_void,
    *const c_char,
    usize,
    *const *const c_char,
    *const usize,
    c_int,
    *mut c_uchar,
    *mut usize,
) -> *mut c_char;

extern "C" {
    fn rocksdb_mergeoperator_create(
        state: *mut c_void,
        destructor: unsafe extern "C" fn(*mut c_void),
        full_merge: FullMerge,
        partial_merge: PartialMerge,
        delete_value: unsafe extern "C" fn(*mut c_void, *const c_char, usize),
        name: unsafe extern "C" fn(*mut c_void) -> *const c_char,
    ) -> *mut c_void;
    fn rocksdb_options_set_merge_operator(options: *mut c_void, op: *mut c_void);
}

/// Gives RocksDB options `options` a uint64add merge operator (owned by the options from then
/// on).
///
/// # Safety
/// `options` must be a live `rocksdb_options_t`.
pub(crate) unsafe fn set_on(options: *mut c_void) {
    // SAFETY: the callbacks have the signatures `rocksdb/c.h` declares; the state is unused
    // (NULL); the caller passes live options, which take ownership of the operator.
    unsafe {
        let op = rocksdb_mergeoperator_create(
            std::ptr::null_mut(),
            destructor,
            full_merge,
            partial_merge,
            delete_value,
            name,
        );
        rocksdb_options_set_merge_operator(options, op);
    }
}

/// Gives RocksDB options `options` a string-append merge operator with delimiter ','
/// (RocksDB's `StringAppendOperator(',')`; owned by the options from then on).
///
/// # Safety
/// `options` must be a live `rocksdb_options_t`.
#[cfg(test)]
pub(crate) unsafe fn set_string_append_on(options: *mut c_void) {
    // SAFETY: as in `set_on`.
    unsafe {
        let op = rocksdb_mergeoperator_create(
            std::ptr::null_mut(),
            destructor,
            append_full_merge,
            append_partial_merge,
            delete_value,
            append_name,
        );
        rocksdb_options_set_merge_operator(options, op);
    }
}

/// The `n` operands RocksDB passes (oldest first), as slices.
#[cfg(test)]
fn operands<'a>(list: *const *const c_char, lens: *const usize, n: c_int) -> Vec<&'a [u8]> {
    let n = usize::try_from(n).unwrap_or(0);
    if list.is_null() || lens.is_null() {
        return Vec::new();
    }
    // SAFETY: RocksDB passes arrays of `n` operand pointers and lengths, each operand readable
    // for the call's duration.
    unsafe {
        let (ptrs, lens) = (
            std::slice::from_raw_parts(list, n),
            std::slice::from_raw_parts(lens, n),
        );
        ptrs.iter()
            .zip(lens)
            .map(|(&p, &l)| {
                if p.is_null() {
                    &[][..]
                } else {
                    std::slice::from_raw_parts(p.cast::<u8>(), l)
                }
            })
            .collect()
    }
}

/// `existing` (if any) and the operands joined with ','.
#[cfg(test)]
fn appended(existing: Option<&[u8]>, ops: &[&[u8]]) -> Vec<u8> {
    let mut out = existing.map(<[u8]>::to_vec).unwrap_or_default();
    for (i, op) in ops.iter().enumerate() {
        if existing.is_some() || i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(op);
    }
    out
}

#[cfg(test)]
unsafe extern "C" fn append_full_merge(
    _state: *mut c_void,
    _key: *const c_char,
    _key_len: usize,
    existing: *const c_char,
    existing_len: usize,
    list: *const *const c_char,
    lens: *const usize,
    n: c_int,
    success: *mut c_uchar,
    new_len: *mut usize,
) -> *mut c_char {
    let existing = (!existing.is_null()).then(|| {
        // SAFETY: RocksDB passes `existing_len` readable bytes at `existing` for the call.
        unsafe { std::slice::from_raw_parts(existing.cast::<u8>(), existing_len) }
    });
    hand_out_bytes(
        appended(existing, &operands(list, lens, n)),
        success,
        new_len,
    )
}

#[cfg(test)]
unsafe extern "C" fn append_partial_merge(
    _state: *mut c_void,
    _key: *const c_char,
    _key_len: usize,
    list: *const *const c_char,
    lens: *const usize,
    n: c_int,
    success: *mut c_uchar,
    new_len: *mut usize,
) -> *mut c_char {
    hand_out_bytes(appended(None, &operands(list, lens, n)), success, new_len)
}

#[cfg(test)]
unsafe extern "C" fn append_name(_state: *mut c_void) -> *const c_char {
    c"StringAppendOperator".as_ptr()
}

fn decode(ptr: *const c_char, len: usize) -> u64 {
    if ptr.is_null() || len != 8 {
        return 0;
    }
    // SAFETY: RocksDB passes `len` readable bytes at `ptr` for the call's duration.
    let bytes = unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) };
    <[u8; 8]>::try_from(bytes).map_or(0, u64::from_le_bytes)
}

/// The sum of the `n` operands in `list`/`lens` (RocksDB passes them oldest first).
fn sum(list: *const *const c_char, lens: *const usize, n: c_int) -> u64 {
    let n = usize::try_from(n).unwrap_or(0);
    if list.is_null() || lens.is_null() {
        return 0;
    }
    // SAFETY: RocksDB passes arrays of `n` operand pointers and lengths.
    let (ptrs, lens) = unsafe {
        (
            std::slice::from_raw_parts(list, n),
            std::slice::from_raw_parts(lens, n),
        )
    };
    ptrs.iter()
        .zip(lens)
        .fold(0u64, |acc, (&p, &l)| acc.wrapping_add(decode(p, l)))
}

fn hand_out(v: u64, success: *mut c_uchar, new_len: *mut usize) -> *mut c_char {
    hand_out_bytes(v.to_le_bytes().to_vec(), success, new_len)
}

fn hand_out_bytes(v: Vec<u8>, success: *mut c_uchar, new_len: *mut usize) -> *mut c_char {
    let boxed: Box<[u8]> = v.into_boxed_slice();
    // SAFETY: RocksDB passes valid out-pointers for the result.
    unsafe {
        *success = 1;
        *new_len = boxed.len();
    }
    Box::into_raw(boxed).cast::<c_char>()
}

unsafe extern "C" fn full_merge(
    _state: *mut c_void,
    _key: *const c_char,
    _key_len: usize,
    existing: *const c_char,
    existing_len: usize,
    list: *const *const c_char,
    lens: *const usize,
    n: c_int,
    success: *mut c_uchar,
    new_len: *mut usize,
) -> *mut c_char {
    let total = decode(existing, existing_len).wrapping_add(sum(list, lens, n));
    hand_out(total, success, new_len)
}

unsafe extern "C" fn partial_merge(
    _state: *mut c_void,
    _key: *const c_char,
    _key_len: usize,
    list: *const *const c_char,
    lens: *const usize,
    n: c_int,
    success: *mut c_uchar,
    new_len: *mut usize,
) -> *mut c_char {
    hand_out(sum(list, lens, n), success, new_len)
}

unsafe extern "C" fn delete_value(_state: *mut c_void, value: *const c_char, len: usize) {
    if !value.is_null() {
        // SAFETY: `value` came from `hand_out`'s `Box<[u8]>` of `len` bytes.
        drop(unsafe {
            Box::from_raw(std::ptr::slice_from_raw_parts_mut(
                value.cast_mut().cast::<u8>(),
                len,
            ))
        });
    }
}

unsafe extern "C" fn destructor(_state: *mut c_void) {}

unsafe extern "C" fn name(_state: *mut c_void) -> *const c_char {
    c"UInt64AddOperator".as_ptr()
}

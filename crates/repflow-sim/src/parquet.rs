//! A small Parquet writer for flow records: flat tables of 64-bit integer and float columns.
//!
//! `repflow sim --out` writes its `flows.parquet` here, so that a run's process never loads
//! a general Parquet library (pyarrow's import alone is ~0.15 s and ~50 MiB). The files are
//! plain Parquet that any reader takes (the tests read them back with pyarrow and compare
//! every value and the schema with pyarrow's own file of the same records):
//!
//! - every column is `OPTIONAL` (nullable, as Arrow makes fields by default) with no null
//!   value, its definition levels one RLE run;
//! - version 1 data pages, no compression; a column chunk is dictionary-encoded
//!   (`RLE_DICTIONARY`, dictionary in first-seen order) when that is smaller than `PLAIN`
//!   and the dictionary stays within [`ParquetOptions::max_dictionary`] entries, else `PLAIN`;
//! - row groups of [`ParquetOptions::rows_per_group`] rows, data pages of at most
//!   [`ParquetOptions::values_per_page`] values; no statistics, no page index.
//!
//! The bytes depend on the values and the options only: the same records give the same file.

use std::collections::HashMap;
use std::io::{self, Write};

/// Errors of [`write_parquet`].
#[derive(Debug, thiserror::Error)]
pub enum ParquetError {
    /// Writing the output failed.
    #[error("writing Parquet: {0}")]
    Io(#[from] io::Error),
    /// The columns differ in length.
    #[error("column '{name}' has {len} values where the first column has {expected}")]
    Length {
        /// The column's name.
        name: String,
        /// Its length.
        len: usize,
        /// The first column's length.
        expected: usize,
    },
    /// A table needs at least one column.
    #[error("a Parquet file needs at least one column")]
    NoColumns,
    /// An option is out of range.
    #[error("{0}")]
    Option(String),
}

/// One column's values, borrowed.
#[derive(Clone, Copy, Debug)]
pub enum ColumnData<'a> {
    /// Signed 64-bit integers (Parquet `INT64`).
    Int64(&'a [i64]),
    /// 64-bit floats (Parquet `DOUBLE`).
    Float64(&'a [f64]),
}

impl ColumnData<'_> {
    fn len(&self) -> usize {
        match self {
            ColumnData::Int64(v) => v.len(),
            ColumnData::Float64(v) => v.len(),
        }
    }

    /// The Parquet physical type.
    fn physical_type(&self) -> i32 {
        match self {
            ColumnData::Int64(_) => 2,   // INT64
            ColumnData::Float64(_) => 5, // DOUBLE
        }
    }

    /// Rows `lo..hi` as 64-bit patterns (floats by their bits, so NaN payloads survive).
    fn bits(&self, lo: usize, hi: usize) -> Vec<u64> {
        match self {
            ColumnData::Int64(v) => v[lo..hi].iter().map(|&x| x as u64).collect(),
            ColumnData::Float64(v) => v[lo..hi].iter().map(|x| x.to_bits()).collect(),
        }
    }
}

/// Layout choices of [`write_parquet`].
#[derive(Clone, Debug)]
pub struct ParquetOptions {
    /// Rows per row group (pyarrow's default too: 1,048,576).
    pub rows_per_group: usize,
    /// Values per data page at most (131,072: 1 MiB of plain 8-byte values).
    pub values_per_page: usize,
    /// Largest dictionary a column chunk may use before it is written `PLAIN` (65,536).
    pub max_dictionary: usize,
    /// The file's `created_by`.
    pub created_by: String,
}

impl Default for ParquetOptions {
    fn default() -> Self {
        ParquetOptions {
            rows_per_group: 1 << 20,
            values_per_page: 1 << 17,
            max_dictionary: 1 << 16,
            created_by: format!("repflow-sim version {}", env!("CARGO_PKG_VERSION")),
        }
    }
}

// Parquet's enumerations (parquet.thrift).
const PAGE_DATA: i32 = 0;
const PAGE_DICTIONARY: i32 = 2;
const ENC_PLAIN: i32 = 0;
const ENC_RLE: i32 = 3;
const ENC_RLE_DICTIONARY: i32 = 8;
const OPTIONAL: i32 = 1;
const UNCOMPRESSED: i32 = 0;

// Thrift compact protocol type codes.
const T_I32: u8 = 5;
const T_I64: u8 = 6;
const T_BINARY: u8 = 8;
const T_LIST: u8 = 9;
const T_STRUCT: u8 = 12;

fn varint(buf: &mut Vec<u8>, mut u: u64) {
    while u >= 0x80 {
        buf.push((u as u8) | 0x80);
        u >>= 7;
    }
    buf.push(u as u8);
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// A Thrift compact-protocol encoder for the few shapes Parquet's metadata needs.
struct Compact {
    buf: Vec<u8>,
    /// The last field id of each open struct (ids are written as deltas).
    last: Vec<i16>,
    cur: i16,
}

impl Compact {
    fn new() -> Compact {
        Compact {
            buf: Vec::new(),
            last: Vec::new(),
            cur: 0,
        }
    }

    fn header(&mut self, id: i16, ty: u8) {
        let delta = id - self.cur;
        if (1..=15).contains(&delta) {
            self.buf.push(((delta as u8) << 4) | ty);
        } else {
            self.buf.push(ty);
            varint(&mut self.buf, zigzag(i64::from(id)));
        }
        self.cur = id;
    }

    fn i32(&mut self, id: i16, v: i32) {
        self.header(id, T_I32);
        varint(&mut self.buf, zigzag(i64::from(v)));
    }

    fn i64(&mut self, id: i16, v: i64) {
        self.header(id, T_I64);
        varint(&mut self.buf, zigzag(v));
    }

    fn binary(&mut self, id: i16, b: &[u8]) {
        self.header(id, T_BINARY);
        self.raw_binary(b);
    }

    fn raw_binary(&mut self, b: &[u8]) {
        varint(&mut self.buf, b.len() as u64);
        self.buf.extend_from_slice(b);
    }

    fn list(&mut self, id: i16, elem: u8, n: usize) {
        self.header(id, T_LIST);
        if n < 15 {
            self.buf.push(((n as u8) << 4) | elem);
        } else {
            self.buf.push(0xF0 | elem);
            varint(&mut self.buf, n as u64);
        }
    }

    /// A struct field `id`; close it with [`Compact::end`].
    fn begin(&mut self, id: i16) {
        self.header(id, T_STRUCT);
        self.open();
    }

    /// A struct as a list element; close it with [`Compact::end`].
    fn open(&mut self) {
        self.last.push(self.cur);
        self.cur = 0;
    }

    fn end(&mut self) {
        self.buf.push(0);
        self.cur = self.last.pop().unwrap_or(0);
    }

    /// Closes the top-level struct and returns its bytes.
    fn finish(mut self) -> Vec<u8> {
        self.buf.push(0);
        self.buf
    }
}

/// The bits needed for values up to `max` (at least 1).
fn bit_width(max: u64) -> u8 {
    (64 - max.leading_zeros()).max(1) as u8
}

/// `values` in Parquet's RLE / bit-packed hybrid encoding with `width` bits each: runs of 8
/// or more equal values (starting on a group boundary) as RLE runs, the rest bit-packed in
/// groups of 8 (the last group padded with zeros).
fn hybrid(out: &mut Vec<u8>, values: &[u32], width: u8) {
    let value_bytes = usize::from(width).div_ceil(8);
    let mut pending: Vec<u32> = Vec::new();
    let mut i = 0;
    while i < values.len() {
        let v = values[i];
        let run = values[i..].iter().take_while(|&&x| x == v).count();
        if run >= 8 && pending.len().is_multiple_of(8) {
            bitpack(out, &pending, width);
            pending.clear();
            varint(out, (run as u64) << 1);
            out.extend_from_slice(&v.to_le_bytes()[..value_bytes]);
            i += run;
        } else {
            pending.push(v);
            i += 1;
        }
    }
    bitpack(out, &pending, width);
}

/// Bit-packed runs of `values` (padded to groups of 8), at most 63 groups per run.
fn bitpack(out: &mut Vec<u8>, values: &[u32], width: u8) {
    for chunk in values.chunks(63 * 8) {
        let groups = chunk.len().div_ceil(8);
        varint(out, ((groups as u64) << 1) | 1);
        let mut acc: u64 = 0;
        let mut bits = 0u32;
        for k in 0..groups * 8 {
            let v = u64::from(chunk.get(k).copied().unwrap_or(0));
            acc |= v << bits;
            bits += u32::from(width);
            while bits >= 8 {
                out.push(acc as u8);
                acc >>= 8;
                bits -= 8;
            }
        }
        // groups of 8 values fill whole bytes: nothing is left over
        debug_assert_eq!(bits, 0);
    }
}

/// Definition levels of `n` defined values of an optional column: one RLE run of 1s,
/// preceded by its length (data page v1).
fn all_defined(out: &mut Vec<u8>, n: usize) {
    let mut run = Vec::new();
    varint(&mut run, (n as u64) << 1);
    run.push(1);
    out.extend_from_slice(&(run.len() as u32).to_le_bytes());
    out.extend_from_slice(&run);
}

fn page_header(kind: i32, size: usize, values: usize, encoding: i32) -> Vec<u8> {
    let mut c = Compact::new();
    c.i32(1, kind);
    c.i32(2, size as i32);
    c.i32(3, size as i32);
    if kind == PAGE_DATA {
        c.begin(5);
        c.i32(1, values as i32);
        c.i32(2, encoding);
        c.i32(3, ENC_RLE);
        c.i32(4, ENC_RLE);
        c.end();
    } else {
        c.begin(7);
        c.i32(1, values as i32);
        c.i32(2, ENC_PLAIN);
        c.end();
    }
    c.finish()
}

/// A column chunk written: where its pages are and how large they are.
struct Chunk {
    physical: i32,
    name: String,
    dictionary: bool,
    start: u64,
    data_offset: u64,
    size: u64,
    rows: usize,
}

/// A writer that counts the bytes it passes on.
struct Counting<W> {
    inner: W,
    at: u64,
}

impl<W: Write> Counting<W> {
    fn put(&mut self, b: &[u8]) -> io::Result<()> {
        self.inner.write_all(b)?;
        self.at += b.len() as u64;
        Ok(())
    }
}

/// Writes one column chunk (rows `lo..hi` of `col`).
fn write_chunk<W: Write>(
    w: &mut Counting<W>,
    name: &str,
    col: &ColumnData<'_>,
    lo: usize,
    hi: usize,
    opts: &ParquetOptions,
) -> io::Result<Chunk> {
    let bits = col.bits(lo, hi);
    let n = bits.len();
    // The dictionary in first-seen order, given up once it passes the bound.
    let mut index: HashMap<u64, u32> = HashMap::new();
    let mut dict: Vec<u64> = Vec::new();
    let mut ids: Vec<u32> = Vec::with_capacity(n);
    for &b in &bits {
        let next = dict.len() as u32;
        let id = *index.entry(b).or_insert(next);
        if id == next {
            dict.push(b);
            if dict.len() > opts.max_dictionary {
                break;
            }
        }
        ids.push(id);
    }
    let width = bit_width(dict.len().saturating_sub(1) as u64);
    let dict_cost = 8 * dict.len() + (n * usize::from(width)).div_ceil(8);
    let dictionary = dict.len() <= opts.max_dictionary && dict_cost < 8 * n;
    let start = w.at;
    if dictionary {
        let mut page = Vec::with_capacity(8 * dict.len());
        for b in &dict {
            page.extend_from_slice(&b.to_le_bytes());
        }
        w.put(&page_header(PAGE_DICTIONARY, page.len(), dict.len(), 0))?;
        w.put(&page)?;
    }
    let data_offset = w.at;
    let mut first = 0;
    while first < n {
        let last = (first + opts.values_per_page).min(n);
        let mut page = Vec::new();
        all_defined(&mut page, last - first);
        let encoding = if dictionary {
            page.push(width);
            hybrid(&mut page, &ids[first..last], width);
            ENC_RLE_DICTIONARY
        } else {
            for b in &bits[first..last] {
                page.extend_from_slice(&b.to_le_bytes());
            }
            ENC_PLAIN
        };
        w.put(&page_header(PAGE_DATA, page.len(), last - first, encoding))?;
        w.put(&page)?;
        first = last;
    }
    Ok(Chunk {
        physical: col.physical_type(),
        name: name.to_string(),
        dictionary,
        start,
        data_offset,
        size: w.at - start,
        rows: n,
    })
}

fn check(opts: &ParquetOptions) -> Result<(), ParquetError> {
    let bad = |field: &str, v: usize, max: usize| {
        ParquetError::Option(format!("{field}: {v} is not within 1 to {max}"))
    };
    // a page (its values and a few bytes of levels and width) must fit an i32 size
    let max = (i32::MAX as usize - 64) / 8;
    if !(1..=max).contains(&opts.values_per_page) {
        return Err(bad("values_per_page", opts.values_per_page, max));
    }
    if !(1..=max).contains(&opts.max_dictionary) {
        return Err(bad("max_dictionary", opts.max_dictionary, max));
    }
    if opts.rows_per_group == 0 {
        return Err(bad("rows_per_group", 0, usize::MAX));
    }
    Ok(())
}

/// Writes `columns` (names and values of equal length) as one Parquet file to `out`.
///
/// Nothing is written unless the columns and options are usable; a write error is returned
/// as it comes (the caller owns the file and removes what is left).
pub fn write_parquet<W: Write>(
    out: W,
    columns: &[(&str, ColumnData<'_>)],
    opts: &ParquetOptions,
) -> Result<(), ParquetError> {
    check(opts)?;
    let Some((_, first)) = columns.first() else {
        return Err(ParquetError::NoColumns);
    };
    let rows = first.len();
    for (name, col) in columns {
        if col.len() != rows {
            return Err(ParquetError::Length {
                name: (*name).to_string(),
                len: col.len(),
                expected: rows,
            });
        }
    }
    let mut w = Counting { inner: out, at: 0 };
    w.put(b"PAR1")?;
    let mut groups: Vec<Vec<Chunk>> = Vec::new();
    let mut lo = 0;
    while lo < rows {
        let hi = (lo + opts.rows_per_group).min(rows);
        let mut chunks = Vec::with_capacity(columns.len());
        for (name, col) in columns {
            chunks.push(write_chunk(&mut w, name, col, lo, hi, opts)?);
        }
        groups.push(chunks);
        lo = hi;
    }
    let meta = file_metadata(columns, rows, &groups, &opts.created_by);
    w.put(&meta)?;
    w.put(&(meta.len() as u32).to_le_bytes())?;
    w.put(b"PAR1")?;
    w.inner.flush()?;
    Ok(())
}

fn file_metadata(
    columns: &[(&str, ColumnData<'_>)],
    rows: usize,
    groups: &[Vec<Chunk>],
    created_by: &str,
) -> Vec<u8> {
    let mut c = Compact::new();
    c.i32(1, 2); // format version
    c.list(2, T_STRUCT, columns.len() + 1);
    c.open(); // the root
    c.binary(4, b"schema");
    c.i32(5, columns.len() as i32);
    c.end();
    for (name, col) in columns {
        c.open();
        c.i32(1, col.physical_type());
        c.i32(3, OPTIONAL);
        c.binary(4, name.as_bytes());
        c.end();
    }
    c.i64(3, rows as i64);
    c.list(4, T_STRUCT, groups.len());
    for chunks in groups {
        c.open();
        c.list(1, T_STRUCT, chunks.len());
        for ch in chunks {
            c.open();
            c.i64(2, ch.start as i64);
            c.begin(3);
            c.i32(1, ch.physical);
            let encodings: &[i32] = if ch.dictionary {
                &[ENC_PLAIN, ENC_RLE, ENC_RLE_DICTIONARY]
            } else {
                &[ENC_PLAIN, ENC_RLE]
            };
            c.list(2, T_I32, encodings.len());
            for &e in encodings {
                varint(&mut c.buf, zigzag(i64::from(e)));
            }
            c.list(3, T_BINARY, 1);
            c.raw_binary(ch.name.as_bytes());
            c.i32(4, UNCOMPRESSED);
            c.i64(5, ch.rows as i64);
            c.i64(6, ch.size as i64);
            c.i64(7, ch.size as i64);
            c.i64(9, ch.data_offset as i64);
            if ch.dictionary {
                c.i64(11, ch.start as i64);
            }
            c.end();
            c.end();
        }
        c.i64(2, chunks.iter().map(|ch| ch.size as i64).sum());
        c.i64(3, chunks.first().map_or(0, |ch| ch.rows) as i64);
        c.end();
    }
    c.binary(6, created_by.as_bytes());
    c.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Decodes the hybrid encoding back (the reader side, for the round trip below).
    fn unhybrid(mut b: &[u8], width: u8, n: usize) -> Vec<u32> {
        fn uvarint(b: &mut &[u8]) -> u64 {
            let (mut v, mut s) = (0u64, 0);
            loop {
                let x = b[0];
                *b = &b[1..];
                v |= u64::from(x & 0x7F) << s;
                if x < 0x80 {
                    return v;
                }
                s += 7;
            }
        }
        let mut out = Vec::new();
        while out.len() < n {
            let h = uvarint(&mut b);
            if h & 1 == 0 {
                let nb = usize::from(width).div_ceil(8);
                let mut v = [0u8; 4];
                v[..nb].copy_from_slice(&b[..nb]);
                b = &b[nb..];
                out.extend(std::iter::repeat_n(
                    u32::from_le_bytes(v),
                    (h >> 1) as usize,
                ));
            } else {
                let count = (h >> 1) as usize * 8;
                let bytes = count * usize::from(width) / 8;
                let mut bit = 0usize;
                for _ in 0..count {
                    let mut v = 0u32;
                    for k in 0..usize::from(width) {
                        let i = bit + k;
                        v |= u32::from((b[i / 8] >> (i % 8)) & 1) << k;
                    }
                    bit += usize::from(width);
                    out.push(v);
                }
                b = &b[bytes..];
            }
        }
        out.truncate(n);
        out
    }

    #[test]
    fn the_hybrid_encoding_reads_back() {
        let mut cases: Vec<Vec<u32>> = vec![
            vec![],
            vec![0],
            vec![5; 3],
            vec![5; 100],
            (0..1000).map(|i| i % 7).collect(),
            (0..1000)
                .map(|i| if i % 50 < 30 { 3 } else { i % 11 })
                .collect(),
        ];
        cases.push((0..3000).map(|i| (i * 7919) % 4099).collect());
        for values in cases {
            let width = bit_width(values.iter().copied().max().unwrap_or(0).into());
            let mut out = Vec::new();
            hybrid(&mut out, &values, width);
            assert_eq!(unhybrid(&out, width, values.len()), values, "width {width}");
        }
    }

    #[test]
    fn long_runs_become_rle_runs() {
        let mut out = Vec::new();
        hybrid(&mut out, &[9; 100_000], 4);
        // one RLE run: varint(100000 << 1) (3 bytes) and one value byte
        assert_eq!(out.len(), 4);
    }

    #[test]
    fn widths_cover_the_largest_index() {
        assert_eq!(bit_width(0), 1);
        assert_eq!(bit_width(1), 1);
        assert_eq!(bit_width(2), 2);
        assert_eq!(bit_width(255), 8);
        assert_eq!(bit_width(256), 9);
    }

    #[test]
    fn bad_input_is_refused_before_anything_is_written() {
        let mut out = Vec::new();
        let cols = [
            ("a", ColumnData::Int64(&[1, 2])),
            ("b", ColumnData::Float64(&[1.0])),
        ];
        let err = write_parquet(&mut out, &cols, &ParquetOptions::default()).unwrap_err();
        assert!(err.to_string().contains("column 'b' has 1 values"), "{err}");
        assert!(out.is_empty());
        let err = write_parquet(&mut out, &[], &ParquetOptions::default()).unwrap_err();
        assert!(matches!(err, ParquetError::NoColumns));
        let opts = ParquetOptions {
            values_per_page: 0,
            ..ParquetOptions::default()
        };
        let err = write_parquet(&mut out, &cols[..1], &opts).unwrap_err();
        assert!(err.to_string().starts_with("values_per_page"), "{err}");
        assert!(out.is_empty());
    }

    #[test]
    fn the_same_columns_give_the_same_bytes() {
        let a: Vec<i64> = (0..5000).map(|i| i % 13).collect();
        let b: Vec<f64> = (0..5000).map(|i| f64::from(i) / 3.0).collect();
        let cols = [("a", ColumnData::Int64(&a)), ("b", ColumnData::Float64(&b))];
        let mut x = Vec::new();
        let mut y = Vec::new();
        write_parquet(&mut x, &cols, &ParquetOptions::default()).unwrap();
        write_parquet(&mut y, &cols, &ParquetOptions::default()).unwrap();
        assert_eq!(x, y);
        assert_eq!(&x[..4], b"PAR1");
        assert_eq!(&x[x.len() - 4..], b"PAR1");
    }
}

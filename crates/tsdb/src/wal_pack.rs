//! WAL compression (`--storage.tsdb.wal-compression`, on by default as in Prometheus): what a shard
//! logs is packed, and what replay reads is unpacked, here. `tessera-wal` still moves opaque,
//! CRC-checked records; compression happens inside a record, so torn tails, corruption reports and
//! repair are unchanged.
//!
//! Two steps, each of which pays on monitoring data (measured on the fleet stream; see the README):
//! - **Context-coded batches** (type 8, [`crate::wal_records::transcode_batch`]): a sample batch keeps
//!   its layout, but each group's series ref and first timestamp are differences from the previous
//!   group's (a scrape's samples share their timestamp and their series are numbered in order), and each
//!   float value is the XOR of its bits with the last value of the same series logged *in the same
//!   segment* ([`ValueCtx`]): a constant series costs 1 byte a sample, a counter's step a few. The context
//!   starts empty in every segment, so a segment decodes without the ones before it (which checkpoints
//!   delete) and a torn or repaired tail loses nothing but itself.
//! - **zstd** over the record (type 7, level 1): `7 codec:u8 raw_len:uvar frame` where codec 1 is
//!   zstd and `raw_len` the length of the record inside, which is any other type. A record that zstd
//!   does not shrink is logged as it is.
//!
//! A record is always context-coded for the segment it lands in: [`Packer::pack_for`] asks the WAL
//! whether the record would start a new segment, and if so starts it first and codes again from an empty
//! context. On replay, [`Unpacker`] is reset at every segment and checkpoint.
//!
//! Hostile bytes (a damaged or forged WAL) never panic the decoder and never allocate more than
//! [`MAX_UNPACKED_BYTES`]: the declared length is checked before anything is allocated, and the frame
//! must decompress to exactly that length.

use tessera_wal::{Wal, WalError};

use crate::wal_records::{
    decode_in, put_uvarint, transcode_batch, DecodeError, Record, ValueCtx, REC_BATCH, REC_BATCH_CTX, REC_BATCH_HIST, REC_BATCH_ST,
    REC_COMPRESSED,
};

/// zstd, the only codec of type 7 records so far.
const CODEC_ZSTD: u8 = 1;
/// zstd's level: 1 is within a few percent of 3 on WAL records at a third more speed.
const LEVEL: i32 = 1;
/// Most bytes a compressed record may declare (a commit is bounded far below by the request limits).
pub const MAX_UNPACKED_BYTES: usize = 1 << 30;

/// Packs the records of one shard's WAL writer.
pub struct Packer {
    ctx: ValueCtx,
    /// The segment `ctx` belongs to.
    segment: Option<u64>,
    z: zstd::bulk::Compressor<'static>,
    /// The context-coded record and its zstd frame.
    bufs: (Vec<u8>, Vec<u8>),
    out: Vec<u8>,
}

impl Packer {
    pub fn new() -> std::io::Result<Packer> {
        Ok(Packer { ctx: ValueCtx::default(), segment: None, z: zstd::bulk::Compressor::new(LEVEL)?, bufs: (Vec::new(), Vec::new()), out: Vec::new() })
    }

    /// Logs `raw` (a record as [`crate::wal_records`] encodes it) to `wal`, packed; returns the bytes
    /// logged.
    pub fn log(&mut self, wal: &mut Wal, raw: &[u8]) -> Result<usize, WalError> {
        self.pack_for(wal, raw)?;
        wal.log(&self.out)?;
        Ok(self.out.len())
    }

    /// Packs `raw` into `self.out` for the segment it will land in (starting a new segment first when it
    /// would not fit the active one).
    fn pack_for(&mut self, wal: &mut Wal, raw: &[u8]) -> Result<(), WalError> {
        let Packer { ctx, segment, z, bufs, out } = self;
        let active = wal.segment_range().1;
        if *segment != Some(active) {
            ctx.reset();
            *segment = Some(active);
        }
        let coded_ok = pack(z, bufs, out, raw, ctx);
        if !coded_ok || wal.would_rotate(out.len()) {
            // Coded against this segment's context (or the context is now partly updated by a record
            // that could not be coded): start the next segment and code again from nothing.
            let next = wal.next_segment()?;
            ctx.reset();
            *segment = Some(next);
            if !pack(z, bufs, out, raw, ctx) {
                // Logged as it is (types 2, 4 and 5 decode without a context, so the reader's stays
                // empty); the writer's is partly updated again: the next record resets it (same segment).
                *segment = None;
            }
        }
        Ok(())
    }
}

/// `raw` context-coded (a batch) and compressed into `out`, whichever of these shrink it. `false`: a
/// batch that could not be context-coded (logged as it is, `ctx` partly updated).
fn pack(z: &mut zstd::bulk::Compressor<'static>, bufs: &mut (Vec<u8>, Vec<u8>), out: &mut Vec<u8>, raw: &[u8], ctx: &mut ValueCtx) -> bool {
    let (coded, zbuf) = bufs;
    let mut ok = true;
    let body: &[u8] = if matches!(raw.first(), Some(&(REC_BATCH | REC_BATCH_ST | REC_BATCH_HIST))) {
        match transcode_batch(raw, ctx, coded) {
            Ok(()) => coded,
            Err(e) => {
                // Our own encoder's output always transcodes; never lose a record over it.
                tracing::error!(offset = e.offset, reason = e.reason, "WAL: batch record not context-coded; logged as it is");
                ok = false;
                raw
            }
        }
    } else {
        raw
    };
    zip(z, zbuf, body, out);
    ok
}

/// `body` as a type 7 record into `out` (cleared), or `body` itself when zstd does not shrink it or it
/// is larger than replay unpacks. The frame goes into the spare capacity of `zbuf` (nothing zero-filled),
/// then behind the header.
fn zip(z: &mut zstd::bulk::Compressor<'static>, zbuf: &mut Vec<u8>, body: &[u8], out: &mut Vec<u8>) {
    out.clear();
    if body.len() <= MAX_UNPACKED_BYTES {
        out.push(REC_COMPRESSED);
        out.push(CODEC_ZSTD);
        put_uvarint(out, body.len() as u64);
        zbuf.clear();
        zbuf.reserve(zstd::zstd_safe::compress_bound(body.len()));
        if let Ok(n) = z.compress_to_buffer(body, zbuf)
            && out.len() + n < body.len()
        {
            out.extend_from_slice(&zbuf[..n]);
            return;
        }
        out.clear();
    }
    out.extend_from_slice(body);
}

/// Unpacks the records of one WAL directory during replay; [`Unpacker::reset`] at every segment and
/// checkpoint.
pub struct Unpacker {
    ctx: ValueCtx,
    z: zstd::bulk::Decompressor<'static>,
    buf: Vec<u8>,
}

impl Unpacker {
    pub fn new() -> std::io::Result<Unpacker> {
        Ok(Unpacker { ctx: ValueCtx::default(), z: zstd::bulk::Decompressor::new()?, buf: Vec::new() })
    }

    /// Starts a segment or checkpoint.
    pub fn reset(&mut self) {
        self.ctx.reset();
        if self.buf.capacity() > 64 << 20 {
            self.buf = Vec::new();
        }
    }

    /// Decodes a record of any type, packed or not.
    pub fn decode(&mut self, rec: &[u8]) -> Result<Record, DecodeError> {
        let inner: &[u8] = if rec.first() == Some(&REC_COMPRESSED) {
            if let Err(e) = self.unzip(rec) {
                // It may have been a context-coded batch: the segment's later ones cannot be trusted.
                self.ctx.set_broken();
                return Err(e);
            }
            &self.buf
        } else {
            rec
        };
        if inner.first() == Some(&REC_BATCH_CTX) && self.ctx.is_broken() {
            return Err(DecodeError { offset: 0, reason: "an earlier record of this segment failed: its value context is lost" });
        }
        match decode_in(inner, Some(&mut self.ctx)) {
            Ok(r) => Ok(r),
            Err(e) => {
                if inner.first() == Some(&REC_BATCH_CTX) {
                    // Its values are partly in the context: the segment's later ones cannot be trusted.
                    self.ctx.set_broken();
                }
                Err(e)
            }
        }
    }

    fn unzip(&mut self, rec: &[u8]) -> Result<(), DecodeError> {
        let err = |offset, reason| DecodeError { offset, reason };
        let codec = *rec.get(1).ok_or(err(1, "truncated compressed record"))?;
        if codec != CODEC_ZSTD {
            return Err(err(1, "unknown compression codec"));
        }
        let (len, tail) = tessera_encoding::varint::read_uvarint(&rec[2..]).map_err(|e| match e {
            tessera_encoding::varint::VarintError::Overflow => err(2, "compressed record length overflows"),
            _ => err(rec.len(), "truncated compressed record length"),
        })?;
        let at = rec.len() - tail.len();
        if len > MAX_UNPACKED_BYTES as u64 {
            return Err(err(2, "compressed record declares more than 1 GiB"));
        }
        let len = len as usize;
        // The frame says how much it holds: nothing is reserved for a frame that would not fill it.
        match zstd::zstd_safe::get_frame_content_size(&rec[at..]) {
            Ok(Some(n)) if n == len as u64 => {}
            _ => return Err(err(at, "zstd frame does not decompress to the declared length")),
        }
        self.buf.clear();
        self.buf.reserve(len);
        let n = self.z.decompress_to_buffer(&rec[at..], &mut self.buf).map_err(|_| err(at, "zstd frame does not decompress"))?;
        if n != len {
            return Err(err(at, "zstd frame decompresses to another length than declared"));
        }
        if self.buf.first() == Some(&REC_COMPRESSED) {
            return Err(err(at, "a compressed record inside a compressed record"));
        }
        Ok(())
    }
}

/// `raw` compressed as a type 7 record (no value context: for records outside the segments, such as a
/// checkpoint's series, tombstones and exemplars), or `raw` itself when zstd does not shrink it.
pub fn compress(raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    match zstd::bulk::Compressor::new(LEVEL) {
        Ok(mut z) => zip(&mut z, &mut Vec::new(), raw, &mut out),
        Err(_) => out.extend_from_slice(raw),
    }
    out
}

/// Whether a record type is one this module writes (for callers that count them).
pub fn is_packed(rec: &[u8]) -> bool {
    matches!(rec.first(), Some(&(REC_COMPRESSED | REC_BATCH_CTX)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wal_records::{encode_series, encode_tombstones, BatchEncoder, SeriesDef, TombstoneRec};
    use proptest::prelude::*;
    use tessera_model::{labels, Sample, STALE_NAN};
    use tessera_wal::{FsyncPolicy, RecordAt, WalOptions};

    /// A scrape-like batch: series `first..first+n`, one sample each at `t`, values from `v(ref)`.
    fn scrape(first: u32, n: u32, t: i64, v: impl Fn(u32) -> f64, st: bool) -> Vec<u8> {
        let mut buf = Vec::new();
        let mut e = if st { BatchEncoder::new_st(&mut buf, std::iter::empty()) } else { BatchEncoder::new(&mut buf, std::iter::empty()) };
        for r in first..first + n {
            if st {
                e.group_st(r, &[Sample::new(t, v(r))], &[if r % 2 == 0 { t - 1000 } else { 0 }]);
            } else {
                e.group(r, &[Sample::new(t, v(r))]);
            }
        }
        e.finish();
        buf
    }

    /// Logs `records` through a packer into a WAL of `segment_bytes` segments, then replays the directory
    /// as the shard does (unpacker reset at every segment) and checks that every record decodes to what
    /// the unpacked original decodes to.
    fn round_trip(records: &[Vec<u8>], segment_bytes: u64) -> (usize, usize, u64) {
        let dir = tempfile::tempdir().expect("tmp");
        let mut wal = Wal::open(dir.path(), WalOptions { segment_bytes, fsync: FsyncPolicy::Never }).expect("open");
        let mut p = Packer::new().expect("zstd");
        let mut logged = 0;
        for r in records {
            logged += p.log(&mut wal, r).expect("log");
        }
        let segments = wal.segment_range();
        wal.close().expect("close");
        let mut u = Unpacker::new().expect("zstd");
        let (mut i, mut at) = (0usize, None);
        tessera_wal::read_all_at::<tessera_wal::WalError>(dir.path(), |pos: RecordAt, rec: &[u8]| {
            if at != Some(pos) {
                u.reset();
                at = Some(pos);
            }
            let got = u.decode(rec).unwrap_or_else(|e| panic!("record {i}: {e:?}"));
            let want = crate::wal_records::decode(&records[i]).expect("original decodes");
            assert_eq!(format!("{got:?}"), format!("{want:?}"), "record {i}");
            if let (Record::Batch { groups: g, .. }, Record::Batch { groups: w, .. }) = (&got, &want) {
                for (x, y) in g.iter().zip(w) {
                    assert!(x.samples.iter().zip(&y.samples).all(|(a, b)| a.bits_eq(b)), "record {i}: value bits");
                }
            }
            i += 1;
            Ok(())
        })
        .expect("replay");
        assert_eq!(i, records.len(), "every record replayed");
        let raw: usize = records.iter().map(Vec::len).sum();
        (raw, logged, segments.1 - segments.0)
    }

    #[test]
    fn scrapes_round_trip_across_segments_and_shrink() {
        let mut recs = Vec::new();
        let names = labels!("__name__" => "up", "job" => "x");
        let mut defs = Vec::new();
        encode_series(&mut defs, [(1u32, &names)].into_iter());
        recs.push(defs);
        for k in 0..300i64 {
            // Constant series, counters, gauges with NaN payloads and stale markers, and start timestamps.
            let v = |r: u32| match r % 4 {
                0 => 42.0,
                1 => (k * (r as i64)) as f64,
                2 if k % 7 == 0 => STALE_NAN,
                2 => f64::from_bits(0x7ff8_0000_0000_0000 | k as u64),
                _ => (k as f64).sin(),
            };
            recs.push(scrape(1, 200, 1_700_000_000_000 + k * 10_000, v, k % 5 == 0));
        }
        let mut ts = Vec::new();
        encode_tombstones(&mut ts, &[TombstoneRec { series_ref: 3, mint_ms: 5, maxt_ms: 9 }]);
        recs.push(ts);
        // One big segment, and segments of a few records (every crossing re-coded from nothing).
        let (raw, logged, _) = round_trip(&recs, 128 << 20);
        assert!(logged * 4 < raw, "packed {logged} of {raw} bytes");
        let (_, _, segments) = round_trip(&recs, 2 << 10);
        assert!(segments > 20, "{segments} segments");
    }

    #[test]
    fn records_zstd_does_not_shrink_are_logged_as_they_are() {
        let mut small = Vec::new();
        encode_tombstones(&mut small, &[TombstoneRec { series_ref: 1, mint_ms: 0, maxt_ms: 1 }]);
        let dir = tempfile::tempdir().expect("tmp");
        let mut wal = Wal::open(dir.path(), WalOptions { segment_bytes: 1 << 20, fsync: FsyncPolicy::Never }).expect("open");
        let mut p = Packer::new().expect("zstd");
        assert_eq!(p.log(&mut wal, &small).expect("log"), small.len());
        assert_eq!(p.out, small);
        assert_eq!(compress(&small), small);
        let big: Vec<u8> = {
            let mut b = Vec::new();
            let defs: Vec<(u32, tessera_model::Labels)> = (0..100).map(|i| (i, labels!("__name__" => "m", "i" => &i.to_string()))).collect();
            encode_series(&mut b, defs.iter().map(|(r, l)| (*r, l)));
            b
        };
        let c = compress(&big);
        assert!(c.len() < big.len() / 2 && c[0] == REC_COMPRESSED && c[1] == CODEC_ZSTD);
        let mut u = Unpacker::new().expect("zstd");
        let Record::Series(defs) = u.decode(&c).expect("decodes") else { panic!("type") };
        assert_eq!(defs.len(), 100);
        assert_eq!(defs[7], SeriesDef { series_ref: 7, labels: labels!("__name__" => "m", "i" => "7") });
    }

    /// The bytes of a type 8 record, as docs/format/wal-records.md specifies them.
    #[test]
    fn context_coded_batch_golden_bytes() {
        let mut ctx = ValueCtx::default();
        let mut out = Vec::new();
        let raw = scrape(5, 2, 1000, |r| if r == 5 { 1.0 } else { 2.0 }, false);
        transcode_batch(&raw, &mut ctx, &mut out).expect("transcodes");
        // 8, source type 2, 0 series, 2 groups; group: ref +5, 1 sample, t0 +1000 (zigzag 2000 = d0 0f),
        // value 1.0 = 3ff0…: 1 leading zero byte? no: lead 0, trail 6 -> ctrl 0x06, bytes 3f f0.
        assert_eq!(
            out,
            vec![8, 2, 0, 2, 10, 1, 0xd0, 0x0f, 0x06, 0x3f, 0xf0, 2, 1, 0, 0x07, 0x40]
        );
        // The same values again: each XOR is 0.
        let raw2 = scrape(5, 2, 1010, |r| if r == 5 { 1.0 } else { 2.0 }, false);
        transcode_batch(&raw2, &mut ctx, &mut out).expect("transcodes");
        assert_eq!(out, vec![8, 2, 0, 2, 10, 1, 0xe4, 0x0f, 0x80, 2, 1, 0, 0x80]);
    }

    #[test]
    fn hostile_packed_records_are_errors() {
        let mut u = Unpacker::new().expect("zstd");
        let frame = zstd::bulk::compress(b"\x03\x00", 1).expect("zstd");
        let with = |len: &[u8], f: &[u8]| [&[REC_COMPRESSED, CODEC_ZSTD][..], len, f].concat();
        let inner = with(&[2], &frame);
        let nested = with(&[inner.len() as u8], &zstd::bulk::compress(&inner, 1).expect("zstd"));
        for (rec, why) in [
            (vec![REC_COMPRESSED], "truncated compressed record"),
            (vec![REC_COMPRESSED, 9, 0], "unknown compression codec"),
            (with(&[0xff, 0xff, 0xff, 0xff, 0x7f], &frame), "more than 1 GiB"),
            (with(&[0xff; 11], &frame), "overflows"),
            (with(&[3], &frame), "declared length"),
            (with(&[2], &frame[..frame.len() - 1]), "does not decompress"),
            (with(&[2], b"garbage"), "declared length"),
            (nested, "a compressed record inside a compressed record"),
            (vec![REC_BATCH_CTX, 9], "unknown type"),
            (vec![REC_BATCH_CTX, REC_BATCH, 0, 1, 2, 1, 0, 0x7f], "control byte"),
        ] {
            u.reset();
            let e = u.decode(&rec).expect_err(why);
            assert!(e.reason.contains(why), "{why}: {e:?}");
        }
        assert!(u.decode(&inner).is_ok(), "the inner record alone is valid");
        // A context-coded batch outside a segment reader is refused by the plain decoder.
        assert!(crate::wal_records::decode(&[REC_BATCH_CTX, REC_BATCH, 0, 0]).is_err());
        // After a broken context-coded record, the segment's later ones are refused; a reset clears it.
        let mut ctx = ValueCtx::default();
        let mut ok = Vec::new();
        transcode_batch(&scrape(1, 3, 10, |r| r as f64, false), &mut ctx, &mut ok).expect("transcodes");
        let mut bad = ok.clone();
        bad.truncate(bad.len() - 1);
        assert!(u.decode(&bad).is_err());
        assert!(u.decode(&ok).is_err(), "the context is lost");
        u.reset();
        assert!(u.decode(&ok).is_ok());
        // So after a compressed record that does not unpack (it may have held a context-coded batch).
        u.reset();
        assert!(u.decode(&with(&[3], &frame)).is_err());
        assert!(u.decode(&ok).is_err(), "the context is lost");
    }

    proptest! {
        #[test]
        fn arbitrary_and_mutated_packed_records_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300), pos in 0usize..400, val in any::<u8>()) {
            let mut u = Unpacker::new().expect("zstd");
            let _ = u.decode(&bytes);
            let mut b = bytes.clone();
            if !b.is_empty() {
                b[0] = [REC_COMPRESSED, REC_BATCH_CTX][pos % 2];
                let _ = u.decode(&b);
            }
            // A real packed record, one byte changed.
            let mut ctx = ValueCtx::default();
            let mut rec = Vec::new();
            transcode_batch(&scrape(1, 20, 1000, |r| r as f64 * 1.5, pos % 3 == 0), &mut ctx, &mut rec).expect("transcodes");
            let mut z = compress(&rec);
            let p = pos % z.len();
            z[p] = val;
            u.reset();
            let _ = u.decode(&z);
            let p = pos % rec.len();
            rec[p] = val;
            u.reset();
            let _ = u.decode(&rec);
        }

        #[test]
        fn random_batches_round_trip(vals in proptest::collection::vec(any::<u64>(), 1..40), seg in 64u64..4096) {
            let recs: Vec<Vec<u8>> = vals.chunks(4).enumerate().map(|(k, c)| {
                let c = c.to_vec();
                scrape(k as u32 % 3, c.len() as u32, k as i64 * 15_000 - 7, move |r| f64::from_bits(c[(r as usize) % c.len()]), k % 2 == 0)
            }).collect();
            round_trip(&recs, seg);
        }
    }
}

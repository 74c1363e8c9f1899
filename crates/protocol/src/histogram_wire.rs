//! Native histograms on the remote-write wire (`prometheus.Histogram`, the same message in 1.0 and
//! 2.0), read with the zero-copy reader into [`tessera_model::HistogramValue`].
//!
//! An integer histogram carries `count_int` (a histogram with neither count is integer, as upstream's
//! `IsFloatHistogram` says), bucket deltas and `zero_count_int`; a float one `count_float`, absolute
//! bucket counts and `zero_count_float`. Fields of the other kind are ignored, as upstream's
//! `ToIntHistogram` / `ToFloatHistogram` ignore them. Repeated scalars are accepted packed or not.

use crate::pbwire::{Reader, WireError, WT_FIXED64, WT_LEN, WT_VARINT};
use tessera_model::histogram::{CounterResetHint, FloatHistogram, Histogram, Span};
use tessera_model::HistogramValue;

fn zigzag32(v: u64) -> i32 {
    let v = v as u32;
    ((v >> 1) as i32) ^ -((v & 1) as i32)
}

fn zigzag64(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// `BucketSpan { sint32 offset = 1; uint32 length = 2; }`.
fn read_span(buf: &[u8]) -> Result<Span, WireError> {
    let mut r = Reader::new(buf);
    let mut s = Span::default();
    while !r.is_empty() {
        match r.key()? {
            (1, wt) => {
                r.expect_wt(1, wt, WT_VARINT)?;
                s.offset = zigzag32(r.varint()?);
            }
            (2, wt) => {
                r.expect_wt(2, wt, WT_VARINT)?;
                s.length = r.varint()? as u32;
            }
            (tag, wt) => r.skip(tag, wt)?,
        }
    }
    Ok(s)
}

/// A repeated `sint64` occurrence, packed or not.
fn read_sint64s(r: &mut Reader<'_>, tag: u32, wt: u8, out: &mut Vec<i64>) -> Result<(), WireError> {
    match wt {
        WT_VARINT => out.push(zigzag64(r.varint()?)),
        WT_LEN => {
            let mut p = Reader::new(r.bytes()?);
            while !p.is_empty() {
                out.push(zigzag64(p.varint()?));
            }
        }
        _ => r.expect_wt(tag, wt, WT_VARINT)?,
    }
    Ok(())
}

/// A repeated `double` occurrence, packed or not.
fn read_doubles(r: &mut Reader<'_>, tag: u32, wt: u8, out: &mut Vec<f64>) -> Result<(), WireError> {
    match wt {
        WT_FIXED64 => out.push(f64::from_bits(r.fixed64()?)),
        WT_LEN => {
            let mut p = Reader::new(r.bytes()?);
            while !p.is_empty() {
                out.push(f64::from_bits(p.fixed64()?));
            }
        }
        _ => r.expect_wt(tag, wt, WT_FIXED64)?,
    }
    Ok(())
}

/// Decodes one `prometheus.Histogram` message: its timestamp, start timestamp (2.0's field 17 when
/// `v2`; 1.0 has no such field, skipped like any unknown one) and value.
pub(crate) fn read_histogram(buf: &[u8], v2: bool) -> Result<(i64, i64, HistogramValue), WireError> {
    let mut r = Reader::new(buf);
    let (mut count_int, mut count_float, mut is_float) = (0u64, 0f64, false);
    let (mut zero_int, mut zero_float) = (0u64, 0f64);
    let (mut sum, mut schema, mut zero_threshold, mut hint, mut t, mut st) = (0f64, 0i32, 0f64, 0u64, 0i64, 0i64);
    let (mut p_spans, mut n_spans) = (Vec::new(), Vec::new());
    let (mut p_deltas, mut n_deltas) = (Vec::new(), Vec::new());
    let (mut p_counts, mut n_counts, mut custom) = (Vec::new(), Vec::new(), Vec::new());
    while !r.is_empty() {
        match r.key()? {
            (1, wt) => {
                r.expect_wt(1, wt, WT_VARINT)?;
                count_int = r.varint()?;
                is_float = false;
            }
            (2, wt) => {
                r.expect_wt(2, wt, WT_FIXED64)?;
                count_float = f64::from_bits(r.fixed64()?);
                is_float = true;
            }
            (3, wt) => {
                r.expect_wt(3, wt, WT_FIXED64)?;
                sum = f64::from_bits(r.fixed64()?);
            }
            (4, wt) => {
                r.expect_wt(4, wt, WT_VARINT)?;
                schema = zigzag32(r.varint()?);
            }
            (5, wt) => {
                r.expect_wt(5, wt, WT_FIXED64)?;
                zero_threshold = f64::from_bits(r.fixed64()?);
            }
            (6, wt) => {
                r.expect_wt(6, wt, WT_VARINT)?;
                zero_int = r.varint()?;
            }
            (7, wt) => {
                r.expect_wt(7, wt, WT_FIXED64)?;
                zero_float = f64::from_bits(r.fixed64()?);
            }
            (8, wt) => {
                r.expect_wt(8, wt, WT_LEN)?;
                n_spans.push(read_span(r.bytes()?)?);
            }
            (9, wt) => read_sint64s(&mut r, 9, wt, &mut n_deltas)?,
            (10, wt) => read_doubles(&mut r, 10, wt, &mut n_counts)?,
            (11, wt) => {
                r.expect_wt(11, wt, WT_LEN)?;
                p_spans.push(read_span(r.bytes()?)?);
            }
            (12, wt) => read_sint64s(&mut r, 12, wt, &mut p_deltas)?,
            (13, wt) => read_doubles(&mut r, 13, wt, &mut p_counts)?,
            (14, wt) => {
                r.expect_wt(14, wt, WT_VARINT)?;
                hint = r.varint()?;
            }
            (15, wt) => {
                r.expect_wt(15, wt, WT_VARINT)?;
                t = r.varint()? as i64;
            }
            (16, wt) => read_doubles(&mut r, 16, wt, &mut custom)?,
            (17, wt) if v2 => {
                r.expect_wt(17, wt, WT_VARINT)?;
                st = r.varint()? as i64;
            }
            (tag, wt) => r.skip(tag, wt)?,
        }
    }
    // Upstream's enum conversion: an unknown hint value reads as "unknown".
    let counter_reset_hint = CounterResetHint::from_u8(u8::try_from(hint).unwrap_or(0)).unwrap_or_default();
    let h = if is_float {
        HistogramValue::Float(FloatHistogram {
            counter_reset_hint,
            schema,
            zero_threshold,
            zero_count: zero_float,
            count: count_float,
            sum,
            positive_spans: p_spans,
            negative_spans: n_spans,
            positive_buckets: p_counts,
            negative_buckets: n_counts,
            custom_values: custom,
        })
    } else {
        HistogramValue::Int(Histogram {
            counter_reset_hint,
            schema,
            zero_threshold,
            zero_count: zero_int,
            count: count_int,
            sum,
            positive_spans: p_spans,
            negative_spans: n_spans,
            positive_buckets: p_deltas,
            negative_buckets: n_deltas,
            custom_values: custom,
        })
    };
    Ok((t, st, h))
}

/// Upstream's validation (`Histogram.Validate` / `FloatHistogram.Validate`), its error text.
pub(crate) fn validate(h: &HistogramValue) -> Result<(), String> {
    match h {
        HistogramValue::Int(h) => h.validate(),
        HistogramValue::Float(h) => h.validate(),
    }
    .map_err(|e| e.to_string())
}

/// `h` at `t` as a `prometheus.Histogram` message (the count oneof always set, so the kind survives).
pub fn to_prompb(t: i64, h: &HistogramValue) -> crate::prompb::Histogram {
    use crate::prompb;
    let spans = |s: &[Span]| s.iter().map(|s| prompb::BucketSpan { offset: s.offset, length: s.length }).collect();
    match h {
        HistogramValue::Int(h) => prompb::Histogram {
            count: Some(prompb::histogram::Count::CountInt(h.count)),
            sum: h.sum,
            schema: h.schema,
            zero_threshold: h.zero_threshold,
            zero_count: Some(prompb::histogram::ZeroCount::ZeroCountInt(h.zero_count)),
            negative_spans: spans(&h.negative_spans),
            negative_deltas: h.negative_buckets.clone(),
            negative_counts: Vec::new(),
            positive_spans: spans(&h.positive_spans),
            positive_deltas: h.positive_buckets.clone(),
            positive_counts: Vec::new(),
            reset_hint: h.counter_reset_hint as i32,
            timestamp: t,
            custom_values: h.custom_values.clone(),
            start_timestamp: 0,
        },
        HistogramValue::Float(h) => prompb::Histogram {
            count: Some(prompb::histogram::Count::CountFloat(h.count)),
            sum: h.sum,
            schema: h.schema,
            zero_threshold: h.zero_threshold,
            zero_count: Some(prompb::histogram::ZeroCount::ZeroCountFloat(h.zero_count)),
            negative_spans: spans(&h.negative_spans),
            negative_deltas: Vec::new(),
            negative_counts: h.negative_buckets.clone(),
            positive_spans: spans(&h.positive_spans),
            positive_deltas: Vec::new(),
            positive_counts: h.positive_buckets.clone(),
            reset_hint: h.counter_reset_hint as i32,
            timestamp: t,
            custom_values: h.custom_values.clone(),
            start_timestamp: 0,
        },
    }
}

/// Encodes `h` at `t` as a `prometheus.Histogram` message body ([`to_prompb`], prost's encoding).
pub fn encode_histogram(out: &mut Vec<u8>, t: i64, h: &HistogramValue) {
    prost::Message::encode(&to_prompb(t, h), out).expect("a Vec grows");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_kinds_round_trip_through_prost_bytes() {
        let ih = Histogram {
            counter_reset_hint: CounterResetHint::Gauge,
            schema: -2,
            zero_threshold: 1e-3,
            zero_count: 4,
            count: 15,
            sum: -7.25,
            positive_spans: vec![Span::new(-3, 2), Span::new(2, 1)],
            negative_spans: vec![Span::new(0, 1)],
            positive_buckets: vec![3, -1, 2],
            negative_buckets: vec![2],
            custom_values: vec![],
        };
        let fh = FloatHistogram {
            schema: -53,
            count: 3.5,
            sum: 1.0,
            positive_spans: vec![Span::new(0, 2)],
            positive_buckets: vec![1.5, 2.0],
            custom_values: vec![0.5],
            ..FloatHistogram::default()
        };
        for (t, h) in [(-5i64, HistogramValue::Int(ih)), (1_700_000_000_000, HistogramValue::Float(fh))] {
            let mut buf = Vec::new();
            encode_histogram(&mut buf, t, &h);
            assert_eq!(read_histogram(&buf, true), Ok((t, 0, h.clone())));
            assert_eq!(validate(&h), Ok(()));
        }
    }

    #[test]
    fn a_histogram_without_count_is_integer_and_bad_bytes_are_errors() {
        assert!(matches!(read_histogram(&[], false), Ok((0, 0, HistogramValue::Int(_)))));
        // Field 12 (positive deltas) with the fixed64 wire type.
        assert!(read_histogram(&[0x61, 1, 2, 3, 4, 5, 6, 7, 8], false).is_err());
        // A truncated packed field.
        assert!(read_histogram(&[0x62, 5, 1], false).is_err());
        // Field 17 (2.0's start timestamp) is read in 2.0 and skipped in 1.0.
        assert!(matches!(read_histogram(&[0x88, 0x01, 42], true), Ok((0, 42, _))));
        assert!(matches!(read_histogram(&[0x88, 0x01, 42], false), Ok((0, 0, _))));
    }
}

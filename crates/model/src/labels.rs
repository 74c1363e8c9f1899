//! Label sets: a series' identity.

use std::fmt;

/// The label that holds the metric name.
pub const METRIC_NAME: &str = "__name__";

/// A label name or value: up to 24 bytes are held inline (no allocation of their own), so a series'
/// label set is one allocation whose strings sit next to each other — most names and values are that
/// short. Compares, orders and hashes as `str` does.
pub type LabelStr = compact_str::CompactString;

/// One name/value pair.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Label {
    pub name: LabelStr,
    pub value: LabelStr,
}

impl Label {
    pub fn new(name: impl Into<LabelStr>, value: impl Into<LabelStr>) -> Self {
        Self { name: name.into(), value: value.into() }
    }
}

/// One pair of a [`Labels`] as the set holds it: borrowed name and value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LabelRef<'a> {
    pub name: &'a str,
    pub value: &'a str,
}

impl LabelRef<'_> {
    /// An owned copy of this pair.
    pub fn to_label(&self) -> Label {
        Label::new(self.name, self.value)
    }
}

impl From<LabelRef<'_>> for Label {
    fn from(l: LabelRef<'_>) -> Self {
        l.to_label()
    }
}

impl PartialEq<Label> for LabelRef<'_> {
    fn eq(&self, other: &Label) -> bool {
        self.name == other.name && self.value == other.value
    }
}

/// A set of labels sorted by name, names unique, no empty values (an empty value means "absent", as in
/// Prometheus). Ordering between label sets is lexicographic over (name, value) pairs, like Prometheus'
/// `labels.Compare`.
///
/// Packed, as Prometheus' `stringlabels`: one shared allocation holding the number of pairs and then each
/// name and value after its length, lengths written as characters of the string itself (see
/// [`push_len`]), so a pair costs its bytes plus two (for names and values under 128 bytes) instead of
/// 48, and reading a name or value is a slice of the string (no UTF-8 check). A node_exporter series'
/// set (5 pairs) is ~100 bytes against ~256 as a slice of pairs.
///
/// Shared: a clone is a reference count, not a copy (a query hands the same series' labels from storage
/// to its result several times). Equal sets have equal packed strings (the encoding is canonical), so
/// equality and hashing work on the string. The handle is one pointer (`arcstr::ArcStr` keeps the
/// length beside the count in the allocation, where `Arc<str>` keeps a weak count there and the length
/// in a second word of every handle): 8 bytes in each head series and each result series.
#[derive(Clone, Eq)]
pub struct Labels(arcstr::ArcStr);

impl Default for Labels {
    fn default() -> Self {
        Labels(arcstr::literal!("\0"))
    }
}

/// Appends `n` as characters: 14 bits each, low digits first; a digit below `0x4000` is the last. Every
/// such character is a valid `char` (all lie below the surrogates), lengths under 128 take one byte.
fn push_len(s: &mut String, mut n: usize) {
    while n >= 0x4000 {
        s.push(char::from_u32(0x4000 + (n & 0x3fff) as u32).unwrap_or('\0'));
        n >>= 14;
    }
    s.push(char::from_u32(n as u32).unwrap_or('\0'));
}

/// Reads a length written by [`push_len`] at `*pos`, moving past it.
#[inline(always)]
fn read_len(s: &str, pos: &mut usize) -> usize {
    let b = s.as_bytes()[*pos];
    if b < 0x80 {
        *pos += 1;
        return b as usize;
    }
    let (mut v, mut shift) = (0usize, 0u32);
    loop {
        let c = s[*pos..].chars().next().unwrap_or('\0');
        *pos += c.len_utf8();
        let c = c as usize;
        if c >= 0x4000 {
            v |= (c - 0x4000) << shift;
            shift += 14;
        } else {
            return v | c << shift;
        }
    }
}

/// How many leading bytes `a` and `b` share (eight at a time).
#[inline]
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let mut i = 0;
    while i + 8 <= n {
        let x = u64::from_le_bytes(a[i..i + 8].try_into().expect("8 bytes"));
        let y = u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        if x != y {
            return i + ((x ^ y).trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while i < n && a[i] == b[i] {
        i += 1;
    }
    i
}

#[inline(always)]
fn take<'a>(s: &'a str, pos: &mut usize) -> &'a str {
    let n = read_len(s, pos);
    let r = &s[*pos..*pos + n];
    *pos += n;
    r
}

/// The pairs of a [`Labels`], in order.
#[derive(Debug, Clone)]
pub struct Iter<'a> {
    s: &'a str,
    pos: usize,
    left: usize,
}

impl<'a> Iterator for Iter<'a> {
    type Item = LabelRef<'a>;

    #[inline]
    fn next(&mut self) -> Option<LabelRef<'a>> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let name = take(self.s, &mut self.pos);
        let value = take(self.s, &mut self.pos);
        Some(LabelRef { name, value })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl ExactSizeIterator for Iter<'_> {}

impl std::hash::Hash for Labels {
    /// The packed string's hash (equal sets pack alike).
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.hash(state);
    }
}

impl PartialEq for Labels {
    /// Two handles of one shared set are equal without comparing a byte (storage merges and result
    /// assembly compare the same series' labels with themselves all the time); otherwise one `memcmp`.
    fn eq(&self, other: &Self) -> bool {
        arcstr::ArcStr::ptr_eq(&self.0, &other.0) || *self.0 == *other.0
    }
}

impl PartialOrd for Labels {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Labels {
    /// Mirrors Prometheus' `labels.Compare`: pairwise by name, then value; the shorter set first on a tie.
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        if arcstr::ArcStr::ptr_eq(&self.0, &other.0) {
            return std::cmp::Ordering::Equal;
        }
        let (sa, sb) = (self.0.as_bytes(), other.0.as_bytes());
        let common = common_prefix(sa, sb);
        if common == sa.len() && common == sb.len() {
            return std::cmp::Ordering::Equal;
        }
        // Sorted series share their first pairs (name, job, instance…): the pairs that lie wholly
        // inside the packed strings' common prefix are equal, and are skipped without comparing. Up to
        // the first differing byte both walks read the same bytes, so they stand at the same places.
        let (mut x, mut y) = (self.iter(), other.iter());
        while x.left > 0 && y.left > 0 {
            let mut end = x.pos;
            take(&self.0, &mut end);
            take(&self.0, &mut end);
            if end > common {
                break;
            }
            (x.pos, y.pos) = (end, end);
            x.left -= 1;
            y.left -= 1;
        }
        for (a, b) in x.zip(y) {
            match a.name.cmp(b.name).then_with(|| a.value.cmp(b.value)) {
                std::cmp::Ordering::Equal => {}
                o => return o,
            }
        }
        self.len().cmp(&other.len())
    }
}

impl fmt::Debug for Labels {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Labels{self}")
    }
}

impl Labels {
    pub fn empty() -> Self {
        Labels::default()
    }

    /// Where the packed label set lies in memory (for a reader that prefetches what it reads next).
    #[inline]
    pub fn as_ptr(&self) -> *const u8 {
        self.0.as_ptr()
    }

    /// Packs pairs the caller guarantees to be sorted, unique and without empty values (`pairs` is walked
    /// twice: once to size the allocation).
    fn pack<'a>(pairs: impl Iterator<Item = (&'a str, &'a str)> + Clone) -> Self {
        let (mut n, mut bytes) = (0usize, 0usize);
        for (a, b) in pairs.clone() {
            n += 1;
            bytes += a.len() + b.len() + 2;
        }
        let mut s = String::with_capacity(bytes + 1);
        push_len(&mut s, n);
        for (a, b) in pairs {
            push_len(&mut s, a.len());
            s.push_str(a);
            push_len(&mut s, b.len());
            s.push_str(b);
        }
        Labels(s.into())
    }

    /// Builds a label set from pairs in any order: sorts by name, drops empty values. When a name occurs
    /// twice the last value wins (use [`Labels::from_sorted`] to validate untrusted input instead).
    pub fn from_pairs<N: Into<LabelStr>, V: Into<LabelStr>>(pairs: impl IntoIterator<Item = (N, V)>) -> Self {
        let mut b = LabelsBuilder::new();
        for (n, v) in pairs {
            b.set(n, v);
        }
        b.build()
    }

    /// Takes labels that must already be sorted by name with unique names; returns the offending name
    /// otherwise. Empty values are dropped.
    pub fn from_sorted(v: Vec<Label>) -> Result<Self, String> {
        for w in v.windows(2) {
            if w[0].name >= w[1].name {
                return Err(w[1].name.to_string());
            }
        }
        Ok(Self::pack(v.iter().filter(|l| !l.value.is_empty()).map(|l| (l.name.as_str(), l.value.as_str()))))
    }

    /// Wraps labels the caller guarantees to be sorted, unique and without empty values.
    pub fn from_vec_unchecked(v: Vec<Label>) -> Self {
        debug_assert!(v.windows(2).all(|w| w[0].name < w[1].name));
        Self::pack(v.iter().map(|l| (l.name.as_str(), l.value.as_str())))
    }

    /// Packs borrowed pairs the caller guarantees to be canonical ([`pairs_are_canonical`]).
    pub fn from_canonical_pairs(pairs: &[(&str, &str)]) -> Self {
        debug_assert!(pairs_are_canonical(pairs));
        Self::pack(pairs.iter().copied())
    }

    /// [`Labels::from_canonical_pairs`] over an iterator (walked twice).
    pub fn from_canonical_iter<'a>(pairs: impl Iterator<Item = (&'a str, &'a str)> + Clone) -> Self {
        Self::pack(pairs)
    }

    /// Packs pairs borrowed from label sets, already canonical (a subset of a set, in its order).
    pub fn from_refs<'a>(pairs: impl Iterator<Item = LabelRef<'a>> + Clone) -> Self {
        Self::pack(pairs.map(|l| (l.name, l.value)))
    }

    pub fn len(&self) -> usize {
        let mut pos = 0;
        read_len(&self.0, &mut pos)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    #[inline]
    pub fn iter(&self) -> Iter<'_> {
        let mut pos = 0;
        let left = read_len(&self.0, &mut pos);
        Iter { s: &self.0, pos, left }
    }

    /// The `i`-th pair (in name order).
    pub fn at(&self, i: usize) -> Option<LabelRef<'_>> {
        self.iter().nth(i)
    }

    pub fn first(&self) -> Option<LabelRef<'_>> {
        self.iter().next()
    }

    pub fn into_vec(self) -> Vec<Label> {
        self.iter().map(|l| l.to_label()).collect()
    }

    /// The value of `name`, or "" when absent (Prometheus' `Labels.Get`).
    pub fn get(&self, name: &str) -> &str {
        for l in self.iter() {
            match l.name.cmp(name) {
                std::cmp::Ordering::Less => {}
                std::cmp::Ordering::Equal => return l.value,
                std::cmp::Ordering::Greater => break,
            }
        }
        ""
    }

    pub fn has(&self, name: &str) -> bool {
        !self.get(name).is_empty()
    }

    pub fn metric_name(&self) -> &str {
        // `__name__` sorts before every name that starts with a lower-case letter: nearly always first.
        match self.first() {
            Some(l) if l.name == METRIC_NAME => l.value,
            _ => self.get(METRIC_NAME),
        }
    }

    /// A stable 64-bit hash (xxh3 over `name 0xff value 0xff`…). Stable across processes and versions:
    /// it routes series to shards, and a shard's WAL must find its series again after a restart.
    pub fn hash(&self) -> u64 {
        hash_iter(self.iter().map(|l| (l.name, l.value)))
    }

    /// Whether this set holds exactly `pairs`, in order (a collision check against borrowed labels
    /// without building a [`Labels`]).
    pub fn eq_pairs(&self, pairs: &[(&str, &str)]) -> bool {
        let it = self.iter();
        it.len() == pairs.len() && it.zip(pairs).all(|(l, &(n, v))| l.name == n && l.value == v)
    }

    /// The shard that owns this series among `n` shards.
    pub fn shard(&self, n: usize) -> usize {
        shard_of_hash(self.hash(), n)
    }

    /// Labels without the metric name (`__name__`).
    pub fn without_metric_name(&self) -> Labels {
        Self::from_refs(self.iter().filter(|l| l.name != METRIC_NAME))
    }

    /// Keeps only the labels whose names are in `names` (`by (...)`).
    pub fn keep(&self, names: &[impl AsRef<str>]) -> Labels {
        Self::from_refs(self.iter().filter(|l| names.iter().any(|n| n.as_ref() == l.name)))
    }

    /// Drops the labels whose names are in `names` (`without (...)`).
    pub fn drop_names(&self, names: &[impl AsRef<str>]) -> Labels {
        Self::from_refs(self.iter().filter(|l| !names.iter().any(|n| n.as_ref() == l.name)))
    }

    /// Approximate heap bytes held, for memory accounting: the shared allocation (its length and
    /// reference count, and the packed string).
    pub fn heap_bytes(&self) -> usize {
        16 + self.0.len()
    }
}

/// [`Labels::hash`] of borrowed `(name, value)` pairs, without building a [`Labels`]: the same bytes in
/// the same order, so the value is identical whenever `pairs` is what the label set would hold (sorted by
/// name, unique names, no empty values). Receivers use it to route and look up series before copying any
/// label; a property test pins the equality.
pub fn hash_pairs(pairs: &[(&str, &str)]) -> u64 {
    hash_iter(pairs.iter().copied())
}

/// [`hash_pairs`] of pairs given by an iterator (walked twice when the pairs outgrow its buffer): a
/// subset of a label set's pairs (grouping, vector matching) hashes as that subset's label set would.
pub fn hash_pairs_iter<'a>(pairs: impl Iterator<Item = (&'a str, &'a str)> + Clone) -> u64 {
    hash_iter(pairs)
}

fn hash_iter<'a>(pairs: impl Iterator<Item = (&'a str, &'a str)> + Clone) -> u64 {
    // One-shot xxh3 over the bytes laid out in a stack buffer gives the streaming digest of the same bytes,
    // at a fraction of the cost of four small `update` calls per label (the ingest hot path hashes every
    // series of every request). Label sets too long for the buffer take the streaming path.
    let mut buf = [0u8; 1024];
    let mut n = 0;
    for (name, value) in pairs.clone() {
        let end = n + name.len() + value.len() + 2;
        if end > buf.len() {
            return hash_streaming(pairs);
        }
        buf[n..n + name.len()].copy_from_slice(name.as_bytes());
        n += name.len();
        buf[n] = 0xff;
        n += 1;
        buf[n..n + value.len()].copy_from_slice(value.as_bytes());
        n += value.len();
        buf[n] = 0xff;
        n += 1;
    }
    xxhash_rust::xxh3::xxh3_64(&buf[..n])
}

fn hash_streaming<'a>(pairs: impl Iterator<Item = (&'a str, &'a str)>) -> u64 {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    for (n, v) in pairs {
        h.update(n.as_bytes());
        h.update(&[0xff]);
        h.update(v.as_bytes());
        h.update(&[0xff]);
    }
    h.digest()
}

/// Whether borrowed pairs form a valid label set as they are: names strictly increasing (so unique) and
/// no empty value. Such pairs can become a [`Labels`] with [`Labels::from_vec_unchecked`].
pub fn pairs_are_canonical(pairs: &[(&str, &str)]) -> bool {
    pairs.iter().all(|&(_, v)| !v.is_empty()) && pairs.windows(2).all(|w| w[0].0 < w[1].0)
}

/// Maps a label hash to one of `n` shards. Uses the high bits through a multiply so that `n` need not be
/// a power of two and low-entropy hashes still spread.
#[inline]
pub fn shard_of_hash(hash: u64, n: usize) -> usize {
    debug_assert!(n > 0);
    ((hash as u128 * n as u128) >> 64) as usize
}

impl<'a> IntoIterator for &'a Labels {
    type Item = LabelRef<'a>;
    type IntoIter = Iter<'a>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl fmt::Display for Labels {
    /// Prometheus' `Labels.String()`: `{__name__="up", job="node"}` with Go-quoted values.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("{")?;
        for (i, l) in self.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{}={}", l.name, go_quote(l.value))?;
        }
        f.write_str("}")
    }
}

/// Quotes a string the way Go's `strconv.Quote` does (escapes `"`, `\`, control and non-printable
/// characters), which is what Prometheus uses when printing label values and in error messages.
pub fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{07}' => out.push_str("\\a"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            '\u{0b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if !go_is_print(c) => {
                if (c as u32) < 0x10000 {
                    out.push_str(&format!("\\u{:04x}", c as u32))
                } else {
                    out.push_str(&format!("\\U{:08x}", c as u32))
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// An approximation of Go's `strconv.IsPrint` without Unicode tables: everything is printable except
/// C1 controls, non-ASCII spaces and separators, format characters, private use and noncharacters.
/// (Unassigned code points, which Go also escapes, print as themselves here.)
pub fn go_is_print(c: char) -> bool {
    let u = c as u32;
    !matches!(u,
        0x80..=0x9f | 0xa0 | 0xad | 0x600..=0x605 | 0x61c | 0x6dd | 0x70f | 0x890..=0x891 | 0x8e2 | 0x1680
        | 0x180e | 0x2000..=0x200f | 0x2028..=0x202f | 0x205f..=0x2064 | 0x2066..=0x206f | 0x3000
        | 0xd800..=0xf8ff | 0xfdd0..=0xfdef | 0xfeff | 0xfff9..=0xfffb | 0x110bd | 0x110cd
        | 0x13430..=0x1343f | 0x1bca0..=0x1bca3 | 0x1d173..=0x1d17a | 0xe0001 | 0xe0020..=0xe007f
        | 0xf0000..=0x10ffff)
        && (u & 0xfffe) != 0xfffe
}


/// Builds label sets by setting and deleting names; `build` sorts and drops empty values.
#[derive(Debug, Clone, Default)]
pub struct LabelsBuilder {
    pairs: Vec<Label>,
}

impl LabelsBuilder {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn from_labels(l: &Labels) -> Self {
        Self { pairs: l.clone().into_vec() }
    }

    /// Sets `name` to `value` (an empty value deletes the label).
    pub fn set(&mut self, name: impl Into<LabelStr>, value: impl Into<LabelStr>) -> &mut Self {
        let name = name.into();
        let value = value.into();
        if let Some(l) = self.pairs.iter_mut().find(|l| l.name == name) {
            l.value = value;
        } else {
            self.pairs.push(Label { name, value });
        }
        self
    }

    pub fn del(&mut self, name: &str) -> &mut Self {
        self.pairs.retain(|l| l.name != name);
        self
    }

    pub fn get(&self, name: &str) -> &str {
        self.pairs.iter().find(|l| l.name == name).map(|l| l.value.as_str()).unwrap_or("")
    }

    pub fn build(&self) -> Labels {
        let mut v: Vec<&Label> = self.pairs.iter().filter(|l| !l.value.is_empty()).collect();
        v.sort_by(|a, b| a.name.cmp(&b.name));
        Labels::pack(v.iter().map(|l| (l.name.as_str(), l.value.as_str())))
    }
}

/// `labels!("__name__" => "up", "job" => "node")` builds a [`Labels`].
#[macro_export]
macro_rules! labels {
    ($($n:expr => $v:expr),* $(,)?) => {
        $crate::Labels::from_pairs([$(($n, $v)),*])
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn from_pairs_sorts_and_drops_empty_values() {
        let l = Labels::from_pairs([("b", "2"), ("a", "1"), ("c", "")]);
        assert_eq!(l.len(), 2);
        assert_eq!(l.at(0).map(|x| x.name), Some("a"));
        assert_eq!(l.get("c"), "");
        assert!(!l.has("c"));
    }

    #[test]
    fn short_names_and_values_live_in_the_pairs_and_the_metric_name_is_found_anywhere() {
        let l = labels!("__name__" => "node_cpu_seconds_total", "cpu" => "0", "instance" => "host-17:9100", "mode" => "idle");
        // One allocation for the whole set: the count, then each name and value after a one-byte length.
        let text = "__name__node_cpu_seconds_totalcpu0instancehost-17:9100modeidle".len();
        assert_eq!(l.heap_bytes(), 16 + 1 + 8 + text);
        // The handle is one pointer (the length lives in the allocation).
        assert_eq!(std::mem::size_of::<Labels>(), 8);
        assert_eq!(std::mem::size_of::<Option<Labels>>(), 8);
        let long = "x".repeat(25);
        assert_eq!(labels!("a" => long.as_str()).heap_bytes(), 16 + 1 + 2 + 1 + 25);
        assert_eq!(l.metric_name(), "node_cpu_seconds_total");
        // Upper-case names sort before `__name__`; a set without it has none.
        let u = labels!("Zone" => "eu", "AZ" => "1", "__name__" => "m", "a" => "b");
        assert_eq!(u.at(2).map(|x| x.name), Some("__name__"));
        assert_eq!(u.metric_name(), "m");
        assert_eq!(labels!("Zone" => "eu").metric_name(), "");
        assert_eq!(Labels::empty().metric_name(), "");
    }

    #[test]
    fn from_sorted_rejects_unsorted_and_duplicate_names() {
        assert!(Labels::from_sorted(vec![Label::new("b", "1"), Label::new("a", "1")]).is_err());
        assert!(Labels::from_sorted(vec![Label::new("a", "1"), Label::new("a", "2")]).is_err());
        assert!(Labels::from_sorted(vec![Label::new("a", "1"), Label::new("b", "2")]).is_ok());
    }

    #[test]
    fn hash_is_stable_and_order_sensitive_to_content() {
        let a = labels!("__name__" => "up", "job" => "node");
        let b = labels!("job" => "node", "__name__" => "up");
        assert_eq!(a.hash(), b.hash());
        let c = labels!("__name__" => "up", "job" => "nodf");
        assert_ne!(a.hash(), c.hash());
        // Pinned: a change of this value would strand existing WALs in the wrong shard.
        assert_eq!(a.hash(), labels!("__name__" => "up", "job" => "node").hash());
        // name/value boundaries matter: {a="bc"} and {ab="c"} differ.
        assert_ne!(labels!("a" => "bc").hash(), labels!("ab" => "c").hash());
    }

    proptest::proptest! {
        /// `hash_pairs` over the pairs of a label set is `Labels::hash` of that set, and `eq_pairs`
        /// recognises exactly that set: borrowed and owned lookups must agree (routing, head lookups).
        #[test]
        fn hash_pairs_equals_labels_hash(
            raw in proptest::collection::vec(("[a-z_\\xff]{0,6}", "[a-z\\x00-\\x02é]{0,6}|[a-z]{100,400}"), 0..8),
            other in proptest::collection::vec(("[a-z]{1,3}", "[a-z]{1,3}"), 0..4),
        ) {
            let l = Labels::from_pairs(raw.iter().map(|(n, v)| (n.as_str(), v.as_str())));
            let pairs: Vec<(&str, &str)> = l.iter().map(|x| (x.name, x.value)).collect();
            proptest::prop_assert!(pairs_are_canonical(&pairs));
            proptest::prop_assert_eq!(hash_pairs(&pairs), l.hash());
            proptest::prop_assert!(l.eq_pairs(&pairs));
            let o = Labels::from_pairs(other.iter().map(|(n, v)| (n.as_str(), v.as_str())));
            let opairs: Vec<(&str, &str)> = o.iter().map(|x| (x.name, x.value)).collect();
            proptest::prop_assert_eq!(l.eq_pairs(&opairs), l == o);
        }
    }

    #[test]
    fn hash_pairs_agrees_on_both_sides_of_its_buffer() {
        for len in [0usize, 1, 500, 1010, 1011, 1012, 1013, 5000] {
            let v = "v".repeat(len);
            let l = Labels::from_pairs([("__name__", "m"), ("a", v.as_str())]);
            let pairs: Vec<(&str, &str)> = l.iter().map(|x| (x.name, x.value)).collect();
            assert_eq!(hash_pairs(&pairs), l.hash(), "value of {len} bytes");
        }
    }

    #[test]
    fn pairs_are_canonical_rejects_unsorted_duplicate_and_empty() {
        assert!(pairs_are_canonical(&[("a", "1"), ("b", "2")]));
        assert!(!pairs_are_canonical(&[("b", "1"), ("a", "2")]));
        assert!(!pairs_are_canonical(&[("a", "1"), ("a", "2")]));
        assert!(!pairs_are_canonical(&[("a", "")]));
    }

    #[test]
    fn shard_of_hash_stays_in_range() {
        for n in 1..17 {
            for h in [0u64, 1, u64::MAX, 0x8000_0000_0000_0000, 12345678901234567] {
                assert!(shard_of_hash(h, n) < n);
            }
        }
    }

    #[test]
    fn display_matches_prometheus() {
        let l = labels!("__name__" => "up", "job" => "a\"b");
        assert_eq!(l.to_string(), r#"{__name__="up", job="a\"b"}"#);
    }

    #[test]
    fn go_quote_escapes_what_go_does_not_print() {
        assert_eq!(go_quote("a\"b\\c\n"), r#""a\"b\\c\n""#);
        assert_eq!(go_quote("\u{1}"), r#""\x01""#);
        assert_eq!(go_quote("zero\u{200b}width"), r#""zero\u200bwidth""#);
        assert_eq!(go_quote("\u{e0001}"), r#""\U000e0001""#);
        assert_eq!(go_quote("ünïcödé ✓"), "\"ünïcödé ✓\"");
    }

    #[test]
    fn lengths_of_every_size_round_trip() {
        // One-byte, two- and three-byte characters, and several 14-bit digits.
        for len in [0usize, 1, 127, 128, 2047, 2048, 0x3fff, 0x4000, 0x4001, 70_000, (1 << 28) + 5] {
            let mut s = String::new();
            push_len(&mut s, len);
            push_len(&mut s, 7);
            let mut pos = 0;
            assert_eq!(read_len(&s, &mut pos), len);
            assert_eq!(read_len(&s, &mut pos), 7);
            assert_eq!(pos, s.len());
        }
        let v = "é".repeat(40_000);
        let l = labels!("__name__" => "m", "a" => v.as_str(), "b" => "2");
        assert_eq!(l.get("a"), v);
        assert_eq!(l.get("b"), "2");
        assert_eq!(l.len(), 3);
        assert_eq!(l.clone().into_vec().len(), 3);
    }

    #[test]
    fn empty_sets_and_subsets() {
        assert_eq!(Labels::empty().len(), 0);
        assert_eq!(Labels::empty().iter().count(), 0);
        assert_eq!(Labels::empty(), Labels::from_pairs(Vec::<(&str, &str)>::new()));
        let l = labels!("__name__" => "up", "job" => "node", "zone" => "a");
        assert_eq!(l.without_metric_name(), labels!("job" => "node", "zone" => "a"));
        assert_eq!(l.keep(&["zone", "nope"]), labels!("zone" => "a"));
        assert_eq!(l.drop_names(&["job"]), labels!("__name__" => "up", "zone" => "a"));
        assert_eq!(l.keep(&["nope"]), Labels::empty());
        assert!(l.has("job") && !l.has("jo") && !l.has("zz"));
        assert_eq!(format!("{l:?}"), r#"Labels{__name__="up", job="node", zone="a"}"#);
    }

    proptest::proptest! {
        /// Packing keeps every pair, equality and order agree with the pairs', and lookups find each name.
        #[test]
        fn packed_sets_agree_with_their_pairs(
            a in proptest::collection::btree_map("[a-z_]{1,4}|[a-z]{120,140}", "[a-zé\x00\x7f]{1,5}|[a-z]{126,300}", 0..6),
            b in proptest::collection::btree_map("[a-c]{1,2}", "[a-c]{1,2}", 0..4),
        ) {
            let pa: Vec<(&str, &str)> = a.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
            let pb: Vec<(&str, &str)> = b.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
            let (la, lb) = (Labels::from_canonical_pairs(&pa), Labels::from_canonical_pairs(&pb));
            let back: Vec<(&str, &str)> = la.iter().map(|l| (l.name, l.value)).collect();
            proptest::prop_assert_eq!(&back, &pa);
            proptest::prop_assert_eq!(la.len(), pa.len());
            for (n, v) in &pa {
                proptest::prop_assert_eq!(la.get(n), *v);
            }
            proptest::prop_assert_eq!(la == lb, pa == pb);
            proptest::prop_assert_eq!(la.cmp(&lb), pa.cmp(&pb));
        }
    }

    proptest::proptest! {
        /// Label sets that share their first pairs (as sorted series do) order as their pairs do: the
        /// pairs inside the packed strings' common prefix are skipped, the rest compared. `b` is `a`
        /// with one pair's name or value changed, or pairs dropped or added at the end; long names and
        /// values take multi-byte lengths.
        #[test]
        fn sets_sharing_a_prefix_order_as_their_pairs(
            a in proptest::collection::btree_map("[a-d_]{1,3}|[a-z]{127,130}", "[a-c]{0,3}|[a-z]{127,129}|[a-z]{16383,16385}", 0..7),
            at in 0usize..8,
            how in 0u8..7,
            text in "[a-d]{0,3}|[a-c]{127,129}",
        ) {
            let mut pb: Vec<(String, String)> = a.iter().map(|(n, v)| (n.clone(), v.clone())).collect();
            let k = at.min(pb.len().saturating_sub(1));
            match how {
                0 if !pb.is_empty() => pb[k].1 = text.clone(),
                1 if !pb.is_empty() => pb[k].0 = text.clone(),
                2 => pb.truncate(k),
                3 => pb.push(("zz".into(), text.clone())),
                // Only the last byte of a value or name differs: the first difference ends the pair.
                4 if !pb.is_empty() => {
                    let v = &mut pb[k].1;
                    let last = v.pop().map_or('a', |c| if c == 'a' { 'b' } else { 'a' });
                    v.push(last);
                }
                5 if !pb.is_empty() => {
                    let n = &mut pb[k].0;
                    let last = n.pop().map_or('a', |c| if c == 'a' { 'b' } else { 'a' });
                    n.push(last);
                }
                _ => {}
            }
            pb.retain(|(n, v)| !n.is_empty() && !v.is_empty());
            pb.sort();
            pb.dedup_by(|x, y| x.0 == y.0);
            let pa: Vec<(&str, &str)> = a.iter().filter(|(_, v)| !v.is_empty()).map(|(n, v)| (n.as_str(), v.as_str())).collect();
            let pb: Vec<(&str, &str)> = pb.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
            let (la, lb) = (Labels::from_canonical_pairs(&pa), Labels::from_canonical_pairs(&pb));
            proptest::prop_assert_eq!(la.cmp(&lb), pa.cmp(&pb));
            proptest::prop_assert_eq!(lb.cmp(&la), pb.cmp(&pa));
            proptest::prop_assert_eq!(la.cmp(&la.clone()), std::cmp::Ordering::Equal);
        }
    }

    #[test]
    fn ordering_is_prometheus_compare() {
        let a = labels!("a" => "1");
        let b = labels!("a" => "1", "b" => "1");
        let c = labels!("a" => "2");
        assert!(a < b && b < c);
    }
}

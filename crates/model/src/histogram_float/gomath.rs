//! Go's `math` functions whose results upstream depends on (libm rounds some differently), and
//! upstream's Kahan summation.

/// One step of Kahan–Neumaier summation: adds `inc` to `sum` with compensation `c`, returning the
/// new sum and compensation. An infinite sum resets the compensation.
///
/// Mirrors upstream `kahansum.Inc` (util/kahansum/kahansum.go). Inlined across crates: PromQL's float
/// sums call it per sample.
#[inline]
pub fn kahan_inc(inc: f64, sum: f64, c: f64) -> (f64, f64) {
    let t = sum + inc;
    let c = if t.is_infinite() {
        0.0
    } else if sum.abs() >= inc.abs() {
        c + ((sum - t) + inc)
    } else {
        c + ((inc - t) + sum)
    };
    (t, c)
}

/// `kahan_inc(-dec, sum, c)`. Mirrors upstream `kahansum.Dec`.
pub fn kahan_dec(dec: f64, sum: f64, c: f64) -> (f64, f64) {
    kahan_inc(-dec, sum, c)
}

/// `frac × 2^exp` with a single rounding. Mirrors Go's `math.Ldexp`, which upstream uses for bucket
/// bounds (including its handling of subnormal results).
pub(super) fn ldexp(frac: f64, exp: i64) -> f64 {
    if frac == 0.0 || !frac.is_finite() {
        return frac;
    }
    // Normalise a subnormal `frac`.
    let (frac, e0) = if frac.abs() < f64::MIN_POSITIVE {
        (frac * (1u64 << 52) as f64, -52i64)
    } else {
        (frac, 0)
    };
    let bits = frac.to_bits();
    let exp = exp
        .saturating_add(e0)
        .saturating_add(((bits >> 52) & 0x7ff) as i64 - 1023);
    if exp < -1075 {
        return 0.0f64.copysign(frac);
    }
    if exp > 1023 {
        return if frac < 0.0 { f64::NEG_INFINITY } else { f64::INFINITY };
    }
    let (exp, m) = if exp < -1022 {
        (exp + 53, 1.0 / (1u64 << 53) as f64)
    } else {
        (exp, 1.0)
    };
    let bits = (bits & !(0x7ffu64 << 52)) | (((exp + 1023) as u64) << 52);
    m * f64::from_bits(bits)
}
/// Go's `math.Frexp`: `x = frac × 2^exp` with `frac` in [0.5, 1).
pub(super) fn go_frexp(x: f64) -> (f64, i64) {
    if x == 0.0 || !x.is_finite() {
        return (x, 0);
    }
    let (x, e0) = if x.abs() < f64::MIN_POSITIVE {
        (x * (1u64 << 52) as f64, -52i64)
    } else {
        (x, 0)
    };
    let bits = x.to_bits();
    let exp = e0 + ((bits >> 52) & 0x7ff) as i64 - 1022;
    let frac = f64::from_bits((bits & !(0x7ffu64 << 52)) | (1022u64 << 52));
    (frac, exp)
}

/// Go's `math.Log` (the FreeBSD algorithm of its pure-Go and amd64 versions), so that results
/// match upstream bit for bit rather than whatever the platform's libm rounds to.
// The constants are spelled as upstream spells them (and round to the same floats).
#[allow(clippy::excessive_precision)]
pub(super) fn go_log(x: f64) -> f64 {
    const LN2_HI: f64 = 6.93147180369123816490e-01;
    const LN2_LO: f64 = 1.90821492927058770002e-10;
    const L1: f64 = 6.666666666666735130e-01;
    const L2: f64 = 3.999999999940941908e-01;
    const L3: f64 = 2.857142874366239149e-01;
    const L4: f64 = 2.222219843214978396e-01;
    const L5: f64 = 1.818357216161805012e-01;
    const L6: f64 = 1.531383769920937332e-01;
    const L7: f64 = 1.479819860511658591e-01;
    if x.is_nan() || x == f64::INFINITY {
        return x;
    }
    if x < 0.0 {
        return f64::NAN;
    }
    if x == 0.0 {
        return f64::NEG_INFINITY;
    }
    let (mut f1, mut ki) = go_frexp(x);
    if f1 < std::f64::consts::FRAC_1_SQRT_2 {
        f1 *= 2.0;
        ki -= 1;
    }
    let f = f1 - 1.0;
    let k = ki as f64;
    let s = f / (2.0 + f);
    let s2 = s * s;
    let s4 = s2 * s2;
    let t1 = s2 * (L1 + s4 * (L3 + s4 * (L5 + s4 * L7)));
    let t2 = s4 * (L2 + s4 * (L4 + s4 * L6));
    let r = t1 + t2;
    let hfsq = 0.5 * f * f;
    k * LN2_HI - ((hfsq - (s * (hfsq + r) + k * LN2_LO)) - f)
}

/// Go's `math.Log2` (exact for powers of two), as upstream's interpolations use it.
pub(crate) fn go_log2(x: f64) -> f64 {
    let (frac, exp) = go_frexp(x);
    if frac == 0.5 {
        return (exp - 1) as f64;
    }
    go_log(frac) * std::f64::consts::LOG2_E + exp as f64
}

/// Go's `math.Exp2` (its pure-Go version, which amd64 uses), as upstream's interpolations use it.
// The constants are spelled as upstream spells them (and round to the same floats).
#[allow(clippy::excessive_precision)]
pub(crate) fn go_exp2(x: f64) -> f64 {
    const LN2_HI: f64 = 6.93147180369123816490e-01;
    const LN2_LO: f64 = 1.90821492927058770002e-10;
    const P1: f64 = 1.66666666666666657415e-01;
    const P2: f64 = -2.77777777770155933842e-03;
    const P3: f64 = 6.61375632143793436117e-05;
    const P4: f64 = -1.65339022054652515390e-06;
    const P5: f64 = 4.13813679705723846039e-08;
    if x.is_nan() {
        return x;
    }
    if x > 1.0239999999999999e+03 {
        return f64::INFINITY;
    }
    if x < -1.0740e+03 {
        return 0.0;
    }
    let k: i64 = if x > 0.0 {
        (x + 0.5) as i64
    } else if x < 0.0 {
        (x - 0.5) as i64
    } else {
        0
    };
    let t = x - k as f64;
    let hi = t * LN2_HI;
    let lo = -t * LN2_LO;
    let r = hi - lo;
    let tt = r * r;
    let c = r - tt * (P1 + tt * (P2 + tt * (P3 + tt * (P4 + tt * P5))));
    let y = 1.0 - ((lo - (r * c) / (2.0 - c)) - hi);
    ldexp(y, k)
}

/* The random initializer's generator (see random.h for why it computes its
 * own logarithm and cosine). Built with -ffp-contract=off so that no fused
 * multiply-add changes a rounding on machines that have one. */
#include "random.h"

#include <math.h>

void dmlrun_random_seed(dmlrun_random* random, uint64_t seed) {
    random->state = seed;
    random->has_spare = false;
    random->spare = 0;
}

/* SplitMix64 (Steele, Lea, Flood 2014): a 64-bit counter through a mixer. */
uint64_t dmlrun_random_next(dmlrun_random* random) {
    uint64_t z = (random->state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

double dmlrun_random_uniform(dmlrun_random* random) { return (double)(dmlrun_random_next(random) >> 11) * 0x1p-53; }

/* log(x) = e*ln2 + log(m) with m in [sqrt(1/2), sqrt(2)), and
 * log(m) = 2*atanh(s), s = (m-1)/(m+1), |s| <= 0.1716: 13 terms of the odd
 * series reach below 2^-53. */
double dmlrun_log(double x) {
    if (!(x > 0)) return x == 0 ? -INFINITY : NAN;
    if (isinf(x)) return x;
    int exponent;
    double m = frexp(x, &exponent); /* exact */
    if (m < 0.70710678118654752440) {
        m *= 2; /* exact */
        exponent--;
    }
    double s = (m - 1) / (m + 1), s2 = s * s;
    double series = 0;
    for (int k = 12; k >= 0; k--)
        series = series * s2 + 1.0 / (2 * k + 1);
    const double ln2_hi = 6.93147180369123816490e-01, ln2_lo = 1.90821492927058770002e-10;
    return exponent * ln2_hi + (2 * s * series + exponent * ln2_lo);
}

/* cos and sin of x in [0, pi/4] by their Taylor series (x^20/20! < 1e-20). */
static void cos_sin_small(double x, double* cosine, double* sine) {
    double x2 = x * x, c = 0, s = 0;
    for (int k = 10; k >= 1; k--) {
        c = 1 - x2 / ((2.0 * k - 1) * (2.0 * k)) * c;
        s = 1 - x2 / ((2.0 * k) * (2.0 * k + 1)) * s;
    }
    *cosine = c;
    *sine = x * s;
}

void dmlrun_cos_sin_turns(double turns, double* cosine, double* sine) {
    /* Quadrant and remainder are exact for turns in [0, 1). */
    double quadrant = floor(turns * 4);
    double rest = turns - quadrant * 0.25; /* [0, 1/4) */
    double c, s;
    if (rest > 0.125) {
        cos_sin_small(6.28318530717958647692 * (0.25 - rest), &s, &c);
    } else {
        cos_sin_small(6.28318530717958647692 * rest, &c, &s);
    }
    switch ((int)quadrant & 3) {
    case 0: *cosine = c, *sine = s; break;
    case 1: *cosine = -s, *sine = c; break;
    case 2: *cosine = -c, *sine = -s; break;
    default: *cosine = s, *sine = -c; break;
    }
}

double dmlrun_random_normal(dmlrun_random* random) {
    if (random->has_spare) {
        random->has_spare = false;
        return random->spare;
    }
    double u1 = 1.0 - dmlrun_random_uniform(random); /* (0, 1]: the logarithm stays finite */
    double u2 = dmlrun_random_uniform(random);
    double radius = sqrt(-2.0 * dmlrun_log(u1));
    double c, s;
    dmlrun_cos_sin_turns(u2, &c, &s);
    random->spare = radius * s;
    random->has_spare = true;
    return radius * c;
}

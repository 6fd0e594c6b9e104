/*
 * random.h — the random initializer's generator, reproducible on every
 * machine: SplitMix64 integers, uniform doubles from their top 53 bits, and
 * Box-Muller normals computed with dmlrun's own logarithm and cosine (only
 * IEEE-exact operations: +, -, *, /, sqrt), so that no libm difference
 * between machines changes a value.
 */
#ifndef DMLRUN_RANDOM_H
#define DMLRUN_RANDOM_H

#include <stdbool.h>
#include <stdint.h>

typedef struct dmlrun_random {
    uint64_t state;
    bool has_spare; /* Box-Muller makes normals in pairs */
    double spare;
} dmlrun_random;

void dmlrun_random_seed(dmlrun_random* random, uint64_t seed);
uint64_t dmlrun_random_next(dmlrun_random* random);
/* Uniform in [0, 1), a multiple of 2^-53. */
double dmlrun_random_uniform(dmlrun_random* random);
/* Standard normal (mean 0, standard deviation 1). */
double dmlrun_random_normal(dmlrun_random* random);

/* The building blocks, exposed for the tests: natural logarithm of x > 0,
 * and cos and sin of 2*pi*turns for turns in [0, 1). */
double dmlrun_log(double x);
void dmlrun_cos_sin_turns(double turns, double* cosine, double* sine);

#endif /* DMLRUN_RANDOM_H */

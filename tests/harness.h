/* The test harness every libdml test uses.
 *
 * - Cases register with TEST_CASE and run in order; `EXPECT` records a failure
 *   with file, line and the run's seed, and the case goes on.
 * - Random inputs come from one seeded generator. The seed is fresh per run
 *   (DML_TEST_SEED=N reproduces one) and printed with every failure.
 * - Tensors get random layouts (packed, permuted such as NHWC, padded pitches,
 *   broadcast zero strides for inputs).
 * - Buffers are guarded: bytes before and after must stay untouched, and the
 *   payload is poisoned before every run.
 * - Element access by data type, with the harness's own FLOAT16 conversion
 *   (independent of the library's).
 */
#ifndef DML_TESTS_HARNESS_H
#define DML_TESTS_HARNESS_H

#include <dml/dml.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- Cases and expectations ---- */
typedef void (*test_fn)(void);
void test_register(const char* name, test_fn fn);
#define TEST_CASE(name)                                                                                                \
    static void name(void);                                                                                            \
    __attribute__((constructor)) static void register_##name(void) { test_register(#name, name); }                     \
    static void name(void)

/* Runs every registered case (or those named on the command line); prints
 * "N passed, M failed" and returns the exit status. */
int test_main(int argc, char** argv);

void test_fail(const char* file, int line, const char* format, ...) __attribute__((format(printf, 3, 4)));
#define EXPECT(cond, ...)                                                                                              \
    do {                                                                                                               \
        if (!(cond)) test_fail(__FILE__, __LINE__, __VA_ARGS__);                                                       \
    } while (0)
/* True when the current case has failed at least once (to stop a loop early). */
bool test_case_failed(void);

/* Expects status and, when it is a failure, a last-error message containing
 * every non-NULL needle (the operator, the field, the rule). */
#define EXPECT_STATUS(status, expected, ...)                                                                           \
    test_expect_status(__FILE__, __LINE__, (status), (expected), (const char*[]){__VA_ARGS__, NULL})
void test_expect_status(const char* file, int line, HRESULT status, HRESULT expected, const char** needles);

/* ---- Random numbers ---- */
uint64_t test_seed(void);
uint64_t test_rand(void);
/* Uniform integer in [lo, hi]. */
uint32_t test_rand_range(uint32_t lo, uint32_t hi);
double test_rand_double(double lo, double hi);
bool test_rand_bool(void);
/* The generator's position: two runs of one problem started from the same
 * position draw the same random layouts (strides, pitches, broadcasts). */
uint64_t test_rand_position(void);
void test_rand_seek(uint64_t position);

/* ---- Elements ---- */
double test_half_to_double(uint16_t bits);
uint16_t test_double_to_half(double value);
/* The element at element offset `offset` of base, as a double (exact for
 * every type but 64-bit integers beyond 2^53, which tests avoid). */
double test_load(DML_TENSOR_DATA_TYPE type, const void* base, uint64_t offset);
/* Stores value converted to type (round to nearest; integers truncate). */
void test_store(DML_TENSOR_DATA_TYPE type, void* base, uint64_t offset, double value);
/* Raw bits of the element (for exact comparisons). */
uint64_t test_load_bits(DML_TENSOR_DATA_TYPE type, const void* base, uint64_t offset);
bool test_type_is_float(DML_TENSOR_DATA_TYPE type);

/* ---- Tensors with layouts ---- */
typedef enum test_layout {
    TEST_LAYOUT_PACKED,    /* Strides = NULL */
    TEST_LAYOUT_EXPLICIT,  /* packed strides, given explicitly */
    TEST_LAYOUT_PERMUTED,  /* dimensions stored in a random order (NHWC among them) */
    TEST_LAYOUT_PADDED,    /* packed order with extra pitch in random dimensions */
    TEST_LAYOUT_BROADCAST, /* inputs only: zero strides on random dimensions */
    TEST_LAYOUT_COUNT
} test_layout;

typedef struct test_tensor {
    uint32_t sizes[8];
    uint32_t strides[8];
    DML_BUFFER_TENSOR_DESC buffer;
    DML_TENSOR_DESC desc;
    uint64_t element_count; /* logical elements */
} test_tensor;

/* Builds a tensor description with the given layout. TotalTensorSizeInBytes
 * is DMLCalcBufferTensorSize's value. */
void test_tensor_init(test_tensor* t, DML_TENSOR_DATA_TYPE type, uint32_t rank, const uint32_t* sizes,
                      test_layout layout);
/* A random layout; broadcast only when allow_broadcast. */
test_layout test_random_layout(bool allow_broadcast);
/* Element offset of the logical (row-major) index. */
uint64_t test_tensor_offset(const test_tensor* t, uint64_t logical_index);
/* Logical coordinates of a logical index. */
void test_tensor_coords(const test_tensor* t, uint64_t logical_index, uint32_t* coords);
const char* test_layout_name(test_layout layout);

/* ---- Guarded buffers ---- */
enum { TEST_GUARD_BYTES = 64 };
typedef struct test_buffer {
    uint8_t* block; /* guard | data | guard */
    uint8_t* data;  /* 64-byte aligned */
    uint64_t size;
} test_buffer;

void test_buffer_alloc(test_buffer* b, uint64_t size);
void test_buffer_free(test_buffer* b);
/* Fills the payload with a poison pattern (0xCD bytes: a NaN-free but
 * implausible value for every type) and resets the guards. */
void test_buffer_poison(test_buffer* b);
/* Expects the guards untouched; `what` names the buffer in the message. */
void test_buffer_check_guards(const test_buffer* b, const char* what);
/* Expects every payload byte that no element of t addresses still poisoned. */
void test_buffer_check_unaddressed(const test_buffer* b, const test_tensor* t, const char* what);

/* Fills every addressed element of t in b with random values suited to the
 * type (floats in [lo, hi], integers over a range that fits). */
void test_fill_random(test_buffer* b, const test_tensor* t, double lo, double hi);
/* Writes values[logical index] into b through t's layout. */
void test_fill_values(test_buffer* b, const test_tensor* t, const double* values);

/* ---- Running an operator ---- */
/* The backend under test: the CPU, or CUDA when the environment has
 * DML_TEST_BACKEND=cuda (ctest's <name>_cuda entries set it). The same test
 * program then runs every case on a CUDA device unchanged. */
bool test_backend_is_cuda(void);
/* The exit status of a program that found nothing to test on (ctest reports
 * it as skipped, not passed). */
enum { TEST_SKIP_EXIT_CODE = 77 };
/* Creates a device at the highest level: on the CPU with `threads` threads
 * (0 = all), or, in CUDA mode, a CUDA device (threads does not apply). */
DMLDevice* test_device(uint32_t threads);
/* A CUDA device on GPU 0 (DML_TEST_CUDA_DEVICE=N picks another); when none
 * can be created, prints "SKIPPED: no CUDA device (<message>)" and exits with
 * TEST_SKIP_EXIT_CODE. */
DMLDevice* test_cuda_device(void);
/* Creates, compiles, initializes and dispatches desc with the given buffers
 * bound in slot order (NULL entries bind NONE). Returns the first failure.
 * Expects every input bit-identical afterwards and every output's guard
 * bytes untouched.
 * On a CUDA device every buffer's whole block (guards, payload, guards) is
 * mirrored into device memory, the device payload is bound, and after the
 * dispatch and a synchronize the whole block comes back: guard, poison and
 * value checks then read the host buffers as on the CPU. A buffer bound to
 * several slots is mirrored once (overlap checks see the same addresses). */
HRESULT test_run(DMLDevice* device, const DML_OPERATOR_DESC* desc, uint32_t input_count, test_buffer** inputs,
                 uint32_t output_count, test_buffer** outputs);
/* test_run, calling between(context) after the compile and before the
 * dispatch (e.g. to compile another operator in between). */
HRESULT test_run_with(DMLDevice* device, const DML_OPERATOR_DESC* desc, uint32_t input_count, test_buffer** inputs,
                      uint32_t output_count, test_buffer** outputs, void (*between)(void* context), void* context);

/* Records that a dispatch ran implementation `name` (test_run does it; the
 * summary lists them). Call from the main thread. */
void test_note_implementation(const char* name);

/* Compares b (through t) with expected[logical index]:
 * |got - expected| <= abs + rel * |expected|; NaN matches NaN. Reports the
 * first mismatch and returns whether all matched. */
bool test_compare(const test_buffer* b, const test_tensor* t, const double* expected, double abs_tol, double rel_tol,
                  const char* what);

#endif

#include "harness.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- Cases ---- */

enum { MAX_CASES = 512 };
static struct {
    const char* name;
    test_fn fn;
} cases[MAX_CASES];
static int case_count;
static const char* current_case;
static int current_failures;
static uint64_t seed;
static uint64_t rng_state;

void test_register(const char* name, test_fn fn) {
    if (case_count == MAX_CASES) {
        fprintf(stderr, "too many test cases\n");
        exit(2);
    }
    cases[case_count].name = name;
    cases[case_count].fn = fn;
    case_count++;
}

void test_fail(const char* file, int line, const char* format, ...) {
    if (current_failures < 20) {
        va_list args;
        va_start(args, format);
        fprintf(stderr, "FAIL %s (%s:%d, DML_TEST_SEED=%" PRIu64 "): ", current_case, file, line, seed);
        vfprintf(stderr, format, args);
        fputc('\n', stderr);
        va_end(args);
    }
    current_failures++;
}

bool test_case_failed(void) { return current_failures > 0; }

void test_expect_status(const char* file, int line, HRESULT status, HRESULT expected, const char** needles) {
    if (status != expected) {
        test_fail(file, line, "status %s (0x%08x), expected %s; message: %s", dmlStatusName(status), (unsigned)status,
                  dmlStatusName(expected), dmlGetLastErrorMessage());
        return;
    }
    if (SUCCEEDED(expected)) return;
    const char* message = dmlGetLastErrorMessage();
    for (const char** needle = needles; *needle; needle++)
        if (strstr(message, *needle) == NULL)
            test_fail(file, line, "message does not mention \"%s\": %s", *needle, message);
}

/* The implementations test_run compiled to, with how often: printed at the
 * end, so a run at each DML_CPU_ISA level shows which fast paths it checked. */
enum { MAX_IMPLEMENTATIONS = 64 };
static struct {
    const char* name;
    unsigned runs;
} implementations[MAX_IMPLEMENTATIONS];
static int implementation_count;

void test_note_implementation(const char* name) {
    for (int i = 0; i < implementation_count; i++)
        if (strcmp(implementations[i].name, name) == 0) {
            implementations[i].runs++;
            return;
        }
    if (implementation_count == MAX_IMPLEMENTATIONS) return;
    implementations[implementation_count].name = name; /* a string literal of the library */
    implementations[implementation_count++].runs = 1;
}

int test_main(int argc, char** argv) {
    /* Line-buffered even into a pipe (ctest): a sanitizer that ends the
     * process mid-case (halt_on_error) must not take the seed and the lines
     * of the finished cases with it. */
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char* fixed = getenv("DML_TEST_SEED");
    seed = fixed && *fixed ? strtoull(fixed, NULL, 10) : ((uint64_t)time(NULL) << 20) ^ (uint64_t)clock();
    printf("seed %" PRIu64 " (set DML_TEST_SEED to reproduce)\n", seed);
    int passed = 0, failed = 0;
    for (int i = 0; i < case_count; i++) {
        bool selected = argc <= 1;
        for (int a = 1; a < argc; a++)
            selected |= strcmp(argv[a], cases[i].name) == 0;
        if (!selected) continue;
        current_case = cases[i].name;
        current_failures = 0;
        rng_state = seed ^ (0x9E3779B97F4A7C15ull * (uint64_t)(i + 1)); /* each case its own stream */
        cases[i].fn();
        printf("%s %s\n", current_failures ? "FAILED" : "ok    ", cases[i].name);
        if (current_failures)
            failed++;
        else
            passed++;
    }
    if (implementation_count > 0) {
        const char* isa = getenv("DML_CPU_ISA");
        printf("implementations run (DML_CPU_ISA=%s):", isa && *isa ? isa : "unset");
        for (int i = 0; i < implementation_count; i++)
            printf(" %s x%u", implementations[i].name, implementations[i].runs);
        printf("\n");
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}

/* ---- Random numbers (splitmix64) ---- */

uint64_t test_seed(void) { return seed; }

uint64_t test_rand_position(void) { return rng_state; }

void test_rand_seek(uint64_t position) { rng_state = position; }

uint64_t test_rand(void) {
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

uint32_t test_rand_range(uint32_t lo, uint32_t hi) { return lo + (uint32_t)(test_rand() % ((uint64_t)hi - lo + 1)); }

double test_rand_double(double lo, double hi) {
    return lo + (hi - lo) * ((double)(test_rand() >> 11) / 9007199254740992.0);
}

bool test_rand_bool(void) { return test_rand() & 1; }

/* ---- Elements ---- */

double test_half_to_double(uint16_t bits) {
    int sign = bits >> 15, exponent = (bits >> 10) & 0x1F, mantissa = bits & 0x3FF;
    double value;
    if (exponent == 0x1F)
        value = mantissa ? NAN : INFINITY;
    else if (exponent == 0)
        value = ldexp(mantissa, -24);
    else
        value = ldexp(1024 + mantissa, exponent - 25);
    return sign ? -value : value;
}

uint16_t test_double_to_half(double value) {
    if (isnan(value)) return 0x7E00;
    uint16_t sign = signbit(value) ? 0x8000 : 0;
    double a = fabs(value);
    if (a >= 65520.0) return sign | 0x7C00;
    if (a < ldexp(1, -14)) return sign | (uint16_t)nearbyint(ldexp(a, 24)); /* ties to even */
    int k;
    frexp(a, &k); /* a = f * 2^k, f in [0.5, 1) */
    int e = k - 1;
    double m = nearbyint((ldexp(a, -e) - 1.0) * 1024.0);
    if (m == 1024.0) {
        m = 0;
        e++;
    }
    if (e > 15) return sign | 0x7C00;
    return sign | (uint16_t)((e + 15) << 10) | (uint16_t)m;
}

bool test_type_is_float(DML_TENSOR_DATA_TYPE type) {
    return type == DML_TENSOR_DATA_TYPE_FLOAT32 || type == DML_TENSOR_DATA_TYPE_FLOAT16 ||
           type == DML_TENSOR_DATA_TYPE_FLOAT64;
}

double test_load(DML_TENSOR_DATA_TYPE type, const void* base, uint64_t offset) {
    switch (type) {
    case DML_TENSOR_DATA_TYPE_FLOAT32: return ((const float*)base)[offset];
    case DML_TENSOR_DATA_TYPE_FLOAT16: return test_half_to_double(((const uint16_t*)base)[offset]);
    case DML_TENSOR_DATA_TYPE_FLOAT64: return ((const double*)base)[offset];
    case DML_TENSOR_DATA_TYPE_UINT8: return ((const uint8_t*)base)[offset];
    case DML_TENSOR_DATA_TYPE_INT8: return ((const int8_t*)base)[offset];
    case DML_TENSOR_DATA_TYPE_UINT16: return ((const uint16_t*)base)[offset];
    case DML_TENSOR_DATA_TYPE_INT16: return ((const int16_t*)base)[offset];
    case DML_TENSOR_DATA_TYPE_UINT32: return ((const uint32_t*)base)[offset];
    case DML_TENSOR_DATA_TYPE_INT32: return ((const int32_t*)base)[offset];
    case DML_TENSOR_DATA_TYPE_UINT64: return (double)((const uint64_t*)base)[offset];
    case DML_TENSOR_DATA_TYPE_INT64: return (double)((const int64_t*)base)[offset];
    default: return NAN;
    }
}

uint64_t test_load_bits(DML_TENSOR_DATA_TYPE type, const void* base, uint64_t offset) {
    switch (dmlDataTypeSize(type)) {
    case 1: return ((const uint8_t*)base)[offset];
    case 2: return ((const uint16_t*)base)[offset];
    case 4: return ((const uint32_t*)base)[offset];
    default: return ((const uint64_t*)base)[offset];
    }
}

void test_store(DML_TENSOR_DATA_TYPE type, void* base, uint64_t offset, double value) {
    switch (type) {
    case DML_TENSOR_DATA_TYPE_FLOAT32: ((float*)base)[offset] = (float)value; break;
    case DML_TENSOR_DATA_TYPE_FLOAT16: ((uint16_t*)base)[offset] = test_double_to_half(value); break;
    case DML_TENSOR_DATA_TYPE_FLOAT64: ((double*)base)[offset] = value; break;
    case DML_TENSOR_DATA_TYPE_UINT8: ((uint8_t*)base)[offset] = (uint8_t)value; break;
    case DML_TENSOR_DATA_TYPE_INT8: ((int8_t*)base)[offset] = (int8_t)value; break;
    case DML_TENSOR_DATA_TYPE_UINT16: ((uint16_t*)base)[offset] = (uint16_t)value; break;
    case DML_TENSOR_DATA_TYPE_INT16: ((int16_t*)base)[offset] = (int16_t)value; break;
    case DML_TENSOR_DATA_TYPE_UINT32: ((uint32_t*)base)[offset] = (uint32_t)value; break;
    case DML_TENSOR_DATA_TYPE_INT32: ((int32_t*)base)[offset] = (int32_t)value; break;
    case DML_TENSOR_DATA_TYPE_UINT64: ((uint64_t*)base)[offset] = (uint64_t)value; break;
    case DML_TENSOR_DATA_TYPE_INT64: ((int64_t*)base)[offset] = (int64_t)value; break;
    default: break;
    }
}

/* ---- Tensors ---- */

const char* test_layout_name(test_layout layout) {
    static const char* names[] = {"packed", "explicit", "permuted", "padded", "broadcast"};
    return layout < TEST_LAYOUT_COUNT ? names[layout] : "?";
}

test_layout test_random_layout(bool allow_broadcast) {
    return (test_layout)test_rand_range(0, allow_broadcast ? TEST_LAYOUT_BROADCAST : TEST_LAYOUT_PADDED);
}

void test_tensor_init(test_tensor* t, DML_TENSOR_DATA_TYPE type, uint32_t rank, const uint32_t* sizes,
                      test_layout layout) {
    memset(t, 0, sizeof *t);
    memcpy(t->sizes, sizes, rank * sizeof *sizes);
    t->element_count = 1;
    for (uint32_t i = 0; i < rank; i++)
        t->element_count *= sizes[i];

    uint32_t order[8]; /* order[0] is the outermost stored dimension */
    for (uint32_t i = 0; i < rank; i++)
        order[i] = i;
    if (layout == TEST_LAYOUT_PERMUTED)
        for (uint32_t i = rank; i > 1; i--) {
            uint32_t j = test_rand_range(0, i - 1), tmp = order[i - 1];
            order[i - 1] = order[j];
            order[j] = tmp;
        }
    uint64_t stride = 1;
    for (uint32_t k = rank; k-- > 0;) {
        uint32_t dim = order[k];
        t->strides[dim] = (uint32_t)stride;
        uint64_t extent = sizes[dim];
        if (layout == TEST_LAYOUT_PADDED && test_rand_bool()) extent += test_rand_range(1, 3);
        stride *= extent;
    }
    if (layout == TEST_LAYOUT_BROADCAST)
        for (uint32_t i = 0; i < rank; i++)
            if (test_rand_range(0, 2) == 0) t->strides[i] = 0;

    t->buffer.DataType = type;
    t->buffer.Flags = DML_TENSOR_FLAG_NONE;
    t->buffer.DimensionCount = rank;
    t->buffer.Sizes = t->sizes;
    t->buffer.Strides = layout == TEST_LAYOUT_PACKED ? NULL : t->strides;
    t->buffer.TotalTensorSizeInBytes = DMLCalcBufferTensorSize(type, rank, t->sizes, t->buffer.Strides);
    t->buffer.GuaranteedBaseOffsetAlignment = 0;
    if (layout == TEST_LAYOUT_PACKED) { /* strides[] still describes the packed layout */
        uint64_t s = 1;
        for (uint32_t i = rank; i-- > 0;) {
            t->strides[i] = (uint32_t)s;
            s *= sizes[i];
        }
    }
    t->desc.Type = DML_TENSOR_TYPE_BUFFER;
    t->desc.Desc = &t->buffer;
}

void test_tensor_coords(const test_tensor* t, uint64_t logical_index, uint32_t* coords) {
    for (uint32_t i = t->buffer.DimensionCount; i-- > 0;) {
        coords[i] = (uint32_t)(logical_index % t->sizes[i]);
        logical_index /= t->sizes[i];
    }
}

uint64_t test_tensor_offset(const test_tensor* t, uint64_t logical_index) {
    uint64_t offset = 0;
    for (uint32_t i = t->buffer.DimensionCount; i-- > 0;) {
        offset += (logical_index % t->sizes[i]) * t->strides[i];
        logical_index /= t->sizes[i];
    }
    return offset;
}

/* ---- Guarded buffers ---- */

enum { GUARD_BYTE = 0xA5, POISON_BYTE = 0xCD };

void test_buffer_alloc(test_buffer* b, uint64_t size) {
    b->size = size;
    b->block = aligned_alloc(64, (size_t)(size + 2 * TEST_GUARD_BYTES + 63) / 64 * 64);
    if (b->block == NULL) {
        fprintf(stderr, "out of memory allocating %" PRIu64 " bytes\n", size);
        exit(2);
    }
    b->data = b->block + TEST_GUARD_BYTES;
    test_buffer_poison(b);
}

void test_buffer_free(test_buffer* b) {
    free(b->block);
    b->block = b->data = NULL;
}

void test_buffer_poison(test_buffer* b) {
    memset(b->block, GUARD_BYTE, TEST_GUARD_BYTES);
    memset(b->data, POISON_BYTE, b->size);
    memset(b->data + b->size, GUARD_BYTE, TEST_GUARD_BYTES);
}

void test_buffer_check_guards(const test_buffer* b, const char* what) {
    for (int i = 0; i < TEST_GUARD_BYTES; i++) {
        if (b->block[i] != GUARD_BYTE) {
            EXPECT(false, "%s: guard byte %d before the buffer was overwritten", what, TEST_GUARD_BYTES - i);
            return;
        }
        if (b->data[b->size + i] != GUARD_BYTE) {
            EXPECT(false, "%s: guard byte %d after the buffer was overwritten", what, i);
            return;
        }
    }
}

void test_buffer_check_unaddressed(const test_buffer* b, const test_tensor* t, const char* what) {
    uint8_t* addressed = calloc(b->size, 1);
    uint32_t element_size = dmlDataTypeSize(t->buffer.DataType);
    for (uint64_t i = 0; i < t->element_count; i++) {
        uint64_t byte = test_tensor_offset(t, i) * element_size;
        memset(addressed + byte, 1, element_size);
    }
    for (uint64_t i = 0; i < b->size; i++)
        if (!addressed[i] && b->data[i] != POISON_BYTE) {
            EXPECT(false, "%s: byte %" PRIu64 " is addressed by no element but was written", what, i);
            break;
        }
    free(addressed);
}

static double random_value(DML_TENSOR_DATA_TYPE type, double lo, double hi) {
    switch (type) {
    case DML_TENSOR_DATA_TYPE_FLOAT32:
    case DML_TENSOR_DATA_TYPE_FLOAT16:
    case DML_TENSOR_DATA_TYPE_FLOAT64: return test_rand_double(lo, hi);
    case DML_TENSOR_DATA_TYPE_UINT8: return test_rand_range(0, 255);
    case DML_TENSOR_DATA_TYPE_INT8: return (double)test_rand_range(0, 255) - 128;
    case DML_TENSOR_DATA_TYPE_UINT16: return test_rand_range(0, 65535);
    case DML_TENSOR_DATA_TYPE_INT16: return (double)test_rand_range(0, 65535) - 32768;
    case DML_TENSOR_DATA_TYPE_UINT32: return test_rand_range(0, UINT32_MAX);
    case DML_TENSOR_DATA_TYPE_INT32: return (double)test_rand_range(0, UINT32_MAX) - 2147483648.0;
    case DML_TENSOR_DATA_TYPE_UINT64: return (double)(test_rand() >> 12); /* < 2^52: exact in double */
    case DML_TENSOR_DATA_TYPE_INT64: return (double)((int64_t)(test_rand() >> 11) - (INT64_C(1) << 52));
    default: return 0;
    }
}

void test_fill_random(test_buffer* b, const test_tensor* t, double lo, double hi) {
    for (uint64_t i = 0; i < t->element_count; i++)
        test_store(t->buffer.DataType, b->data, test_tensor_offset(t, i), random_value(t->buffer.DataType, lo, hi));
}

void test_fill_values(test_buffer* b, const test_tensor* t, const double* values) {
    for (uint64_t i = 0; i < t->element_count; i++)
        test_store(t->buffer.DataType, b->data, test_tensor_offset(t, i), values[i]);
}

/* ---- Running an operator ---- */

bool test_backend_is_cuda(void) {
    const char* backend = getenv("DML_TEST_BACKEND");
    if (backend == NULL || *backend == '\0' || strcmp(backend, "cpu") == 0) return false;
    if (strcmp(backend, "cuda") == 0) return true;
    fprintf(stderr, "DML_TEST_BACKEND is \"%s\" but must be cpu or cuda\n", backend);
    exit(2);
}

DMLDevice* test_cuda_device(void) {
    const char* ordinal = getenv("DML_TEST_CUDA_DEVICE");
    DML_DEVICE_DESC desc = {.Backend = DML_BACKEND_CUDA, .CudaDeviceOrdinal = ordinal ? atoi(ordinal) : 0};
    DMLDevice* device = NULL;
    if (FAILED(dmlCreateDevice(&desc, &device))) {
        printf("SKIPPED: no CUDA device (%s)\n", dmlGetLastErrorMessage());
        fflush(stdout);
        exit(TEST_SKIP_EXIT_CODE);
    }
    return device;
}

/* A run asked for one instruction-set level (DML_CPU_ISA) must test at
 * that level, not below it: on a CPU without it the run is skipped. */
static void skip_unless_requested_isa(const DMLDevice* device) {
    static const char* const names[] = {"generic", "avx2", "avx512"};
    const char* requested = getenv("DML_CPU_ISA");
    if (requested == NULL || *requested == '\0') return;
    for (int level = 0; level < 3; level++)
        if (strcmp(requested, names[level]) == 0) {
            if (dmlGetDeviceCpuIsa(device) == (DML_CPU_ISA)(DML_CPU_ISA_GENERIC + level)) return;
            printf("SKIPPED: DML_CPU_ISA=%s but this CPU lacks it\n", requested);
            fflush(stdout);
            exit(TEST_SKIP_EXIT_CODE);
        }
}

DMLDevice* test_device(uint32_t threads) {
    if (test_backend_is_cuda()) return test_cuda_device();
    DML_DEVICE_DESC desc = {.Backend = DML_BACKEND_CPU, .ThreadCount = threads};
    DMLDevice* device = NULL;
    HRESULT status = dmlCreateDevice(&desc, &device);
    if (FAILED(status)) {
        fprintf(stderr, "dmlCreateDevice failed: %s\n", dmlGetLastErrorMessage());
        exit(2);
    }
    skip_unless_requested_isa(device);
    return device;
}

/* The buffers of one test_run and, on a device with its own memory, their
 * mirrors there (the whole guarded block). */
enum { MAX_RUN_BUFFERS = 16 };
typedef struct run_buffers {
    DMLDevice* device;
    bool mirrored;
    uint32_t count;
    test_buffer* host[MAX_RUN_BUFFERS];
    uint8_t* block[MAX_RUN_BUFFERS]; /* device copy of host[i]->block */
} run_buffers;

static uint64_t guarded_size(const test_buffer* b) { return b->size + 2 * TEST_GUARD_BYTES; }

/* The payload address to bind for b: its own, or its mirror's. */
static HRESULT run_buffer_address(run_buffers* run, test_buffer* b, void** address) {
    if (!run->mirrored) {
        *address = b->data;
        return S_OK;
    }
    for (uint32_t i = 0; i < run->count; i++)
        if (run->host[i] == b) {
            *address = run->block[i] + TEST_GUARD_BYTES;
            return S_OK;
        }
    if (run->count == MAX_RUN_BUFFERS) {
        fprintf(stderr, "test_run: more than %d buffers\n", MAX_RUN_BUFFERS);
        exit(2);
    }
    void* block = NULL;
    HRESULT status = dmlAllocateBuffer(run->device, guarded_size(b), &block);
    if (FAILED(status)) return status;
    run->host[run->count] = b;
    run->block[run->count] = block;
    run->count++;
    status = dmlUpload(run->device, block, b->block, guarded_size(b));
    *address = (uint8_t*)block + TEST_GUARD_BYTES;
    return status;
}

static HRESULT bind_buffers(run_buffers* run, uint32_t count, test_buffer** buffers,
                            DML_BUFFER_BINDING* buffer_bindings, DML_BINDING_DESC* bindings) {
    for (uint32_t i = 0; i < count; i++) {
        if (buffers[i] == NULL) {
            bindings[i] = (DML_BINDING_DESC){DML_BINDING_TYPE_NONE, NULL};
            continue;
        }
        void* address = NULL;
        HRESULT status = run_buffer_address(run, buffers[i], &address);
        if (FAILED(status)) return status;
        buffer_bindings[i] = (DML_BUFFER_BINDING){address, 0, buffers[i]->size};
        bindings[i] = (DML_BINDING_DESC){DML_BINDING_TYPE_BUFFER, &buffer_bindings[i]};
    }
    return S_OK;
}

/* Brings every mirror back into its host block (after a successful run) and
 * frees the mirrors. */
static HRESULT run_buffers_finish(run_buffers* run, HRESULT status) {
    for (uint32_t i = 0; i < run->count; i++) {
        if (SUCCEEDED(status))
            status = dmlDownload(run->device, run->host[i]->block, run->block[i], guarded_size(run->host[i]));
        dmlFreeBuffer(run->device, run->block[i]);
    }
    return status;
}

HRESULT test_run(DMLDevice* device, const DML_OPERATOR_DESC* desc, uint32_t input_count, test_buffer** inputs,
                 uint32_t output_count, test_buffer** outputs) {
    return test_run_with(device, desc, input_count, inputs, output_count, outputs, NULL, NULL);
}

HRESULT test_run_with(DMLDevice* device, const DML_OPERATOR_DESC* desc, uint32_t input_count, test_buffer** inputs,
                      uint32_t output_count, test_buffer** outputs, void (*between)(void* context), void* context) {
    DMLOperator* op = NULL;
    DMLCompiledOperator* compiled = NULL;
    run_buffers run = {.device = device, .mirrored = dmlGetDeviceBackend(device) == DML_BACKEND_CUDA};
    /* Inputs, guards included, must come out of a dispatch bit-identical. */
    uint8_t* input_snapshots[8] = {NULL};
    for (uint32_t i = 0; i < input_count && i < 8; i++) {
        if (inputs[i] == NULL) continue;
        input_snapshots[i] = malloc(guarded_size(inputs[i]));
        memcpy(input_snapshots[i], inputs[i]->block, guarded_size(inputs[i]));
    }
    HRESULT status = dmlCreateOperator(device, desc, &op);
    if (SUCCEEDED(status)) status = dmlCompileOperator(device, op, DML_EXECUTION_FLAG_NONE, &compiled);
    dmlReleaseOperator(op);
    if (SUCCEEDED(status)) status = dmlInitializeOperator(compiled, 0, NULL, NULL);
    if (SUCCEEDED(status) && between) between(context);
    /* The workspace the plan asked for, guarded and poisoned: a kernel may
     * not expect it zeroed, nor write past it. */
    test_buffer temporary = {0};
    DML_BUFFER_BINDING temporary_buffer;
    DML_BINDING_DESC temporary_binding = {DML_BINDING_TYPE_NONE, NULL};
    if (SUCCEEDED(status)) {
        DML_COMPILED_OPERATOR_INFO info;
        status = dmlGetCompiledOperatorInfo(compiled, &info);
        if (SUCCEEDED(status)) test_note_implementation(info.ImplementationName);
        if (SUCCEEDED(status) && info.TemporaryResourceSize > 0) {
            test_buffer_alloc(&temporary, info.TemporaryResourceSize);
            test_buffer_poison(&temporary);
            test_buffer* temporaries[1] = {&temporary};
            status = bind_buffers(&run, 1, temporaries, &temporary_buffer, &temporary_binding);
        }
    }
    if (SUCCEEDED(status)) {
        DML_BUFFER_BINDING in_buffers[8], out_buffers[8];
        DML_BINDING_DESC in_bindings[8], out_bindings[8];
        status = bind_buffers(&run, input_count, inputs, in_buffers, in_bindings);
        if (SUCCEEDED(status)) status = bind_buffers(&run, output_count, outputs, out_buffers, out_bindings);
        if (SUCCEEDED(status)) {
            DML_DISPATCH_BINDINGS bindings = {input_count,  in_bindings,       output_count,
                                              out_bindings, temporary_binding, {DML_BINDING_TYPE_NONE, NULL}};
            status = dmlDispatch(compiled, &bindings);
        }
        if (SUCCEEDED(status)) status = dmlSynchronize(device);
    }
    /* After a failure only frees run here, which keeps the failure's message. */
    status = run_buffers_finish(&run, status);
    dmlReleaseCompiledOperator(compiled);
    /* Nothing is written outside the outputs' buffers, whatever the result. */
    const char* name = dmlOperatorTypeName(desc->Type) ? dmlOperatorTypeName(desc->Type) : "unknown operator";
    if (temporary.block != NULL) {
        char what[96];
        snprintf(what, sizeof what, "%s: TemporaryResource", name);
        test_buffer_check_guards(&temporary, what);
        test_buffer_free(&temporary);
    }
    for (uint32_t o = 0; o < output_count; o++) {
        if (outputs[o] == NULL) continue;
        char what[96];
        snprintf(what, sizeof what, "%s: output slot %u", name, o);
        test_buffer_check_guards(outputs[o], what);
    }
    for (uint32_t i = 0; i < input_count && i < 8; i++) {
        if (input_snapshots[i] == NULL) continue;
        bool aliased = false; /* an input also bound as an output may legitimately change */
        for (uint32_t o = 0; o < output_count; o++)
            aliased |= outputs[o] == inputs[i];
        EXPECT(aliased || memcmp(input_snapshots[i], inputs[i]->block, guarded_size(inputs[i])) == 0,
               "%s: input slot %u changed during the dispatch", name, i);
        free(input_snapshots[i]);
    }
    return status;
}

bool test_compare(const test_buffer* b, const test_tensor* t, const double* expected, double abs_tol, double rel_tol,
                  const char* what) {
    for (uint64_t i = 0; i < t->element_count; i++) {
        double got = test_load(t->buffer.DataType, b->data, test_tensor_offset(t, i));
        double want = expected[i];
        bool ok = (isnan(got) && isnan(want)) || got == want || fabs(got - want) <= abs_tol + rel_tol * fabs(want);
        if (!ok) {
            uint32_t coords[8];
            test_tensor_coords(t, i, coords);
            char where[96] = "";
            size_t used = 0;
            for (uint32_t d = 0; d < t->buffer.DimensionCount && used < sizeof where; d++)
                used += (size_t)snprintf(where + used, sizeof where - used, "%s%u", d ? "," : "", coords[d]);
            EXPECT(false, "%s: element %" PRIu64 " [%s] is %.9g but expected %.9g (tolerance %g + %g*|expected|)", what,
                   i, where, got, want, abs_tol, rel_tol);
            return false;
        }
    }
    return true;
}

/* fuzz_dispatch: a valid description (a template: one dispatchable of the
 * example models) with a few fuzzed mutations (data types, layouts, sizes,
 * ranks, scalar fields, dropped tensors, OWNED_BY_DML inputs, fused
 * activations, alignments, huge TotalTensorSizeInBytes) is created on a
 * device of fuzzed ThreadCount and RoiAlignMaxSamplesPerAxis (invalid ones
 * must be refused), compiled, initialized and dispatched with fuzzed
 * bindings (offsets, sizes, NONE/NULL, wrong types and counts, aliasing
 * inputs and outputs, misaligned addresses) over one pool of memory in
 * which every buffer has guard regions around it, and fuzzed input values
 * (NaN, infinities, huge values, out-of-range batch indices).
 *
 * Invariants beyond ASan/UBSan/LSan (fuzz/README.md):
 *   - create: S_OK or E_INVALIDARG naming the operator; it rejects every
 *     malformed tensor; the description is unchanged and not kept;
 *   - compile succeeds (every kernel exists on the CPU) but for OWNED_BY_DML
 *     inputs whose sizes exceed 2^64 bytes in all (E_INVALIDARG);
 *   - initialize writes nothing but the persistent resource's bytes;
 *   - a dispatch that fails writes nothing and leaves the device usable;
 *   - a dispatch that succeeds writes only the bytes of the addressed
 *     elements of its outputs (no guard, input, padding or persistent byte
 *     changes), accepted no forbidden overlap, and wrote every addressed
 *     output byte from the inputs alone (a second dispatch over outputs
 *     filled with another pattern gives the same bytes);
 *   - the canonical bindings of a valid operator are accepted.
 *
 * DML_FUZZ_BACKEND=cuda runs the same on a CUDA device: libdml sees a device
 * copy of the pool (uploaded before each call, downloaded after it), and
 * every check reads the host copy. There a problem the CUDA backend does not
 * implement may be E_NOTIMPL at compile or dispatch. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_models.h"

int LLVMFuzzerInitialize(int* argc, char*** argv);
int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

enum {
    MAX_ELEMENTS = 4096, /* per tensor, for a dispatch to run (DML_FUZZ_MAX_ELEMENTS overrides it) */
    /* ROI align: sample evaluations one dispatch may take (docs/operators/roi_align.md, "Cost and precision") */
    MAX_ROI_ALIGN_SAMPLES = 1 << 22,
    MAX_MUTATIONS = 5,
    MAX_TENSORS = 8,   /* tensor fields of one description */
    MAX_BINDINGS = 16, /* entries of a binding array (counts are fuzzed up to slots + 1) */
    GUARD_BYTES = 64,  /* at least this much untouched memory around each region */
    REGION_ALIGNMENT = 256,
    GUARD_BYTE = 0xA5,
    OUTPUT_FILL = 0xCD
};

#define COUNT_OF(array) (sizeof array / sizeof array[0])

/* Elements per tensor, and 16 bytes per element, for a dispatch to run. */
static uint64_t max_elements = MAX_ELEMENTS;
/* DML_FUZZ_BACKEND: the backend of the devices that dispatch. */
static DML_BACKEND backend = DML_BACKEND_CPU;
/* Whether libdml works on a device copy of the pool: on CUDA, and on the CPU
 * with DML_FUZZ_MIRROR=1 (which tests the mirroring where no GPU is). */
static bool use_mirror;

/* DML_FUZZ_BACKEND=cpu (the default) or cuda; on cuda a device must exist:
 * the process ends with status 77 (skipped, as the CUDA tests do) when none
 * can be created. */
static void choose_backend(void) {
    const char* mirror = getenv("DML_FUZZ_MIRROR");
    use_mirror = mirror != NULL && strcmp(mirror, "1") == 0;
    const char* name = getenv("DML_FUZZ_BACKEND");
    if (name == NULL || name[0] == '\0' || strcmp(name, "cpu") == 0) return;
    if (strcmp(name, "cuda") != 0) {
        fprintf(stderr, "fuzz_dispatch: DML_FUZZ_BACKEND is '%s' but must be cpu or cuda\n", name);
        exit(2);
    }
    backend = DML_BACKEND_CUDA;
    use_mirror = true;
    DML_DEVICE_DESC desc;
    memset(&desc, 0, sizeof desc);
    desc.Backend = DML_BACKEND_CUDA;
    DMLDevice* device = NULL;
    HRESULT status = dmlCreateDevice(&desc, &device);
    if (FAILED(status)) {
        fprintf(stderr, "fuzz_dispatch: DML_FUZZ_BACKEND=cuda but no CUDA device can be created: %s (%s)\n",
                dmlGetLastErrorMessage(), dmlStatusName(status));
        exit(77);
    }
    dmlReleaseDevice(device);
}

int LLVMFuzzerInitialize(int* argc, char*** argv) {
    (void)argc, (void)argv;
    /* Longer sessions may dispatch larger tensors (tiles, chunks, blocks of the kernels). */
    const char* elements = getenv("DML_FUZZ_MAX_ELEMENTS");
    if (elements != NULL && atoll(elements) > 0) max_elements = (uint64_t)atoll(elements);
    choose_backend();
    size_t count;
    fuzz_templates(&count);
    if (count == 0) abort();
    return 0;
}

/* ---- The mutated description ---- */

typedef struct tensor_field {
    const dmlrun_field* field;
    bool is_output;
    uint32_t slot; /* among the input or the output slots */
} tensor_field;

typedef struct description {
    const dmlrun_op_schema* schema;
    DML_OPERATOR_DESC* desc;
    fuzz_arena* arena;
    tensor_field tensors[MAX_TENSORS];
    uint32_t tensor_count, input_count, output_count;
} description;

static DML_BUFFER_TENSOR_DESC* buffer_of(const description* d, uint32_t t) {
    const DML_TENSOR_DESC* tensor = fuzz_tensor_field(d->desc->Desc, d->tensors[t].field);
    if (tensor == NULL || tensor->Type != DML_TENSOR_TYPE_BUFFER || tensor->Desc == NULL) return NULL;
    /* The arena's copy: the template is never changed. */
    DML_BUFFER_TENSOR_DESC* buffer = (DML_BUFFER_TENSOR_DESC*)tensor->Desc;
    if (buffer->DimensionCount < 1 || buffer->DimensionCount > 8 || buffer->Sizes == NULL) return NULL;
    return buffer;
}

static void recompute_total(DML_BUFFER_TENSOR_DESC* buffer) {
    buffer->TotalTensorSizeInBytes =
        DMLCalcBufferTensorSize(buffer->DataType, buffer->DimensionCount, buffer->Sizes, buffer->Strides);
}

static UINT* mutable_sizes(DML_BUFFER_TENSOR_DESC* buffer) { return (UINT*)buffer->Sizes; }

static const DML_TENSOR_DATA_TYPE value_types[] = {
    DML_TENSOR_DATA_TYPE_FLOAT32, DML_TENSOR_DATA_TYPE_FLOAT16, DML_TENSOR_DATA_TYPE_FLOAT64,
    DML_TENSOR_DATA_TYPE_UINT8,   DML_TENSOR_DATA_TYPE_INT8,    DML_TENSOR_DATA_TYPE_UINT16,
    DML_TENSOR_DATA_TYPE_INT16,   DML_TENSOR_DATA_TYPE_UINT32,  DML_TENSOR_DATA_TYPE_INT32,
    DML_TENSOR_DATA_TYPE_UINT64,  DML_TENSOR_DATA_TYPE_INT64};

/* Every tensor of one data type gets another (the value type of a family). */
static void mutate_type(fuzz_input* in, description* d) {
    DML_BUFFER_TENSOR_DESC* picked = buffer_of(d, fuzz_u8(in) % d->tensor_count);
    DML_TENSOR_DATA_TYPE new_type = value_types[fuzz_u8(in) % COUNT_OF(value_types)];
    if (picked == NULL) return;
    DML_TENSOR_DATA_TYPE old_type = picked->DataType;
    for (uint32_t t = 0; t < d->tensor_count; t++) {
        DML_BUFFER_TENSOR_DESC* buffer = buffer_of(d, t);
        if (buffer == NULL || buffer->DataType != old_type) continue;
        buffer->DataType = new_type;
        recompute_total(buffer);
    }
}

/* Packed, explicit, permuted (NHWC among them), padded or broadcast strides. */
static void mutate_layout(fuzz_input* in, description* d) {
    DML_BUFFER_TENSOR_DESC* buffer = buffer_of(d, fuzz_u8(in) % d->tensor_count);
    uint8_t layout = fuzz_u8(in) % 5;
    if (buffer == NULL) return;
    uint32_t rank = buffer->DimensionCount;
    if (layout == 0) {
        buffer->Strides = NULL;
    } else {
        uint32_t order[8];
        for (uint32_t i = 0; i < rank; i++)
            order[i] = i;
        if (layout == 2)
            for (uint32_t i = rank; i > 1; i--) {
                uint32_t j = fuzz_u8(in) % i, swap = order[i - 1];
                order[i - 1] = order[j];
                order[j] = swap;
            }
        UINT* strides = fuzz_alloc(d->arena, rank * sizeof(UINT));
        uint64_t stride = 1;
        for (uint32_t k = rank; k-- > 0;) {
            uint32_t dim = order[k];
            strides[dim] = (UINT)stride;
            stride *= (uint64_t)buffer->Sizes[dim] + (layout == 3 ? fuzz_u8(in) % 3 : 0);
            if (stride > UINT32_MAX) return;
        }
        if (layout == 4)
            for (uint32_t i = 0; i < rank; i++)
                if (fuzz_u8(in) % 3 == 0) strides[i] = 0;
        buffer->Strides = strides;
    }
    recompute_total(buffer);
}

/* Huge: 2^64 - 4 and a little less (the persistent size of an OWNED_BY_DML input wraps when
 * rounded up to 256), or 2^32 .. 2^63 (two such inputs sum past 2^64). */
static uint64_t huge_total(uint8_t how) {
    return how % 2 ? UINT64_MAX - 3 - 4u * (how / 2 % 128) : (uint64_t)1 << (32 + how / 2 % 32);
}

static void mutate_total(fuzz_input* in, description* d) {
    DML_BUFFER_TENSOR_DESC* buffer = buffer_of(d, fuzz_u8(in) % d->tensor_count);
    uint8_t how = fuzz_u8(in);
    if (buffer == NULL) return;
    recompute_total(buffer);
    switch (how % 5) {
    case 0: buffer->TotalTensorSizeInBytes += 4u * (1 + how / 5 % 8); break;
    case 1: buffer->TotalTensorSizeInBytes += 2; break; /* not a multiple of 4 */
    case 2:
        if (buffer->TotalTensorSizeInBytes >= 4) buffer->TotalTensorSizeInBytes -= 4;
        break;
    case 3: buffer->TotalTensorSizeInBytes = huge_total(how / 5); break;
    default: break;
    }
}

/* GuaranteedBaseOffsetAlignment: 0, powers of two (above 16 they make the
 * bindings' offsets of 16 misaligned), or a value that is not one. */
static void mutate_alignment(fuzz_input* in, description* d) {
    static const UINT alignments[] = {0, 1, 2, 4, 8, 16, 32, 64, 256, 4096, 3, 24};
    DML_BUFFER_TENSOR_DESC* buffer = buffer_of(d, fuzz_u8(in) % d->tensor_count);
    UINT alignment = alignments[fuzz_u8(in) % COUNT_OF(alignments)];
    if (buffer != NULL) buffer->GuaranteedBaseOffsetAlignment = alignment;
}

/* A scalar field, one array entry, or a smaller count (a larger count would
 * make libdml read past the harness's arrays: the rank mutation grows them). */
static void mutate_scalar(fuzz_input* in, description* d) {
    const dmlrun_op_schema* schema = d->schema;
    const dmlrun_field* field = &schema->fields[fuzz_u8(in) % schema->field_count];
    void* slot = fuzz_field_at(d->desc->Desc, field);
    switch (field->kind) {
    case DMLRUN_FIELD_UINT:
    case DMLRUN_FIELD_BOOL: fuzz_store_u32(slot, fuzz_uint(in)); break;
    case DMLRUN_FIELD_COUNT: {
        uint32_t count = fuzz_load_u32(slot);
        fuzz_store_u32(slot, fuzz_u8(in) % (count + 1));
        break;
    }
    case DMLRUN_FIELD_FLOAT: {
        float value = fuzz_float(in);
        memcpy(slot, &value, sizeof value);
        break;
    }
    case DMLRUN_FIELD_ENUM:
        if (fuzz_u8(in) % 2)
            fuzz_store_u32(slot, fuzz_u32(in));
        else
            fuzz_store_u32(slot, (uint32_t)field->enumeration->values[fuzz_u8(in) % field->enumeration->count].value);
        break;
    case DMLRUN_FIELD_SIZE_2D: {
        size_t which = fuzz_u8(in) % 2;
        fuzz_store_u32((char*)slot + which * sizeof(UINT), 1 + fuzz_u8(in) % 8);
        break;
    }
    case DMLRUN_FIELD_UINT_ARRAY: {
        UINT* values = (UINT*)fuzz_load_pointer(slot);
        uint32_t count = fuzz_array_count(schema, d->desc->Desc, field);
        uint8_t index = fuzz_u8(in), how = fuzz_u8(in);
        if (values == NULL || count == 0) break;
        values[index % count] = how % 2 ? how / 2 % 5 : fuzz_uint(in);
        break;
    }
    default: break; /* tensors and activations have their own mutations */
    }
}

static void mutate_drop(fuzz_input* in, description* d) {
    fuzz_store_pointer(fuzz_field_at(d->desc->Desc, d->tensors[fuzz_u8(in) % d->tensor_count].field), NULL);
}

static void mutate_owned(fuzz_input* in, description* d) {
    uint32_t t = fuzz_u8(in) % d->tensor_count;
    DML_BUFFER_TENSOR_DESC* buffer = buffer_of(d, t);
    if (buffer == NULL) return;
    buffer->Flags ^= DML_TENSOR_FLAG_OWNED_BY_DML;
    /* Owned inputs are dispatched whatever their declared size. */
    uint8_t how = fuzz_u8(in);
    if (how % 4 == 0) buffer->TotalTensorSizeInBytes = huge_total(how / 4);
}

/* A fused activation of any fusable type (or none). */
static void mutate_activation(fuzz_input* in, description* d) {
    const dmlrun_field* field = NULL;
    for (size_t i = 0; i < d->schema->field_count; i++)
        if (d->schema->fields[i].kind == DMLRUN_FIELD_FUSED_ACTIVATION) field = &d->schema->fields[i];
    uint8_t how = fuzz_u8(in), pick = fuzz_u8(in);
    if (field == NULL) return;
    void* slot = fuzz_field_at(d->desc->Desc, field);
    if (how % 4 == 0) {
        fuzz_store_pointer(slot, NULL);
        return;
    }
    size_t fusable = 0;
    for (size_t i = 0; i < dmlrun_op_schema_count(); i++)
        fusable += dmlrun_op_schema_at(i)->fusable;
    const dmlrun_op_schema* activation = NULL;
    for (size_t i = 0, n = pick % fusable; i < dmlrun_op_schema_count(); i++)
        if (dmlrun_op_schema_at(i)->fusable && n-- == 0) activation = dmlrun_op_schema_at(i);
    void* activation_desc = fuzz_alloc(d->arena, activation->desc_size);
    for (size_t i = 0; i < activation->field_count; i++)
        if (activation->fields[i].kind == DMLRUN_FIELD_FLOAT) {
            /* Mostly plain parameters (SOFTPLUS needs Steepness >= 1). */
            float value = how % 4 == 3 ? fuzz_float(in) : (float)(fuzz_u8(in) % 9) * 0.5f;
            memcpy(fuzz_field_at(activation_desc, &activation->fields[i]), &value, sizeof value);
        }
    DML_OPERATOR_DESC* op = fuzz_alloc(d->arena, sizeof *op);
    op->Type = activation->type;
    op->Desc = activation_desc;
    fuzz_store_pointer(slot, op);
}

/* A new size for one dimension of every tensor that has the old size there
 * (N or C of a whole family at once), or for every dimension of that size. */
static void mutate_resize(fuzz_input* in, description* d) {
    DML_BUFFER_TENSOR_DESC* picked = buffer_of(d, fuzz_u8(in) % d->tensor_count);
    uint8_t dim_byte = fuzz_u8(in), new_size = 1 + fuzz_u8(in) % 8, everywhere = fuzz_u8(in) % 2;
    if (picked == NULL) return;
    uint32_t rank = picked->DimensionCount, dim = dim_byte % rank, old_size = picked->Sizes[dim];
    for (uint32_t t = 0; t < d->tensor_count; t++) {
        DML_BUFFER_TENSOR_DESC* buffer = buffer_of(d, t);
        if (buffer == NULL) continue;
        bool changed = false;
        for (uint32_t i = 0; i < buffer->DimensionCount; i++) {
            bool same_place = buffer->DimensionCount == rank && i == dim;
            if ((everywhere || same_place) && buffer->Sizes[i] == old_size) {
                mutable_sizes(buffer)[i] = new_size;
                changed = true;
            }
        }
        if (changed) {
            buffer->Strides = NULL;
            recompute_total(buffer);
        }
    }
}

/* One more dimension in every tensor, and optionally one more entry at the
 * front of every per-dimension array (4-D pooling becomes 5-D). */
static void mutate_rank(fuzz_input* in, description* d) {
    uint8_t position = fuzz_u8(in), size = 1 + fuzz_u8(in) % 3, arrays_too = fuzz_u8(in) % 2;
    for (uint32_t t = 0; t < d->tensor_count; t++) {
        DML_BUFFER_TENSOR_DESC* buffer = buffer_of(d, t);
        if (buffer == NULL || buffer->DimensionCount >= 8) continue;
        uint32_t rank = buffer->DimensionCount, at = position % (rank + 1);
        UINT* sizes = fuzz_alloc(d->arena, (rank + 1) * sizeof(UINT));
        for (uint32_t i = 0, j = 0; i <= rank; i++)
            sizes[i] = i == at ? size : buffer->Sizes[j++];
        buffer->Sizes = sizes;
        buffer->DimensionCount = rank + 1;
        buffer->Strides = NULL;
        recompute_total(buffer);
    }
    if (!arrays_too) return;
    const dmlrun_op_schema* schema = d->schema;
    for (size_t i = 0; i < schema->field_count; i++) {
        const dmlrun_field* field = &schema->fields[i];
        if (field->kind != DMLRUN_FIELD_UINT_ARRAY) continue;
        const UINT* values = fuzz_load_pointer(fuzz_field_at(d->desc->Desc, field));
        uint32_t count = fuzz_array_count(schema, d->desc->Desc, field);
        UINT* grown = fuzz_alloc(d->arena, (count + 1) * sizeof(UINT));
        grown[0] = strstr(field->name, "Padding") ? 0 : 1;
        if (values != NULL) memcpy(grown + 1, values, count * sizeof(UINT));
        fuzz_store_pointer(fuzz_field_at(d->desc->Desc, field), grown);
    }
    for (size_t i = 0; i < schema->field_count; i++)
        if (schema->fields[i].kind == DMLRUN_FIELD_COUNT) {
            void* slot = fuzz_field_at(d->desc->Desc, &schema->fields[i]);
            fuzz_store_u32(slot, fuzz_load_u32(slot) + 1);
        }
}

static void mutate(fuzz_input* in, description* d) {
    uint32_t count = fuzz_u8(in) % (MAX_MUTATIONS + 1);
    for (uint32_t m = 0; m < count; m++) {
        switch (fuzz_u8(in) % 10) {
        case 0: mutate_type(in, d); break;
        case 1: mutate_layout(in, d); break;
        case 2: mutate_total(in, d); break;
        case 3: mutate_scalar(in, d); break;
        case 4: mutate_drop(in, d); break;
        case 5: mutate_owned(in, d); break;
        case 6: mutate_activation(in, d); break;
        case 7: mutate_resize(in, d); break;
        case 8: mutate_rank(in, d); break;
        default: mutate_alignment(in, d); break;
        }
    }
}

/* ---- What the harness keeps of each tensor after the description is gone ---- */

typedef struct tensor_info {
    const char* field;
    bool is_output, present, owned;
    uint32_t slot;
    DML_TENSOR_DATA_TYPE type;
    uint32_t element_size, rank;
    uint32_t sizes[8];
    uint64_t strides[8];
    uint64_t elements, total_bytes;
} tensor_info;

/* Fills info from the description; false when some tensor is malformed
 * (libdml must then reject the description). */
static bool describe_tensors(const description* d, tensor_info* info) {
    bool well_formed = true;
    for (uint32_t t = 0; t < d->tensor_count; t++) {
        tensor_info* ti = &info[t];
        memset(ti, 0, sizeof *ti);
        ti->field = d->tensors[t].field->name;
        ti->is_output = d->tensors[t].is_output;
        ti->slot = d->tensors[t].slot;
        const DML_TENSOR_DESC* tensor = fuzz_tensor_field(d->desc->Desc, d->tensors[t].field);
        if (tensor == NULL) continue;
        ti->present = true;
        const DML_BUFFER_TENSOR_DESC* buffer = buffer_of(d, t);
        if (buffer == NULL || dmlDataTypeSize(buffer->DataType) == 0) {
            well_formed = false;
            continue;
        }
        ti->owned = buffer->Flags & DML_TENSOR_FLAG_OWNED_BY_DML;
        ti->type = buffer->DataType;
        ti->element_size = dmlDataTypeSize(buffer->DataType);
        ti->rank = buffer->DimensionCount;
        ti->elements = 1;
        uint64_t packed = 1;
        for (uint32_t i = ti->rank; i-- > 0;) {
            ti->sizes[i] = buffer->Sizes[i];
            ti->strides[i] = buffer->Strides ? buffer->Strides[i] : packed;
            packed *= buffer->Sizes[i];
            ti->elements *= buffer->Sizes[i];
            if (ti->elements > UINT32_MAX) ti->elements = UINT32_MAX; /* rejected anyway; no overflow here */
        }
        ti->total_bytes = buffer->TotalTensorSizeInBytes;
    }
    return well_formed;
}

/* The most bytes of memory the harness gives one region (16 per element). */
static uint64_t region_cap(void) { return 16 * max_elements; }

static uint64_t capped(uint64_t size) { return size < region_cap() ? size : region_cap(); }

/* Whether a dispatch is quick enough to run. Bound tensors must fit their
 * regions; OWNED_BY_DML inputs may declare any size (dmlCompileOperator must
 * reject one that does not fit the persistent resource, and initialize one
 * whose binding is smaller than it declares). */
static bool small_enough(const tensor_info* info, uint32_t count) {
    for (uint32_t t = 0; t < count; t++) {
        if (!info[t].present) continue;
        bool bound = !(info[t].owned && !info[t].is_output);
        if (info[t].elements > max_elements || (bound && info[t].total_bytes > region_cap())) return false;
    }
    return true;
}

/* Whether dmlCompileOperator must reject the description: its OWNED_BY_DML
 * inputs, each rounded up to 256 bytes, exceed 2^64 bytes in all. */
static bool persistent_size_overflows(const tensor_info* info, uint32_t count) {
    uint64_t total = 0;
    for (uint32_t t = 0; t < count; t++) {
        if (!info[t].present || !info[t].owned || info[t].is_output) continue;
        uint64_t padded = info[t].total_bytes + 255;
        if (padded < 255 || total + padded / 256 * 256 < total) return true;
        total += padded / 256 * 256;
    }
    return false;
}

static uint32_t field_u32(const description* d, const char* name, uint32_t otherwise) {
    for (size_t i = 0; i < d->schema->field_count; i++)
        if (strcmp(d->schema->fields[i].name, name) == 0)
            return fuzz_load_u32(fuzz_field_at(d->desc->Desc, &d->schema->fields[i]));
    return otherwise;
}

/* ROI align evaluates at most R*C*OH*OW * s^2 samples, twice that for the
 * gradient of MAX, with s = min(MaximumSamplesPerOutput, the device's
 * RoiAlignMaxSamplesPerAxis) (docs/operators/roi_align.md, "Cost and
 * precision"). The largest tensor bounds R*C*OH*OW. Large sample counts are
 * fuzzed; a dispatch runs only within MAX_ROI_ALIGN_SAMPLES. */
static bool roi_align_within_budget(const description* d, const tensor_info* info, UINT samples_per_axis_limit) {
    DML_OPERATOR_TYPE type = d->schema->type;
    if (type != DML_OPERATOR_ROI_ALIGN && type != DML_OPERATOR_ROI_ALIGN1 && type != DML_OPERATOR_ROI_ALIGN_GRAD)
        return true;
    uint64_t limit = samples_per_axis_limit ? samples_per_axis_limit : DML_ROI_ALIGN_DEFAULT_SAMPLES_PER_AXIS;
    uint64_t per_axis = field_u32(d, "MaximumSamplesPerOutput", UINT32_MAX);
    if (per_axis > limit) per_axis = limit;
    uint64_t largest = 1;
    for (uint32_t t = 0; t < d->tensor_count; t++)
        if (info[t].present && info[t].elements > largest) largest = info[t].elements;
    /* largest <= max_elements and per_axis <= 2^16: no overflow. */
    return 2 * largest * per_axis * per_axis <= MAX_ROI_ALIGN_SAMPLES;
}

/* ---- Memory: one pool, regions with guards between them ---- */

typedef struct region {
    uint8_t* base;
    uint64_t size;
} region;

typedef struct pool {
    uint8_t* bytes;
    uint64_t size;
    region regions[MAX_BINDINGS + 3]; /* input slots, output slots, persistent, spare, temporary */
    uint32_t region_count;
    DMLDevice* device;
    uint8_t* mirror; /* on CUDA: the device copy libdml reads and writes; NULL on the CPU */
} pool;

static void pool_layout(pool* p, DMLDevice* device, const uint64_t* sizes, uint32_t count) {
    uint64_t offsets[MAX_BINDINGS + 3], end = 0;
    for (uint32_t i = 0; i < count; i++) {
        offsets[i] = (end + GUARD_BYTES + REGION_ALIGNMENT - 1) / REGION_ALIGNMENT * REGION_ALIGNMENT;
        end = offsets[i] + sizes[i];
    }
    p->size = (end + GUARD_BYTES + REGION_ALIGNMENT - 1) / REGION_ALIGNMENT * REGION_ALIGNMENT;
    p->bytes = aligned_alloc(REGION_ALIGNMENT, p->size);
    if (p->bytes == NULL) abort();
    memset(p->bytes, GUARD_BYTE, p->size);
    p->region_count = count;
    for (uint32_t i = 0; i < count; i++)
        p->regions[i] = (region){p->bytes + offsets[i], sizes[i]};
    p->device = device;
    p->mirror = NULL;
    if (!use_mirror) return;
    /* Device allocations are at least 256-aligned, as the pool: every
     * address has the same alignment in both copies. */
    void* mirror = NULL;
    FUZZ_CHECK(dmlAllocateBuffer(device, p->size, &mirror) == S_OK, "dmlAllocateBuffer of %llu bytes failed",
               (unsigned long long)p->size);
    p->mirror = mirror;
}

static void pool_free(pool* p) {
    if (p->mirror != NULL) dmlFreeBuffer(p->device, p->mirror);
    free(p->bytes);
}

/* Before a call: the device copy gets the host's bytes. */
static void pool_upload(const pool* p) {
    if (p->mirror == NULL) return;
    FUZZ_CHECK(dmlUpload(p->device, p->mirror, p->bytes, p->size) == S_OK, "dmlUpload failed");
}

/* After a call, failed or not: the host copy gets the device's bytes. */
static void pool_download(pool* p) {
    if (p->mirror == NULL) return;
    FUZZ_CHECK(dmlSynchronize(p->device) == S_OK, "dmlSynchronize failed after a call");
    FUZZ_CHECK(dmlDownload(p->device, p->bytes, p->mirror, p->size) == S_OK, "dmlDownload failed");
}

/* The address libdml gets for a host address: the same byte of the mirror
 * for a byte of the pool (its end included), any other address unchanged. */
static const void* mirrored_address(const pool* p, const void* host) {
    uintptr_t address = (uintptr_t)host, base = (uintptr_t)p->bytes;
    if (p->mirror == NULL || address < base || address - base > p->size) return host;
    return p->mirror + (address - base);
}

/* Room for the mirrored copies of one call's bindings. */
typedef struct mirrored_bindings {
    DML_BINDING_DESC descs[2 * MAX_BINDINGS];
    DML_BUFFER_BINDING buffers[2 * MAX_BINDINGS + 2];
    DML_BUFFER_ARRAY_BINDING arrays[2 * MAX_BINDINGS + 2];
    uint32_t desc_count, buffer_count, array_count;
} mirrored_bindings;

static DML_BUFFER_BINDING* mirror_buffer(const pool* p, mirrored_bindings* m, const DML_BUFFER_BINDING* host) {
    FUZZ_CHECK(m->buffer_count < COUNT_OF(m->buffers), "too many bindings to mirror");
    DML_BUFFER_BINDING* copy = &m->buffers[m->buffer_count++];
    *copy = *host;
    copy->Buffer = (void*)mirrored_address(p, host->Buffer);
    return copy;
}

/* desc as libdml gets it: its buffers' addresses mirrored. A binding of an
 * unknown type stays as it is (libdml must refuse it without reading it). */
static DML_BINDING_DESC mirror_binding(const pool* p, mirrored_bindings* m, DML_BINDING_DESC desc) {
    if (p->mirror == NULL || desc.Desc == NULL) return desc;
    if (desc.Type == DML_BINDING_TYPE_BUFFER) {
        desc.Desc = mirror_buffer(p, m, desc.Desc);
    } else if (desc.Type == DML_BINDING_TYPE_BUFFER_ARRAY) {
        /* The harness's arrays hold one binding. */
        FUZZ_CHECK(m->array_count < COUNT_OF(m->arrays), "too many bindings to mirror");
        DML_BUFFER_ARRAY_BINDING* array = &m->arrays[m->array_count++];
        *array = *(const DML_BUFFER_ARRAY_BINDING*)desc.Desc;
        if (array->BindingCount == 1 && array->Bindings != NULL) array->Bindings = mirror_buffer(p, m, array->Bindings);
        desc.Desc = array;
    }
    return desc;
}

static const DML_BINDING_DESC* mirror_list(const pool* p, mirrored_bindings* m, UINT count,
                                           const DML_BINDING_DESC* descs) {
    if (p->mirror == NULL || descs == NULL) return descs;
    FUZZ_CHECK(count <= COUNT_OF(m->descs) - m->desc_count, "too many bindings to mirror");
    DML_BINDING_DESC* copies = &m->descs[m->desc_count];
    m->desc_count += count;
    for (UINT i = 0; i < count; i++)
        copies[i] = mirror_binding(p, m, descs[i]);
    return copies;
}

/* The message of the last pool_initialize or pool_dispatch: the download
 * after the call (dmlSynchronize, dmlDownload) clears libdml's. */
static char pool_call_message[1024];

static void keep_message(void) {
    snprintf(pool_call_message, sizeof pool_call_message, "%s", dmlGetLastErrorMessage());
}

/* dmlInitializeOperator and dmlDispatch on the pool (its mirror on CUDA). */
static HRESULT pool_initialize(pool* p, DMLCompiledOperator* compiled, UINT count, const DML_BINDING_DESC* inputs,
                               const DML_BINDING_DESC* persistent) {
    mirrored_bindings m = {.desc_count = 0};
    DML_BINDING_DESC mirrored_persistent = mirror_binding(p, &m, *persistent);
    pool_upload(p);
    HRESULT status = dmlInitializeOperator(compiled, count, mirror_list(p, &m, count, inputs), &mirrored_persistent);
    keep_message();
    pool_download(p);
    return status;
}

static HRESULT pool_dispatch(pool* p, DMLCompiledOperator* compiled, const DML_DISPATCH_BINDINGS* bindings) {
    mirrored_bindings m = {.desc_count = 0};
    DML_DISPATCH_BINDINGS mirrored = *bindings;
    mirrored.Inputs = mirror_list(p, &m, bindings->InputCount, bindings->Inputs);
    mirrored.Outputs = mirror_list(p, &m, bindings->OutputCount, bindings->Outputs);
    mirrored.TemporaryResource = mirror_binding(p, &m, bindings->TemporaryResource);
    mirrored.PersistentResource = mirror_binding(p, &m, bindings->PersistentResource);
    pool_upload(p);
    HRESULT status = dmlDispatch(compiled, &mirrored);
    keep_message();
    pool_download(p);
    return status;
}

/* Plain values of a type: floats in [-4, 4], small integers (valid batch
 * indices for small batches). */
static uint64_t plain_bits(DML_TENSOR_DATA_TYPE type, uint64_t random) {
    double value = (double)((int64_t)(random % 8001) - 4000) / 1000.0;
    switch (type) {
    case DML_TENSOR_DATA_TYPE_FLOAT32: {
        float f = (float)value;
        uint32_t bits;
        memcpy(&bits, &f, sizeof bits);
        return bits;
    }
    case DML_TENSOR_DATA_TYPE_FLOAT64: {
        uint64_t bits;
        memcpy(&bits, &value, sizeof bits);
        return bits;
    }
    case DML_TENSOR_DATA_TYPE_FLOAT16: /* exponents 2^-6 .. 2^3 */
        return (random >> 40 & 0x8000) | ((9 + (random >> 20) % 10) << 10) | (random >> 30 & 0x3FF);
    case DML_TENSOR_DATA_TYPE_INT8:
    case DML_TENSOR_DATA_TYPE_INT16:
    case DML_TENSOR_DATA_TYPE_INT32:
    case DML_TENSOR_DATA_TYPE_INT64: return (uint64_t)((int64_t)(random % 9) - 4);
    default: return random % 4;
    }
}

/* NaN, infinities, signed zeros, extremes and denormals of a type. */
static uint64_t special_bits(uint32_t element_size, bool is_float, uint64_t random) {
    static const uint32_t float32[] = {0x7FC00000, 0xFFC00000, 0x7F800000, 0xFF800000, 0x00000000, 0x80000000,
                                       0x7F7FFFFF, 0xFF7FFFFF, 0x00000001, 0x7149F2CA, 0x3F800000, 0x4F800000};
    static const uint16_t float16[] = {0x7E00, 0xFE00, 0x7C00, 0xFC00, 0x0000, 0x8000,
                                       0x7BFF, 0xFBFF, 0x0001, 0x3C00, 0x7C01, 0x03FF};
    static const uint64_t float64[] = {0x7FF8000000000000, 0xFFF0000000000000, 0x7FF0000000000000, 0x8000000000000000,
                                       0x7FEFFFFFFFFFFFFF, 0x0000000000000001, 0x3FF0000000000000, 0x47EFFFFFE0000000};
    static const uint64_t integers[] = {0,
                                        1,
                                        2,
                                        0x7F,
                                        0x80,
                                        0xFF,
                                        0x7FFF,
                                        0x8000,
                                        0xFFFF,
                                        0x7FFFFFFF,
                                        0x80000000,
                                        0xFFFFFFFF,
                                        0x100000000,
                                        0x7FFFFFFFFFFFFFFF,
                                        0x8000000000000000,
                                        0xFFFFFFFFFFFFFFFF};
    if (is_float && element_size == 4) return float32[random % COUNT_OF(float32)];
    if (is_float && element_size == 2) return float16[random % COUNT_OF(float16)];
    if (is_float) return float64[random % COUNT_OF(float64)];
    return integers[random % COUNT_OF(integers)];
}

static void fill_input(region r, DML_TENSOR_DATA_TYPE type, uint8_t style, uint64_t* state) {
    uint32_t element_size = dmlDataTypeSize(type);
    bool is_float = type == DML_TENSOR_DATA_TYPE_FLOAT32 || type == DML_TENSOR_DATA_TYPE_FLOAT16 ||
                    type == DML_TENSOR_DATA_TYPE_FLOAT64;
    if (element_size == 0 || style % 4 == 1) { /* raw random bytes */
        for (uint64_t i = 0; i < r.size; i++)
            r.base[i] = (uint8_t)fuzz_splitmix64(state);
        return;
    }
    for (uint64_t i = 0; i + element_size <= r.size; i += element_size) {
        uint64_t random = fuzz_splitmix64(state);
        bool special = style % 4 == 2 || (style % 4 == 3 && random % 8 == 0);
        uint64_t bits = special ? special_bits(element_size, is_float, random >> 8) : plain_bits(type, random);
        memcpy(r.base + i, &bits, element_size); /* little-endian: the low bytes */
    }
}

/* Marks the bytes of every element of t bound at start. */
static void mark_addressed(uint8_t* mask, const pool* p, const tensor_info* t, const uint8_t* start) {
    for (uint64_t index = 0; index < t->elements; index++) {
        uint64_t offset = 0, rest = index;
        for (uint32_t i = t->rank; i-- > 0;) {
            offset += rest % t->sizes[i] * t->strides[i];
            rest /= t->sizes[i];
        }
        uint64_t byte = offset * t->element_size;
        FUZZ_CHECK(start >= p->bytes && (uint64_t)(start - p->bytes) + byte + t->element_size <= p->size,
                   "%s: an accepted binding addresses memory outside the harness's pool", t->field);
        memset(mask + (start - p->bytes) + byte, 1, t->element_size);
    }
}

/* ---- Bindings ---- */

/* A list of bindings: the descs are contiguous, as libdml takes them. */
typedef struct binding_list {
    DML_BINDING_DESC descs[MAX_BINDINGS];
    DML_BUFFER_BINDING buffers[MAX_BINDINGS];
    DML_BUFFER_ARRAY_BINDING arrays[MAX_BINDINGS];
} binding_list;

static void bind_buffer(binding_list* list, uint32_t i, uint8_t* base, uint64_t offset, uint64_t size) {
    list->buffers[i] = (DML_BUFFER_BINDING){base, offset, size};
    list->descs[i] = (DML_BINDING_DESC){DML_BINDING_TYPE_BUFFER, &list->buffers[i]};
}

static void bind_none(binding_list* list, uint32_t i) {
    memset(&list->buffers[i], 0, sizeof list->buffers[i]);
    list->descs[i] = (DML_BINDING_DESC){DML_BINDING_TYPE_NONE, NULL};
}

/* Entry i of list: region `own` (or NONE when nothing must be bound there),
 * or a fuzzed variation. Every variation claims only memory of the pool's
 * regions, but one that claims a range wrapping around the address space
 * (libdml must reject it). Returns whether the entry is the canonical one. */
static bool make_binding(fuzz_input* in, binding_list* list, uint32_t i, const pool* p, uint32_t own, bool bound) {
    const region* r = &p->regions[own];
    if (bound)
        bind_buffer(list, i, r->base, 0, r->size);
    else
        bind_none(list, i);
    uint8_t mode = fuzz_u8(in) % 16, value = fuzz_u8(in);
    switch (mode) {
    case 8: bind_none(list, i); break;
    case 9: list->descs[i] = (DML_BINDING_DESC){DML_BINDING_TYPE_BUFFER, NULL}; break;
    case 10: bind_buffer(list, i, NULL, 0, r->size); break;
    case 11: { /* an offset, aligned to 16 or only to 4 */
        uint64_t offset = value % 2 ? 4u * (value / 2 % 16) : 16u * (value / 2 % 8);
        if (offset > r->size) offset = r->size;
        bind_buffer(list, i, r->base, offset, r->size - offset);
        break;
    }
    case 12: { /* a smaller size */
        uint64_t less = 4u * (1 + value % 16);
        bind_buffer(list, i, r->base, 0, less < r->size ? r->size - less : 0);
        break;
    }
    case 13: { /* another region: aliasing */
        const region* other = &p->regions[value % p->region_count];
        uint64_t offset = 16u * (value / 16 % 4);
        if (offset > other->size) offset = other->size;
        bind_buffer(list, i, other->base, offset, other->size - offset);
        break;
    }
    case 14: { /* a misaligned address */
        uint64_t delta = 1 + value % 7;
        if (delta <= r->size) bind_buffer(list, i, r->base + delta, 0, r->size - delta);
        break;
    }
    case 15:
        bind_buffer(list, i, r->base, 0, r->size);
        switch (value % 4) {
        case 0:
            list->arrays[i] = (DML_BUFFER_ARRAY_BINDING){1, &list->buffers[i]};
            list->descs[i] = (DML_BINDING_DESC){DML_BINDING_TYPE_BUFFER_ARRAY, &list->arrays[i]};
            break;
        case 1: list->descs[i].Type = (DML_BINDING_TYPE)(3 + value / 4); break;
        case 2: list->buffers[i].Offset = UINT64_MAX - 15; break; /* Buffer + Offset wraps */
        default: bind_none(list, i); break;
        }
        break;
    default: return true;
    }
    return false;
}

/* A binding count: mostly right, sometimes one more or one less, or a NULL
 * array (the arrays have room for one more). */
static UINT binding_count(fuzz_input* in, UINT count, bool* null_array, bool* canonical) {
    uint8_t mode = fuzz_u8(in) % 16;
    *null_array = mode == 13 && count > 0;
    *canonical &= mode < 13;
    if (mode == 15) return count + 1;
    if (mode == 14 && count > 0) return count - 1;
    return count;
}

/* ---- One run ---- */

/* A problem the CUDA backend does not implement: E_NOTIMPL there. */
static bool not_implemented_on_cuda(HRESULT status) { return backend == DML_BACKEND_CUDA && status == E_NOTIMPL; }

static void check_failure(HRESULT status, const char* function, const char* name, const char* message) {
    size_t length = strlen(name);
    FUZZ_CHECK(status == E_INVALIDARG || not_implemented_on_cuda(status), "%s returned %s", function,
               dmlStatusName(status));
    FUZZ_CHECK(strncmp(message, name, length) == 0 && message[length] == ':',
               "%s's message does not begin with '%s:': %s", function, name, message);
    FUZZ_CHECK(strstr(message, "(null)") == NULL, "%s's message prints a NULL string: %s", function, message);
}

typedef struct range {
    uintptr_t begin, end;
} range;

static bool overlap(range a, range b) { return a.begin < b.end && b.begin < a.end; }

/* The bytes [Buffer + Offset, + bytes) of an accepted BUFFER binding. */
static range bound_range(const DML_BUFFER_BINDING* buffer, uint64_t bytes) {
    uintptr_t begin = (uintptr_t)buffer->Buffer + (uintptr_t)buffer->Offset;
    return (range){begin, begin + bytes};
}

typedef struct slots {
    const tensor_info* info[2][MAX_BINDINGS]; /* [0] inputs, [1] outputs; NULL: no tensor field */
    uint32_t region[2][MAX_BINDINGS];
    uint32_t count[2];
} slots;

/* "byte 12 of the region of OutputTensor", or a guard byte of the pool. */
static void describe_byte(const slots* s, const pool* p, uint64_t byte, char* text, size_t capacity) {
    const uint8_t* address = p->bytes + byte;
    for (uint32_t r = 0; r < p->region_count; r++) {
        const region* reg = &p->regions[r];
        if (address < reg->base || address >= reg->base + reg->size) continue;
        const char* what = r + 1 == p->region_count ? "the spare region" : "the persistent resource";
        for (uint32_t kind = 0; kind < 2; kind++)
            for (uint32_t i = 0; i < s->count[kind]; i++)
                if (s->region[kind][i] == r) what = s->info[kind][i] ? s->info[kind][i]->field : "an unused slot";
        snprintf(text, capacity, "byte %llu of the region of %s", (unsigned long long)(address - reg->base), what);
        return;
    }
    snprintf(text, capacity, "guard byte %llu of the pool", (unsigned long long)byte);
}

/* After a successful call: every changed byte is marked in mask. */
static void check_changes(const slots* s, const pool* p, const uint8_t* before, const uint8_t* after,
                          const uint8_t* mask, const char* what) {
    for (uint64_t i = 0; i < p->size; i++) {
        if (before[i] == after[i] || mask[i]) continue;
        char where[128];
        describe_byte(s, p, i, where, sizeof where);
        FUZZ_CHECK(false, "%s changed %s (0x%02x to 0x%02x), which it must not write", what, where, before[i],
                   after[i]);
    }
}

static bool slot_bound(const slots* s, uint32_t kind, uint32_t i) {
    const tensor_info* ti = s->info[kind][i];
    return ti != NULL && ti->present && !(kind == 0 && ti->owned);
}

/* Dispatch with bindings, then checks what it wrote; returns its status. */
static HRESULT dispatch(DMLCompiledOperator* compiled, const DML_DISPATCH_BINDINGS* bindings, const slots* s, pool* p,
                        uint8_t* before, uint8_t* after, uint8_t* mask, uint64_t persistent_size,
                        uint64_t temporary_size, const char* name) {
    memcpy(before, p->bytes, p->size);
    HRESULT status = pool_dispatch(p, compiled, bindings);
    memcpy(after, p->bytes, p->size);
    if (fuzz_verbose()) fprintf(stderr, "dmlDispatch: %s %s\n", dmlStatusName(status), pool_call_message);
    if (FAILED(status)) {
        check_failure(status, "dmlDispatch", name, pool_call_message);
        FUZZ_CHECK(memcmp(before, after, p->size) == 0, "a failed dmlDispatch wrote to its buffers");
        return status;
    }
    /* Accepted: no output overlaps an input, another output or the persistent resource (spec §6.4). */
    range inputs[MAX_BINDINGS], outputs[MAX_BINDINGS];
    uint32_t input_ranges = 0, output_ranges = 0;
    for (uint32_t kind = 0; kind < 2; kind++)
        for (uint32_t i = 0; i < s->count[kind]; i++) {
            if (!slot_bound(s, kind, i)) continue;
            const DML_BINDING_DESC* desc = kind ? &bindings->Outputs[i] : &bindings->Inputs[i];
            FUZZ_CHECK(desc->Type == DML_BINDING_TYPE_BUFFER && desc->Desc != NULL, "accepted a binding of type %u",
                       (unsigned)desc->Type);
            range r = bound_range(desc->Desc, s->info[kind][i]->total_bytes);
            if (kind)
                outputs[output_ranges++] = r;
            else
                inputs[input_ranges++] = r;
        }
    if (persistent_size > 0) inputs[input_ranges++] = bound_range(bindings->PersistentResource.Desc, persistent_size);
    for (uint32_t o = 0; o < output_ranges; o++) {
        for (uint32_t i = 0; i < input_ranges; i++)
            FUZZ_CHECK(!overlap(outputs[o], inputs[i]), "accepted an output that overlaps an input");
        for (uint32_t other = o + 1; other < output_ranges; other++)
            FUZZ_CHECK(!overlap(outputs[o], outputs[other]), "accepted two overlapping outputs");
    }
    /* The workspace is the dispatch's alone, and its contents are nobody's concern. */
    if (temporary_size > 0) {
        range temporary = bound_range(bindings->TemporaryResource.Desc, temporary_size);
        for (uint32_t i = 0; i < input_ranges; i++)
            FUZZ_CHECK(!overlap(temporary, inputs[i]), "accepted a temporary resource that overlaps an input");
        for (uint32_t o = 0; o < output_ranges; o++)
            FUZZ_CHECK(!overlap(temporary, outputs[o]), "accepted a temporary resource that overlaps an output");
        uint64_t offset = (uint64_t)(temporary.begin - (uintptr_t)p->bytes);
        memcpy(after + offset, before + offset, temporary_size);
    }
    /* Written: only the addressed elements of the outputs. */
    memset(mask, 0, p->size);
    for (uint32_t i = 0; i < s->count[1]; i++) {
        if (!slot_bound(s, 1, i)) continue;
        const DML_BUFFER_BINDING* buffer = bindings->Outputs[i].Desc;
        mark_addressed(mask, p, s->info[1][i], (const uint8_t*)buffer->Buffer + buffer->Offset);
    }
    check_changes(s, p, before, after, mask, "dmlDispatch");
    return status;
}

static void run_operator(fuzz_input* in, DMLDevice* device, DMLCompiledOperator* compiled, const char* name,
                         const tensor_info* info, uint32_t tensor_count, uint32_t input_count, uint32_t output_count,
                         uint64_t persistent_size, uint64_t temporary_size) {
    /* Regions: input slots, output slots, the persistent resource, a spare
     * one, the temporary resource. */
    slots s;
    memset(&s, 0, sizeof s);
    s.count[0] = input_count;
    s.count[1] = output_count;
    uint64_t sizes[MAX_BINDINGS + 3];
    uint32_t region_count = 0;
    for (uint32_t kind = 0; kind < 2; kind++)
        for (uint32_t i = 0; i < s.count[kind]; i++) {
            for (uint32_t t = 0; t < tensor_count; t++)
                if (info[t].is_output == (kind == 1) && info[t].slot == i) s.info[kind][i] = &info[t];
            const tensor_info* ti = s.info[kind][i];
            s.region[kind][i] = region_count;
            /* An OWNED_BY_DML input declared larger than the harness's
             * regions gets a region (and a binding) smaller than it says. */
            sizes[region_count++] = ti && ti->present ? capped(ti->total_bytes) + 16u * (fuzz_u8(in) % 4) : 64;
        }
    uint32_t persistent_region = region_count, spare_region = region_count + 1, temporary_region = region_count + 2;
    /* A persistent resource larger than the harness's regions is bound
     * with the region's size: too small, so initialize and dispatch must
     * refuse it. */
    uint64_t persistent_bound = capped(persistent_size);
    sizes[region_count++] = persistent_bound + 256;
    sizes[region_count++] = 256;
    sizes[region_count++] = temporary_size + 256;
    pool p;
    pool_layout(&p, device, sizes, region_count);

    uint64_t random_state = fuzz_u64(in);
    for (uint32_t i = 0; i < input_count; i++)
        if (s.info[0][i] && s.info[0][i]->present)
            fill_input(p.regions[s.region[0][i]], s.info[0][i]->type, fuzz_u8(in), &random_state);
    for (uint32_t i = 0; i < output_count; i++)
        memset(p.regions[s.region[1][i]].base, OUTPUT_FILL, p.regions[s.region[1][i]].size);

    uint8_t* before = malloc(p.size);
    uint8_t* after = malloc(p.size);
    uint8_t* mask = calloc(p.size, 1);
    uint8_t* first = malloc(p.size);
    if (before == NULL || after == NULL || mask == NULL || first == NULL) abort();

    /* Initialization: the OWNED_BY_DML inputs are copied into the persistent resource. */
    bool canonical = persistent_bound == persistent_size;
    binding_list init;
    for (uint32_t i = 0; i < input_count; i++)
        if (s.info[0][i] && s.info[0][i]->present && s.info[0][i]->total_bytes > region_cap()) canonical = false;
    for (uint32_t i = 0; i < input_count; i++)
        canonical &= make_binding(in, &init, i, &p, s.region[0][i],
                                  s.info[0][i] && s.info[0][i]->present && s.info[0][i]->owned);
    bool null_array = false;
    UINT init_count = binding_count(in, input_count, &null_array, &canonical);
    for (uint32_t i = input_count; i < init_count; i++)
        bind_none(&init, i);
    binding_list persistent;
    bind_none(&persistent, 0);
    uint8_t persistent_mode = fuzz_u8(in) % 8;
    if (persistent_size > 0 && persistent_mode < 6)
        bind_buffer(&persistent, 0, p.regions[persistent_region].base, 0, persistent_bound);
    else if (persistent_size > 0 && persistent_mode == 6)
        bind_buffer(&persistent, 0, p.regions[persistent_region].base, 16, persistent_bound); /* misaligned */
    else if (persistent_size == 0 && persistent_mode == 7)
        bind_buffer(&persistent, 0, p.regions[spare_region].base, 0, 256); /* not wanted */
    canonical &= persistent_mode < 6;
    memcpy(before, p.bytes, p.size);
    HRESULT status = pool_initialize(&p, compiled, init_count, null_array ? NULL : init.descs, persistent.descs);
    memcpy(after, p.bytes, p.size);
    if (fuzz_verbose()) fprintf(stderr, "dmlInitializeOperator: %s %s\n", dmlStatusName(status), pool_call_message);
    if (FAILED(status)) {
        FUZZ_CHECK(!canonical || not_implemented_on_cuda(status), "the canonical initialization failed");
        check_failure(status, "dmlInitializeOperator", name, pool_call_message);
        FUZZ_CHECK(memcmp(before, after, p.size) == 0, "a failed dmlInitializeOperator wrote to its buffers");
    } else {
        memset(mask, 0, p.size);
        if (persistent_size > 0) memset(mask + (p.regions[persistent_region].base - p.bytes), 1, persistent_size);
        check_changes(&s, &p, before, after, mask, "dmlInitializeOperator");
    }
    bool initialized = SUCCEEDED(status);

    /* Dispatch. */
    binding_list inputs, outputs, temporary;
    for (uint32_t i = 0; i < input_count; i++)
        canonical &= make_binding(in, &inputs, i, &p, s.region[0][i], slot_bound(&s, 0, i));
    for (uint32_t i = 0; i < output_count; i++)
        canonical &= make_binding(in, &outputs, i, &p, s.region[1][i], slot_bound(&s, 1, i));
    bool inputs_null = false, outputs_null = false;
    UINT dispatch_inputs = binding_count(in, input_count, &inputs_null, &canonical);
    UINT dispatch_outputs = binding_count(in, output_count, &outputs_null, &canonical);
    for (uint32_t i = input_count; i < dispatch_inputs; i++)
        bind_none(&inputs, i);
    for (uint32_t i = output_count; i < dispatch_outputs; i++)
        bind_none(&outputs, i);
    persistent_mode = fuzz_u8(in) % 8;
    bind_none(&persistent, 0);
    if (persistent_size > 0 && persistent_mode < 5)
        bind_buffer(&persistent, 0, p.regions[persistent_region].base, 0, persistent_bound);
    else if (persistent_size > 0 && persistent_mode == 5)
        bind_buffer(&persistent, 0, p.regions[persistent_region].base, 0, persistent_bound - 4); /* too small */
    else if (persistent_size > 0 && persistent_mode == 6)
        bind_buffer(&persistent, 0, p.regions[persistent_region].base, 16, persistent_bound); /* misaligned */
    else if (persistent_size == 0 && persistent_mode == 7)
        bind_buffer(&persistent, 0, p.regions[spare_region].base, 0, 256); /* not wanted */
    canonical &= persistent_mode < 5;
    bind_none(&temporary, 0);
    uint8_t temporary_mode = fuzz_u8(in) % 16;
    if (temporary_size > 0 && temporary_mode < 13) {
        bind_buffer(&temporary, 0, p.regions[temporary_region].base, 0, temporary_size);
    } else if (temporary_size > 0 && temporary_mode == 13) {
        bind_buffer(&temporary, 0, p.regions[temporary_region].base, 0, temporary_size - 1); /* too small */
        canonical = false;
    } else if (temporary_size > 0 && temporary_mode == 14) {
        bind_buffer(&temporary, 0, p.regions[temporary_region].base, 64, temporary_size); /* misaligned */
        canonical = false;
    } else if (temporary_size > 0 || temporary_mode == 15) {
        /* Unbound though needed, or bound though TemporaryResourceSize is 0. */
        if (temporary_size == 0) bind_buffer(&temporary, 0, p.regions[spare_region].base, 0, 256);
        canonical = false;
    }
    DML_DISPATCH_BINDINGS bindings = {dispatch_inputs,    inputs_null ? NULL : inputs.descs,
                                      dispatch_outputs,   outputs_null ? NULL : outputs.descs,
                                      temporary.descs[0], persistent.descs[0]};
    status = dispatch(compiled, &bindings, &s, &p, before, after, mask, persistent_size, temporary_size, name);
    FUZZ_CHECK(SUCCEEDED(status) || !(canonical && initialized) || not_implemented_on_cuda(status),
               "the canonical dispatch failed");
    if (SUCCEEDED(status)) {
        /* Again with every output byte inverted first (inputs unchanged: no
         * input overlaps an output): the same bytes, all of them written. */
        memcpy(first, after, p.size);
        for (uint64_t i = 0; i < p.size; i++)
            p.bytes[i] = mask[i] ? (uint8_t)~before[i] : before[i];
        status = dispatch(compiled, &bindings, &s, &p, before, after, mask, persistent_size, temporary_size, name);
        FUZZ_CHECK(status == S_OK, "the same dispatch failed the second time");
        for (uint64_t i = 0; i < p.size; i++) {
            if (!mask[i] || first[i] == after[i]) continue;
            char where[128];
            describe_byte(&s, &p, i, where, sizeof where);
            FUZZ_CHECK(false,
                       "%s differs between two dispatches over different output contents (0x%02x, then 0x%02x): "
                       "not written, or read before written",
                       where, first[i], after[i]);
        }
    }
    free(first);
    free(mask);
    free(after);
    free(before);
    pool_free(&p);
}

/* The device: mostly valid (one or two threads: kernels that split small
 * problems, ROI align's gradients, do so with two; ROI align's sample limit
 * from 1 to its maximum), sometimes invalid: a ThreadCount past
 * DML_MAX_THREAD_COUNT (up to 2^32 - 1) or a RoiAlignMaxSamplesPerAxis past
 * DML_ROI_ALIGN_MAX_SAMPLES_PER_AXIS, which dmlCreateDevice must refuse.
 * Valid thread counts above two would start that many threads per input:
 * they are left to the tests. The device is of the fuzzed backend, but for
 * an invalid ThreadCount (a CPU field): that refusal is checked on the CPU. */
static DML_DEVICE_DESC device_desc(fuzz_input* in, bool* valid) {
    static const UINT samples_per_axis[] = {0, 0, 1, 16, 256, DML_ROI_ALIGN_MAX_SAMPLES_PER_AXIS};
    static const UINT bad_thread_counts[] = {
        DML_MAX_THREAD_COUNT + 1, 32768, 65536, 0x7FFFFFFFu, 0x80000000u, 0xFFFFFFFFu};
    DML_DEVICE_DESC desc;
    memset(&desc, 0, sizeof desc);
    uint8_t mode = fuzz_u8(in);
    *valid = mode < 224;
    desc.Backend = backend;
    desc.ThreadCount = 1 + mode % 2;
    if (*valid) {
        desc.RoiAlignMaxSamplesPerAxis = samples_per_axis[mode / 2 % COUNT_OF(samples_per_axis)];
    } else if (mode < 240) {
        uint32_t random = fuzz_u32(in);
        desc.Backend = DML_BACKEND_CPU;
        desc.ThreadCount = mode % 2 ? bad_thread_counts[random % COUNT_OF(bad_thread_counts)]
                                    : DML_MAX_THREAD_COUNT + 1 + random % (UINT32_MAX - DML_MAX_THREAD_COUNT);
    } else {
        uint32_t random = fuzz_u32(in);
        desc.RoiAlignMaxSamplesPerAxis =
            DML_ROI_ALIGN_MAX_SAMPLES_PER_AXIS + 1 + random % (UINT32_MAX - DML_ROI_ALIGN_MAX_SAMPLES_PER_AXIS);
    }
    return desc;
}

/* Creates the device of desc, or checks that an invalid desc is refused and
 * creates a valid one of the fuzzed backend (of one thread) instead. */
static DMLDevice* create_device(DML_DEVICE_DESC desc, bool valid) {
    DMLDevice* device = NULL;
    HRESULT status = dmlCreateDevice(&desc, &device);
    if (fuzz_verbose())
        fprintf(stderr, "dmlCreateDevice (ThreadCount %u, RoiAlignMaxSamplesPerAxis %u): %s %s\n", desc.ThreadCount,
                desc.RoiAlignMaxSamplesPerAxis, dmlStatusName(status), dmlGetLastErrorMessage());
    if (valid) {
        FUZZ_CHECK(status == S_OK && device != NULL, "dmlCreateDevice failed");
        return device;
    }
    const char* message = dmlGetLastErrorMessage();
    const char* field = desc.ThreadCount > DML_MAX_THREAD_COUNT ? "ThreadCount" : "RoiAlignMaxSamplesPerAxis";
    FUZZ_CHECK(status == E_INVALIDARG && device == NULL, "dmlCreateDevice accepted %s %u", field,
               desc.ThreadCount > DML_MAX_THREAD_COUNT ? desc.ThreadCount : desc.RoiAlignMaxSamplesPerAxis);
    FUZZ_CHECK(strncmp(message, "dmlCreateDevice: ", 17) == 0 && strstr(message, field) != NULL,
               "dmlCreateDevice's message does not name %s: %s", field, message);
    DML_DEVICE_DESC fallback;
    memset(&fallback, 0, sizeof fallback);
    fallback.Backend = backend;
    fallback.ThreadCount = 1;
    FUZZ_CHECK(dmlCreateDevice(&fallback, &device) == S_OK, "dmlCreateDevice failed");
    return device;
}

static DML_EXECUTION_FLAGS execution_flags(fuzz_input* in, DML_EXECUTION_FLAGS template_flags) {
    uint8_t byte = fuzz_u8(in);
    return byte < 224 ? template_flags : (DML_EXECUTION_FLAGS)(byte % 8);
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    fuzz_input in = {data, size, 0};
    size_t template_count;
    const fuzz_template* templates = fuzz_templates(&template_count);
    const fuzz_template* template = &templates[fuzz_u8(&in) % template_count];
    /* No output of these descriptions has two elements at one address, so
     * results never depend on the thread count. */
    bool device_valid;
    DML_DEVICE_DESC device_desc_fuzzed = device_desc(&in, &device_valid);

    fuzz_arena arena = {NULL};
    description d;
    memset(&d, 0, sizeof d);
    d.schema = template->schema;
    d.arena = &arena;
    d.desc = fuzz_copy_operator(&arena, template->desc);
    for (size_t i = 0; i < d.schema->field_count && d.tensor_count < MAX_TENSORS; i++) {
        const dmlrun_field* field = &d.schema->fields[i];
        if (!dmlrun_field_is_tensor(field->kind)) continue;
        tensor_field* tensor = &d.tensors[d.tensor_count++];
        tensor->field = field;
        tensor->is_output = !dmlrun_field_is_input(field->kind);
        tensor->slot = tensor->is_output ? d.output_count++ : d.input_count++;
    }
    mutate(&in, &d);
    DML_EXECUTION_FLAGS flags = execution_flags(&in, template->flags);

    tensor_info info[MAX_TENSORS];
    bool well_formed = describe_tensors(&d, info);
    UINT samples_per_axis = device_valid ? device_desc_fuzzed.RoiAlignMaxSamplesPerAxis : 0;
    bool small =
        well_formed && small_enough(info, d.tensor_count) && roi_align_within_budget(&d, info, samples_per_axis);
    bool persistent_overflows = well_formed && persistent_size_overflows(info, d.tensor_count);

    DMLDevice* device = create_device(device_desc_fuzzed, device_valid);
    const char* name = d.schema->name;
    if (fuzz_verbose()) {
        fprintf(stderr, "template %s, execution flags 0x%x\n", template->name, (unsigned)flags);
        fuzz_print_operator(d.desc);
    }
    uint64_t checksum = fuzz_arena_checksum(&arena);
    DMLOperator* op = NULL;
    HRESULT status = dmlCreateOperator(device, d.desc, &op);
    FUZZ_CHECK(fuzz_arena_checksum(&arena) == checksum, "dmlCreateOperator changed the description");
    fuzz_arena_release(&arena); /* the operator holds deep copies only */
    if (fuzz_verbose()) fprintf(stderr, "dmlCreateOperator: %s %s\n", dmlStatusName(status), dmlGetLastErrorMessage());
    if (FAILED(status)) {
        check_failure(status, "dmlCreateOperator", name, dmlGetLastErrorMessage());
    } else {
        FUZZ_CHECK(well_formed, "dmlCreateOperator accepted a malformed tensor");
        DMLCompiledOperator* compiled = NULL;
        status = dmlCompileOperator(device, op, flags, &compiled);
        if (fuzz_verbose())
            fprintf(stderr, "dmlCompileOperator: %s %s\n", dmlStatusName(status), dmlGetLastErrorMessage());
        dmlReleaseOperator(op); /* the compiled operator holds its own copy */
        if (persistent_overflows) {
            FUZZ_CHECK(FAILED(status) && compiled == NULL, "dmlCompileOperator accepted a persistent resource "
                                                           "of more than 2^64 bytes");
            check_failure(status, "dmlCompileOperator", name, dmlGetLastErrorMessage());
        } else if (not_implemented_on_cuda(status)) {
            check_failure(status, "dmlCompileOperator", name, dmlGetLastErrorMessage());
        } else {
            FUZZ_CHECK(status == S_OK, "dmlCompileOperator failed");
            DML_BINDING_PROPERTIES properties;
            FUZZ_CHECK(dmlGetBindingProperties(compiled, &properties) == S_OK, "dmlGetBindingProperties failed");
            if (small)
                run_operator(&in, device, compiled, name, info, d.tensor_count, d.input_count, d.output_count,
                             properties.PersistentResourceSize, properties.TemporaryResourceSize);
            dmlReleaseCompiledOperator(compiled);
        }
    }
    FUZZ_CHECK(dmlGetDeviceRemovedReason(device) == S_OK, "the device was removed");
    dmlReleaseDevice(device);
    return 0;
}

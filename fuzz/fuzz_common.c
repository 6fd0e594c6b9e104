/* What the fuzz targets share: the decision stream, the arena, and the
 * description codec driven by dmlrun's operator schemas (fuzz_common.h). */
#include "fuzz_common.h"

#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define COUNT_OF(array) (sizeof array / sizeof array[0])

void fuzz_fail(const char* file, int line, const char* condition, const char* format, ...) {
    va_list args;
    va_start(args, format);
    fprintf(stderr, "\n==libdml fuzz== %s:%d: invariant violated (%s): ", file, line, condition);
    vfprintf(stderr, format, args);
    fprintf(stderr, "\n==libdml fuzz== last libdml message: %s\n", dmlGetLastErrorMessage());
    va_end(args);
    abort();
}

/* ---- Reading ---- */

uint8_t fuzz_u8(fuzz_input* in) { return in->position < in->size ? in->data[in->position++] : 0; }

uint32_t fuzz_u32(fuzz_input* in) {
    uint32_t value = 0;
    for (int i = 0; i < 4; i++)
        value |= (uint32_t)fuzz_u8(in) << (8 * i);
    return value;
}

uint64_t fuzz_u64(fuzz_input* in) {
    uint64_t low = fuzz_u32(in);
    return low | (uint64_t)fuzz_u32(in) << 32;
}

static const uint32_t boundary_uints[] = {
    0,     1,     2,     3,     4,          5,          7,          8,          16,         255,        256,
    65535, 65536, 65537, 46341, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFE, 0xFFFFFFFF, 0x10000000, 0x40000000, 1000000};

uint32_t fuzz_uint(fuzz_input* in) {
    switch (fuzz_u8(in) % 4) {
    case 0: return fuzz_u32(in);
    case 1: return fuzz_u8(in) % 17;
    case 2: return boundary_uints[fuzz_u8(in) % COUNT_OF(boundary_uints)];
    default: return fuzz_u8(in);
    }
}

static float interesting_float(uint8_t index) {
    static const float values[] = {0.0f,     -0.0f,   1.0f,   -1.0f,   0.5f,     2.0f,     0.25f,  -0.5f,
                                   100.0f,   1e-3f,   1e10f,  -1e10f,  1e30f,    -1e30f,   1e-30f, FLT_MAX,
                                   -FLT_MAX, FLT_MIN, 1e-45f, -1e-45f, 65504.0f, 65520.0f, 3.0f,   -3.0f};
    uint8_t count = (uint8_t)COUNT_OF(values);
    if (index % (count + 3) == count) return NAN;
    if (index % (count + 3) == count + 1) return INFINITY;
    if (index % (count + 3) == count + 2) return -INFINITY;
    return values[index % (count + 3)];
}

float fuzz_float(fuzz_input* in) {
    if (fuzz_u8(in) % 2 == 1) return interesting_float(fuzz_u8(in));
    uint32_t bits = fuzz_u32(in);
    float value;
    memcpy(&value, &bits, sizeof value);
    return value;
}

/* ---- Writing ---- */

void fuzz_put_u8(fuzz_output* out, uint8_t value) {
    if (out->size == out->capacity) {
        out->capacity = out->capacity ? 2 * out->capacity : 256;
        out->data = realloc(out->data, out->capacity);
        if (out->data == NULL) abort();
    }
    out->data[out->size++] = value;
}

void fuzz_put_u32(fuzz_output* out, uint32_t value) {
    for (int i = 0; i < 4; i++)
        fuzz_put_u8(out, (uint8_t)(value >> (8 * i)));
}

void fuzz_put_u64(fuzz_output* out, uint64_t value) {
    fuzz_put_u32(out, (uint32_t)value);
    fuzz_put_u32(out, (uint32_t)(value >> 32));
}

void fuzz_put_uint(fuzz_output* out, uint32_t value) {
    fuzz_put_u8(out, 0);
    fuzz_put_u32(out, value);
}

void fuzz_put_float(fuzz_output* out, float value) {
    uint32_t bits;
    memcpy(&bits, &value, sizeof bits);
    fuzz_put_u8(out, 0);
    fuzz_put_u32(out, bits);
}

void fuzz_output_free(fuzz_output* out) {
    free(out->data);
    memset(out, 0, sizeof *out);
}

/* ---- Arena ---- */

struct fuzz_block {
    fuzz_block* next;
    size_t size;
    max_align_t data[];
};

void* fuzz_alloc(fuzz_arena* arena, size_t size) {
    fuzz_block* block = calloc(1, sizeof(fuzz_block) + (size ? size : 1));
    if (block == NULL) abort();
    block->size = size;
    block->next = arena->blocks;
    arena->blocks = block;
    return block->data;
}

uint64_t fuzz_arena_checksum(const fuzz_arena* arena) {
    uint64_t hash = 0xcbf29ce484222325ull; /* FNV-1a */
    for (const fuzz_block* block = arena->blocks; block != NULL; block = block->next) {
        const uint8_t* bytes = (const uint8_t*)block->data;
        for (size_t i = 0; i < block->size; i++)
            hash = (hash ^ bytes[i]) * 0x100000001b3ull;
        hash = (hash ^ block->size) * 0x100000001b3ull;
    }
    return hash;
}

void fuzz_arena_release(fuzz_arena* arena) {
    while (arena->blocks != NULL) {
        fuzz_block* next = arena->blocks->next;
        memset(arena->blocks->data, 0xAB, arena->blocks->size);
        free(arena->blocks);
        arena->blocks = next;
    }
}

/* ---- Schemas ---- */

const dmlrun_op_schema* fuzz_schema_of_type(uint32_t type) {
    for (size_t i = 0; i < dmlrun_op_schema_count(); i++)
        if ((uint32_t)dmlrun_op_schema_at(i)->type == type) return dmlrun_op_schema_at(i);
    return NULL;
}

const DML_TENSOR_DESC* fuzz_tensor_field(const void* desc, const dmlrun_field* field) {
    const DML_TENSOR_DESC* tensor;
    memcpy(&tensor, fuzz_field_at(desc, field), sizeof tensor);
    return tensor;
}

static const dmlrun_field* find_field(const dmlrun_op_schema* schema, const char* name) {
    for (size_t i = 0; i < schema->field_count; i++)
        if (strcmp(schema->fields[i].name, name) == 0) return &schema->fields[i];
    return NULL;
}

uint32_t fuzz_array_count(const dmlrun_op_schema* schema, const void* desc, const dmlrun_field* array) {
    const dmlrun_field* count_field = find_field(schema, array->count_field);
    uint32_t count = 0;
    if (count_field != NULL) memcpy(&count, fuzz_field_at(desc, count_field), sizeof count);
    return count;
}

void fuzz_store_u32(void* slot, uint32_t value) { memcpy(slot, &value, sizeof value); }
void fuzz_store_pointer(void* slot, const void* pointer) { memcpy(slot, &pointer, sizeof pointer); }
uint32_t fuzz_load_u32(const void* slot) {
    uint32_t value;
    memcpy(&value, slot, sizeof value);
    return value;
}
const void* fuzz_load_pointer(const void* slot) {
    const void* pointer;
    memcpy(&pointer, slot, sizeof pointer);
    return pointer;
}

/* ---- Tensors ---- */

static const uint32_t huge_counts[] = {32, 255, FUZZ_MAX_ARRAY, FUZZ_MAX_ARRAY + 1, 0x80000000u, 0xFFFFFFFFu};

static UINT* decode_uint_array(fuzz_input* in, fuzz_arena* arena, uint32_t count) {
    if (count > FUZZ_MAX_ARRAY) return NULL;
    if (fuzz_u8(in) % 32 == 31) return NULL;
    UINT* values = fuzz_alloc(arena, (count ? count : 1) * sizeof(UINT));
    for (uint32_t i = 0; i < count; i++)
        values[i] = fuzz_uint(in);
    return values;
}

static void encode_uint_array(fuzz_output* out, const UINT* values, uint32_t count) {
    if (count > FUZZ_MAX_ARRAY) return;
    if (values == NULL) {
        fuzz_put_u8(out, 31);
        return;
    }
    fuzz_put_u8(out, 0);
    for (uint32_t i = 0; i < count; i++)
        fuzz_put_uint(out, values[i]);
}

static const DML_TENSOR_DESC* decode_tensor(fuzz_input* in, fuzz_arena* arena) {
    uint8_t mode = fuzz_u8(in) % 16;
    if (mode == 15) return NULL;
    DML_TENSOR_DESC* tensor = fuzz_alloc(arena, sizeof *tensor);
    uint8_t type_mode = fuzz_u8(in) % 8;
    tensor->Type = type_mode < 6 ? DML_TENSOR_TYPE_BUFFER
                                 : (DML_TENSOR_TYPE)(type_mode == 6 ? DML_TENSOR_TYPE_INVALID : fuzz_u32(in));
    if (mode == 14) return tensor; /* Desc NULL */
    DML_BUFFER_TENSOR_DESC* buffer = fuzz_alloc(arena, sizeof *buffer);
    tensor->Desc = buffer;

    uint8_t byte = fuzz_u8(in);
    buffer->DataType = (DML_TENSOR_DATA_TYPE)(byte < 240 ? byte % 16 : byte == 255 ? fuzz_u32(in) : byte);
    byte = fuzz_u8(in);
    buffer->Flags = (DML_TENSOR_FLAGS)(byte < 240 ? byte % 3 : fuzz_u32(in));
    byte = fuzz_u8(in);
    uint32_t rank = byte < 240 ? byte % 10 : byte < 250 ? byte - 230u : huge_counts[(byte - 250) % 6];
    buffer->DimensionCount = rank;
    UINT* sizes = decode_uint_array(in, arena, rank);
    buffer->Sizes = sizes;

    UINT* strides = NULL;
    uint8_t strides_mode = fuzz_u8(in) % 4;
    switch (strides_mode) {
    case 0: break; /* packed */
    case 1: strides = decode_uint_array(in, arena, rank); break;
    case 2:   /* packed strides with pitches */
    case 3: { /* packed strides with some zeroed (broadcast) */
        if (sizes == NULL) break;
        strides = fuzz_alloc(arena, (rank ? rank : 1) * sizeof(UINT));
        uint8_t pattern = fuzz_u8(in);
        uint64_t stride = 1;
        for (uint32_t i = rank; i-- > 0;) {
            bool marked = (pattern >> (i % 8)) & 1;
            strides[i] = (uint32_t)stride;
            if (marked && strides_mode == 3) strides[i] = 0;
            stride *= (uint64_t)sizes[i] + (marked && strides_mode == 2 ? 1 + fuzz_u8(in) % 4 : 0);
            if (stride > UINT32_MAX) stride = 1;
        }
        break;
    }
    }
    buffer->Strides = strides;

    uint64_t minimum = DMLCalcBufferTensorSize(buffer->DataType, rank, sizes, strides);
    switch (fuzz_u8(in) % 8) {
    case 0:
    case 7: buffer->TotalTensorSizeInBytes = minimum; break;
    case 1: buffer->TotalTensorSizeInBytes = fuzz_u64(in); break;
    case 2: buffer->TotalTensorSizeInBytes = minimum + 4ull * fuzz_u8(in); break;
    case 3: buffer->TotalTensorSizeInBytes = minimum - 4; break; /* 0 - 4 wraps: huge */
    case 4: buffer->TotalTensorSizeInBytes = minimum + 1 + fuzz_u8(in) % 3; break;
    case 5: buffer->TotalTensorSizeInBytes = 0; break;
    default: buffer->TotalTensorSizeInBytes = UINT64_MAX - fuzz_u8(in); break;
    }
    byte = fuzz_u8(in);
    buffer->GuaranteedBaseOffsetAlignment = byte == 0    ? 0
                                            : byte <= 32 ? 1u << (byte - 1)
                                            : byte < 255 ? byte
                                                         : fuzz_u32(in);
    return tensor;
}

static void encode_tensor(fuzz_output* out, const DML_TENSOR_DESC* tensor) {
    if (tensor == NULL) {
        fuzz_put_u8(out, 15);
        return;
    }
    fuzz_put_u8(out, tensor->Desc ? 0 : 14);
    if (tensor->Type == DML_TENSOR_TYPE_BUFFER) {
        fuzz_put_u8(out, 0);
    } else {
        fuzz_put_u8(out, 7);
        fuzz_put_u32(out, (uint32_t)tensor->Type);
    }
    if (tensor->Desc == NULL) return;
    const DML_BUFFER_TENSOR_DESC* buffer = tensor->Desc;
    fuzz_put_u8(out, 255);
    fuzz_put_u32(out, (uint32_t)buffer->DataType);
    fuzz_put_u8(out, 255);
    fuzz_put_u32(out, (uint32_t)buffer->Flags);
    uint32_t rank = buffer->DimensionCount;
    fuzz_put_u8(out, (uint8_t)(rank < 10 ? rank : 230 + rank)); /* ranks above 19 are not encoded */
    encode_uint_array(out, buffer->Sizes, rank);
    if (buffer->Strides == NULL) {
        fuzz_put_u8(out, 0);
    } else {
        fuzz_put_u8(out, 1);
        encode_uint_array(out, buffer->Strides, rank);
    }
    uint64_t minimum = DMLCalcBufferTensorSize(buffer->DataType, rank, buffer->Sizes, buffer->Strides);
    if (buffer->TotalTensorSizeInBytes == minimum) {
        fuzz_put_u8(out, 0);
    } else {
        fuzz_put_u8(out, 1);
        fuzz_put_u64(out, buffer->TotalTensorSizeInBytes);
    }
    uint32_t alignment = buffer->GuaranteedBaseOffsetAlignment;
    if (alignment == 0) {
        fuzz_put_u8(out, 0);
    } else if ((alignment & (alignment - 1)) == 0) {
        fuzz_put_u8(out, (uint8_t)(__builtin_ctz(alignment) + 1));
    } else {
        fuzz_put_u8(out, 255);
        fuzz_put_u32(out, alignment);
    }
}

/* ---- Description structs ---- */

static void* decode_struct(fuzz_input* in, fuzz_arena* arena, const dmlrun_op_schema* schema, int depth);

static const DML_OPERATOR_DESC* decode_activation(fuzz_input* in, fuzz_arena* arena, int depth) {
    uint32_t type;
    switch (fuzz_u8(in) % 4) {
    case 0: return NULL;
    case 1: { /* a fusable activation */
        size_t fusable = 0;
        for (size_t i = 0; i < dmlrun_op_schema_count(); i++)
            fusable += dmlrun_op_schema_at(i)->fusable;
        size_t pick = fuzz_u8(in) % fusable;
        type = 0;
        for (size_t i = 0; i < dmlrun_op_schema_count(); i++)
            if (dmlrun_op_schema_at(i)->fusable && pick-- == 0) type = dmlrun_op_schema_at(i)->type;
        break;
    }
    case 2: type = fuzz_u32(in); break;
    default: type = dmlrun_op_schema_at(fuzz_u8(in) % dmlrun_op_schema_count())->type; break;
    }
    DML_OPERATOR_DESC* activation = fuzz_alloc(arena, sizeof *activation);
    activation->Type = (DML_OPERATOR_TYPE)type;
    if (fuzz_u8(in) % 8 == 7) return activation; /* Desc NULL */
    const dmlrun_op_schema* schema = fuzz_schema_of_type(type);
    activation->Desc =
        schema ? decode_struct(in, arena, schema, depth + 1) : fuzz_alloc(arena, FUZZ_UNKNOWN_DESC_BYTES);
    return activation;
}

static void* decode_struct(fuzz_input* in, fuzz_arena* arena, const dmlrun_op_schema* schema, int depth) {
    void* desc = fuzz_alloc(arena, schema->desc_size);
    /* Counts first: the arrays are allocated by them. */
    for (size_t i = 0; i < schema->field_count; i++)
        if (schema->fields[i].kind == DMLRUN_FIELD_COUNT)
            fuzz_store_u32(fuzz_field_at(desc, &schema->fields[i]), fuzz_uint(in));
    for (size_t i = 0; i < schema->field_count; i++) {
        const dmlrun_field* field = &schema->fields[i];
        void* slot = fuzz_field_at(desc, field);
        switch (field->kind) {
        case DMLRUN_FIELD_INPUT_TENSOR:
        case DMLRUN_FIELD_OPTIONAL_INPUT_TENSOR:
        case DMLRUN_FIELD_OUTPUT_TENSOR:
        case DMLRUN_FIELD_OPTIONAL_OUTPUT_TENSOR: fuzz_store_pointer(slot, decode_tensor(in, arena)); break;
        case DMLRUN_FIELD_UINT:
        case DMLRUN_FIELD_BOOL: fuzz_store_u32(slot, fuzz_uint(in)); break;
        case DMLRUN_FIELD_FLOAT: {
            float value = fuzz_float(in);
            memcpy(slot, &value, sizeof value);
            break;
        }
        case DMLRUN_FIELD_ENUM:
            if (fuzz_u8(in) % 2 == 0)
                fuzz_store_u32(slot, fuzz_u32(in));
            else
                fuzz_store_u32(slot,
                               (uint32_t)field->enumeration->values[fuzz_u8(in) % field->enumeration->count].value);
            break;
        case DMLRUN_FIELD_UINT_ARRAY:
            fuzz_store_pointer(slot, decode_uint_array(in, arena, fuzz_array_count(schema, desc, field)));
            break;
        case DMLRUN_FIELD_COUNT: break;
        case DMLRUN_FIELD_SIZE_2D: {
            DML_SIZE_2D size = {fuzz_uint(in), fuzz_uint(in)};
            memcpy(slot, &size, sizeof size);
            break;
        }
        case DMLRUN_FIELD_FUSED_ACTIVATION:
            if (depth == 0) fuzz_store_pointer(slot, decode_activation(in, arena, depth));
            break;
        }
    }
    return desc;
}

static void encode_struct(fuzz_output* out, const dmlrun_op_schema* schema, const void* desc, int depth) {
    for (size_t i = 0; i < schema->field_count; i++)
        if (schema->fields[i].kind == DMLRUN_FIELD_COUNT)
            fuzz_put_uint(out, fuzz_load_u32(fuzz_field_at(desc, &schema->fields[i])));
    for (size_t i = 0; i < schema->field_count; i++) {
        const dmlrun_field* field = &schema->fields[i];
        const void* slot = fuzz_field_at(desc, field);
        switch (field->kind) {
        case DMLRUN_FIELD_INPUT_TENSOR:
        case DMLRUN_FIELD_OPTIONAL_INPUT_TENSOR:
        case DMLRUN_FIELD_OUTPUT_TENSOR:
        case DMLRUN_FIELD_OPTIONAL_OUTPUT_TENSOR: encode_tensor(out, fuzz_load_pointer(slot)); break;
        case DMLRUN_FIELD_UINT:
        case DMLRUN_FIELD_BOOL: fuzz_put_uint(out, fuzz_load_u32(slot)); break;
        case DMLRUN_FIELD_FLOAT: {
            float value;
            memcpy(&value, slot, sizeof value);
            fuzz_put_float(out, value);
            break;
        }
        case DMLRUN_FIELD_ENUM:
            fuzz_put_u8(out, 0);
            fuzz_put_u32(out, fuzz_load_u32(slot));
            break;
        case DMLRUN_FIELD_UINT_ARRAY:
            encode_uint_array(out, fuzz_load_pointer(slot), fuzz_array_count(schema, desc, field));
            break;
        case DMLRUN_FIELD_COUNT: break;
        case DMLRUN_FIELD_SIZE_2D: {
            DML_SIZE_2D size;
            memcpy(&size, slot, sizeof size);
            fuzz_put_uint(out, size.Width);
            fuzz_put_uint(out, size.Height);
            break;
        }
        case DMLRUN_FIELD_FUSED_ACTIVATION: {
            if (depth > 0) break;
            const DML_OPERATOR_DESC* activation = fuzz_load_pointer(slot);
            if (activation == NULL) {
                fuzz_put_u8(out, 0);
                break;
            }
            fuzz_put_u8(out, 2);
            fuzz_put_u32(out, (uint32_t)activation->Type);
            const dmlrun_op_schema* activation_schema = fuzz_schema_of_type((uint32_t)activation->Type);
            fuzz_put_u8(out, activation->Desc && activation_schema ? 0 : 7);
            if (activation->Desc && activation_schema)
                encode_struct(out, activation_schema, activation->Desc, depth + 1);
            break;
        }
        }
    }
}

const DML_OPERATOR_DESC* fuzz_decode_operator(fuzz_input* in, fuzz_arena* arena, const dmlrun_op_schema** schema) {
    *schema = NULL;
    if (fuzz_u8(in) % 8 == 7) return NULL;
    uint32_t type;
    switch (fuzz_u8(in) % 4) {
    case 0: type = fuzz_u32(in); break;
    case 3: type = fuzz_u8(in); break;
    default: type = dmlrun_op_schema_at(fuzz_u8(in) % dmlrun_op_schema_count())->type; break;
    }
    DML_OPERATOR_DESC* desc = fuzz_alloc(arena, sizeof *desc);
    desc->Type = (DML_OPERATOR_TYPE)type;
    *schema = fuzz_schema_of_type(type);
    if (fuzz_u8(in) % 16 == 15) return desc; /* Desc NULL */
    desc->Desc = *schema ? decode_struct(in, arena, *schema, 0) : fuzz_alloc(arena, FUZZ_UNKNOWN_DESC_BYTES);
    return desc;
}

void fuzz_encode_operator(fuzz_output* out, const DML_OPERATOR_DESC* desc) {
    fuzz_put_u8(out, 0);
    fuzz_put_u8(out, 0);
    fuzz_put_u32(out, (uint32_t)desc->Type);
    const dmlrun_op_schema* schema = fuzz_schema_of_type((uint32_t)desc->Type);
    fuzz_put_u8(out, desc->Desc && schema ? 0 : 15);
    if (desc->Desc && schema) encode_struct(out, schema, desc->Desc, 0);
}

/* ---- Deep copies ---- */

static const UINT* copy_uints(fuzz_arena* arena, const UINT* values, uint32_t count) {
    if (values == NULL) return NULL;
    UINT* copy = fuzz_alloc(arena, (count ? count : 1) * sizeof(UINT));
    memcpy(copy, values, count * sizeof(UINT));
    return copy;
}

static const DML_TENSOR_DESC* copy_tensor(fuzz_arena* arena, const DML_TENSOR_DESC* tensor) {
    if (tensor == NULL) return NULL;
    DML_TENSOR_DESC* copy = fuzz_alloc(arena, sizeof *copy);
    *copy = *tensor;
    if (tensor->Desc == NULL) return copy;
    const DML_BUFFER_TENSOR_DESC* buffer = tensor->Desc;
    DML_BUFFER_TENSOR_DESC* buffer_copy = fuzz_alloc(arena, sizeof *buffer_copy);
    *buffer_copy = *buffer;
    buffer_copy->Sizes = copy_uints(arena, buffer->Sizes, buffer->DimensionCount);
    buffer_copy->Strides = copy_uints(arena, buffer->Strides, buffer->DimensionCount);
    copy->Desc = buffer_copy;
    return copy;
}

static void* copy_struct(fuzz_arena* arena, const dmlrun_op_schema* schema, const void* desc) {
    void* copy = fuzz_alloc(arena, schema->desc_size);
    memcpy(copy, desc, schema->desc_size);
    for (size_t i = 0; i < schema->field_count; i++) {
        const dmlrun_field* field = &schema->fields[i];
        void* slot = fuzz_field_at(copy, field);
        if (dmlrun_field_is_tensor(field->kind)) {
            fuzz_store_pointer(slot, copy_tensor(arena, fuzz_load_pointer(slot)));
        } else if (field->kind == DMLRUN_FIELD_UINT_ARRAY) {
            fuzz_store_pointer(slot, copy_uints(arena, fuzz_load_pointer(slot), fuzz_array_count(schema, desc, field)));
        } else if (field->kind == DMLRUN_FIELD_FUSED_ACTIVATION && fuzz_load_pointer(slot) != NULL) {
            fuzz_store_pointer(slot, fuzz_copy_operator(arena, fuzz_load_pointer(slot)));
        }
    }
    return copy;
}

DML_OPERATOR_DESC* fuzz_copy_operator(fuzz_arena* arena, const DML_OPERATOR_DESC* desc) {
    DML_OPERATOR_DESC* copy = fuzz_alloc(arena, sizeof *copy);
    *copy = *desc;
    const dmlrun_op_schema* schema = fuzz_schema_of_type((uint32_t)desc->Type);
    if (desc->Desc != NULL && schema != NULL) copy->Desc = copy_struct(arena, schema, desc->Desc);
    return copy;
}

uint64_t fuzz_splitmix64(uint64_t* state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* ---- Printing ---- */

bool fuzz_verbose(void) {
    static int verbose = -1;
    if (verbose < 0) {
        const char* value = getenv("DML_FUZZ_VERBOSE");
        verbose = value != NULL && value[0] != '\0' && strcmp(value, "0") != 0;
    }
    return verbose;
}

static void print_uints(const char* name, const UINT* values, uint32_t count) {
    fprintf(stderr, "%s", name);
    if (values == NULL) {
        fprintf(stderr, "NULL");
        return;
    }
    fputc('{', stderr);
    for (uint32_t i = 0; i < count && i < 16; i++)
        fprintf(stderr, "%s%u", i ? "," : "", values[i]);
    fprintf(stderr, "%s}", count > 16 ? ",..." : "");
}

static void print_struct(const dmlrun_op_schema* schema, const void* desc, const char* indent) {
    for (size_t i = 0; i < schema->field_count; i++) {
        const dmlrun_field* field = &schema->fields[i];
        const void* slot = fuzz_field_at(desc, field);
        fprintf(stderr, "%s%s: ", indent, field->name);
        if (dmlrun_field_is_tensor(field->kind)) {
            const DML_TENSOR_DESC* tensor = fuzz_load_pointer(slot);
            if (tensor == NULL || tensor->Desc == NULL) {
                fprintf(stderr, "%s\n", tensor ? "{Desc NULL}" : "NULL");
                continue;
            }
            const DML_BUFFER_TENSOR_DESC* buffer = tensor->Desc;
            const char* type = dmlDataTypeName(buffer->DataType);
            fprintf(stderr, "Type %u %s flags %u rank %u ", (unsigned)tensor->Type, type ? type : "?",
                    (unsigned)buffer->Flags, buffer->DimensionCount);
            uint32_t rank = buffer->DimensionCount <= FUZZ_MAX_ARRAY ? buffer->DimensionCount : 0;
            print_uints("sizes ", buffer->Sizes, rank);
            print_uints(" strides ", buffer->Strides, rank);
            fprintf(stderr, " total %llu alignment %u\n", (unsigned long long)buffer->TotalTensorSizeInBytes,
                    buffer->GuaranteedBaseOffsetAlignment);
            continue;
        }
        switch (field->kind) {
        case DMLRUN_FIELD_FLOAT: {
            float value;
            memcpy(&value, slot, sizeof value);
            fprintf(stderr, "%.9g\n", (double)value);
            break;
        }
        case DMLRUN_FIELD_UINT_ARRAY:
            print_uints("", fuzz_load_pointer(slot), fuzz_array_count(schema, desc, field));
            fputc('\n', stderr);
            break;
        case DMLRUN_FIELD_SIZE_2D: {
            DML_SIZE_2D size;
            memcpy(&size, slot, sizeof size);
            fprintf(stderr, "{Width %u, Height %u}\n", size.Width, size.Height);
            break;
        }
        case DMLRUN_FIELD_FUSED_ACTIVATION: {
            const DML_OPERATOR_DESC* activation = fuzz_load_pointer(slot);
            const dmlrun_op_schema* activation_schema =
                activation ? fuzz_schema_of_type((uint32_t)activation->Type) : NULL;
            if (activation == NULL) {
                fprintf(stderr, "NULL\n");
            } else {
                fprintf(stderr, "type %u (%s)%s\n", (unsigned)activation->Type,
                        activation_schema ? activation_schema->name : "?", activation->Desc ? "" : " Desc NULL");
                if (activation->Desc && activation_schema) print_struct(activation_schema, activation->Desc, "    ");
            }
            break;
        }
        default: fprintf(stderr, "%u\n", fuzz_load_u32(slot)); break;
        }
    }
}

void fuzz_print_operator(const DML_OPERATOR_DESC* desc) {
    if (desc == NULL) {
        fprintf(stderr, "operator: NULL\n");
        return;
    }
    const dmlrun_op_schema* schema = fuzz_schema_of_type((uint32_t)desc->Type);
    fprintf(stderr, "operator: type %u (%s)%s\n", (unsigned)desc->Type, schema ? schema->name : "?",
            desc->Desc ? "" : " Desc NULL");
    if (schema != NULL && desc->Desc != NULL) print_struct(schema, desc->Desc, "  ");
}

/* ---- Devices ---- */

static const DML_FEATURE_LEVEL feature_levels[] = {
    DML_FEATURE_LEVEL_1_0, DML_FEATURE_LEVEL_2_0, DML_FEATURE_LEVEL_2_1, DML_FEATURE_LEVEL_3_0, DML_FEATURE_LEVEL_3_1,
    DML_FEATURE_LEVEL_4_0, DML_FEATURE_LEVEL_4_1, DML_FEATURE_LEVEL_5_0, DML_FEATURE_LEVEL_5_1, DML_FEATURE_LEVEL_5_2,
    DML_FEATURE_LEVEL_6_0, DML_FEATURE_LEVEL_6_1, DML_FEATURE_LEVEL_6_2, DML_FEATURE_LEVEL_6_3, DML_FEATURE_LEVEL_6_4};

DML_FEATURE_LEVEL fuzz_feature_level(fuzz_input* in) {
    uint8_t byte = fuzz_u8(in);
    if (byte == 0) return (DML_FEATURE_LEVEL)0;
    if (byte >= 240) return (DML_FEATURE_LEVEL)fuzz_u32(in);
    return feature_levels[(byte - 1) % COUNT_OF(feature_levels)];
}

void fuzz_put_feature_level(fuzz_output* out, DML_FEATURE_LEVEL level) {
    for (size_t i = 0; i < COUNT_OF(feature_levels); i++)
        if (feature_levels[i] == level) {
            fuzz_put_u8(out, (uint8_t)(i + 1));
            return;
        }
    if (level == 0) {
        fuzz_put_u8(out, 0);
        return;
    }
    fuzz_put_u8(out, 255);
    fuzz_put_u32(out, (uint32_t)level);
}

#!/usr/bin/env bash
# dmlrun on malformed models: every one must end with a clean error — a
# non-zero exit status below 128 (no signal), no sanitizer report, and a
# message that names the place in the model (and the rule).
#
# usage: test_dmlrun_errors.sh DMLRUN WORKDIR
set -u
dmlrun=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
work=$2
rm -rf "$work"
mkdir -p "$work"
cases=0
failures=0

fail() {
  echo "FAIL [$1]: $2"
  sed 's/^/    /' "$work/$1.err" | head -20
  failures=$((failures + 1))
}

# expect_error NAME [--status N] NEEDLE...: runs dmlrun on $work/NAME.json
# (or with the arguments in $args when set) and checks the error.
expect_error() {
  local name=$1 wanted_status=1
  shift
  if [ "${1:-}" = "--status" ]; then wanted_status=$2; shift 2; fi
  cases=$((cases + 1))
  if [ -n "${args+set}" ]; then
    "$dmlrun" "${args[@]}" >"$work/$name.out" 2>"$work/$name.err"
  else
    "$dmlrun" "$work/$name.json" >"$work/$name.out" 2>"$work/$name.err"
  fi
  local status=$?
  unset args
  if [ $status -ge 128 ]; then fail "$name" "killed by signal $((status - 128))"; return; fi
  if grep -qE "Sanitizer|runtime error:" "$work/$name.err" "$work/$name.out"; then fail "$name" "sanitizer report"; return; fi
  if [ $status -ne "$wanted_status" ]; then fail "$name" "exit status $status, expected $wanted_status"; return; fi
  local needle
  for needle in "$@"; do
    if ! grep -qF -- "$needle" "$work/$name.err"; then fail "$name" "the message lacks '$needle'"; return; fi
  done
}

# expect_warning NAME NEEDLE...: as DxDispatch does, dmlrun runs the model
# (exit status 0), here with a warning that names the place.
expect_warning() {
  local name=$1
  shift
  expect_error "$name" --status 0 "$@"
}

# model NAME RESOURCES DISPATCHABLES COMMANDS: writes a model from its parts.
model() {
  printf '{\n"resources": {%s},\n"dispatchables": {%s},\n"commands": [%s]\n}\n' "$2" "$3" "$4" >"$work/$1.json"
}

X='"x": {"initialValuesDataType": "FLOAT32", "initialValues": [1, 2, 3, 2, 4, 2, 5, 6, 7]}'
Y='"y": {"initialValuesDataType": "FLOAT32", "initialValues": {"valueCount": 4, "value": 0}}'
RESOURCES="$X, $Y"
TENSORS='"InputTensor": {"DataType": "FLOAT32", "Sizes": [1, 1, 3, 3]}, "OutputTensor": {"DataType": "FLOAT32", "Sizes": [1, 1, 2, 2]}'
WINDOW='"Strides": [1, 1], "WindowSize": [2, 2], "StartPadding": [0, 0], "EndPadding": [0, 0], "Dilations": [1, 1]'
pool() { printf '"pool": {"type": "DML_OPERATOR_MAX_POOLING2", "desc": {%s}}' "$1"; }
POOL=$(pool "$TENSORS, $WINDOW")
DISPATCH='{"type": "dispatch", "dispatchable": "pool", "bindings": {"InputTensor": "x", "OutputTensor": "y"}}'
PRINT='{"type": "print", "resource": "y"}'

# The base model runs: the cases below each break one thing.
model valid "$RESOURCES" "$POOL" "$DISPATCH, $PRINT"
if ! "$dmlrun" "$work/valid.json" >"$work/valid.out" 2>&1; then
  echo "FAIL: the valid base model does not run"; cat "$work/valid.out"; exit 1
fi

# ---- JSON syntax: line and column ----
printf '{\n  "resources": {\n    "x": {"initialValuesDataType": "FLOAT32",\n' >"$work/truncated.json"
expect_error truncated "truncated.json:4:1" "unexpected end"
printf '{\n  "resources": {}\n  "dispatchables": {},\n  "commands": []\n}\n' >"$work/missing_comma.json"
expect_error missing_comma "missing_comma.json:3:3" "syntax error near '\"dispatchables\""
printf '{"resources": {}, "dispatchables": {}, "commands": []} extra' >"$work/trailing_garbage.json"
expect_error trailing_garbage "trailing_garbage.json:1:56" "syntax error near 'extra'"
printf '{"resources": {}, /* unterminated comment' >"$work/open_comment.json"
expect_error open_comment "open_comment.json:1:20" "syntax error"
printf '{"resources": {},\0 "dispatchables": {}, "commands": []}' >"$work/nul_byte.json"
expect_error nul_byte "nul_byte.json:1:18" "NUL"
: >"$work/empty.json"
expect_error empty "empty.json:1:1" "unexpected end"
printf '%0.s[' $(seq 1 5000) >"$work/deep.json"
expect_error deep "deep.json:1:" "syntax error"
printf '[1, 2]' >"$work/not_object.json"
expect_error not_object "a model is an object"
printf '{"resources": {}, "dispatchables": {}}' >"$work/no_commands.json"
expect_error no_commands "commands: required member"

# ---- Files and the command line ----
args=("$work/does_not_exist.json"); expect_error missing_model "cannot read" "does_not_exist.json"
args=("$work"); expect_error model_is_directory "is a directory"
args=("$work/model.onnx"); expect_error onnx_model "model.onnx: ONNX models are not supported"
args=(--threads many); expect_error bad_threads --status 2 "--threads needs a whole number"
args=(--iterations 0); expect_error zero_iterations --status 2 "--iterations must be at least 1"
args=(--backend tpu); expect_error bad_backend --status 2 "--backend is cpu or cuda"
args=(--fast); expect_error unknown_option --status 2 "unknown option '--fast'"
args=(a.json b.json); expect_error two_models --status 2 "one model at a time"
args=(-m a.json b.json); expect_error two_models_m --status 2 "one model at a time"
args=(-i); expect_error missing_value --status 2 "-i needs a value"
args=(-v 3); expect_error timing_verbosity --status 2 "--timing_verbosity needs a whole number from 0 to 2"
args=(-r 0); expect_error zero_repeat --status 2 "--dispatch_repeat must be at least 1"
args=(-a tpu); expect_error bad_adapter --status 2 "--adapter 'tpu' matches no libdml backend"
args=(-z); expect_error unknown_short_option --status 2 "unknown option '-z'"
args=(--max-memory 0); expect_error zero_max_memory --status 2 "--max-memory needs a byte count"
args=(--max-memory 17179869184G); expect_error huge_max_memory --status 2 "--max-memory needs a byte count"
# --max-memory caps all resources together: x (36 bytes) and y (16) take 52.
model memory_cap "$RESOURCES" "$POOL" "$DISPATCH"
args=(--max-memory 51 "$work/memory_cap.json")
expect_error memory_cap "resources.y: 16 bytes would bring the resources to more than --max-memory (51 bytes; 36 taken"
args=(--max-memory=52 "$work/memory_cap.json"); expect_error memory_cap_fits --status 0
args=(--max-memory 1K "$work/memory_cap.json"); expect_error memory_cap_suffix --status 0

# ---- Resources ----
model bad_type '"x": {"initialValuesDataType": "FLOAT33", "initialValues": [1]}' "" ""
expect_error bad_type "resources.x.initialValuesDataType" "'FLOAT33' is not a DML_TENSOR_DATA_TYPE value"
model sub_byte_type '"x": {"initialValuesDataType": "UINT4", "initialValues": [1]}' "" ""
expect_error sub_byte_type "resources.x.initialValuesDataType" "no whole-byte elements"
model no_type '"x": {"initialValues": [1]}' "" ""
expect_error no_type "resources.x.initialValuesDataType" "required"
model no_values '"x": {"initialValuesDataType": "FLOAT32"}' "" ""
expect_error no_values "resources.x.initialValues" "required"
model unknown_resource_field '"x": {"initialValuesDataType": "FLOAT32", "initialValues": [1], "size": 4}' "" ""
expect_warning unknown_resource_field "dmlrun: warning: resources.x.size: unknown field 'size'" "ignored"
model out_of_range '"x": {"initialValuesDataType": "UINT8", "initialValues": [1, 2, 256]}' "" ""
expect_error out_of_range "resources.x.initialValues[2]" "out of the UINT8 range"
model not_a_number '"x": {"initialValuesDataType": "FLOAT32", "initialValues": [1, "abc"]}' "" ""
expect_error not_a_number "resources.x.initialValues[1]" "'abc' is not a number"
model fraction_for_int '"x": {"initialValuesDataType": "INT32", "initialValues": [1.5]}' "" ""
expect_error fraction_for_int "resources.x.initialValues[0]" "must be an integer"
model empty_values '"x": {"initialValuesDataType": "FLOAT32", "initialValues": []}' "" ""
expect_error empty_values "resources.x.initialValues" "at least one value"
model negative_count '"x": {"initialValuesDataType": "FLOAT32", "initialValues": {"valueCount": -3, "value": 0}}' "" ""
expect_error negative_count "resources.x.initialValues.valueCount" "must be >= 0"
model zero_count '"x": {"initialValuesDataType": "FLOAT32", "initialValues": {"valueCount": 0, "value": 0}}' "" ""
expect_error zero_count "resources.x.initialValues.valueCount" "at least one value"
model huge_count '"x": {"initialValuesDataType": "FLOAT32", "initialValues": {"valueCount": 1e15, "value": 0}}' "" ""
expect_error huge_count "resources.x.initialValues" "limit"
model huge_count_string '"x": {"initialValuesDataType": "FLOAT64", "initialValues": {"valueCount": "18446744073709551615", "valueStart": 0, "valueDelta": 1}}' "" ""
expect_error huge_count_string "resources.x.initialValues" "limit"
model huge_random '"x": {"initialValuesDataType": "FLOAT32", "initialValues": {"valueCount": 4294967296, "random": {"distribution": "uniform"}}}' "" ""
expect_error huge_random "resources.x.initialValues" "limit"
model huge_size '"x": {"initialValuesDataType": "FLOAT32", "initialValues": [1], "sizeInBytes": 1000000000000}' "" ""
expect_error huge_size "resources.x.sizeInBytes" "limit"
model small_size '"x": {"initialValuesDataType": "FLOAT32", "initialValues": [1, 2], "sizeInBytes": 4}' "" ""
expect_error small_size "resources.x.sizeInBytes" "is 4 but the initial values need 8 bytes"
model huge_offset '"x": {"initialValuesDataType": "FLOAT32", "initialValues": [1], "initialValuesOffsetInBytes": 1e15}' "" ""
expect_error huge_offset "resources.x.initialValuesOffsetInBytes" "limit"
model negative_offset '"x": {"initialValuesDataType": "FLOAT32", "initialValues": [1], "initialValuesOffsetInBytes": -4}' "" ""
expect_error negative_offset "resources.x.initialValuesOffsetInBytes" "must be >= 0"
model two_initializers '"x": {"initialValuesDataType": "FLOAT32", "initialValues": {"valueCount": 2, "value": 0, "valueStart": 0}}' "" ""
expect_error two_initializers "resources.x.initialValues" "exactly one of"
model no_delta '"x": {"initialValuesDataType": "FLOAT32", "initialValues": {"valueCount": 2, "valueStart": 0}}' "" ""
expect_error no_delta "resources.x.initialValues.valueDelta" "required"
model deferred '"x": {"initialValuesDataType": "FLOAT32", "initialValues": "deferred"}' "" ""
expect_error deferred "resources.x.initialValues" "deferred"
model bad_distribution '"x": {"initialValuesDataType": "FLOAT32", "initialValues": {"valueCount": 2, "random": {"distribution": "poisson"}}}' "" ""
expect_error bad_distribution "resources.x.initialValues.random.distribution" "'poisson'"
model min_above_max '"x": {"initialValuesDataType": "FLOAT32", "initialValues": {"valueCount": 2, "random": {"distribution": "uniform", "min": 2, "max": 1}}}' "" ""
expect_error min_above_max "resources.x.initialValues.random" "min (2) must not be larger than max (1)"
model normal_with_min '"x": {"initialValuesDataType": "FLOAT32", "initialValues": {"valueCount": 2, "random": {"distribution": "normal", "min": 0}}}' "" ""
expect_warning normal_with_min "warning: resources.x.initialValues.random.min: unknown field 'min'"
model duplicate_member '"x": {"initialValuesDataType": "FLOAT32", "initialValuesDataType": "FLOAT16", "initialValues": [1]}' "" ""
expect_error duplicate_member "resources.x.initialValuesDataType" "appears twice"
# Duplicate keys anywhere are errors, the top level's included (cJSON's lookup took the first).
printf '{"resources": {%s}, "dispatchables": {%s}, "commands": [%s], "commands": []}\n' "$RESOURCES" "$POOL" "$DISPATCH" >"$work/duplicate_commands.json"
expect_error duplicate_commands "commands" "'commands' appears twice in the model"
printf '{"resources": {%s, %s}, "dispatchables": {}, "commands": []}\n' "$X" "$X" >"$work/duplicate_resource.json"
expect_error duplicate_resource "resources.x" "'x' appears twice"
# FLOAT16 overflow is an error, as FLOAT32's is (it silently became inf).
model float16_overflow '"h": {"initialValuesDataType": "FLOAT16", "initialValues": [1, 70000]}' "" ""
expect_error float16_overflow "resources.h.initialValues[1]" "out of the FLOAT16 range"
model bad_resource_type '"x": {"type": "texture", "initialValuesDataType": "FLOAT32", "initialValues": [1]}' "" ""
expect_error bad_resource_type "resources.x.type" "'texture'"
model missing_file '"x": {"initialValuesDataType": "FLOAT32", "initialValues": {"sourcePath": "missing.npy"}}' "" ""
expect_error missing_file "resources.x.initialValues.sourcePath" "cannot read" "missing.npy"
# A pipe or a device is refused before it is read (a FIFO would block).
mkfifo "$work/pipe.bin"
model fifo_file '"x": {"initialValuesDataType": "FLOAT32", "initialValues": {"sourcePath": "pipe.bin"}}' "" ""
expect_error fifo_file "resources.x.initialValues.sourcePath" "cannot read" "not a regular file"
model device_file '"x": {"initialValuesDataType": "FLOAT32", "initialValues": {"sourcePath": "/dev/zero"}}' "" ""
args=("$work/device_file.json" --allow-any-path)
expect_error device_file "resources.x.initialValues.sourcePath" "'/dev/zero'" "not a regular file"
printf 'not a numpy file at all' >"$work/garbage.npy"
model garbage_npy '"x": {"initialValuesDataType": "FLOAT32", "initialValues": {"sourcePath": "garbage.npy"}}' "" ""
expect_error garbage_npy "resources.x.initialValues.sourcePath" "not a .npy file"
printf '\x93NUMPY\x01\x00\x76\x00{'"'"'descr'"'"': '"'"'<f4'"'"', '"'"'fortran_order'"'"': True, '"'"'shape'"'"': (2, 2), }' >"$work/fortran.npy"
printf '%*s\n' 59 '' >>"$work/fortran.npy"
head -c 16 /dev/zero >>"$work/fortran.npy"
model fortran_npy '"x": {"initialValuesDataType": "FLOAT32", "initialValues": {"sourcePath": "fortran.npy"}}' "" ""
expect_error fortran_npy "resources.x.initialValues.sourcePath" "fortran_order True is not supported"
printf 'abc' >"$work/three_bytes.bin"
model odd_raw_file '"x": {"initialValuesDataType": "FLOAT32", "initialValues": {"sourcePath": "three_bytes.bin"}}' "" ""
expect_error odd_raw_file "resources.x.initialValues.sourcePath" "not a whole number of FLOAT32 values"
model raw_without_type '"x": {"initialValues": {"sourcePath": "three_bytes.bin"}}' "" ""
expect_error raw_without_type "resources.x.initialValuesDataType" "required for raw files"
model image_file '"x": {"initialValuesDataType": "FLOAT32", "initialValues": {"sourcePath": "cat.png"}}' "" ""
expect_error image_file "resources.x.initialValues.sourcePath" "image files are not supported"
model source_is_directory '"x": {"initialValuesDataType": "FLOAT32", "initialValues": {"sourcePath": "."}}' "" ""
expect_error source_is_directory "resources.x.initialValues.sourcePath" "is a directory"
# A .npy written by dmlrun itself, read back as another type.
model write_int32 '"i": {"initialValuesDataType": "INT32", "initialValues": [1, 2, 3]}' "" \
  '{"type": "writeFile", "resource": "i", "targetPath": "int32.npy"}'
"$dmlrun" "$work/write_int32.json" --output-dir "$work" >/dev/null 2>&1 || echo "FAIL: writing int32.npy"
model npy_type_mismatch '"x": {"initialValuesDataType": "FLOAT32", "initialValues": {"sourcePath": "int32.npy"}}' "" ""
expect_error npy_type_mismatch "resources.x.initialValues.sourcePath" "holds INT32 values but initialValuesDataType is FLOAT32"

# ---- Dispatchables ----
model unknown_operator "$RESOURCES" '"add": {"type": "DML_OPERATOR_ELEMENT_WISE_ADD", "desc": {}}' ""
expect_error unknown_operator "dispatchables.add.type" "'DML_OPERATOR_ELEMENT_WISE_ADD' is not an operator dmlrun supports"
model hlsl "$RESOURCES" '"shader": {"type": "hlsl", "sourcePath": "add.hlsl", "compiler": "dxc", "compilerArgs": []}' ""
expect_error hlsl "dispatchables.shader.type" "'hlsl' dispatchables are not supported"
model onnx "$RESOURCES" '"net": {"type": "onnx", "sourcePath": "model.onnx"}' ""
expect_error onnx "dispatchables.net.type" "'onnx' dispatchables are not supported"
model serialized_graph "$RESOURCES" '"graph": {"type": "dmlSerializedGraph", "sourcePath": "g.dml"}' ""
expect_error serialized_graph "dispatchables.graph.type" "not supported"
model no_operator_type "$RESOURCES" '"pool": {"desc": {}}' ""
expect_error no_operator_type "dispatchables.pool.type" "required"
model dispatchable_not_object "$RESOURCES" '"pool": 7' ""
expect_error dispatchable_not_object "dispatchables.pool" "must be an object"
model unknown_desc_field "$RESOURCES" "$(pool "$TENSORS, $WINDOW, \"WindowSizes\": [2, 2]")" "$DISPATCH, $PRINT"
expect_warning unknown_desc_field "warning: dispatchables.pool.desc.WindowSizes: unknown field 'WindowSizes'" "a DML_MAX_POOLING2_OPERATOR_DESC"
model wrong_case_field "$RESOURCES" "$(pool "$TENSORS, ${WINDOW/WindowSize/windowSize}")" ""
expect_error wrong_case_field "dispatchables.pool.desc.windowSize" "did you mean 'WindowSize'"
model missing_field "$RESOURCES" "$(pool "$TENSORS, ${WINDOW/\"Dilations\": \[1, 1\]/\"DimensionCount\": 2}")" ""
expect_error missing_field "dispatchables.pool.desc.Dilations" "required field is missing"
model array_as_string "$RESOURCES" "$(pool "$TENSORS, ${WINDOW/\[2, 2\]/\"2\"}")" ""
expect_error array_as_string "dispatchables.pool.desc.WindowSize" "must be an array of unsigned integers, not a string"
model negative_window "$RESOURCES" "$(pool "$TENSORS, ${WINDOW/\[2, 2\]/[2, -1]}")" ""
expect_error negative_window "dispatchables.pool.desc.WindowSize[1]" "is -1 but must be >= 0"
model huge_window "$RESOURCES" "$(pool "$TENSORS, ${WINDOW/\[2, 2\]/[2, 4294967296]}")" ""
expect_error huge_window "dispatchables.pool.desc.WindowSize[1]" "must be <= 4294967295"
model lengths_disagree "$RESOURCES" "$(pool "$TENSORS, ${WINDOW/\"EndPadding\": \[0, 0\]/\"EndPadding\": [0, 0, 0]}")" ""
expect_error lengths_disagree "dispatchables.pool.desc.EndPadding" "has 3 elements but Strides has 2"
model count_disagrees "$RESOURCES" "$(pool "$TENSORS, $WINDOW, \"DimensionCount\": 3")" ""
expect_error count_disagrees "dispatchables.pool.desc.DimensionCount" "is 3 but Strides has 2 elements"
model count_negative "$RESOURCES" "$(pool "$TENSORS, $WINDOW, \"DimensionCount\": -2")" ""
expect_error count_negative "dispatchables.pool.desc.DimensionCount" "must be >= 0"
model no_data_type "$RESOURCES" "$(pool "${TENSORS/\"DataType\": \"FLOAT32\", /}, $WINDOW")" ""
expect_error no_data_type "dispatchables.pool.desc.InputTensor.DataType" "required"
model strides_length "$RESOURCES" "$(pool "${TENSORS/\"Sizes\": \[1, 1, 3, 3\]/\"Sizes\": [1, 1, 3, 3], \"Strides\": [9, 3, 1]}, $WINDOW")" ""
expect_error strides_length "dispatchables.pool.desc.InputTensor.Strides" "has 3 elements but Sizes has 4"
model tensor_not_object "$RESOURCES" "$(pool "\"InputTensor\": [1, 1, 3, 3], \"OutputTensor\": null, $WINDOW")" ""
expect_error tensor_not_object "dispatchables.pool.desc.InputTensor" "a tensor must be an object"
model missing_output "$RESOURCES" "$(pool "\"InputTensor\": {\"DataType\": \"FLOAT32\", \"Sizes\": [1, 1, 3, 3]}, \"OutputTensor\": null, $WINDOW")" ""
expect_error missing_output "dispatchables.pool.desc.OutputTensor" "required tensor is missing"
model bad_flags "$RESOURCES" "$(pool "${TENSORS/\"Sizes\": \[1, 1, 3, 3\]/\"Sizes\": [1, 1, 3, 3], \"Flags\": \"OWNED\"}, $WINDOW")" ""
expect_error bad_flags "dispatchables.pool.desc.InputTensor.Flags" "'OWNED' is not a DML_TENSOR_FLAGS value"
model bad_execution_flag "$RESOURCES" "\"pool\": {\"type\": \"MAX_POOLING2\", \"executionFlags\": [\"FAST\"], \"desc\": {$TENSORS, $WINDOW}}" ""
expect_error bad_execution_flag "dispatchables.pool.executionFlags[0]" "'FAST' is not a DML_EXECUTION_FLAGS value"
model libdml_rejects "$RESOURCES" "$(pool "$TENSORS, ${WINDOW/\"Strides\": \[1, 1\]/\"Strides\": [0, 1]}")" "$DISPATCH"
expect_error libdml_rejects "dispatchables.pool.desc" "libdml rejected the description: MAX_POOLING2: Strides[0] is 0" "E_INVALIDARG"
model huge_sizes "$RESOURCES" "$(pool "${TENSORS/\[1, 1, 3, 3\]/[4294967295, 4294967295, 4294967295, 3]}, $WINDOW")" "$DISPATCH"
expect_error huge_sizes "dispatchables.pool.desc" "MAX_POOLING2"
model rank_nine "$RESOURCES" "$(pool "${TENSORS/\[1, 1, 3, 3\]/[1, 1, 1, 1, 1, 1, 1, 3, 3]}, $WINDOW")" "$DISPATCH"
expect_error rank_nine "dispatchables.pool.desc" "MAX_POOLING2"
model empty_window "$RESOURCES" "$(pool "$TENSORS, \"Strides\": [], \"WindowSize\": [], \"StartPadding\": [], \"EndPadding\": [], \"Dilations\": []")" "$DISPATCH"
expect_error empty_window "dispatchables.pool.desc" "MAX_POOLING2"
model owned_without_bindings "$RESOURCES" "$(pool "${TENSORS/\"Sizes\": \[1, 1, 3, 3\]/\"Sizes\": [1, 1, 3, 3], \"Flags\": \"OWNED_BY_DML\"}, $WINDOW")" ""
expect_error owned_without_bindings "dispatchables.pool" "InputTensor is OWNED_BY_DML"
model init_binds_output "$RESOURCES" "\"pool\": {\"type\": \"MAX_POOLING2\", \"bindings\": {\"OutputTensor\": \"y\"}, \"desc\": {$TENSORS, $WINDOW}}" ""
expect_error init_binds_output "dispatchables.pool.bindings.OutputTensor" "only OWNED_BY_DML input tensors are bound at initialization"

# Batch normalization descriptions are built (and checked) by dmlrun before libdml sees them.
BN_TENSORS='"InputTensor": {"DataType": "FLOAT32", "Sizes": [1, 2, 1, 2]}, "ScaleTensor": {"DataType": "FLOAT32", "Sizes": [1, 2, 1, 1]}, "BiasTensor": {"DataType": "FLOAT32", "Sizes": [1, 2, 1, 1]}, "OutputTensor": {"DataType": "FLOAT32", "Sizes": [1, 2, 1, 2]}, "OutputMeanTensor": {"DataType": "FLOAT32", "Sizes": [1, 2, 1, 1]}, "OutputVarianceTensor": {"DataType": "FLOAT32", "Sizes": [1, 2, 1, 1]}, "Epsilon": 0.001'
bn() { printf '"bn": {"type": "BATCH_NORMALIZATION_TRAINING", "desc": {%s, "FusedActivation": %s}}' "$BN_TENSORS" "$1"; }
model not_fusable "$RESOURCES" "$(bn '{"Type": "DML_OPERATOR_MAX_POOLING"}')" ""
expect_error not_fusable "dispatchables.bn.desc.FusedActivation.Type" "'DML_OPERATOR_MAX_POOLING' is not a fusable activation"
model activation_with_tensor "$RESOURCES" "$(bn '{"Type": "ACTIVATION_RELU", "Desc": {"InputTensor": {"DataType": "FLOAT32", "Sizes": [1]}}}')" ""
expect_error activation_with_tensor "dispatchables.bn.desc.FusedActivation.Desc.InputTensor" "must be omitted in a FusedActivation"
model activation_missing_alpha "$RESOURCES" "$(bn '{"Type": "ACTIVATION_LEAKY_RELU"}')" ""
expect_error activation_missing_alpha "dispatchables.bn.desc.FusedActivation.Alpha" "required field is missing"
model activation_unknown_field "$RESOURCES" "$(bn '{"Type": "ACTIVATION_ELU", "Alpha": 1, "Beta": 2}')" ""
expect_warning activation_unknown_field "warning: dispatchables.bn.desc.FusedActivation.Beta: unknown field 'Beta'"
model activation_no_type "$RESOURCES" "$(bn '{"Alpha": 1}')" ""
expect_error activation_no_type "dispatchables.bn.desc.FusedActivation" "needs a \"Type\""
model activation_not_object "$RESOURCES" "$(bn '"RELU"')" ""
expect_error activation_not_object "dispatchables.bn.desc.FusedActivation" "must be an object"
model epsilon_string "$RESOURCES" "\"bn\": {\"type\": \"BATCH_NORMALIZATION_TRAINING\", \"desc\": {${BN_TENSORS/0.001/\"small\"}}}" ""
expect_error epsilon_string "dispatchables.bn.desc.Epsilon" "'small' is not a number"
model epsilon_too_large "$RESOURCES" "\"bn\": {\"type\": \"BATCH_NORMALIZATION_TRAINING\", \"desc\": {${BN_TENSORS/0.001/1e39}}}" ""
expect_error epsilon_too_large "dispatchables.bn.desc.Epsilon" "out of the FLOAT32 range"
ALIGN='"InputTensor": {"DataType": "FLOAT32", "Sizes": [1, 1, 4, 4]}, "ROITensor": {"DataType": "FLOAT32", "Sizes": [1, 4]}, "BatchIndicesTensor": {"DataType": "UINT32", "Sizes": [1]}, "OutputTensor": {"DataType": "FLOAT32", "Sizes": [1, 1, 2, 2]}, "InterpolationMode": "LINEAR", "SpatialScaleX": 1, "SpatialScaleY": 1, "InputPixelOffset": 0.5, "OutputPixelOffset": -0.5, "OutOfBoundsInputValue": 0, "MinimumSamplesPerOutput": 1, "MaximumSamplesPerOutput": 4'
align() { printf '"align": {"type": "ROI_ALIGN1", "desc": {%s, %s}}' "$ALIGN" "$1"; }
model bad_enum "$RESOURCES" "$(align '"ReductionFunction": "MEAN", "AlignRegionsToCorners": false')" ""
expect_error bad_enum "dispatchables.align.desc.ReductionFunction" "'MEAN' is not a DML_REDUCE_FUNCTION value"
model bad_bool "$RESOURCES" "$(align '"ReductionFunction": "AVERAGE", "AlignRegionsToCorners": 2')" ""
expect_error bad_bool "dispatchables.align.desc.AlignRegionsToCorners" "a boolean must be true, false, 0 or 1"
model bad_size_2d "$RESOURCES" '"roi": {"type": "ROI_POOLING", "desc": {"InputTensor": {"DataType": "FLOAT32", "Sizes": [1, 1, 4, 4]}, "ROITensor": {"DataType": "FLOAT32", "Sizes": [1, 1, 1, 5]}, "OutputTensor": {"DataType": "FLOAT32", "Sizes": [1, 1, 2, 2]}, "SpatialScale": 1, "PooledSize": {"Width": 2}}}' ""
expect_error bad_size_2d "dispatchables.roi.desc.PooledSize.Height" "required field is missing"

# ---- Commands and bindings ----
model unknown_command "$RESOURCES" "$POOL" '{"type": "run"}'
expect_error unknown_command "commands[0].type" "'run' is not a command"
model command_not_object "$RESOURCES" "$POOL" '"print"'
expect_error command_not_object "commands[0]" "must be an object"
model unknown_dispatchable "$RESOURCES" "$POOL" '{"type": "dispatch", "dispatchable": "conv", "bindings": {}}'
expect_error unknown_dispatchable "commands[0].dispatchable" "no dispatchable named 'conv'"
model missing_binding "$RESOURCES" "$POOL" '{"type": "dispatch", "dispatchable": "pool", "bindings": {"InputTensor": "x"}}'
expect_error missing_binding "commands[0].bindings" "OutputTensor is required but not bound"
model no_bindings "$RESOURCES" "$POOL" '{"type": "dispatch", "dispatchable": "pool"}'
expect_error no_bindings "commands[0].bindings" "required field is missing"
model unknown_binding_resource "$RESOURCES" "$POOL" '{"type": "dispatch", "dispatchable": "pool", "bindings": {"InputTensor": "z", "OutputTensor": "y"}}'
expect_error unknown_binding_resource "commands[0].bindings.InputTensor" "no resource named 'z'"
model binding_not_tensor "$RESOURCES" "$POOL" '{"type": "dispatch", "dispatchable": "pool", "bindings": {"InputTensor": "x", "OutputTensor": "y", "WindowSize": "x"}}'
expect_error binding_not_tensor "commands[0].bindings.WindowSize" "'WindowSize' is not a tensor field of MAX_POOLING2"
model absent_optional_bound "$RESOURCES" "$POOL" '{"type": "dispatch", "dispatchable": "pool", "bindings": {"InputTensor": "x", "OutputTensor": "y", "OutputIndicesTensor": "y"}}'
expect_error absent_optional_bound "commands[0].bindings.OutputIndicesTensor" "absent from the description"
model binding_too_small "$X, \"y\": {\"initialValuesDataType\": \"FLOAT32\", \"initialValues\": [0, 0, 0]}" "$POOL" "$DISPATCH"
expect_error binding_too_small "commands[0].bindings.OutputTensor" "resource 'y' is too small: OutputTensor needs 16 bytes"
model binding_wrong_type_size "$X, \"y\": {\"initialValuesDataType\": \"FLOAT16\", \"initialValues\": [0, 0, 0, 0]}" "$POOL" "$DISPATCH"
expect_error binding_wrong_type_size "commands[0].bindings.OutputTensor" "too small"
model offset_beyond_end "$RESOURCES" "$POOL" '{"type": "dispatch", "dispatchable": "pool", "bindings": {"InputTensor": {"name": "x", "elementOffset": 100}, "OutputTensor": "y"}}'
expect_error offset_beyond_end "commands[0].bindings.InputTensor" "elementOffset 100 (byte 400) is beyond the end"
model offset_too_far "$RESOURCES" "$POOL" '{"type": "dispatch", "dispatchable": "pool", "bindings": {"InputTensor": {"name": "x", "elementOffset": 4}, "OutputTensor": "y"}}'
expect_error offset_too_far "commands[0].bindings.InputTensor" "too small"
model offset_overflow "$RESOURCES" "$POOL" '{"type": "dispatch", "dispatchable": "pool", "bindings": {"InputTensor": {"name": "x", "elementOffset": 4611686018427387904}, "OutputTensor": "y"}}'
expect_error offset_overflow "commands[0].bindings.InputTensor.elementOffset" "2^53"
model offset_unaligned "$X, \"y\": {\"initialValuesDataType\": \"FLOAT32\", \"initialValues\": {\"valueCount\": 8, \"value\": 0}}" "$POOL" '{"type": "dispatch", "dispatchable": "pool", "bindings": {"InputTensor": "x", "OutputTensor": {"name": "y", "elementOffset": 1}}}'
expect_error offset_unaligned "commands[0]" "dispatching 'pool' failed" "OutputTensor"
model binding_no_name "$RESOURCES" "$POOL" '{"type": "dispatch", "dispatchable": "pool", "bindings": {"InputTensor": {"elementOffset": 0}, "OutputTensor": "y"}}'
expect_error binding_no_name "commands[0].bindings.InputTensor.name" "required"
model binding_array "$RESOURCES" "$POOL" '{"type": "dispatch", "dispatchable": "pool", "bindings": {"InputTensor": ["x", "x"], "OutputTensor": "y"}}'
expect_error binding_array "commands[0].bindings.InputTensor" "binds 2 resources"
model binding_number "$RESOURCES" "$POOL" '{"type": "dispatch", "dispatchable": "pool", "bindings": {"InputTensor": 3, "OutputTensor": "y"}}'
expect_error binding_number "commands[0].bindings.InputTensor" "must be a resource name"
model binding_twice "$RESOURCES" "$POOL" '{"type": "dispatch", "dispatchable": "pool", "bindings": {"InputTensor": "x", "InputTensor": "x", "OutputTensor": "y"}}'
expect_error binding_twice "commands[0].bindings.InputTensor" "appears twice"
model overlap "$X, \"y\": {\"initialValuesDataType\": \"FLOAT32\", \"initialValues\": {\"valueCount\": 9, \"value\": 0}}" "$POOL" '{"type": "dispatch", "dispatchable": "pool", "bindings": {"InputTensor": "y", "OutputTensor": "y"}}'
expect_error overlap "commands[0]" "dispatching 'pool' failed" "overlaps"
model print_unknown "$RESOURCES" "$POOL" '{"type": "print", "resource": "nothing"}'
expect_error print_unknown "commands[0].resource" "no resource named 'nothing'"
model print_no_resource "$RESOURCES" "$POOL" '{"type": "print"}'
expect_error print_no_resource "commands[0].resource" "required"
model expect_count "$RESOURCES" "$POOL" "$DISPATCH, {\"type\": \"expect\", \"resource\": \"y\", \"values\": [4, 4, 6]}"
expect_error expect_count "commands[1].values" "has 3 values but resource 'y' has 4"
model expect_both "$RESOURCES" "$POOL" '{"type": "expect", "resource": "y", "values": [1, 1, 1, 1], "sourcePath": "y.npy"}'
expect_error expect_both "commands[0]" "exactly one of"
model expect_negative_tolerance "$RESOURCES" "$POOL" '{"type": "expect", "resource": "y", "values": [0, 0, 0, 0], "absoluteTolerance": -1}'
expect_error expect_negative_tolerance "commands[0].absoluteTolerance" "must be >= 0"
model expect_missing_file "$RESOURCES" "$POOL" '{"type": "expect", "resource": "y", "sourcePath": "nowhere.npy"}'
expect_error expect_missing_file "commands[0].sourcePath" "cannot read"
model expect_mismatch "$RESOURCES" "$POOL" "$DISPATCH, {\"type\": \"expect\", \"resource\": \"y\", \"values\": [4, 5, \"nan\", 7], \"absoluteTolerance\": 0.5}"
expect_error expect_mismatch "commands[1]: expect 'y': 2 of 4 values differ" "[1] got 4, expected 5 (error 1)" "[2] got 6, expected nan" "largest error inf at [2]" "1 expect command failed"
model write_shape "$RESOURCES" "$POOL" '{"type": "writeFile", "resource": "y", "targetPath": "y.npy", "shape": [2, 3]}'
expect_error write_shape "commands[0].shape" "has 6 elements but resource 'y' has 4"
model write_no_directory "$RESOURCES" "$POOL" '{"type": "writeFile", "resource": "y", "targetPath": "no/such/dir/y.npy"}'
expect_error write_no_directory "commands[0].targetPath" "cannot write"

# ---- Confinement: a model reads inside its directory and writes inside the
# output directory; links, FIFOs, the model and its inputs are refused ----
model source_absolute '"x": {"initialValuesDataType": "UINT8", "initialValues": {"sourcePath": "/etc/passwd"}}' "" ""
expect_error source_absolute "sourcePath" "'/etc/passwd' leaves the model's directory" "--allow-any-path"
model source_parent '"x": {"initialValuesDataType": "UINT8", "initialValues": {"sourcePath": "sub/../../x.bin"}}' "" ""
expect_error source_parent "sourcePath" "leaves the model's directory"
ln -sf /etc/passwd "$work/passwd_link"
model source_link '"x": {"initialValuesDataType": "UINT8", "initialValues": {"sourcePath": "passwd_link"}}' "" ""
expect_error source_link "sourcePath" "'passwd_link' resolves outside the model's directory"
WRITE_X='{"type": "writeFile", "resource": "x", "targetPath": "%s"}'
write_model() { model "$1" "$X" "" "$(printf "$WRITE_X" "$2")"; }
write_model target_absolute "$HOME/.bashrc"
expect_error target_absolute "commands[0].targetPath" "leaves the output directory"
write_model target_parent "../outside.bin"
expect_error target_parent "commands[0].targetPath" "leaves the output directory"
echo keep >"$work/kept.txt"
ln -sf kept.txt "$work/file_link"
write_model target_link "file_link"
args=("$work/target_link.json" --output-dir "$work")
expect_error target_link "commands[0].targetPath" "symbolic link"
grep -qx keep "$work/kept.txt" || { echo "FAIL [target_link]: the link's target was changed"; failures=$((failures + 1)); }
mkdir -p "$work/elsewhere"
ln -sfn "$work/elsewhere" "$work/out_link"
write_model target_dir_link "out_link/x.bin"
args=("$work/target_dir_link.json" --output-dir "$work/sub_out")
mkdir -p "$work/sub_out" && ln -sfn "$work/elsewhere" "$work/sub_out/out_link"
expect_error target_dir_link "commands[0].targetPath" "outside the output directory"
rm -f "$work/fifo" && mkfifo "$work/fifo"
write_model target_fifo "fifo"
args=("$work/target_fifo.json" --output-dir "$work")
expect_error target_fifo "commands[0].targetPath" "not a regular file"
write_model target_model "target_model.json"
args=("$work/target_model.json" --output-dir "$work")
expect_error target_model "commands[0].targetPath" "the model or one of its input files"
grep -q writeFile "$work/target_model.json" || { echo "FAIL [target_model]: the model was overwritten"; failures=$((failures + 1)); }
printf 'abcd' >"$work/input.bin"
model target_input '"x": {"initialValuesDataType": "UINT8", "initialValues": {"sourcePath": "input.bin"}}' "" \
  "$(printf "$WRITE_X" "input.bin")"
args=("$work/target_input.json" --output-dir "$work")
expect_error target_input "commands[0].targetPath" "the model or one of its input files"
# Allowed: inside --output-dir; anywhere with --allow-any-path.
write_model target_inside "written.bin"
cases=$((cases + 1))
"$dmlrun" "$work/target_inside.json" --output-dir "$work/sub_out" >/dev/null 2>&1 && [ -s "$work/sub_out/written.bin" ] ||
  { echo "FAIL [target_inside]: not written to --output-dir"; failures=$((failures + 1)); }
write_model target_anywhere "$work/elsewhere/anywhere.bin"
cases=$((cases + 1))
"$dmlrun" "$work/target_anywhere.json" --allow-any-path >/dev/null 2>&1 && [ -s "$work/elsewhere/anywhere.bin" ] ||
  { echo "FAIL [target_anywhere]: --allow-any-path did not allow an absolute path"; failures=$((failures + 1)); }
model write_no_target "$RESOURCES" "$POOL" '{"type": "writeFile", "resource": "y"}'
expect_error write_no_target "commands[0].targetPath" "required"
model write_image "$RESOURCES" "$POOL" '{"type": "writeFile", "resource": "y", "targetPath": "y.png"}'
expect_error write_image "commands[0].targetPath" "writing image files is not supported"

# ---- Mutations of valid models: any outcome but a crash or a sanitizer report ----
# A number of a valid model becomes a limit value, a few bytes become JSON
# punctuation, digits or letters, or the text is cut short.
seed=${DMLRUN_FUZZ_SEED:-$((($$ * 7919 + $(date +%s)) % 32768))}
RANDOM=$seed
alphabet='{}[]",:-09ex /nt.'
align_model="\"align\": {\"type\": \"ROI_ALIGN1\", \"desc\": {$ALIGN, \"ReductionFunction\": \"AVERAGE\", \"AlignRegionsToCorners\": false}}"
model fuzz_base0 "$RESOURCES, \"u\": {\"initialValuesDataType\": \"UINT32\", \"initialValues\": {\"valueCount\": 4, \"valueStart\": 1, \"valueDelta\": 2}}" \
  "$POOL" \
  "$DISPATCH, $PRINT, {\"type\": \"expect\", \"resource\": \"y\", \"values\": [4, 4, 6, 7]}, {\"type\": \"print\", \"resource\": \"u\", \"verbose\": true}"
model fuzz_base1 "$RESOURCES" "$align_model, $(bn '{"Type": "ACTIVATION_ELU", "Alpha": 1}')" ""
fuzz_failures=0
for round in $(seq 1 150); do
  base="$work/fuzz_base$((round % 2)).json"
  size=$(stat -c %s "$base")
  cp "$base" "$work/fuzz.json"
  mode=$((RANDOM % 8))
  if [ $mode -eq 0 ]; then
    truncate -s $(((RANDOM * 32768 + RANDOM) % size)) "$work/fuzz.json"
  elif [ $mode -le 3 ]; then
    # Replace the k-th number with a value at or beyond a limit.
    values=(-1 0 1 3 255 65536 4294967295 4294967296 9007199254740993 1e300 2.5 '"nan"' null '[]' '{}' '"x"')
    awk -v k=$((RANDOM % 60)) -v value="${values[$((RANDOM % ${#values[@]}))]}" '{
        line = $0; out = ""
        while (match(line, /-?[0-9]+(\.[0-9]+)?/)) {
          n++; out = out substr(line, 1, RSTART - 1) (n == k ? value : substr(line, RSTART, RLENGTH))
          line = substr(line, RSTART + RLENGTH)
        }
        print out line }' "$base" >"$work/fuzz.json"
  else
    for flip in $(seq 1 $((RANDOM % 3 + 1))); do
      offset=$(((RANDOM * 32768 + RANDOM) % size))
      printf '%s' "${alphabet:$((RANDOM % ${#alphabet})):1}" |
        dd of="$work/fuzz.json" bs=1 seek=$offset conv=notrunc status=none
    done
  fi
  (cd "$work" && "$dmlrun" fuzz.json) >"$work/fuzz.out" 2>"$work/fuzz.err"
  status=$?
  if [ $status -ge 128 ] || grep -qE "Sanitizer|runtime error:" "$work/fuzz.out" "$work/fuzz.err"; then
    cp "$work/fuzz.json" "$work/fuzz_failure_$round.json"
    echo "FAIL [fuzz round $round, seed $seed]: status $status, model kept as fuzz_failure_$round.json"
    sed 's/^/    /' "$work/fuzz.err" | head -20
    fuzz_failures=$((fuzz_failures + 1))
  fi
done
cases=$((cases + 1))
[ $fuzz_failures -eq 0 ] || failures=$((failures + 1))

echo "$((cases - failures)) of $cases error cases passed (fuzz seed $seed; DMLRUN_FUZZ_SEED=$seed reproduces it)"
[ $failures -eq 0 ]

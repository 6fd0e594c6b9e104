#!/usr/bin/env bash
# dmlrun on well-formed models: every initializer, the DxDispatch forms of
# descriptions and bindings, print's text (DxDispatch's), writeFile and .npy
# round trips, expect's tolerances, the options and the default tour.
#
# usage: test_dmlrun_features.sh DMLRUN WORKDIR
set -u
dmlrun=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
work=$2
rm -rf "$work"
mkdir -p "$work/sub"
work=$(cd "$work" && pwd)
cases=0
failures=0

fail() {
  echo "FAIL [$1]: $2"
  cat "$work/$1.out" "$work/$1.err" 2>/dev/null | sed 's/^/    /' | head -30
  failures=$((failures + 1))
}

# run NAME [OPTIONS...]: runs $work/NAME.json, which must succeed cleanly.
run() {
  local name=$1
  shift
  cases=$((cases + 1))
  (cd "$work" && "$dmlrun" "$name.json" "$@") >"$work/$name.out" 2>"$work/$name.err"
  local status=$?
  if grep -qE "Sanitizer|runtime error:" "$work/$name.out" "$work/$name.err"; then fail "$name" "sanitizer report"; return 1; fi
  if [ $status -ne 0 ]; then fail "$name" "exit status $status"; return 1; fi
  return 0
}

# has NAME LINE...: the output (stdout or stderr) of NAME has each exact line.
has() {
  local name=$1 line
  shift
  for line in "$@"; do
    if ! cat "$work/$name.out" "$work/$name.err" 2>/dev/null | grep -qxF -- "$line"; then
      fail "$name" "no line '$line'"
      return
    fi
  done
}

model() {
  printf '{\n"resources": {%s},\n"dispatchables": {%s},\n"commands": [%s]\n}\n' "$2" "$3" "$4" >"$work/$1.json"
}

X='"x": {"initialValuesDataType": "FLOAT32", "initialValues": [1, 2, 3, 2, 4, 2, 5, 6, 7]}'
Y='"y": {"initialValuesDataType": "FLOAT32", "initialValues": {"valueCount": 4, "value": "nan"}}'
TENSORS='"InputTensor": {"DataType": "FLOAT32", "Sizes": [1, 1, 3, 3]}, "OutputTensor": {"DataType": "FLOAT32", "Sizes": [1, 1, 2, 2]}'
WINDOW='"Strides": [1, 1], "WindowSize": [2, 2], "StartPadding": [0, 0], "EndPadding": [0, 0], "Dilations": [1, 1]'
POOL="\"pool\": {\"type\": \"DML_OPERATOR_MAX_POOLING2\", \"desc\": {$TENSORS, $WINDOW}}"
DISPATCH='{"type": "dispatch", "dispatchable": "pool", "bindings": {"InputTensor": "x", "OutputTensor": "y"}}'
PRINT_Y='{"type": "print", "resource": "y"}'
EXPECT_Y='{"type": "expect", "resource": "y", "values": [4, 4, 6, 7]}'

# ---- print shows DxDispatch's text ----
model print_text '"f": {"initialValuesDataType": "FLOAT32", "initialValues": [0.1, 1e-5, 123456789, -2.5, "nan", "inf", "-inf", -0.0]},
  "h": {"initialValuesDataType": "DML_TENSOR_DATA_TYPE_FLOAT16", "initialValues": [0.1, 65504, 1e-7, -2]},
  "d": {"initialValuesDataType": "FLOAT64", "initialValues": [0.1, 3.141592653589793, 1e300]},
  "i8": {"initialValuesDataType": "INT8", "initialValues": [-128, 5, 127]},
  "u8": {"initialValuesDataType": "UINT8", "initialValues": [0, 200, 255]},
  "i16": {"initialValuesDataType": "INT16", "initialValues": [-32768, 32767]},
  "u16": {"initialValuesDataType": "UINT16", "initialValues": [65535]},
  "i32": {"initialValuesDataType": "INT32", "initialValues": [-2147483648, 2147483647]},
  "u32": {"initialValuesDataType": "UINT32", "initialValues": [4294967295]},
  "i64": {"initialValuesDataType": "INT64", "initialValues": ["-9223372036854775808", 9007199254740991]},
  "u64": {"initialValuesDataType": "UINT64", "initialValues": ["18446744073709551615"]},
  "t": {"initialValuesDataType": 1, "initialValues": [1.5]}' "" \
  '{"type": "print", "resource": "f"}, {"type": "print", "resource": "h"}, {"type": "print", "resource": "d"},
   {"type": "print", "resource": "i8"}, {"type": "print", "resource": "u8"}, {"type": "print", "resource": "i16"},
   {"type": "print", "resource": "u16"}, {"type": "print", "resource": "i32"}, {"type": "print", "resource": "u32"},
   {"type": "print", "resource": "i64"}, {"type": "print", "resource": "u64"}, {"type": "Print", "resource": "t"}'
run print_text && has print_text \
  "Resource 'f': 0.1, 1e-05, 1.23457e+08, -2.5, nan, inf, -inf, -0" \
  "Resource 'h': 0.0999756, 65504, 1.19209e-07, -2" \
  "Resource 'd': 0.1, 3.14159, 1e+300" \
  "Resource 'i8': -128, 5, 127" \
  "Resource 'u8': 0, 200, 255" \
  "Resource 'i16': -32768, 32767" \
  "Resource 'u16': 65535" \
  "Resource 'i32': -2147483648, 2147483647" \
  "Resource 'u32': 4294967295" \
  "Resource 'i64': -9223372036854775808, 9007199254740991" \
  "Resource 'u64': 18446744073709551615" \
  "Resource 't': 1.5"

model print_verbose '"u": {"initialValuesDataType": "UINT32", "initialValues": [1, 255, 7, 7, 7, 7, 7, 7, 7, 7, 7]},
  "f": {"initialValuesDataType": "FLOAT32", "initialValues": [1]}' "" \
  '{"type": "print", "resource": "u", "verbose": true}, {"type": "print", "resource": "f", "verbose": true}'
run print_verbose && has print_verbose "Resource 'u':" "[ 0] 1 (0x       1)" "[ 1] 255 (0x      FF)" \
  "[10] 7 (0x       7)" "Resource 'f':" "[0] 1 (0x3F800000)"

# ---- Initializers ----
model initializers '"c": {"initialValuesDataType": "INT16", "initialValues": {"valueCount": 3, "value": -7}},
  "s": {"initialValuesDataType": "FLOAT32", "initialValues": {"valueCount": 5, "valueStart": 0, "valueDelta": 0.1}},
  "w": {"initialValuesDataType": "UINT8", "initialValues": {"valueCount": 4, "valueStart": 254, "valueDelta": 1}},
  "hs": {"initialValuesDataType": "FLOAT16", "initialValues": {"valueCount": 3, "valueStart": 2048, "valueDelta": 1}},
  "o": {"initialValuesDataType": "FLOAT32", "initialValues": [1, 2], "initialValuesOffsetInBytes": 8, "sizeInBytes": 32},
  "r": {"initialValuesDataType": "UINT8", "initialValues": [1, 2, 3]},
  "p": {"type": "buffer", "initialValuesDataType": "FLOAT32", "initialValues": {"valueCount": 2, "value": "-inf"}}' "" \
  '{"type": "print", "resource": "c"}, {"type": "print", "resource": "s"}, {"type": "print", "resource": "w"},
   {"type": "print", "resource": "hs"}, {"type": "print", "resource": "o"}, {"type": "print", "resource": "r"},
   {"type": "print", "resource": "p"}'
# 0.1 accumulated in FLOAT32 (as DxDispatch: value += delta); FLOAT16 2048 + 1 rounds to 2048.
run initializers && has initializers "Resource 'c': -7, -7, -7" "Resource 's': 0, 0.1, 0.2, 0.3, 0.4" \
  "Resource 'w': 254, 255, 0, 1" "Resource 'hs': 2048, 2048, 2048" "Resource 'o': 0, 0, 1, 2" \
  "Resource 'r': 1, 2, 3" "Resource 'p': -inf, -inf"

RANDOM_RESOURCES='"u": {"initialValuesDataType": "FLOAT32", "initialValues": {"valueCount": 1000, "random": {"distribution": "uniform", "min": -2, "max": 3, "seed": 7}}},
  "n": {"initialValuesDataType": "FLOAT64", "initialValues": {"valueCount": 6, "random": {"distribution": "normal", "mean": 10, "stddev": 0.5, "seed": 7}}},
  "k": {"initialValuesDataType": "INT8", "initialValues": {"valueCount": 200, "random": {"distribution": "uniform", "min": -3, "max": 3}}},
  "z": {"initialValuesDataType": "FLOAT16", "initialValues": {"valueCount": 4, "random": {"distribution": "normal"}}}'
PRINT_RANDOM='{"type": "print", "resource": "u"}, {"type": "print", "resource": "n"}, {"type": "print", "resource": "k"}, {"type": "print", "resource": "z"}'
model random "$RANDOM_RESOURCES" "" "$PRINT_RANDOM"
cp "$work/random.json" "$work/random_again.json"
if run random && run random_again --threads 1; then
  cases=$((cases + 1))
  cmp -s "$work/random.out" "$work/random_again.out" || fail random_again "another run gives other random values"
  cases=$((cases + 1))
  awk -F': ' '/^Resource .u.:/ { n = split($2, v, ", "); for (i = 1; i <= n; i++) if (v[i] < -2 || v[i] >= 3) bad = 1;
       if (n != 1000) bad = 1 } /^Resource .k.:/ { n = split($2, v, ", ");
       for (i = 1; i <= n; i++) { if (v[i] < -3 || v[i] > 3 || v[i] != int(v[i])) bad = 1; seen[v[i]] = 1 }
       for (j = -3; j <= 3; j++) if (!(j in seen)) bad = 1 }
       /^Resource .n.:/ { n = split($2, v, ", "); for (i = 1; i <= n; i++) if (v[i] < 7 || v[i] > 13) bad = 1 }
       END { exit bad }' "$work/random.out" || fail random "random values out of their distribution's range"
fi
sed 's/"seed": 7/"seed": 8/' "$work/random.json" >"$work/random_seed8.json"
if run random_seed8; then
  cases=$((cases + 1))
  ! cmp -s "$work/random.out" "$work/random_seed8.out" || fail random_seed8 "another seed gives the same values"
fi

# ---- writeFile and files as initial values ----
model write '"i": {"initialValuesDataType": "INT32", "initialValues": [1, -2, 3, -4, 5, -6]},
  "h": {"initialValuesDataType": "FLOAT16", "initialValues": [0.5, -1, 2]}' "" \
  '{"type": "writeFile", "resource": "i", "targetPath": "sub/i.npy"},
   {"type": "writeFile", "resource": "i", "targetPath": "sub/i23.npy", "shape": [2, 3]},
   {"type": "writeFile", "resource": "i", "targetPath": "sub/i32.npy", "dimensions": [3, 2]},
   {"type": "writeFile", "resource": "h", "targetPath": "sub/h.npy"},
   {"type": "writeFile", "resource": "i", "targetPath": "sub/i.bin"}'
if run write; then
  has write "Resource 'i' written to 'sub/i.npy'"
  cases=$((cases + 1))
  head -c 128 "$work/sub/i23.npy" | grep -qF "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), }" ||
    fail write "the shape (2, 3) is not in i23.npy's header"
  head -c 128 "$work/sub/i32.npy" | grep -qF "'shape': (3, 2)" || fail write "dimensions [3, 2] are not in the header"
  head -c 128 "$work/sub/i.npy" | grep -qF "'shape': (6,)" || fail write "a 1-D .npy by default"
  [ "$(stat -c %s "$work/sub/i.bin")" = 24 ] || fail write "i.bin is not 24 bytes"
  [ "$(stat -c %s "$work/sub/i.npy")" = $((128 + 24)) ] || fail write "i.npy is not 128 + 24 bytes"
fi
# Read back from the model's directory (sourcePath is relative to the model file).
printf '{"resources": {
  "a": {"initialValuesDataType": "INT32", "initialValues": {"sourcePath": "i.npy"}},
  "b": {"initialValues": {"sourcePath": "i23.npy"}},
  "c": {"initialValuesDataType": "INT32", "initialValues": {"sourcePath": "i.bin"}},
  "h": {"initialValuesDataType": "FLOAT16", "initialValues": {"sourcePath": "h.npy"}}},
 "dispatchables": {},
 "commands": [{"type": "print", "resource": "a"}, {"type": "print", "resource": "b"}, {"type": "print", "resource": "c"},
   {"type": "print", "resource": "h"},
   {"type": "expect", "resource": "a", "sourcePath": "i.npy"}, {"type": "expect", "resource": "c", "sourcePath": "i.bin"}]}' \
  >"$work/sub/read.json"
cases=$((cases + 1))
if (cd / && "$dmlrun" "$work/sub/read.json") >"$work/read.out" 2>"$work/read.err"; then
  has read "Resource 'a': 1, -2, 3, -4, 5, -6" "Resource 'b': 1, -2, 3, -4, 5, -6" "Resource 'c': 1, -2, 3, -4, 5, -6" \
    "Resource 'h': 0.5, -1, 2" "Expect 'a': 6 values match" "Expect 'c': 6 values match"
else
  fail read "reading the written files failed"
fi

# ---- DxDispatch's forms: comments, trailing commas, flattened descs, wrapped tensors ----
cat >"$work/dxdispatch_forms.json" <<'EOF'
{
    "$schema": "./_schema.json",
    // DxDispatch accepts comments and trailing commas.
    "resources": {
        "x": { "initialValuesDataType": "FLOAT32", "initialValues": [9, 9, 9, 9, 1, 2, 3, 2, 4, 2, 5, 6, 7], },
        "y": { "initialValuesDataType": "FLOAT32", "initialValues": { "valueCount": 4, "value": 0 } },
        "z": { "initialValuesDataType": "FLOAT32", "initialValues": { "valueCount": 4, "value": 0 } },
        /* an index buffer */
        "i": { "initialValuesDataType": "UINT32", "initialValues": { "valueCount": 4, "value": 0 } }
    },
    "dispatchables": {
        "flat": {
            "type": "MAX_POOLING1",
            "InputTensor": { "Type": "DML_TENSOR_TYPE_BUFFER", "Desc": { "DataType": "FLOAT32", "Sizes": [1, 1, 3, 3] } },
            "OutputTensor": { "Type": "BUFFER", "DataType": "DML_TENSOR_DATA_TYPE_FLOAT32", "Sizes": [1, 1, 2, 2],
                              "Strides": [4, 4, 2, 1], "TotalTensorSizeInBytes": 16, "GuaranteedBaseOffsetAlignment": 16,
                              "DimensionCount": 4, "Flags": "NONE" },
            "OutputIndicesTensor": { "DataType": "UINT32", "Sizes": [1, 1, 2, 2] },
            "DimensionCount": 2,
            "Strides": [1, 1], "WindowSize": [2, 2], "StartPadding": [0, 0], "EndPadding": [0, 0],
            "executionFlags": ["DML_EXECUTION_FLAG_NONE", "DISABLE_META_COMMANDS"],
            "dmlCompileType": "DmlCompileOp",
        },
        "capital": {
            "type": "DML_OPERATOR_MAX_POOLING",
            "Desc": {
                "InputTensor": { "DataType": 1, "Sizes": [1, 1, 3, 3] },
                "OutputTensor": { "DataType": "FLOAT32", "Sizes": [1, 1, 2, 2] },
                "Strides": [1, 1], "WindowSize": [2, 2], "StartPadding": [0, 0], "EndPadding": [0, 0]
            },
            "executionFlags": "ALLOW_HALF_PRECISION_COMPUTATION"
        }
    },
    "commands": [
        { "type": "dispatch", "dispatchable": "flat", "threadGroupCount": [1, 1, 1],
          "bindings": { "InputTensor": { "name": "x", "elementOffset": 4 }, "OutputTensor": ["y"],
                        "OutputIndicesTensor": [{ "name": "i", "format": "R32_UINT", "elementCount": 4 }] } },
        { "type": "PRINT", "resource": "y" },
        { "type": "print", "resource": "i" },
        { "type": "dispatch", "dispatchable": "capital",
          "bindings": { "InputTensor": { "name": "x", "elementOffset": 1, "elementSizeInBytes": 16 }, "OutputTensor": "z" } },
        { "type": "print", "resource": "z" },
    ]
}
EOF
run dxdispatch_forms && has dxdispatch_forms "Resource 'y': 4, 4, 6, 7" "Resource 'i': 4, 4, 7, 8" "Resource 'z': 4, 4, 6, 7"

# elementOffset counts elements of the resource's initialValuesDataType (as
# DxDispatch computes it), not of the tensor's type: a FLOAT32 tensor bound
# to a UINT8 resource at elementOffset 16 starts at byte 16.
model raw_write '"f": {"initialValuesDataType": "FLOAT32", "initialValues": [0, 0, 0, 0, 1, 2, 3, 2, 4, 2, 5, 6, 7]}' "" \
  '{"type": "writeFile", "resource": "f", "targetPath": "floats.bin"}'
model raw_offset '"bytes": {"initialValuesDataType": "UINT8", "initialValues": {"sourcePath": "floats.bin"}},
  "y": {"initialValuesDataType": "FLOAT32", "initialValues": {"valueCount": 4, "value": 0}}' "$POOL" \
  '{"type": "dispatch", "dispatchable": "pool", "bindings": {"InputTensor": {"name": "bytes", "elementOffset": 16}, "OutputTensor": "y"}},
   {"type": "print", "resource": "y"}'
run raw_write && run raw_offset && has raw_offset "Resource 'y': 4, 4, 6, 7"

# OWNED_BY_DML: bound once, at initialization, through the dispatchable's bindings.
model owned "$X, $Y" "\"pool\": {\"type\": \"MAX_POOLING2\", \"bindings\": {\"InputTensor\": \"x\"}, \"desc\": {${TENSORS/\"Sizes\": \[1, 1, 3, 3\]/\"Sizes\": [1, 1, 3, 3], \"Flags\": [\"OWNED_BY_DML\"]}, $WINDOW}}" \
  '{"type": "dispatch", "dispatchable": "pool", "bindings": {"OutputTensor": "y"}}, {"type": "print", "resource": "y"}'
run owned && has owned "Resource 'y': 4, 4, 6, 7"

# Fused activations in both forms reach libdml (which may not implement batch normalization yet).
BN_TENSORS='"InputTensor": {"DataType": "FLOAT32", "Sizes": [1, 2, 1, 2]}, "ScaleTensor": {"DataType": "FLOAT32", "Sizes": [1, 2, 1, 1]}, "BiasTensor": {"DataType": "FLOAT32", "Sizes": [1, 2, 1, 1]}, "OutputTensor": {"DataType": "FLOAT32", "Sizes": [1, 2, 1, 2]}, "OutputMeanTensor": {"DataType": "FLOAT32", "Sizes": [1, 2, 1, 1]}, "OutputVarianceTensor": {"DataType": "FLOAT32", "Sizes": [1, 2, 1, 1]}, "Epsilon": 0'
for form in '{"Type": "ACTIVATION_LEAKY_RELU", "Alpha": 0.5}' \
            '{"Type": "DML_OPERATOR_ACTIVATION_LEAKY_RELU", "Desc": {"Alpha": 0.5}}' \
            '{"type": "ACTIVATION_LEAKY_RELU", "desc": {"Alpha": 0.5, "InputTensor": null, "OutputTensor": null}}'; do
  model fused '"in": {"initialValuesDataType": "FLOAT32", "initialValues": [1, 2, 3, 5]},
    "one": {"initialValuesDataType": "FLOAT32", "initialValues": [1, 1]},
    "zero": {"initialValuesDataType": "FLOAT32", "initialValues": [0, 0]},
    "out": {"initialValuesDataType": "FLOAT32", "initialValues": {"valueCount": 4, "value": 0}},
    "mean": {"initialValuesDataType": "FLOAT32", "initialValues": {"valueCount": 2, "value": 0}},
    "var": {"initialValuesDataType": "FLOAT32", "initialValues": {"valueCount": 2, "value": 0}}' \
    "\"bn\": {\"type\": \"BATCH_NORMALIZATION_TRAINING\", \"desc\": {$BN_TENSORS, \"FusedAddTensor\": null, \"FusedActivation\": $form}}" \
    '{"type": "dispatch", "dispatchable": "bn", "bindings": {"InputTensor": "in", "ScaleTensor": "one", "BiasTensor": "zero",
      "OutputTensor": "out", "OutputMeanTensor": "mean", "OutputVarianceTensor": "var"}},
     {"type": "expect", "resource": "out", "values": [-0.5, 1, -0.5, 1], "absoluteTolerance": 1e-6},
     {"type": "expect", "resource": "mean", "values": [1.5, 4], "absoluteTolerance": 1e-6},
     {"type": "expect", "resource": "var", "values": [0.25, 1], "absoluteTolerance": 1e-6}'
  cases=$((cases + 1))
  (cd "$work" && "$dmlrun" fused.json) >"$work/fused.out" 2>"$work/fused.err"
  status=$?
  if [ $status -ne 0 ] && ! grep -qF "dispatchables.bn.desc: libdml cannot run this operator: BATCH_NORMALIZATION_TRAINING: not implemented yet" "$work/fused.err"; then
    fail fused "the fused activation $form neither ran nor reached libdml"
  fi
done

# ---- expect: tolerances, NaN, files ----
model expects "$X, $Y, \"n\": {\"initialValuesDataType\": \"FLOAT32\", \"initialValues\": [\"nan\", 1, \"-inf\"]},
  \"u\": {\"initialValuesDataType\": \"UINT16\", \"initialValues\": [100, 200]}" "$POOL" \
  "$DISPATCH, $EXPECT_Y,
   {\"type\": \"expect\", \"resource\": \"y\", \"values\": [4.0000005, 4, 6, 7], \"ulpTolerance\": 1},
   {\"type\": \"expect\", \"resource\": \"y\", \"values\": [4.1, 4, 6, 7], \"relativeTolerance\": 0.03},
   {\"type\": \"expect\", \"resource\": \"y\", \"values\": [4.1, 4, 6, 7], \"absoluteTolerance\": 0.11},
   {\"type\": \"expect\", \"resource\": \"n\", \"values\": [\"NaN\", 1, \"-Inf\"]},
   {\"type\": \"expect\", \"resource\": \"u\", \"values\": [101, 198], \"absoluteTolerance\": 2},
   {\"type\": \"writeFile\", \"resource\": \"y\", \"targetPath\": \"y.npy\"}"
run expects && has expects "Expect 'y': 4 values match" "Expect 'n': 3 values match" "Expect 'u': 2 values match"
model expect_file "$X, $Y" "$POOL" "$DISPATCH, {\"type\": \"expect\", \"resource\": \"y\", \"sourcePath\": \"y.npy\"}"
run expect_file && has expect_file "Expect 'y': 4 values match"

# A mismatch is reported and makes the run fail, after every command ran.
model mismatch "$X, $Y" "$POOL" \
  "$DISPATCH, {\"type\": \"expect\", \"resource\": \"y\", \"values\": [4.0000005, 4, 6, 7]}, $PRINT_Y"
cases=$((cases + 1))
(cd "$work" && "$dmlrun" mismatch.json) >"$work/mismatch.out" 2>"$work/mismatch.err"
if [ $? -ne 1 ]; then fail mismatch "a failed expect must exit with 1"
else has mismatch "Resource 'y': 4, 4, 6, 7" "  [0] got 4, expected 4 (error 4.76837e-07)" "dmlrun: error: 1 expect command failed"
fi

# ---- Options ----
model timed "$X, $Y" "$POOL" "$DISPATCH"
if run timed --iterations 5 --warmup=2 --threads 2 --backend cpu; then
  cases=$((cases + 1))
  grep -qE "^Dispatch 'pool' \[cpu\]: 5 iterations, median [0-9]+\.[0-9]{4} ms, min [0-9]+\.[0-9]{4} ms, max [0-9]+\.[0-9]{4} ms, [0-9]+\.[0-9]{2} GB/s$" \
    "$work/timed.out" || fail timed "no timing line"
fi
run timed --verbose && grep -qF "dmlrun: running commands[0]" "$work/timed.err" || fail timed "--verbose says nothing"
# DxDispatch's options, with DxDispatch's letters and meaning.
if run timed -i 4 -w 1 -r 3 -v 2; then
  cases=$((cases + 1))
  grep -qE "^Dispatch 'pool' \[cpu\]: 4 iterations, " "$work/timed.out" || fail timed "-i 4: not 4 iterations"
  grep -qE "^  cold \(the first dispatch\): [0-9]+\.[0-9]{4} ms$" "$work/timed.out" || fail timed "-v 2: no cold time"
  grep -qE "^  samples \(ms, in order\):( [0-9]+\.[0-9]{4}){4}$" "$work/timed.out" || fail timed "-v 2: not 4 samples"
fi
# -t: at least 40 ms of iterations; -I: at least 30 ms from one to the next.
if run timed --dispatch_iterations=2 --milliseconds_to_run 40; then
  cases=$((cases + 1))
  count=$(sed -n "s/^Dispatch 'pool' \[cpu\]: \([0-9]*\) iterations.*/\1/p" "$work/timed.out")
  [ "${count:-0}" -gt 2 ] || fail timed "-t 40: only ${count:-no} iterations"
fi
start=$(date +%s%N)
if run timed -i 3 -I 30 -w 0; then
  cases=$((cases + 1))
  elapsed_ms=$((($(date +%s%N) - start) / 1000000))
  [ $elapsed_ms -ge 90 ] || fail timed "-I 30 with 3 iterations took only $elapsed_ms ms"
fi
run timed --print_commands && grep -qF "dmlrun: running commands[0]" "$work/timed.err" || fail timed "--print_commands"
cases=$((cases + 1))
(cd "$work" && "$dmlrun" -m timed.json) >"$work/model_option.out" 2>&1 &&
  grep -qE "^Dispatch 'pool' \[cpu\]: 1 iterations" "$work/model_option.out" || fail model_option "-m timed.json"
if run timed -d -a cpu -q compute --disable_gpu_timeout -f batch:2; then
  has timed "dmlrun: note: --queue_type is DxDispatch's Direct3D, PIX or ONNX Runtime option: it has no counterpart in libdml and is ignored" \
    "dmlrun: note: --onnx_free_dim_name_override is DxDispatch's Direct3D, PIX or ONNX Runtime option: it has no counterpart in libdml and is ignored"
fi
# --input_path: sourcePath from there; --output_path: writeFile there.
printf '\x00\x00\x80\x3f' >"$work/sub/one.bin"
model paths '"v": {"initialValuesDataType": "FLOAT32", "initialValues": {"sourcePath": "one.bin"}}' "" \
  '{"type": "print", "resource": "v"}, {"type": "writeFile", "resource": "v", "targetPath": "v.bin"}'
if run paths --input_path "$work/sub" --output_path "$work/sub"; then
  has paths "Resource 'v': 1"
  cases=$((cases + 1))
  cmp -s "$work/sub/one.bin" "$work/sub/v.bin" || fail paths "--output_path: v.bin is not in sub/"
fi
cases=$((cases + 1))
"$dmlrun" -s >"$work/adapters.out" 2>&1 && grep -qx "cpu: available" "$work/adapters.out" || fail adapters "-s"
cases=$((cases + 1))
"$dmlrun" -S >"$work/dependencies.out" 2>&1 && grep -qE "^  cJSON [0-9]+\.[0-9]+" "$work/dependencies.out" || fail dependencies "-S"
cases=$((cases + 1))
"$dmlrun" --help >"$work/help.out" 2>"$work/help.err" && grep -qF "usage: dmlrun [MODEL.json]" "$work/help.out" || fail help "--help"
cases=$((cases + 1))
"$dmlrun" --version >"$work/version.out" 2>"$work/version.err" && grep -qE "^dmlrun \(libdml [0-9]+\.[0-9]+\.[0-9]+\)$" "$work/version.out" ||
  fail version "--version"

# ---- The default tour ----
cases=$((cases + 1))
if "$dmlrun" >"$work/tour.out" 2>"$work/tour.err"; then
  has tour "Resource 'pool_input': 1, 2, 3, 2, 4, 2, 5, 6, 7" "Resource 'pool_output': 4, 4, 6, 7" \
    "Resource 'pool2_indices': 4, 4, 7, 8" "Resource 'pool_input_gradient': 0, 0, 0, 0, 3, 0, 0, 4, 5" \
    "tour: 12 operators, all results as expected"
  # Every operator either ran or was skipped because libdml does not implement it yet.
  cases=$((cases + 1))
  if grep "^Dispatch" "$work/tour.out" | grep -vE "\[cpu\]: 1 iterations|skipped: [A-Z_0-9]+: not implemented yet"; then
    fail tour "a dispatch neither ran nor was skipped as not implemented"
  fi
else
  fail tour "the tour failed"
fi

echo "$((cases - failures)) of $cases feature checks passed"
[ $failures -eq 0 ]

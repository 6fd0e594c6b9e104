# cmake -DINPUT=file -DOUTPUT=file.c -P embed.cmake: writes INPUT's bytes as
# the C array dmlrun_default_model (NUL-terminated) and its size.
file(READ "${INPUT}" content HEX)
string(LENGTH "${content}" hex_length)
math(EXPR size "${hex_length} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${content}")
string(REGEX REPLACE "((0x..,){16})" "\\1\n    " bytes "${bytes}")
file(WRITE "${OUTPUT}" "/* Generated from default_model.json by embed.cmake: do not edit. */
#include <stddef.h>
extern const char dmlrun_default_model[];
extern const size_t dmlrun_default_model_size;
const char dmlrun_default_model[] = {
    ${bytes}0x00};
const size_t dmlrun_default_model_size = ${size};
")

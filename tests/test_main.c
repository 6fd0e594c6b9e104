/* The main of every test program: runs the cases its files registered. */
#include "harness.h"

int main(int argc, char** argv) { return test_main(argc, argv); }

// What every harness and check extension includes from the installed torch and the standard library, precompiled
// once per torch version, compiler and flags (codemod/verify/pch.py) and force-included into each compile: no bypass
// changes these headers. tests/test_build.py checks that it holds every fixed include of harness.cpp.in and of the
// extension's source.
#include <ATen/ATen.h>
#include <ATen/NativeFunctions.h>
#include <ATen/native/Resize.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/csrc/utils/pybind.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

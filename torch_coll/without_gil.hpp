// WithoutGil: releases Python's GIL for a scope, where this thread holds it. Calls that wait
// for peers (agreement, shrink, reconfigure, a new timeout under the drive lock) run
// without it: the worker's completions may need it (freeing a tensor Python knows,
// running an abort hook written in Python).
#pragma once

#include <Python.h>

namespace torch_coll {

class WithoutGil {
 public:
  WithoutGil() {
    if (Py_IsInitialized() != 0 && PyGILState_Check() != 0) saved_ = PyEval_SaveThread();
  }
  ~WithoutGil() {
    if (saved_ != nullptr) PyEval_RestoreThread(saved_);
  }
  WithoutGil(const WithoutGil &) = delete;
  WithoutGil &operator=(const WithoutGil &) = delete;

 private:
  PyThreadState *saved_ = nullptr;
};

}  // namespace torch_coll

"""Run a user's script under torch.profiler and save its trace: `python profile_script.py TRACE FAILURE SCRIPT [ARGS]`.

`codemod hot SCRIPT` runs this file in a subprocess, so the script runs as `python SCRIPT ARGS`
would (its own `sys.argv`, `sys.path[0]` and `__main__`), and a script that raises fails
this process only: its traceback is printed from the script's first frame down (this file's and
runpy's frames left out), and FAILURE (JSON) names the script's line it raised from and the error,
for codemod's one-line message. It imports nothing of codemod's.

The trace is torch's own `export_chrome_trace`, with overload names (`aten::mul.Tensor`), and
what the chrome trace leaves out added to each op's args under `codemod: ` keys, from the
profiler's event tree (matched by correlation id, the trace's `External id`): each tensor
input's device and layout, and whether it is a tensor still alive when the script ended that
requires grad or is a view (matched by the addresses of its TensorImpl and data, dtype and
sizes; tensors freed earlier are unknown).
"""
from __future__ import annotations

import gc
import json
import os
import runpy
import sys
import traceback
import warnings

# codemod.measure.hot reads these keys; importing this module for them must not import torch (seconds)
DEVICES, LAYOUTS, AUTOGRAD_META = "codemod: Input devices", "codemod: Input layouts", "codemod: Input autograd metadata"


def main() -> None:
    from torch._C._profiler import _ExperimentalConfig, _TensorMetadata
    from torch.profiler import ProfilerActivity, profile

    trace_path, failure_path, script, *args = sys.argv[1:]
    sys.argv = [script, *args]
    sys.path[0] = os.path.dirname(os.path.abspath(script))  # where python put this file's directory
    config = _ExperimentalConfig(capture_overload_names=True)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True, experimental_config=config) as profiler:
        try:
            namespace = runpy.run_path(script, run_name="__main__")
        except SystemExit as exit_:
            if exit_.code not in (0, None):
                raise
            namespace = {}
        except BaseException as error:  # the script's own error, whatever it is (KeyboardInterrupt too)
            _report_failure(error, script, failure_path)
            sys.exit(1)
    with_meta = _live_tensors_with_autograd_meta()
    del namespace
    inputs = {event.correlation_id: event.extra_fields.inputs for event in _torch_ops(profiler)}
    profiler.export_chrome_trace(trace_path)
    with open(trace_path) as file:
        trace = json.load(file)
    for event in trace["traceEvents"]:
        recorded = inputs.get(event.get("args", {}).get("External id")) if event.get("cat") == "cpu_op" else None
        if recorded is None:
            continue
        tensors = [i if isinstance(i, _TensorMetadata) else None for i in recorded]
        event["args"][DEVICES] = [str(t.device) if t else "" for t in tensors]
        event["args"][LAYOUTS] = [str(t.layout) if t else "" for t in tensors]
        event["args"][AUTOGRAD_META] = [with_meta.get(_identity(t.impl_ptr, t.storage_data_ptr, t.dtype, t.sizes), "unknown")
                                        if t else "" for t in tensors]
    with open(trace_path, "w") as file:
        json.dump(trace, file)


def _report_failure(error: BaseException, script: str, failure_path: str) -> None:
    """ERROR's traceback on stderr from the script's first frame, and in FAILURE_PATH where in SCRIPT it raised."""
    frames = error.__traceback__
    while frames is not None and (frames.tb_frame.f_code.co_filename == __file__
                                  or frames.tb_frame.f_globals.get("__name__") == "runpy"):  # frozen: no file
        frames = frames.tb_next
    traceback.print_exception(type(error), error, frames)
    stack = traceback.extract_tb(frames)
    in_script = [f for f in stack if os.path.isfile(f.filename) and os.path.samefile(f.filename, script)]
    where = (in_script or stack)[-1] if stack else None
    with open(failure_path, "w") as file:
        json.dump({"where": f"{where.filename}:{where.lineno}" if where else script,
                   "error": traceback.format_exception_only(type(error), error)[-1].strip()}, file)


def _live_tensors_with_autograd_meta() -> dict[tuple, str]:
    """_identity -> "requires_grad" / "view" / "none", for the tensors alive now. A leaf that requires grad (a
    parameter) did so from its creation; a result that requires grad only from when the op making it returned,
    so calls inside that op saw it without: left out (unknown), its later calls in grad mode make autograd nodes."""
    import torch

    found = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # isinstance on deprecated module attributes warns
        tensors = [obj for obj in gc.get_objects() if isinstance(obj, torch.Tensor)]
    for tensor in tensors:
        if tensor.layout != torch.strided or tensor.device.type == "meta" or (tensor.requires_grad and not tensor.is_leaf):
            continue
        key = _identity(tensor._cdata, tensor.untyped_storage().data_ptr(), tensor.dtype, tensor.shape)
        found[key] = "requires_grad" if tensor.requires_grad else "view" if tensor._is_view() else "none"
    return found


def _identity(impl_address: int, data_address: int | None, dtype, sizes) -> tuple:
    """A tensor as the profiler recorded it: its TensorImpl's and its data's addresses, dtype and sizes. Addresses
    are reused once freed; all four matching a live tensor makes a freed one unlikely."""
    return impl_address, data_address or 0, str(dtype), tuple(sizes)


def _torch_ops(profiler):
    pending = list(profiler.profiler.kineto_results.experimental_event_tree())
    while pending:
        event = pending.pop()
        pending.extend(event.children)
        if hasattr(event.extra_fields, "inputs"):
            yield event


if __name__ == "__main__":
    main()

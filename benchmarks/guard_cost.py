"""Where the guarded bypass's instructions go, function by function and line by line.

Renders `codemod bench OP --guarded`'s program (the guard as `bypass OP --guarded` writes it),
compiles it with debug information (-g, otherwise bench's own flags) and counts with callgrind:

- instructions per call of the dispatcher, the plain bypass and the guarded bypass, and the share
  of the dispatcher's extra instructions the guard removes (what `bench OP --guarded` reports);
- every function the guarded path runs above the CPU kernel it shares with the dispatcher, with its
  own and inclusive instructions per call (bench.call_paths);
- each line of the guard's text that costs instructions, per call, with the calls made from it
  (callgrind_annotate on the rendered source): the checks inlined into the guarded `at::OP`.

    python benchmarks/guard_cost.py [OP] [--tree target_tree]

Figures for a person (callgrind counts do not depend on the machine's load; the load average is printed
with them), never assertions.
"""
from __future__ import annotations

import argparse
import datetime
import re
import subprocess
import tempfile
from pathlib import Path

from codemod.measure import bench, guarded_bench
from codemod.model.tree import locate
from codemod.plan import guarded as plan_guarded
from codemod.verify import compiler

PATHS = tuple(bench.LABELS["guarded"])
CALLS = 3_000
# callgrind_annotate's source lines: the count (or "." for none) and the text; a call made from the line: "=> ...".
_LINE = re.compile(r"^\s*([\d,]+|\.)\s{2}(.*)$")


def compiled_with_debug_info(source: str, scratch: Path) -> Path:
    source_file, executable = scratch / "guarded_bench.cpp", scratch / "guarded_bench"
    source_file.write_text(source)
    command = compiler.compile_command(source_file, executable)
    subprocess.run([command[0], "-g", *command[1:]], check=True)
    return executable


def guard_lines(annotated: str, op: str, calls: int) -> list[str]:
    """The lines that cost instructions from the guard's namespace to the end of the guarded definitions (where the
    program's own `guarded_functional` begins), per call."""
    lines, inside = [], False
    source = annotated[annotated.index("-- User-annotated source:"):]  # after the per-function summary
    for text in source.splitlines():
        match = _LINE.match(text)
        if not match:
            continue
        count, code = match.groups()
        if "guarded_functional" in code:
            break
        inside = inside or f"namespace {plan_guarded.guard_namespace(op)} {{" in code
        if inside and count != ".":
            code = code.strip()
            shown = "    " + re.sub(r" \[/.*\]$", "", code) if code.startswith("=>") else code
            lines.append(f"{int(count.replace(',', '')) / calls:8.1f}  {shown[:140]}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("op", nargs="?", default="mul")
    parser.add_argument("--tree", default="target_tree")
    options = parser.parse_args()
    op, started = options.op, bench.load_average()
    source, call = guarded_bench.render(locate(options.tree), op)
    with tempfile.TemporaryDirectory(prefix="codemod-guard-cost-") as scratch:
        executable = compiled_with_debug_info(source, Path(scratch))
        instructions, graphs = bench.count(executable, PATHS, n2=CALLS)
        per_call = {path: instructions[path]["per_call"] for path in PATHS}
        above = bench.call_paths(op, graphs, CALLS)
        traced = bench.callgrind_run(executable, "guarded", CALLS, Path(scratch), True)
        (Path(scratch) / "guarded.out").write_text(traced)
        annotated = subprocess.run(["callgrind_annotate", "--auto=no", "--show-percs=no", "--context=1000000", str(Path(scratch) / "guarded.out"),
                                    str(Path(scratch) / "guarded_bench.cpp")], capture_output=True, text=True, check=True).stdout
    extra = per_call["dispatch"] - per_call["bypass"]
    print(f"{op}: {call}; {datetime.date.today()}, load average {started} at start, {bench.load_average()} at end")
    print("instructions/call: " + ", ".join(f"{bench.LABELS['guarded'][p]} {c:,.1f}" for p, c in per_call.items()))
    print(f"the guard removes {(per_call['dispatch'] - per_call['guarded']) / extra:.1%} of the {extra:,.1f} "
          f"instructions/call the dispatcher adds to the plain bypass; the guarded path costs "
          f"{per_call['guarded'] - per_call['bypass']:,.1f} more than the plain one")
    for path in ("guarded", "bypass"):
        print(f"{bench.LABELS['guarded'][path]} path above the kernel ({above['above_kernel_per_call'][path]:,.1f} own "
              "instructions/call), function by function:")
        for function in above["above_kernel"][path]:
            print(f"  {function['own_per_call']:8.1f} own {function['inclusive_per_call']:10.1f} inclusive  {function['function']}")
    print("the guard's text, line by line (instructions/call; `=>` a call made from the line, inclusive):")
    print("\n".join(guard_lines(annotated, op, CALLS)))


if __name__ == "__main__":
    main()
